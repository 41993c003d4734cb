"""Pictures that say what their colours mean: the ResNet-18 example's per-layer chart."""

from __future__ import annotations

import importlib.util

from .vtasm.paths import REPO


def _run_script():
    spec = importlib.util.spec_from_file_location("resnet18_run", REPO / "examples/resnet18/run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_resnet18_layer_chart_has_a_legend_for_each_colour_drawn(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    kept: list = []
    monkeypatch.setattr(plt, "close", kept.append)
    layers = [("conv1", 11_000_000), ("maxpool", 1_300_000), ("layer1_0_conv1", 2_100_000),
              ("layer1_0_conv2_add", 600_000), ("logits", 90_000)]
    bounds = {"conv1": 10_000_000, "maxpool": 800_000, "layer1_0_conv1": 2_100_000, "layer1_0_conv2_add": 500_000,
              "logits": 95_000}  # logits above its cycles: nothing lost
    path = tmp_path / "chart.png"
    _run_script().draw(layers, bounds, 100.0, path, "test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = kept[0].axes[0]
    legend = ax.get_legend()
    assert legend is not None
    texts = [t.get_text() for t in legend.get_texts()]
    assert len(texts) == 4 and "residual add" in texts[0] and texts[1].startswith("convolution (")
    assert "pooling" in texts[2] and texts[3].startswith("lost to the layer's bound")
    solid, hatched = ax.patches[: len(layers)], ax.patches[len(layers) :]
    assert {tuple(h.get_facecolor()) for h in legend.legend_handles[:3]} == {tuple(p.get_facecolor()) for p in solid}
    # each bar: its bound, solid, then what it loses, hatched, on top (ms at 100 MHz)
    assert [round(p.get_height(), 3) for p in solid] == [100.0, 8.0, 21.0, 5.0, 0.9]
    assert [round(p.get_height(), 3) for p in hatched] == [10.0, 5.0, 0.0, 1.0, 0.0]
    assert all(p.get_hatch() for p in hatched)

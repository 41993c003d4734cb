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
              ("layer1_0_add", 600_000), ("logits", 90_000)]
    path = tmp_path / "chart.png"
    _run_script().draw(layers, 100.0, path, "test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    legend = kept[0].axes[0].get_legend()
    assert legend is not None
    texts = [t.get_text() for t in legend.get_texts()]
    assert len(texts) == 3 and texts[0].startswith("convolution") and texts[1] == "residual add"
    assert "pooling" in texts[2]
    bars = {tuple(p.get_facecolor()) for p in kept[0].axes[0].patches}
    assert {tuple(h.get_facecolor()) for h in legend.legend_handles} == bars  # a legend entry per colour

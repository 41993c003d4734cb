"""Tiles chosen by predicted cycles: the cost model against the full timing model, --explain, --roofline."""

from __future__ import annotations

import pytest

from tests.vtacc.resnet import RESNET, layer_source
from vtacc.frontend.check import check_source
from vtacc.program_builder import compile_file
from vtacc.reports.roofline import roofline_points
from vtasim.timing.profile import resolve_profile
from vtasim.timing.run import time_program
from vtasm.config import default_config

from .test_cli import EXAMPLES, tool


@pytest.mark.parametrize("profile", ["chisel-2019", "chisel-2021"])
@pytest.mark.parametrize("name", ["C2", "C6", "C8", "C10", "C11"])
def test_cost_model_tracks_the_timing_model(name, profile):
    """The tiler's estimate for the tiling it chose is within 15 % of what the full model says of the program."""
    p = resolve_profile(profile, 16)
    compiled = compile_file(check_source(layer_source(name)[0], f"{name}.vk"), default_config(), profile=p)
    measured = time_program(compiled.program, p, record=False).report.cycles
    estimate = compiled.planned[0].tiling.cycles
    assert abs(estimate - measured) <= 0.15 * measured, (estimate, measured)


def test_two_threads_hide_loads_on_every_layer():
    p = resolve_profile("chisel-2021", 16)
    cfg = default_config()
    for name in RESNET:
        checked = check_source(layer_source(name)[0], f"{name}.vk")
        one = roofline_points(compile_file(checked, cfg, profile=p, threads=1))[0]
        two = roofline_points(compile_file(checked, cfg, profile=p, threads=2))[0]
        assert two.cycles < one.cycles, name
        assert 0 < two.fraction <= 1 and two.binds == "compute"


@pytest.mark.parametrize("profile", ["chisel-2019", "chisel-2021"])
def test_resnet_layers_reach_their_roofline(profile):
    """Memory latency 16: compute-bound layers reach 85 % of their bound, bandwidth-bound ones 60 %."""
    p = resolve_profile(profile, 16)
    for name in RESNET:
        compiled = compile_file(check_source(layer_source(name)[0], f"{name}.vk"), default_config(), profile=p)
        point = roofline_points(compiled)[0]
        assert point.fraction >= (0.85 if point.binds == "compute" else 0.60), (name, point.fraction)


@pytest.mark.parametrize("profile", ["chisel-2019", "chisel-2021"])
def test_compiler_beats_the_conv_opt_schedule_on_c8(profile):
    """The compiler's own tiles for C8 take fewer cycles than the tutorial's (examples/resnet_c8.vk)."""
    p = resolve_profile(profile, 16)
    tutorial = (EXAMPLES / "resnet_c8.vk").read_text()
    assert "schedule {" in tutorial
    own = "\n".join(line for line in tutorial.splitlines() if "schedule {" not in line)
    cycles = [time_program(compile_file(check_source(src, "c8.vk"), default_config(), profile=p).program, p,
                           record=False).report.cycles for src in (tutorial, own)]
    assert cycles[1] < cycles[0], cycles


def test_roofline_bounds_by_hand():
    """C8: 3x3 conv 256 -> 256 on 14x14 = 115,605,504 MACs at 256 per 4 cycles, plus 4 ALU passes of 3,136.

    The 2019 core's ALU takes 5 cycles per execution with an immediate (shift, max, min) and 6 with a
    tensor operand (the bias add), timing.md section 2.
    """
    p = resolve_profile("chisel-2019", 16)
    compiled = compile_file(check_source(layer_source("C8")[0], "C8.vk"), default_config(), profile=p)
    point = roofline_points(compiled)[0]
    assert point.macs == 115_605_504
    assert point.compute_bound == pytest.approx(115_605_504 / 64 + 3 * 3_136 * 5 + 3_136 * 6)
    reads = 256 * 14 * 14 + 256 * 256 * 9 + 256 * 4  # input, weights, bias
    assert point.memory_bound == pytest.approx(reads / 8)
    assert 0 < point.cycles <= compiled.timed.report.cycles  # one result: its span within the run


def test_explain_reports_predicted_cycles_and_bounds(tmp_path):
    r = tool("vtacc", EXAMPLES / "resnet_c8.vk", "--explain", "--timing", "chisel-2021", "-o", tmp_path / "c8.vasm",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "predicted (chisel-2021, memory latency 16):" in r.stdout
    assert "compute-bound" in r.stdout and "of the bound" in r.stdout


def test_roofline_picture_and_refusals(tmp_path):
    png = tmp_path / "roof.png"
    r = tool("vtacc", EXAMPLES / "resnet_c8.vk", "--roofline", png, "-o", tmp_path / "c8.vasm", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = tool("vtacc", EXAMPLES / "resnet_c8.vk", "--roofline", tmp_path / "roof.txt", cwd=tmp_path)
    assert bad.returncode == 2 and "must end in .png" in bad.stderr
    alone = tool("vtacc", EXAMPLES / "resnet_c8.vk", "--roofline-threads", cwd=tmp_path)
    assert alone.returncode == 2 and "--roofline" in alone.stderr
    unknown = tool("vtacc", EXAMPLES / "resnet_c8.vk", "--set", "gemm.speed=2", cwd=tmp_path)
    assert unknown.returncode == 1 and "unknown profile key gemm.speed" in unknown.stderr


CALLS = """
kernel dw(x: int8[1, 16, 8, 8], w: int8[16, 16, 3, 3]) -> y: int8[1, 16, 8, 8] {
    y = clip(conv2d(x, w, pad=1) >> 8, 0, 127)
}

kernel g(x: int8[1, 32, 8, 8], w: int8[16, 32, 1, 1]) -> y: int8[1, 16, 8, 8] {
    y = clip(conv2d(x, w) >> 8, 0, 127)
}

kernel main(x: int8[1, 16, 8, 8], w: int8[16, 16, 3, 3], w2: int8[16, 32, 1, 1], w3: int8[16, 16, 3, 3])
    -> (y: int8[1, 16, 8, 8], z: int8[1, 16, 8, 8]) {
    t = concat(dw(x, w), x)
    y = g(t, w2)
    z = clip(dw(dw(x, w3), w3) + x, -128, 127)
}
"""


def test_roofline_points_carry_the_users_names():
    """The compiler's names (main_concat_c0, dw_y_2, ...) become the kernel called or the entry's result."""
    compiled = compile_file(check_source(CALLS, "calls.vk"), default_config())
    points = roofline_points(compiled)
    assert [p.name for p in points] == ["main_concat_c0", "main_concat_c16", "y", "dw_y", "dw_y_2", "z"]
    assert [getattr(p, "label", p.name) for p in points] == ["dw #1", "concat [c16:]", "g", "dw #2", "dw #3", "z"]


def test_roofline_picture_numbers_its_points_and_names_them_in_a_key(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from vtacc.reports.roofline import RooflinePoint, draw_roofline

    kept: list = []
    monkeypatch.setattr(plt, "close", kept.append)
    # eight results a few percent apart: their names written beside them would pile up
    points = [RooflinePoint(f"main_concat_{k}_c{16 * k}", 1000, 40_000 + 900 * k, 0, 1000, 1000, 0.0, 0.0, 100.0)
              for k in range(8)] + [RooflinePoint("conv1_y", 4000, 100_000, 0, 500, 500, 0.0, 0.0, 100.0)]
    for point, label in zip(points, [f"fire{k}" for k in range(8)] + ["conv1"], strict=True):
        point.label = label
    p = resolve_profile("chisel-2019", 16)
    draw_roofline({"as compiled": points}, p, default_config(), tmp_path / "r.png", "t")
    ax = kept[0].axes[0]
    texts = [t for t in ax.texts if t.get_text()]
    key = "\n".join(t.get_text() for t in texts if "\n" in t.get_text())
    assert all(f"{k + 1} fire{k}" in key for k in range(8)) and "9 conv1" in key and "main_concat" not in key
    numbers = [t for t in texts if "\n" not in t.get_text()]
    assert sorted(int(n) for t in numbers for n in t.get_text().split(",")) == list(range(1, 10))
    renderer = FigureCanvasAgg(kept[0]).get_renderer()
    boxes = [t.get_window_extent(renderer) for t in numbers]
    assert not any(a.overlaps(b) for k, a in enumerate(boxes) for b in boxes[k + 1:])

"""Windows that lie wholly in padding: no LOAD of no rows, the reference's numbers on every design.

The 2021 Chisel design never completes a LOAD with ``y_size`` 0 and
``x_size`` > 0 (isa.md section 7). The compiler used such loads for input
windows that lie wholly in a convolution's padding; it now reads one row of
an all-zero tensor with one padding row fewer. The shapes below produced
them: large pads, strides larger than the kernel, tiles that fall in the
padding. Each is checked against numpy's convolution (written from the
definition) on every golden configuration, for the stream it emits, under
the portability lint, and on the design interpreter as the 2021 design.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.hardware_designs import DesignHang, run_design
from tests.vtasim.builders import INP as MEM_INP
from tests.vtasim.builders import Image, chain, load
from vtacc.schedule.dma import MAX_PAD, ZERO_ROW, padded_plane_loads, zero_rows
from vtacc.schedule.steps import ACC, INP
from vtasim.core.machine import Machine
from vtasm.config import default_config

from .harness import CONFIGS, compile_source, config, conv_ref, low8, rand8, run

# (input channels, image, output channels, kernel, stride, pad, schedule)
SHAPES = {
    "1x1_pad2": (16, (4, 4), 16, 1, 1, 2, ""),
    "1x1_pad2_rows": (16, (4, 4), 16, 1, 1, 2, "tile_h = 1"),
    "3x3_stride4_pad3": (16, (9, 9), 32, 3, 4, 3, "tile_h = 1"),
    "2x2_stride3_pad2": (24, (7, 5), 16, 2, 3, 2, "tile_h = 1"),
    "5x5_pad6": (8, (3, 3), 16, 5, 1, 6, ""),
    "1x1_pad15_tall_rows": (16, (2, 3), 16, 1, 1, 15, "tile_h = 15"),
    "1x1_stride2_pad3": (32, (6, 6), 16, 1, 2, 3, ""),
}


def _source(ic: int, hw: tuple[int, int], oc: int, k: int, s: int, pad: int, schedule: str) -> tuple[str, tuple]:
    h, w = hw
    oh, ow = (h + 2 * pad - k) // s + 1, (w + 2 * pad - k) // s + 1
    block = f"\n        schedule {{ {schedule} }}" if schedule else ""
    return (f"""kernel c(x: int8[1, {ic}, {h}, {w}], w: int8[{oc}, {ic}, {k}, {k}]) -> y: int8[1, {oc}, {oh}, {ow}] {{
        y = conv2d(x, w, stride={s}, pad={pad}) >> 4{block}
    }}""", (oh, ow))


def _rowless_loads(program) -> list[int]:
    return [i for i, insn in enumerate(program.instructions)
            if insn.kind == "load" and insn["y_size"] == 0 and insn["x_size"] > 0]


@pytest.mark.parametrize("cfg_name", CONFIGS)
@pytest.mark.parametrize("shape", SHAPES)
def test_windows_in_the_padding_compute_the_convolution_without_rowless_loads(shape, cfg_name):
    ic, hw, oc, k, s, pad, schedule = SHAPES[shape]
    src, _ = _source(ic, hw, oc, k, s, pad, schedule)
    rng = np.random.default_rng(len(shape) + len(cfg_name))
    x, w = rand8(rng, 1, ic, *hw), rand8(rng, oc, ic, k, k)
    result = run(src, {"x": x, "w": w}, config(cfg_name))  # lint-clean: no load-no-rows either
    program = result.compiled.program
    assert _rowless_loads(program) == []
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["y"], low8(conv_ref(x, w, s, pad) >> 4))


def test_the_shapes_do_reach_the_zero_rows():
    """Each shape has a window wholly in the padding on some golden configuration (else the test above would
    prove nothing): the tiles the compiler picks decide where windows fall."""
    for shape, (ic, hw, oc, k, s, pad, schedule) in SHAPES.items():
        src, _ = _source(ic, hw, oc, k, s, pad, schedule)
        programs = [compile_source(src, config(name)).program for name in CONFIGS]
        assert any(seg.name == ZERO_ROW[INP] for p in programs for seg in p.segments), shape


@pytest.mark.parametrize("shape", ["1x1_pad2_rows", "3x3_stride4_pad3", "2x2_stride3_pad2"])
def test_the_2021_design_finishes_them_with_the_reference_bytes(shape):
    ic, hw, oc, k, s, pad, schedule = SHAPES[shape]
    src, _ = _source(ic, hw, oc, k, s, pad, schedule)
    rng = np.random.default_rng(7)
    x, w = rand8(rng, 1, ic, *hw), rand8(rng, oc, ic, k, k)
    result = run(src, {"x": x, "w": w}, default_config())
    program = result.compiled.program
    inputs = {name: program.tensor(name).pack(value) for name, value in (("x", x), ("w", w))}
    seg, info = program.segment("y"), program.tensor("y")
    dram = run_design(program, "chisel-2021", inputs)
    assert (info.unpack(bytes(dram[seg.addr:seg.addr + info.nbytes])) == result.outputs["y"]).all()


def test_a_load_of_no_rows_hangs_the_2021_design_and_the_lint_says_so():
    cfg = default_config()
    img = Image(cfg)
    inp = img.add("x", bytes(cfg.inp_elem_bytes * 4))
    program = img.program(chain([load(MEM_INP, 0, inp // cfg.inp_elem_bytes, 4, y=0, pad=(2, 0, 0, 0))]))
    for design in ("hls", "chisel-2019"):
        run_design(program, design, {})  # they complete it, writing its padding rows
    with pytest.raises(DesignHang):
        run_design(program, "chisel-2021", {})
    from vtasim.checks.lint import Linter

    machine = Machine(program)
    linter = Linter(machine)
    machine.run()
    found = [w for w in linter.report() if w.rule == "load-no-rows"]
    assert len(found) == 1 and "chisel-2021" in found[0].describe(program)
    from vtasim.timing.profile import load_profile
    from vtasim.timing.run import time_program

    notes = {name: time_program(program, load_profile(name), record=False).report.notes
             for name in ("hls", "chisel-2019", "chisel-2021")}
    assert notes["hls"] == notes["chisel-2019"] == ()
    assert len(notes["chisel-2021"]) == 1 and "instruction 0 is a LOAD of no rows" in notes["chisel-2021"][0]


def _covers(loads, sram: int, rows: int, cols: int) -> bool:
    """Whether the loads fill SRAM [sram, sram + rows * cols) row by row, each padded row ``cols`` long."""
    at = sram
    for ld in loads:
        y0, y1, x0, x1 = ld.dma.pads
        if ld.dma.sram != at or x0 + ld.dma.x + x1 != cols or max(ld.dma.pads) > MAX_PAD:
            return False
        at += ld.dma.sram_elems
    return at == sram + rows * cols


def test_padding_only_loads_cover_the_window_31_rows_a_load():
    # a 70-row window wholly above the image: 31 + 31 + 8 rows, each one zero row with its padding around it
    loads = padded_plane_loads(ACC, "t", (1, 1, 4, 4), 0, 0, -80, 70, 0, 4, 100)
    assert [(ld.tensor, ld.buffer, ld.dma.y, ld.dma.x) for ld in loads] == [(ZERO_ROW[ACC], ACC, 1, 1)] * 3
    assert [ld.dma.pads for ld in loads] == [(MAX_PAD, MAX_PAD, 3, 0), (MAX_PAD, MAX_PAD, 3, 0), (7, 0, 3, 0)]
    assert _covers(loads, 100, 70, 4)
    # a window beside the image (its rows inside, its columns all padding) too
    beside = padded_plane_loads(INP, "t", (1, 1, 4, 4), 0, 0, 0, 3, 6, 5, 0)
    assert [(ld.tensor, ld.dma.y, ld.dma.x, ld.dma.pads) for ld in beside] == [(ZERO_ROW[INP], 1, 1, (2, 0, 4, 0))]
    # wider than the column padding reaches: the zero row reads the middle
    wide = padded_plane_loads(INP, "t", (1, 1, 4, 4), 0, 0, 9, 2, 0, 45, 0)
    assert [(ld.dma.y, ld.dma.x, ld.dma.pads) for ld in wide] == [(1, 15, (1, 0, 15, 15))]
    for rows in range(1, 40):
        for cols in (1, 2, 31, 32, 70):
            assert _covers(padded_plane_loads(INP, "t", (1, 1, 4, 4), 0, 0, -rows, rows, 0, cols, 5), 5, rows,
                           cols), (rows, cols)


@pytest.mark.parametrize("cfg_name", CONFIGS)
def test_the_zero_rows_are_as_wide_as_the_widest_load_and_all_zero(cfg_name):
    cfg = config(cfg_name)
    loads = (padded_plane_loads(INP, "t", (1, 1, 4, 4), 0, 0, -9, 3, 0, 36, 0)
             + padded_plane_loads(ACC, "t", (1, 1, 4, 4), 0, 0, -9, 3, 0, 41, 0)
             + padded_plane_loads(INP, "t", (1, 1, 4, 4), 0, 0, -9, 3, 0, 39, 0))
    tensors, data = zero_rows(loads, cfg)
    assert [(t.name, t.n_elements, t.elem_bytes) for t in tensors] == [
        (ZERO_ROW[ACC], 11, cfg.acc_elem_bytes), (ZERO_ROW[INP], 9, cfg.inp_elem_bytes)]
    assert {name: len(b) for name, b in data.items()} == {t.name: t.nbytes for t in tensors}
    assert not any(any(b) for b in data.values())
    assert zero_rows(padded_plane_loads(INP, "t", (1, 1, 4, 4), 0, 0, -1, 3, 0, 6, 0), cfg) == ([], {})

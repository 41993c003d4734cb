"""Adversarial programs for the in-order run (schedule.py, inorder.py) against the pipeline.

Every program here is one schedule.in_order accepts, so Machine.run() takes the
in-order run; attaching an observer forces the pipeline. Both must leave the
same buffers, DRAM, counters and extras, or raise the same SimFault (text and
index). Programs that do not fault are also checked against the reference
interpreter where its model applies (counters taken modulo 2^64, as the
reference's uint64 profiler counters hold them).

The cases lean on what the in-order run does differently: its slice-based
LOAD/STORE, its per-kernel caches (``prepared`` by micro-op generation,
``by_content`` by micro-op words), its strided-view paths for affine ALU work and
single-weight GEMMs, and its counters summed over the stream before the run.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from vtasim.core.machine import Machine
from vtasim.core.order import in_order
from vtasim.core.pipeline import DEFAULT_MAX_OPS
from vtasm.columns import decode_stream, stream_bytes, stream_columns
from vtasm.encoding import Instruction
from vtasm.errors import SimFault
from vtasm.program import Program, Segment

from .builders import (
    ACC,
    ACC8,
    ADD,
    CONFIGS,
    INP,
    MAX,
    MIN,
    MUL,
    OUT,
    PAGE,
    SHR,
    UOP,
    WGT,
    Image,
    alu,
    chain,
    config,
    elem_bytes,
    finish,
    gemm,
    int32_bytes,
    load,
    store,
    uops,
)
from .reference import COUNTERS, run_reference

BUFFERS = ("inp_bytes", "wgt_bytes", "acc_bytes", "uop_words", "uop_dst", "uop_src", "uop_wgt")
U64 = (1 << 64) - 1


# -- running both ways ----------------------------------------------------------


def _outcome(program: Program, pipeline: bool, max_ops: int = DEFAULT_MAX_OPS):
    machine = Machine(program, max_ops)
    try:
        result = machine.run(through_pipeline=pipeline)
    except SimFault as exc:
        return ("fault", str(exc), exc.index), machine.state
    return ("ok", dict(result.counters), result.extras), machine.state


def _in_order(program: Program) -> bool:
    return in_order(stream_columns(program.instructions, program.config), 10**12) is not None


def _negative_counts(program: Program) -> bool:
    """Whether a GEMM/ALU has uop_end < uop_bgn with loops that run (a negative profiler count)."""
    return any(i.kind in ("gemm", "alu") and i["uop_end"] < i["uop_bgn"] and i["iter_out"] * i["iter_in"] > 0
               for i in program.instructions)


def assert_same_outcome(program: Program, max_ops: int = DEFAULT_MAX_OPS):
    """Both paths: equal buffers, DRAM, counters, extras, or equal SimFaults. Returns the in-order outcome."""
    assert _in_order(program)
    fast, fast_state = _outcome(program, False, max_ops)
    slow, slow_state = _outcome(program, True, max_ops)
    assert fast[0] == slow[0], (fast, slow)
    if fast[0] == "fault":
        assert fast[1:] == slow[1:]
    else:
        assert fast[1] == slow[1]
        assert fast[2] == slow[2]
    assert fast_state.dram.tobytes() == slow_state.dram.tobytes()
    for name in BUFFERS:
        assert np.array_equal(getattr(fast_state, name), getattr(slow_state, name)), name
    assert fast_state.uop_generation == slow_state.uop_generation
    return fast, fast_state


def assert_reference(program: Program, outcome, state) -> None:
    """The reference's DRAM, accumulators and counters (mod 2^64) for a program that ran."""
    ref = run_reference(program)
    dram = state.dram.tobytes()
    lo, hi = program.insn_addr, program.insn_addr + 16 * len(program.instructions)
    assert dram[:lo] == bytes(ref.dram[:lo])
    assert dram[hi:] == bytes(ref.dram[hi:])
    acc = state.acc.reshape(state.acc.shape[0], -1)
    for index, lanes in ref.sram["acc"].items():
        assert acc[index].tolist() == lanes, f"acc[{index}]"
    assert {k: outcome[1][k] for k in COUNTERS} == {k: v & U64 for k, v in ref.counters.items()}


def check(program: Program, reference: bool = True, **kw):
    outcome, state = assert_same_outcome(program, **kw)
    if reference and outcome[0] == "ok":
        assert_reference(program, outcome, state)
    return outcome


# -- programs -----------------------------------------------------------------


def _image(cfg, seed: int = 5, n: int = 64) -> Image:
    rng = np.random.default_rng(seed)
    img = Image(cfg)
    img.add("inp", rng.integers(0, 256, n * elem_bytes(cfg, INP), dtype=np.uint8).tobytes())
    img.add("wgt", rng.integers(0, 256, 16 * elem_bytes(cfg, WGT), dtype=np.uint8).tobytes())
    img.add("acc8", rng.integers(0, 256, n * elem_bytes(cfg, ACC8), dtype=np.uint8).tobytes())
    lanes = cfg.batch * cfg.block_out
    img.add("acc", int32_bytes(rng.integers(-2**31, 2**31, n * lanes).tolist()))
    img.add("out", rng.integers(0, 256, 128 * elem_bytes(cfg, OUT), dtype=np.uint8).tobytes())
    return img


def _with_tail(program: Program, tail: bytes) -> tuple[Program, int]:
    """The program with a last segment after the instructions: it ends DRAM (at an odd size if ``tail`` has one)."""
    addr = -(-(program.insn_addr + 16 * len(program.instructions)) // PAGE) * PAGE
    return dataclasses.replace(program, segments=[*program.segments, Segment("tail", addr, tail)]), addr


def _tail_program(cfg, body_of, tail_len: int, seed: int = 9):
    """A program whose body (built from the tail's byte address) reads and writes the end of DRAM.

    The instruction count does not depend on the address, so build twice: once to place the tail.
    """
    img = _image(cfg)
    tail = np.random.default_rng(seed).integers(0, 256, tail_len, dtype=np.uint8).tobytes()
    table = uops((0, 0, 0), (1, 1, 1), (2, 2, 0), (3, 3, 1))
    first = img.program(chain(body_of(img, 1 << 30)), table)
    _, addr = _with_tail(first, tail)
    program, addr2 = _with_tail(img.program(chain(body_of(img, addr)), table), tail)
    assert addr2 == addr
    return program, addr


# -- the one discrepancy found --------------------------------------------------


@pytest.mark.parametrize("kind", ["gemm", "alu"])
def test_negative_micro_op_ranges_count_like_the_pipeline(kind):
    """uop_end < uop_bgn with loops that run: no execution, but the profiler adds a negative count.

    The pipeline adds wrap_int32(iter_out * iter_in * (uop_end - uop_bgn)) modulo 2^64, as the reference's
    uint64 counters do. The in-order run first summed schedule.executions(), which clamps at 0, and reported 0
    here (found by this review; an xfail(strict=True) until vtasim/core/inorder.py counted as the units do).
    """
    cfg = config("default")
    img = _image(cfg)
    looped = gemm(3, 1, (2, 3)) if kind == "gemm" else alu(ADD, 2, 0, (1, 5), imm=3)
    program = img.program(chain([load(UOP, 0, img.uop_elem(), 4), looped]), uops(*[(k, k, k) for k in range(4)]))
    fast, _ = _outcome(program, False)
    slow, _ = _outcome(program, True)
    ref = run_reference(program).counters
    key = f"{kind}_counter"
    expected = ref[key] & U64  # gemm: 2*3*(1-3) = -12; alu: 1*5*(0-2) = -10
    assert expected > 1 << 63 and slow[1][key] == expected  # the pipeline agrees with the reference
    assert fast[1][key] == slow[1][key]


def test_negative_micro_op_ranges_change_nothing_else():
    cfg = config("default")
    img = _image(cfg)
    body = [load(UOP, 0, img.uop_elem(), 4), load(ACC, 0, img.elem("acc", ACC), 8), gemm(3, 1, (2, 3)),
            alu(ADD, 2, 0, (1, 5), imm=3), gemm(3, 1, (2, 3), reset=1), alu(ADD, 0, 2, (2, 2), dst=(2, 1), imm=1),
            gemm(3, 1, (2, 3)), store(0, img.elem("out", OUT), 8)]
    program = img.program(chain(body), uops(*[(k, k, k) for k in range(4)]))
    assert _negative_counts(program)
    outcome = check(program)  # the reference's counters go negative: compared modulo 2^64
    assert outcome[0] == "ok" and outcome[2]["uop_executions"] == 8


# -- DMA edges ----------------------------------------------------------------


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("mem", [INP, WGT, ACC, ACC8, UOP])
def test_loads_with_padding_empty_rows_and_short_strides(name, mem):
    cfg = config(name)
    img = _image(cfg)
    seg = {INP: "inp", WGT: "wgt", ACC: "acc", ACC8: "acc8"}.get(mem)
    base = img.uop_elem() if mem == UOP else img.elem(seg, mem)
    depth = {INP: cfg.inp_depth, WGT: cfg.wgt_depth, ACC: cfg.acc_depth, ACC8: cfg.acc_depth, UOP: cfg.uop_depth}[mem]
    body = [
        load(mem, 3, base, 4, 0, 4, (1, 2, 1, 1)),  # no rows: only the zero padding is written
        load(mem, 0, base, 3, 4, 1),  # x_stride < x_size: rows overlap in DRAM
        load(mem, 20, base + 2, 2, 3, 0, (2, 0, 0, 3)),  # stride 0: the same row three times
        load(mem, 1, base + 1, 5, 1, 0),  # one row, stride 0
        load(mem, 40, base, 2, 2, 7, (0, 1, 2, 0)),
        load(mem, depth, 1 << 31, 4, 0),  # empty tile at the end of the buffer, DRAM never read
        load(mem, 50, (1 << 32) - 1, 3, 0, 5, (1, 0, 0, 0)),  # rows outside DRAM, but no rows
        load(mem, depth - 6, base, 2, 3),  # the tile ends at the last element
        load(mem, 8, base, 0, 3, 1, (1, 1, 1, 1)),  # x_size 0: a NOP whatever the padding
    ]
    if mem == UOP:  # keep micro-ops inside the buffers for the kernels that follow
        body = [b for b in body if b["sram_base"] < 64 or b["y_size"] == 0]
        body.append(load(UOP, 0, base, 4))
    body += [alu(ADD, 0, 2, (2, 2), dst=(3, 1), src=(1, 0)), store(0, img.elem("out", OUT), 60)]
    program = img.program(chain(body), uops((0, 0, 0), (5, 9, 1), (9, 2, 2), (2, 9, 3)))
    check(program, reference=mem != ACC8 or cfg.acc_width == 32)


@pytest.mark.parametrize("name", ["default", "batch4", "block32"])
def test_dma_at_the_very_end_of_dram(name):
    cfg = config(name)
    out_e = elem_bytes(cfg, OUT)
    inp_e = elem_bytes(cfg, INP)
    tail_len = 6 * max(out_e, inp_e) + 7  # DRAM ends 7 bytes into an element

    def body(img, addr):
        last_out = (addr + tail_len) // out_e  # the first out element that does not fit whole
        last_inp = (addr + tail_len) // inp_e
        return [
            load(INP, 0, last_inp - 2, 2),  # the last whole elements
            load(INP, 4, last_inp - 5, 2, 2, 3),  # strided rows ending at the last whole element
            load(INP, 9, last_inp - 1, 1, 3, 0),
            load(ACC, 0, img.elem("acc", ACC), 16),
            alu(MAX, 0, 2, (2, 2), dst=(4, 1), imm=-5),
            store(0, last_out - 3, 3),
            store(3, last_out - 4, 2, 3, 1),  # overlapping rows; later rows win
            store(6, last_out - 2, 2, 4, 0),  # stride 0: the last row wins
            store(8, last_out - 1, 1, 2, 0),
            store(10, last_out - 5, 2, 2, 3),  # strided rows ending at the last whole element
            load(INP, 12, addr // inp_e, 1, 2, 1, (1, 1, 1, 1)),
        ]

    program, _ = _tail_program(cfg, body, tail_len)
    check(program)


@pytest.mark.parametrize("what", ["load", "load_rows", "store", "store_rows", "store_overlap"])
def test_dma_one_element_past_the_end_of_dram_faults_alike(what):
    cfg = config("default")
    tail_len = 3 * 16 + 5

    def body(img, addr):
        end = (addr + tail_len) // 16  # the element DRAM cuts short
        last = {
            "load": load(INP, 0, end, 1),
            "load_rows": load(WGT, 0, (addr + tail_len) // 256 - 1, 1, 3, 1),
            "store": store(0, end - 1, 2),
            "store_rows": store(0, end - 4, 2, 3, 2),
            "store_overlap": store(0, end - 2, 2, 3, 1),
        }[what]
        return [load(ACC, 0, img.elem("acc", ACC), 8), alu(ADD, 0, 1, (8, 1), dst=(1, 0), imm=7),
                store(0, end - 2, 2), last]

    program, _ = _tail_program(cfg, body, tail_len)
    outcome = check(program)
    assert outcome[0] == "fault" and "lie outside the program's memory" in outcome[1]


@pytest.mark.parametrize("case", ["pad", "type", "sram", "load_type", "acc8_sram", "uop_sram"])
def test_dma_faults_alike(case):
    cfg = config("default")
    img = _image(cfg)
    bad = {
        "pad": Instruction("store", {**store(0, img.elem("out", OUT), 2).fields, "x_pad_1": 1}),
        "type": store(0, img.elem("out", OUT), 2, mem=ACC),
        "sram": store(cfg.acc_depth - 3, img.elem("out", OUT), 2, 2),
        "load_type": load(OUT, 0, img.elem("out", OUT), 0),  # an unknown type faults even as a NOP
        "acc8_sram": load(ACC8, cfg.acc_depth - 2, img.elem("acc8", ACC8), 1, 1, 1, (0, 0, 1, 1)),
        "uop_sram": load(UOP, cfg.uop_depth, img.uop_elem(), 1, 0, 1, (1, 0, 0, 0)),  # no rows, one padding row
    }[case]
    body = [load(UOP, 0, img.uop_elem(), 2), load(ACC, 0, img.elem("acc", ACC), 4),
            alu(SHR, 0, 2, (1, 2), dst=(2, 0), imm=-3), store(0, img.elem("out", OUT), 4), bad]
    program = img.program(chain(body), uops((0, 0, 0), (1, 1, 1)))
    outcome = check(program)
    assert outcome[0] == "fault" and outcome[2] == len(program.instructions) - 2


def test_micro_ops_loaded_from_what_a_store_wrote():
    """A STORE rewrites DRAM under the micro-op table; reloading it changes a prepared kernel's micro-ops."""
    cfg = config("default")
    img = _image(cfg)
    u = img.uop_elem()
    body = [
        load(UOP, 0, u, 4),
        load(ACC, 0, img.elem("acc", ACC), 16),
        alu(MIN, 0, 4, (1, 1), imm=100),  # acc values become small
        alu(MAX, 0, 4, (1, 1), imm=0),
        alu(ADD, 0, 4, (2, 2), dst=(4, 8), src=(1, 1)),
        store(2, u * 4 // 16, 1),  # 16 int8 lanes = four micro-op words
        load(UOP, 0, u, 4),
        alu(ADD, 0, 4, (2, 2), dst=(4, 8), src=(1, 1)),  # same fields, new micro-ops
        load(UOP, 0, u + 4, 4),  # the original words again (the table is repeated)
        alu(ADD, 0, 4, (2, 2), dst=(4, 8), src=(1, 1)),
        store(0, img.elem("out", OUT), 32),
    ]
    table = [(0, 1, 0), (1, 2, 0), (2, 3, 0), (3, 0, 0)] * 2
    program = img.program(chain(body), uops(*table))
    check(program, reference=False)  # the reference keeps no instruction area: compare the two runs only


# -- kernel caches --------------------------------------------------------------


@pytest.mark.parametrize("name", ["default", "batch2", "block8"])
def test_kernels_after_reloads_of_their_micro_ops_inputs_and_weights(name):
    cfg = config(name)
    img = _image(cfg)
    u = img.uop_elem()
    one_weight = gemm(0, 4, (2, 2), dst=(8, 4), src=(8, 4))  # affine, single weight tile: strided views
    im2col = gemm(4, 8, (2, 3), dst=(1, 0), src=(1, 2), wgt=(0, 1))  # every destination takes taps
    imm = alu(SHR, 0, 4, (2, 2), dst=(8, 4), imm=-3)
    tensor = alu(MUL, 0, 4, (2, 2), dst=(8, 4), src=(8, 4))
    shifts = alu(SHR, 8, 12, (1, 2), dst=(0, 1), src=(0, 1))
    kernels = [one_weight, im2col, imm, tensor, shifts]
    body = [load(UOP, 0, u, 12), load(INP, 0, img.elem("inp", INP), 40), load(WGT, 0, img.elem("wgt", WGT), 8),
            load(ACC, 0, img.elem("acc", ACC), 48), alu(MIN, 0, 1, (48, 1), dst=(1, 0), imm=9999),
            alu(MAX, 0, 1, (48, 1), dst=(1, 0), imm=-9999), *kernels]
    body += [load(INP, 0, img.elem("inp", INP) + 20, 40), *kernels]
    body += [load(WGT, 0, img.elem("wgt", WGT) + 8, 8), *kernels]
    body += [load(WGT, 0, img.elem("wgt", WGT), 1), load(INP, 3, img.elem("inp", INP), 2, 1, 2, (0, 0, 1, 0)),
             *kernels]
    body += [load(UOP, 1, u + 12, 2), *kernels]  # micro-ops 1 and 2 change: no longer affine
    body += [load(UOP, 0, u, 12), *kernels]  # back to the first words: prepared kernels apply again
    body += [gemm(0, 4, (2, 2), dst=(8, 4), src=(8, 4), reset=1), one_weight, one_weight]
    body += [store(0, img.elem("out", OUT), 48)]
    table = [(0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 3, 0), (0, 0, 0), (1, 1, 1), (2, 2, 2), (3, 3, 3),
             (0, 0, 0), (1, 2, 0), (2, 4, 0), (3, 6, 0), (7, 3, 5), (2, 30, 0)]
    program = img.program(chain(body), uops(*table))
    check(program)


@pytest.mark.parametrize("name", ["default", "batch2", "block8", "block32"])
def test_convolutions_and_identity_weights_after_reloads(name):
    """im2col kernels whose output-channel blocks share their patches, and single-weight GEMMs through
    +-identity tiles, rerun after weight loads that turn a tile from the identity into something else and back."""
    cfg = config(name)
    rng = np.random.default_rng(11)
    img = Image(cfg)
    eye = np.eye(cfg.block_out, cfg.block_in, dtype=np.int8)
    near = eye.copy()
    near[-1, 0] = -1
    rand = rng.integers(-128, 128, (9, cfg.block_out, cfg.block_in), dtype=np.int8)
    tiles = np.concatenate([np.stack([eye, -eye, near, eye * 2]), rand])  # 13 tiles
    img.add("inp", rng.integers(-128, 128, 64 * cfg.inp_elem_bytes, dtype=np.int8).tobytes())
    img.add("wgt", tiles.tobytes())
    img.add("acc", rng.integers(-2**31, 2**31, 64 * cfg.batch * cfg.block_out, dtype=np.int32).tobytes())
    img.add("out", bytes(64 * cfg.out_elem_bytes))
    inp, wgt = img.elem("inp", INP), img.elem("wgt", WGT)
    conv = gemm(0, 3, (3, 5), dst=(5, 1), src=(0, 1), wgt=(3, 0))  # 3 blocks x 5 pixels x 3 taps, shared patches
    conv2 = gemm(0, 3, (2, 4), dst=(8, 2), src=(0, 2), wgt=(4, 0))  # strided pixels
    conv3 = gemm(0, 3, (3, 5), dst=(8, 1), src=(0, 1), wgt=(3, 0))  # blocks of 5 accumulators 8 apart
    moves = [gemm(3, 4, (2, 6), dst=(8, 1), src=(6, 1)),  # tile 0 over affine views
             gemm(4, 5, (1, 8), dst=(0, 1), src=(0, 1)),  # tile 1
             gemm(5, 6, (1, 8), dst=(0, 1), src=(0, 2))]  # tile 2 (almost the identity)
    kernels = [conv, conv2, conv3, *moves]
    body = [load(UOP, 0, img.uop_elem(), 6), load(INP, 0, inp, 48), load(WGT, 0, wgt, 13),
            load(ACC, 0, img.elem("acc", ACC), 48), *kernels]
    body += [load(INP, 0, inp + 8, 40), *kernels]
    body += [load(WGT, 0, wgt + 2, 1), load(WGT, 1, wgt, 1), load(WGT, 2, wgt + 1, 1), *kernels]  # -I, I, -I
    body += [load(WGT, 5, wgt + 3, 2), *kernels]  # the convolution's weights change
    body += [load(WGT, 0, wgt, 3), load(INP, 1, inp, 3, 1, 3, (0, 1, 0, 0)), *kernels]
    body += [gemm(3, 4, (2, 6), dst=(8, 1), src=(6, 1), reset=1), *kernels, store(0, img.elem("out", OUT), 48)]
    table = uops((0, 0, 0), (0, 1, 1), (0, 2, 2), (0, 0, 0), (0, 0, 1), (0, 0, 2))
    program = img.program(chain(body), table)
    check(program)


def test_in_place_and_overlapping_alu_views():
    """dst == src, src one element after dst (reads what a later execution writes), src before dst (chains)."""
    cfg = config("default")
    img = _image(cfg)
    body = [load(UOP, 0, img.uop_elem(), 8), load(ACC, 0, img.elem("acc", ACC), 64)]
    for op in (MIN, MAX, ADD, SHR, MUL):
        body += [alu(op, 0, 4, (2, 2), dst=(8, 4), src=(8, 4)),  # in place
                 alu(op, 4, 8, (1, 3), dst=(0, 4), src=(0, 4)),  # src = dst + 1: parallel, reads old values
                 alu(op, 0, 4, (2, 1), dst=(4, 0), src=(4, 0)),
                 alu(op, 4, 8, (1, 3), dst=(0, 4), src=(0, 4))]
        body += [alu(MIN, 0, 1, (64, 1), dst=(1, 0), imm=1 << 12), alu(MAX, 0, 1, (64, 1), dst=(1, 0), imm=-4096)]
    body += [alu(ADD, 1, 2, (1, 6), dst=(0, 1), src=(0, 1)),  # src = dst - 1: a chain through the executions
             alu(ADD, 1, 2, (1, 6), dst=(0, 1), src=(0, 1)), store(0, img.elem("out", OUT), 64)]
    table = [(0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 3, 0), (20, 21, 0), (21, 22, 0), (22, 23, 0), (23, 24, 0)]
    table[1] = (31, 30, 0)
    program = img.program(chain(body), uops(*table))
    check(program)


@pytest.mark.parametrize("imm", [-32768, -33, -32, -31, -1, 0, 1, 31, 32, 33, 32767])
def test_alu_immediates_at_the_edges(imm):
    cfg = config("default")
    img = _image(cfg)
    body = [load(UOP, 0, img.uop_elem(), 4), load(ACC, 0, img.elem("acc", ACC), 32)]
    for op in (SHR, MUL, ADD, MIN, MAX):
        body += [alu(op, 0, 4, (2, 2), dst=(8, 4), imm=imm)] * 2  # the unit, then the prepared view
        body += [alu(op, 0, 4, (1, 2), dst=(0, 0), imm=imm)] * 2  # repeated destinations: not a view
    body.append(store(0, img.elem("out", OUT), 32))
    program = img.program(chain(body), uops((0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)))
    check(program)


def test_faults_that_appear_on_a_kernels_second_use():
    cfg = config("default")
    img = _image(cfg)
    u = img.uop_elem()
    cases = [
        # a micro-op load moves an index out of its buffer
        [load(UOP, 0, u, 2), alu(ADD, 0, 2, (2, 2), dst=(4, 1), src=(4, 1)), load(UOP, 1, u + 2, 1),
         alu(ADD, 0, 2, (2, 2), dst=(4, 1), src=(4, 1))],
        # a reset never reads its sources; the accumulating GEMM with the same loops does
        [load(UOP, 0, u, 2), gemm(0, 2, (2, 2), dst=(2, 1), src=(2047, 1), reset=1),
         gemm(0, 2, (2, 2), dst=(2, 1), src=(2047, 1), reset=1), gemm(0, 2, (2, 2), dst=(2, 1), src=(2047, 1))],
        # an immediate never reads its sources; the tensor form does
        [load(UOP, 0, u, 2), alu(MAX, 0, 2, (1, 2), dst=(0, 1), src=(0, 2046), imm=3),
         alu(MAX, 0, 2, (1, 2), dst=(0, 1), src=(0, 2046), imm=3), alu(MAX, 0, 2, (1, 2), dst=(0, 1), src=(0, 2046))],
        # the micro-op range leaves the buffer only for the second kernel
        [load(UOP, 0, u, 2), alu(ADD, 0, 2, imm=1), alu(ADD, 0, 2, imm=1),
         alu(ADD, cfg.uop_depth - 1, cfg.uop_depth + 1, imm=1)],
        # an unknown ALU operation, even with no executions
        [load(UOP, 0, u, 2), alu(ADD, 0, 2, imm=1), alu(7, 2, 0, (1, 1), imm=1)],
        # a weight index out of range after new micro-ops with the same loops
        [load(UOP, 0, u, 2), gemm(0, 2, (2, 2), wgt=(1, 1)), load(UOP, 0, u + 3, 1), gemm(0, 2, (2, 2), wgt=(1, 1))],
    ]
    table = uops((0, 1, 0), (2, 3, 0), (2047, 3, 0), (0, 0, cfg.wgt_depth - 2))
    for body in cases:
        program = img.program(chain([*body, store(0, img.elem("out", OUT), 4)]), table)
        outcome = check(program)
        assert outcome[0] == "fault", body


def test_huge_loops_in_chunks_run_twice():
    """Instructions beyond one chunk go through the units every time (not prepared), in execution order."""
    cfg = config("default")
    img = _image(cfg)
    body = [load(UOP, 0, img.uop_elem(), 2), load(INP, 0, img.elem("inp", INP), 64),
            load(WGT, 0, img.elem("wgt", WGT), 4), load(ACC, 0, img.elem("acc", ACC), 64)]
    chained = alu(ADD, 0, 2, (300, 120), dst=(0, 0), src=(0, 0))  # 72000 executions folding into two elements
    waves = alu(SHR, 0, 1, (260, 260), dst=(0, 0), src=(0, 0), imm=-1)
    product = gemm(0, 2, (260, 130), dst=(0, 0), src=(1, 0), wgt=(0, 0))
    body += [chained, waves, product, chained, product, waves, store(0, img.elem("out", OUT), 8)]
    program = img.program(chain(body), uops((0, 1, 0), (1, 3, 1)))
    check(program, reference=False)  # 400 000 executions: too slow for the reference


def test_tokens_piled_up_in_program_order():
    """Several tokens pushed before they are popped, some never popped: the extras count the deepest queues."""
    cfg = config("default")
    img = _image(cfg)
    inp = img.elem("inp", INP)
    out = img.elem("out", OUT)
    insns = [
        *(load(INP, k, inp + k, 1, push_next=1) for k in range(3)),
        load(UOP, 0, img.uop_elem(), 2, pop_prev=1, push_next=1),
        gemm(0, 2, (1, 2), dst=(0, 2), src=(0, 2), pop_prev=1, push_prev=1, push_next=1),
        alu(ADD, 0, 2, (1, 2), dst=(0, 2), imm=5, pop_prev=1, push_prev=1),
        store(0, out, 2, pop_prev=1, push_prev=1),
        store(2, out + 2, 2, pop_prev=1, push_prev=1),
        load(WGT, 0, img.elem("wgt", WGT), 2, pop_next=1, push_next=1),
        load(INP, 3, inp, 1, pop_next=1),
        alu(MAX, 0, 4, imm=0, pop_next=1, pop_prev=1),
        alu(MAX, 0, 4, imm=0, pop_next=1),
        finish(),
    ]
    program = img.program(insns, uops((0, 0, 0), (1, 1, 0)))
    outcome = check(program)
    assert outcome[2]["max_queue_tokens"] == {"l2g": 3, "g2l": 2, "s2g": 2, "g2s": 2}


def test_operation_budget_edges():
    cfg = config("default")
    img = _image(cfg)
    body = [load(UOP, 0, img.uop_elem(), 2), alu(ADD, 0, 2, (3, 4), dst=(8, 2), imm=1), gemm(0, 2, (2, 2), reset=1)]
    program = img.program(chain(body), uops((0, 0, 0), (1, 1, 0)))
    ops = len(program.instructions) + 24 + 8
    for max_ops in (0, 1, ops - 1, ops, ops + 1):
        fast, _ = _outcome(program, False, max_ops)
        slow, _ = _outcome(program, True, max_ops)
        assert fast == slow
        assert (fast[0] == "ok") == (max_ops >= ops)


def test_instructions_with_stray_bits():
    """Known opcodes with bits set outside their fields: the units ignore the bits; both paths alike."""
    cfg = config("default")
    img = _image(cfg)
    body = [load(UOP, 0, img.uop_elem(), 2), load(ACC, 0, img.elem("acc", ACC), 8),
            alu(ADD, 0, 2, (2, 2), dst=(2, 1), imm=3), alu(ADD, 0, 2, (2, 2), dst=(2, 1), imm=3),
            store(0, img.elem("out", OUT), 8)]
    data = bytearray(stream_bytes(chain(body), cfg))
    data[16 * 1 + 7] |= 0x04  # LOAD: bit 58
    data[16 * 3 + 7] |= 0x80  # ALU: bit 63
    data[16 * 4 + 7] |= 0x08  # STORE
    data[16 * 5 + 7] |= 0x40  # FINISH
    insns = decode_stream(bytes(data), cfg)
    assert [i.kind for i in insns].count("raw") == 4
    program = img.program(insns, uops((0, 0, 0), (1, 1, 0)))
    check(program, reference=False)


# -- seeded random programs ------------------------------------------------------


def _random_program(cfg, rng: random.Random) -> Program:
    """Loads of every type with odd shapes, stores with odd strides, DMA at the ends of DRAM and of the
    buffers, kernels with odd loops (some repeated after reloads), micro-op ranges that run backwards."""
    n = rng.choice([8, 24, 40])
    img = _image(cfg, rng.randrange(1 << 30), n)
    n_uops = 32
    depth = {INP: cfg.inp_depth, WGT: cfg.wgt_depth, ACC: cfg.acc_depth, ACC8: cfg.acc_depth, UOP: cfg.uop_depth}
    seg = {INP: "inp", WGT: "wgt", ACC: "acc", ACC8: "acc8"}
    out_base = img.elem("out", OUT)
    u = img.uop_elem()

    def sram(mem):
        return depth[mem] - rng.randint(0, 3) if rng.random() < 0.03 else rng.randint(0, min(depth[mem] - 1, 40))

    def dims():
        x, y = rng.choice([0, 1, 1, 2, 3, 4, 5]), rng.choice([0, 1, 1, 2, 3, 4])
        return x, y, rng.choice([x, x, 0, rng.randint(0, 8), max(0, x - 1)])

    def a_load(end):
        mem = rng.choice([INP, WGT, ACC, ACC8, UOP, INP, ACC])
        x, y, stride = dims()
        pad = tuple(rng.choice([0, 0, 0, 1, 2]) for _ in range(4))
        r = rng.random()
        if r < 0.1:
            e = cfg.acc8_elem_bytes if mem == ACC8 else elem_bytes(cfg, mem)
            dram = max(0, end // e - (((y - 1) * stride + x) if y else 0) + rng.choice([0, 0, 1, -1]))
        elif r < 0.12:
            dram = rng.randint(0, (1 << 32) - 1)
        else:
            dram = (u if mem == UOP else img.elem(seg[mem], mem)) + rng.randint(0, n)
        return load(mem, sram(mem), dram, x, y, stride, pad)

    def a_store(end):
        x, y, stride = dims()
        r = rng.random()
        if r < 0.05:
            dram = max(0, end // elem_bytes(cfg, OUT) - (((y - 1) * stride + x) if y else 0) + rng.choice([0, 1, -1]))
        elif r < 0.1:
            dram = u * 4 // elem_bytes(cfg, OUT) + rng.randint(0, 8)  # over the micro-op table
        else:
            dram = out_base + rng.randint(0, 40)
        return store(sram(ACC), dram, x, y, stride, OUT if rng.random() < 0.98 else ACC)

    def loops():
        bgn = rng.randint(0, n_uops - 1) if rng.random() < 0.98 else cfg.uop_depth - rng.randint(1, 3)
        end = max(0, bgn + rng.choice([0, 1, 1, 2, 3, 4, -1, -2]))
        if rng.random() < 0.02:
            end = cfg.uop_depth + 1
        f = [rng.choice([0, 0, 1, 1, 2, 3, 4, 8]) for _ in range(4)]
        return bgn, end, (rng.randint(0, 4), rng.randint(0, 4)), (f[0], f[1]), (f[2], f[3])

    def a_gemm(_):
        wgt = (rng.choice([0, 0, 1, 2]), rng.choice([0, 0, 1, 2]))
        return gemm(*loops(), wgt, reset=int(rng.random() < 0.2))

    def an_alu(_):
        op = rng.choice([MIN, MAX, ADD, SHR, MUL]) if rng.random() < 0.99 else rng.randint(5, 7)
        imm = rng.choice([None, None, rng.randint(-40, 40), rng.randint(-32768, 32767), -32, -31, 31, 32, 33, 0])
        return alu(op, *loops(), imm)

    makers = [a_load, a_load, a_store, a_gemm, a_gemm, an_alu, an_alu, an_alu]
    plan: list = []  # a maker, or the position of an earlier instruction to repeat
    for k in range(rng.randint(1, 16)):
        plan.append(rng.randrange(k) if k and rng.random() < 0.25 else rng.choice(makers))
    table = []
    for _ in range(n_uops):
        d = rng.randrange(n) if rng.random() < 0.97 else rng.randrange(cfg.acc_depth)
        s = min(max(d + rng.randint(-2, 2), 0), n - 1) if rng.random() < 0.6 else rng.randrange(n)
        table.append((d, s, rng.randrange(min(12, cfg.wgt_depth))))
    if rng.random() < 0.5:  # an affine run of micro-ops for the strided views
        step, first = rng.randint(0, 3), rng.randint(0, 8)
        for k in range(8):
            table[8 + k] = (first + step * k, (first + rng.choice([0, step]) * k) % n, table[8][2])
    extra = rng.choice([0, 0, 1, 7, 100])
    state = rng.getstate()

    def build(end):
        rng.setstate(state)
        made: list[Instruction] = []
        for step in plan:
            made.append(made[step] if isinstance(step, int) else step(end))
        body = [load(UOP, 0, u, n_uops), *made, store(0, out_base + 40, 24)]
        return img.program(chain(body), uops(*table))

    size = build(1 << 30).dram_size() + extra
    return dataclasses.replace(build(size), dram_bytes=size)


@pytest.mark.parametrize("name", CONFIGS)
def test_seeded_random_programs_run_alike(name):
    cfg = config(name)
    for seed in range(150):
        program = _random_program(cfg, random.Random(f"{name}-{seed}"))
        check(program, reference=False)


def _kernel_program(cfg, rng: random.Random) -> Program:
    """A few kernels over (mostly) affine micro-ops, run many times between reloads of micro-ops (rewriting
    or restoring them), inputs, weights and accumulators, and stores."""
    img = _image(cfg, rng.randrange(1 << 30), 144)
    n, n_uops, wmax = 48, 16, min(12, cfg.wgt_depth)
    u = img.uop_elem()

    def affine():
        d0, s0, w0 = rng.randint(0, 8), rng.randint(0, 8), rng.randrange(wmax)
        ds, ss, ws = rng.choice([0, 1, 1, 2, 3]), rng.choice([0, 1, 2, -1]), rng.choice([0, 0, 0, 1])
        return [(min(n - 1, d0 + ds * k), max(0, min(n - 1, s0 + ss * k)), min(wmax - 1, w0 + ws * k))
                for k in range(n_uops)]

    a = affine()
    if rng.random() < 0.5:
        a[rng.randrange(n_uops)] = (rng.randrange(n), rng.randrange(n), rng.randrange(wmax))
    b = list(a)
    for _ in range(rng.randint(0, 2)):
        b[rng.randrange(n_uops)] = (rng.randrange(n), rng.randrange(n), rng.randrange(wmax))
    table = a + b + affine()

    def factor():
        return rng.choice([0, 0, 1, 2, 3, 4, 8, 16])

    kernels = []
    for _ in range(rng.randint(1, 5)):
        bgn = rng.randint(0, n_uops - 1)
        end = min(n_uops, bgn + rng.choice([1, 1, 2, 3, 4, 8]))
        iters = (rng.randint(1, 4), rng.randint(1, 4))
        dst = (factor(), factor())
        if rng.random() < 0.5:
            wgt = (rng.choice([0, 0, 1]), rng.choice([0, 0, 1]))
            kernels.append(gemm(bgn, end, iters, dst, (factor(), factor()), wgt, reset=int(rng.random() < 0.25)))
        else:
            src = dst if rng.random() < 0.3 else (factor(), factor())
            imm = rng.choice([None, None, rng.randint(-40, 40), -32, 31, -1, 5])
            kernels.append(alu(rng.choice([MIN, MAX, ADD, SHR, MUL]), bgn, end, iters, dst, src, imm))
    body = [load(UOP, 0, u, n_uops)]
    for _ in range(rng.randint(3, 25)):
        r = rng.random()
        if r < 0.55:
            body.append(rng.choice(kernels))
        elif r < 0.7:
            at = rng.choice([0, 0, rng.randrange(n_uops)])
            body.append(load(UOP, at, u + rng.choice([0, n_uops, 2 * n_uops]) + rng.choice([0, 0, at]),
                             rng.randint(1, n_uops - at)))
        elif r < 0.9:
            mem = rng.choice([INP, WGT, ACC])
            x = rng.randint(1, n)
            pad = (0, 0, 0, 0) if rng.random() < 0.8 else tuple(rng.randint(0, 1) for _ in range(4))
            name = {INP: "inp", WGT: "wgt", ACC: "acc"}[mem]
            body.append(load(mem, rng.randint(0, n - x), img.elem(name, mem) + rng.randint(0, 2 * n), x, 1, None, pad))
        else:
            body.append(store(rng.randint(0, n - 8), img.elem("out", OUT) + rng.randint(0, 100), 8))
    body.append(store(0, img.elem("out", OUT) + 64, n))
    return img.program(chain(body), uops(*table))


@pytest.mark.parametrize("name", CONFIGS)
def test_seeded_kernel_programs_run_alike_and_match_the_reference(name):
    cfg = config(name)
    for seed in range(60):
        program = _kernel_program(cfg, random.Random(f"{name}-{seed}"))
        check(program, reference=seed < 8)

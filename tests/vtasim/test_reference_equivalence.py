"""The simulator against the reference interpreter (reference.py) and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from vtasim.core.machine import run_program

from . import randprog
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
    SHR,
    UOP,
    WGT,
    Image,
    alu,
    chain,
    config,
    elem_bytes,
    gemm,
    int8_bytes,
    int32_bytes,
    load,
    store,
    uops,
)
from .reference import COUNTERS, alu_op, run_reference

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def assert_same(program, result=None):
    """Run both machines; compare DRAM (outside the instruction area), accumulators and counters."""
    result = result or run_program(program)
    ref = run_reference(program)
    dram = result.state.dram.tobytes()
    lo, hi = program.insn_addr, program.insn_addr + 16 * len(program.instructions)
    assert len(dram) == len(ref.dram)
    assert dram[:lo] == bytes(ref.dram[:lo])
    assert dram[hi:] == bytes(ref.dram[hi:])
    acc = result.state.acc.reshape(result.state.acc.shape[0], -1)
    for index, lanes in ref.sram["acc"].items():
        assert acc[index].tolist() == lanes, f"acc[{index}]"
    written = set(ref.sram["acc"])
    untouched = [i for i in range(acc.shape[0]) if i not in written]
    assert not acc[untouched].any()
    assert {k: result.counters[k] for k in COUNTERS} == ref.counters
    return result, ref


@pytest.mark.parametrize("name", CONFIGS)
def test_random_programs_match_reference(name):
    cfg = config(name)

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(randprog.bodies(), randprog.seeds)
    def check(body, seed):
        assert_same(randprog.build(cfg, body, seed))

    check()


# -- deterministic cases ------------------------------------------------------


def acc_program(cfg, values, body, n_uops):
    """Load int32 accumulator rows (one value per element, broadcast to every lane), run body."""
    lanes = cfg.batch * cfg.block_out
    img = Image(cfg)
    img.add("acc", int32_bytes([v for v in values for _ in range(lanes)]))
    insns = [load(UOP, 0, img.uop_elem(), len(n_uops)), load(ACC, 0, img.elem("acc", ACC), len(values)), *body]
    return img.program(chain(insns), n_uops)


def acc_values(result, count):
    """Lane 0 of accumulator elements 0..count-1 (every lane must agree)."""
    acc = result.state.acc.reshape(result.state.acc.shape[0], -1)[:count].astype(np.int64)
    assert (acc == acc[:, :1]).all()
    return acc[:, 0].tolist()


@pytest.mark.parametrize("name", ["default", "batch2", "block8"])
def test_in_place_chain_is_a_prefix_sum(name):
    cfg = config(name)
    values = [3, -1, 4, 1, -5, 9, 2, 6]
    # acc[i] += acc[i - 1] for i = 1..7: each execution sees the one before
    prog = acc_program(cfg, values, [alu(ADD, 0, 1, (1, 7), dst=(0, 1), src=(0, 1))], uops((1, 0, 0)))
    result, _ = assert_same(prog)
    assert acc_values(result, 8) == np.cumsum(values).tolist()


def test_chain_through_outer_and_inner_loops_and_micro_ops():
    cfg = config("default")
    values = list(range(1, 13))
    # two micro-ops per iteration: acc[2k+1] += acc[2k], acc[2k+2] += acc[2k+1]; k over (i, j) = 2 x 3
    body = [alu(ADD, 0, 2, (2, 3), dst=(6, 2), src=(6, 2))]
    result, _ = assert_same(acc_program(cfg, values, body, uops((1, 0, 0), (2, 1, 0))))
    assert acc_values(result, 13) == np.cumsum(values + [0]).tolist()


@pytest.mark.parametrize("op, fold", [(MAX, max), (MIN, min), (ADD, sum)])
def test_pooling_fold_into_first_element(op, fold):
    cfg = config("default")
    values = [5, -7, 12, 3, 8, 8, -1, 20, -9, -3, -30, -4]
    # three windows of four: acc[4w] = op(acc[4w], acc[4w + k]) for k = 1..3
    body = [alu(op, 0, 1, (3, 3), dst=(4, 0), src=(4, 1))]
    result, _ = assert_same(acc_program(cfg, values, body, uops((0, 1, 0))))
    got = acc_values(result, 12)
    for w in range(3):
        window = values[4 * w : 4 * w + 4]
        assert got[4 * w] == fold(window)
        assert got[4 * w + 1 : 4 * w + 4] == window[1:]


def test_repeated_destination_with_reused_source():
    cfg = config("default")
    values = [3, 2]
    # acc[0] *= acc[0] three times, then acc[1] = acc[1] * acc[0] (sees the final acc[0])
    body = [alu(MUL, 0, 1, (1, 3)), alu(MUL, 1, 2)]
    result, _ = assert_same(acc_program(cfg, values, body, uops((0, 0, 0), (1, 0, 0))))
    assert acc_values(result, 2) == [3**8, 2 * 3**8]


SHIFTS = [0, 1, 5, 15, 16, 31, 32, 33, 40, 63, 32767, -1, -4, -16, -17, -31, -32, -33, -40, -32768]


def expected_shr(x: int, y: int) -> int:
    """x86 semantics: the count is taken modulo 32; result wrapped to int32."""
    value = x >> (y & 31) if y >= 0 else x << ((-y) & 31)
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


def test_expected_shr_helper_against_reference_lane():
    for x in (-12345, 77, INT32_MIN, INT32_MAX):
        for y in SHIFTS:
            assert alu_op(SHR, x, y, 32) == expected_shr(x, y)


@pytest.mark.parametrize("x", [-12345, 1000, INT32_MIN, INT32_MAX, -1])
def test_shr_by_immediate(x):
    cfg = config("default")
    body = [alu(SHR, k, k + 1, imm=y) for k, y in enumerate(SHIFTS)]
    table = uops(*[(k, 0, 0) for k in range(len(SHIFTS))])
    result, _ = assert_same(acc_program(cfg, [x] * len(SHIFTS), body, table))
    assert acc_values(result, len(SHIFTS)) == [expected_shr(x, y) for y in SHIFTS]


def test_shr_by_tensor_amounts():
    cfg = config("default")
    amounts = [*SHIFTS, INT32_MIN, INT32_MAX, 1 << 20, -(1 << 20)]
    x = -987654321
    n = len(amounts)
    values = [x] * n + amounts
    body = [alu(SHR, 0, 1, (1, n), dst=(0, 1), src=(0, 1))]  # acc[k] >>= acc[n + k]
    result, _ = assert_same(acc_program(cfg, values, body, uops((0, n, 0))))
    assert acc_values(result, n) == [expected_shr(x, y) for y in amounts]


def test_mul_wraps_to_the_low_32_bits():
    cfg = config("default")
    pairs = [(1 << 16, 1 << 16), (INT32_MAX, 2), (INT32_MIN, -1), (-3, 1 << 30), (46341, 46341), (-7, 9)]
    values = [a for a, _ in pairs] + [b for _, b in pairs]
    n = len(pairs)
    body = [alu(MUL, 0, 1, (1, n), dst=(0, 1), src=(0, 1))]
    result, _ = assert_same(acc_program(cfg, values, body, uops((0, n, 0))))
    wrapped = [((a * b + (1 << 31)) % (1 << 32)) - (1 << 31) for a, b in pairs]
    assert acc_values(result, n) == wrapped == [0, -2, INT32_MIN, 1 << 30, -2147479015, -63]


def test_mul_and_add_by_immediate_wrap():
    cfg = config("default")
    body = [alu(MUL, 0, 1, imm=-32768), alu(ADD, 1, 2, imm=32767), alu(MUL, 2, 3, imm=3)]
    result, _ = assert_same(acc_program(cfg, [1 << 20, INT32_MAX, 1 << 30], body,
                                        uops((0, 0, 0), (1, 0, 0), (2, 0, 0))))
    assert acc_values(result, 3) == [0, INT32_MIN + 32766, -(1 << 30)]


@pytest.mark.parametrize("name", ["default", "batch2", "block32"])
def test_acc_8bit_load_sign_extends_and_counts_acc_bytes(name):
    cfg = config(name)
    lanes = cfg.batch * cfg.block_out
    raw = [(-128 + 37 * k) % 256 - 128 for k in range(3 * lanes)]  # int8 values including -128, -1, 127
    raw[:3] = [-128, -1, 127]
    img = Image(cfg)
    img.add("acc8", int8_bytes(raw))
    out_addr = img.add("out", bytes(5 * elem_bytes(cfg, OUT)))
    out = out_addr // elem_bytes(cfg, OUT)
    # rows of 1 element 1 apart from DRAM element 0 and 2, with one padding element in front
    insns = [load(ACC8, 0, img.elem("acc8", ACC8), 1, 2, 2, pad=(0, 0, 1, 0)), store(0, out, 4)]
    prog = img.program(chain(insns))
    result, _ = assert_same(prog)
    acc = result.state.acc.reshape(result.state.acc.shape[0], -1)
    assert acc[0].tolist() == [0] * lanes
    assert acc[1].tolist() == raw[:lanes]
    assert acc[3].tolist() == raw[2 * lanes : 3 * lanes]
    assert result.counters["acc_load_nbytes"] == 2 * lanes * 4
    assert result.counters["out_store_nbytes"] == 4 * lanes
    stored = result.state.dram[out_addr : out_addr + 4 * lanes].view(np.int8).tolist()
    assert stored == [0] * lanes + raw[:lanes] + [0] * lanes + raw[2 * lanes : 3 * lanes]


def test_store_truncates_to_the_low_eight_bits():
    cfg = config("default")
    values = [255, 256, -129, 128, INT32_MIN, INT32_MAX, -1, 0x12345678]
    img = Image(cfg)
    lanes = cfg.batch * cfg.block_out
    img.add("acc", int32_bytes([v for v in values for _ in range(lanes)]))
    out_addr = img.add("out", bytes(len(values) * lanes))
    insns = [load(ACC, 0, img.elem("acc", ACC), len(values)), store(0, out_addr // lanes, len(values))]
    result, _ = assert_same(img.program(chain(insns)))
    stored = result.state.dram[out_addr : out_addr + len(values) * lanes].view(np.int8)
    assert stored.reshape(len(values), lanes)[:, 0].tolist() == [-1, 0, 127, -128, 0, -1, -1, 0x78]


@pytest.mark.parametrize("stride", [0, 1, 3])
def test_acc_8bit_rows_with_any_stride(stride):
    """x_stride 0 repeats one DRAM row (isa.md: row r starts at dram_base + r * x_stride)."""
    cfg = config("default")
    raw = list(range(-64, 64))  # 8 ACC_8BIT elements of 16 values
    img = Image(cfg)
    img.add("acc8", int8_bytes(raw))
    prog = img.program(chain([load(ACC8, 0, img.elem("acc8", ACC8), 2, 3, stride)]))
    result, _ = assert_same(prog)
    acc = result.state.acc.reshape(result.state.acc.shape[0], -1)
    for r in range(3):
        for c in range(2):
            element = r * stride + c
            assert acc[2 * r + c].tolist() == raw[16 * element : 16 * element + 16]


@pytest.mark.parametrize("reload", ["data", "padding"])
def test_repeated_convolution_sees_reloaded_weights(reload):
    """The same convolution-shaped GEMM twice, with the weights reloaded in between."""
    cfg = config("default")
    rng = np.random.default_rng(3)
    inp = rng.integers(-128, 128, (4, 16), dtype=np.int8)
    wgt = rng.integers(-128, 128, (4, 16, 16), dtype=np.int8)  # two sets of two tiles
    img = Image(cfg)
    img.add("inp", inp.tobytes())
    img.add("wgt", wgt.tobytes())
    conv = gemm(0, 1, (2, 2), dst=(1, 0), src=(1, 2), wgt=(0, 1))  # acc[i] += sum_j inp[i + 2j] @ wgt[j]^T
    if reload == "data":
        second = load(WGT, 0, img.elem("wgt", WGT) + 2, 2)
    else:  # a padding-only load: one zero row of one element over wgt[0]
        second = load(WGT, 0, 0, 1, 0, pad=(1, 0, 0, 0))
    insns = [load(UOP, 0, img.uop_elem(), 1), load(INP, 0, img.elem("inp", INP), 4),
             load(WGT, 0, img.elem("wgt", WGT), 2), conv, second, conv]
    result, _ = assert_same(img.program(chain(insns), uops((0, 0, 0))))
    after = wgt[2:4] if reload == "data" else np.stack([np.zeros_like(wgt[0]), wgt[1]])
    x, expected = inp.astype(np.int64), np.zeros((2, 16), dtype=np.int64)
    for weights in (wgt[0:2], after):
        for i in range(2):
            expected[i] += sum(x[i + 2 * j] @ weights[j].astype(np.int64).T for j in range(2))
    assert result.state.acc[0:2, 0].tolist() == expected.tolist()

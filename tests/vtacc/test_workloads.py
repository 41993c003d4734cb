"""The reference workloads (workloads.md) compiled, run on vtasim, and compared with numpy from the math."""

from __future__ import annotations

import numpy as np
import pytest

from .harness import CONFIGS, config, low8, matmul_ref, rand8, rand32, run, wrap32


@pytest.fixture
def rng():
    return np.random.default_rng(2024)


def check(result, name, expected):
    assert result.races == [], [r.describe(result.compiled.program) for r in result.races]
    got = result.outputs[name]
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_vadd(rng, cfg):
    a, b = rand32(rng, 1, 1024), rand32(rng, 1, 1024)
    src = "kernel vadd(a: int32[1, 1024], b: int32[1, 1024]) -> c: int8[1, 1024] { c = a + b }"
    check(run(src, {"a": a, "b": b}, config(cfg)), "c", low8(wrap32(a.astype(np.int64) + b)))


@pytest.mark.parametrize("cfg", CONFIGS)
def test_matmul(rng, cfg):
    x, w = rand8(rng, 1, 256), rand8(rng, 256, 256)
    src = "kernel mm(x: int8[1, 256], w: int8[256, 256]) -> y: int8[1, 256] { y = matmul(x, w) }"
    check(run(src, {"x": x, "w": w}, config(cfg)), "y", low8(matmul_ref(x, w)))


@pytest.mark.parametrize("cfg", CONFIGS)
def test_blocked_matmul(rng, cfg):
    x, w = rand8(rng, 1, 1024), rand8(rng, 1024, 1024)
    src = """kernel fc(x: int8[1, 1024], w: int8[1024, 1024]) -> y: int8[1, 1024] {
        acc = matmul(x, w)
        y = clip(acc >> 8, 0, 127)
    }"""
    expected = np.clip(matmul_ref(x, w) >> 8, 0, 127).astype(np.int8)
    check(run(src, {"x": x, "w": w}, config(cfg)), "y", expected)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_dense_16x512_to_1008(rng, cfg):
    x, w = rand8(rng, 16, 512), rand8(rng, 1008, 512)
    src = """kernel dense_layer(x: int8[16, 512], w: int8[1008, 512]) -> y: int8[16, 1008] {
        y = clip(matmul(x, w) >> 8, 0, 127)
    }"""
    check(run(src, {"x": x, "w": w}, config(cfg)), "y", np.clip(matmul_ref(x, w) >> 8, 0, 127).astype(np.int8))


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("shape", [(3, 100, 37), (5, 17, 1), (1, 1, 1), (2, 33, 65)])
def test_matmul_odd_sizes(rng, cfg, shape):
    n, k, o = shape
    x, w = rand8(rng, n, k), rand8(rng, o, k)
    src = f"kernel odd(x: int8[{n}, {k}], w: int8[{o}, {k}]) -> y: int8[{n}, {o}] {{ y = matmul(x, w) }}"
    check(run(src, {"x": x, "w": w}, config(cfg)), "y", low8(matmul_ref(x, w)))


@pytest.mark.parametrize("cfg", CONFIGS)
def test_load_store(rng, cfg):
    c = config(cfg)
    a = rand32(rng, 6 * c.batch, 6 * c.block_out)
    src = f"kernel ls(a: int32[{a.shape[0]}, {a.shape[1]}]) -> y: int8[{a.shape[0]}, {a.shape[1]}] {{ y = a >> 0 }}"
    r = run(src, {"a": a}, c)
    check(r, "y", low8(a))


@pytest.mark.parametrize("cfg", CONFIGS)
def test_gemm(rng, cfg):
    c = config(cfg)
    x, w = rand8(rng, 4 * c.batch, c.block_in), rand8(rng, 4 * c.block_out, c.block_in)
    src = f"""kernel gemm(x: int8[{x.shape[0]}, {x.shape[1]}], w: int8[{w.shape[0]}, {w.shape[1]}])
        -> y: int8[{x.shape[0]}, {w.shape[0]}] {{
        y = clip(matmul(x, w) >> 8, 0, 127)
    }}"""
    check(run(src, {"x": x, "w": w}, c), "y", np.clip(matmul_ref(x, w) >> 8, 0, 127).astype(np.int8))


@pytest.mark.parametrize("cfg", CONFIGS)
def test_alu(rng, cfg):
    a, b = rand32(rng, 8, 128, lo=-(2**20), hi=2**20), rand32(rng, 8, 128, lo=-(2**20), hi=2**20)
    src = """kernel alu(a: int32[8, 128], b: int32[8, 128]) -> y: int8[8, 128] {
        t = max(max(a << 2, -3), b)     # shift-left by imm, max with imm, max of two tensors
        y = ((t + 4) + b) >> 3          # add imm, add two tensors, shift-right by imm
    }"""
    t = np.maximum(np.maximum(wrap32(a.astype(np.int64) << 2), -3), b)
    expected = low8(wrap32(wrap32(t.astype(np.int64) + 4).astype(np.int64) + b) >> 3)
    check(run(src, {"a": a, "b": b}, config(cfg)), "y", expected)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_relu(rng, cfg):
    a = rand32(rng, 8, 160, lo=-1000, hi=1000)
    src = "kernel relu_k(a: int32[8, 160]) -> y: int8[8, 160] { y = min(max(a, 0), 127) }"
    check(run(src, {"a": a}, config(cfg)), "y", np.minimum(np.maximum(a, 0), 127).astype(np.int8))


@pytest.mark.parametrize("cfg", CONFIGS)
def test_shift_and_scale(rng, cfg):
    a = rand32(rng, 2, 128)
    src = "kernel ss(a: int32[2, 128]) -> y: int8[2, 128] { y = (a + 3) >> 2 }"
    check(run(src, {"a": a}, config(cfg)), "y", low8(wrap32(a.astype(np.int64) + 3) >> 2))


def test_relu_and_int8_operands(rng):
    x, s = rand8(rng, 4, 48), rand8(rng, 4, 48)
    src = """kernel k(x: int8[4, 48], s: int8[4, 48], b: int32[48]) -> y: int8[4, 48] {
        y = relu(x - s + b)          # int8 operands pass through the GEMM core (identity weights)
    }"""
    b = rand32(rng, 48, lo=-100, hi=100)
    expected = low8(np.maximum(x.astype(np.int32) - s.astype(np.int32) + b, 0))
    check(run(src, {"x": x, "s": s, "b": b}), "y", expected)


def test_int8_cast_and_big_constants(rng):
    a = rand32(rng, 2, 64)
    src = "kernel k(a: int32[2, 64]) -> y: int8[2, 64] { y = (int8(a) + 100000) >> 9 }"
    expected = low8(wrap32(a.astype(np.int8).astype(np.int64) + 100000) >> 9)
    check(run(src, {"a": a}), "y", expected)


def test_programs_end_with_finish_and_are_lint_clean(rng):
    from vtasim.checks.lint import Linter
    from vtasim.core.machine import Machine

    from .harness import compile_source

    src = """kernel fc(x: int8[1, 1024], w: int8[1024, 1024]) -> y: int8[1, 1024] {
        y = clip(matmul(x, w) >> 8, 0, 127)
    }"""
    program = compile_source(src, config("default")).program
    machine = Machine(program)
    linter = Linter(machine)
    machine.run()
    assert [w.describe(program) for w in linter.report()] == []


def test_a_local_used_twice_is_computed_once_and_copied(rng):
    a, b = rand32(rng, 2, 64), rand32(rng, 2, 64)
    src = """kernel k(a: int32[2, 64], b: int32[2, 64]) -> y: int8[2, 64] {
        t = (a >> 2) + b
        y = min(t, 100) + max(t >> 1, b)     # t feeds two operations
    }"""
    t = wrap32((a.astype(np.int64) >> 2) + b)
    expected = low8(wrap32(np.minimum(t, 100).astype(np.int64) + np.maximum(t >> 1, b)))
    check(run(src, {"a": a, "b": b}), "y", expected)


def test_vector_on_the_left_and_alone(rng):
    a, v = rand32(rng, 3, 32, lo=-1000, hi=1000), rand32(rng, 32, lo=-1000, hi=1000)
    src = """kernel k(a: int32[3, 32], v: int32[32]) -> y: int8[3, 32] {
        y = max(v, a) + (v >> 1)
    }"""
    expected = low8(wrap32(np.maximum(v[None, :], a).astype(np.int64) + (v[None, :] >> 1)))
    check(run(src, {"a": a, "v": v}), "y", expected)


@pytest.mark.parametrize("key", ["LOG_BLOCK", "LOG_BATCH"])
def test_elements_larger_than_a_page(rng, key):
    """Weight elements of 16 KiB (BLOCK 128) or accumulator elements of 8 KiB (BATCH 128): segments must align."""
    from vtasm.config import DEFAULT_CONFIG, config_from_dict

    cfg = config_from_dict({**DEFAULT_CONFIG, key: 7})
    x, w = rand8(rng, 1, 128), rand8(rng, 128, 128)
    src = "kernel m(x: int8[1, 128], w: int8[128, 128]) -> y: int8[1, 128] { y = matmul(x, w) }"
    check(run(src, {"x": x, "w": w}, cfg), "y", low8(matmul_ref(x, w)))


@pytest.mark.parametrize("cfg", ["default", "batch2"])
def test_constants_wider_than_an_immediate(rng, cfg):
    """min/max/clip beyond 16 bits and large additions use a constant vector in DRAM, not many immediates."""
    a = rand32(rng, 3, 64, 8, 8)
    src = """kernel k(a: int32[3, 64, 8, 8]) -> y: int8[3, 64, 8, 8] {
        y = (clip(a + 2147483647, -70000, 70000) + 100000) >> 10
    }"""
    result = run(src, {"a": a}, config(cfg))
    t = np.clip(wrap32(a.astype(np.int64) + 2147483647), -70000, 70000).astype(np.int64) + 100000
    check(result, "y", low8(t >> 10))
    assert len(result.compiled.program.instructions) < 200

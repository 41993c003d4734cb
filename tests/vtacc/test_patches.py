"""A first layer over the program's own input of few channels reads it as patches (vtacc/schedule/patches.py):
results equal the convolution's definition on every golden configuration, fewer GEMM executions, and the
plain layout where the input is read by something else or the patches would not pay."""

from __future__ import annotations

import numpy as np
import pytest

from vtacc.schedule import patches as patches_module

from .harness import CONFIGS, config, conv_ref, rand8, rand32, run


def _stem(n: int, c: int, h: int, k: int, stride: int, pad: int, extra: str = "", outputs: str = "") -> str:
    o = (h + 2 * pad - k) // stride + 1
    return f"""
kernel main(x: int8[{n}, {c}, {h}, {h}], w: int8[32, {c}, {k}, {k}], b: int32[32])
    -> (y: int8[{n}, 32, {o}, {o}]{outputs}) {{
    y = clip((conv2d(x, w, stride={stride}, pad={pad}) >> 8) + b, 0, 127)
{extra}}}
"""


CASES = [(3, 7, 2, 3, 30), (3, 3, 1, 1, 12), (1, 5, 2, 2, 17), (2, 3, 2, 0, 15)]


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("c, k, stride, pad, h", CASES)
def test_patched_convolutions_equal_the_definition(name, c, k, stride, pad, h, monkeypatch):
    cfg = config(name)
    rng = np.random.default_rng(c * 100 + k)
    x, w, b = rand8(rng, cfg.batch, c, h, h), rand8(rng, 32, c, k, k), rand32(rng, 32, lo=-5000, hi=5000)
    source = _stem(cfg.batch, c, h, k, stride, pad)
    result = run(source, {"x": x, "w": w, "b": b}, cfg)
    want = np.clip((conv_ref(x, w, stride, pad) >> 8) + b[None, :, None, None], 0, 127).astype(np.int8)
    assert np.array_equal(result.outputs["y"], want)
    assert result.races == []
    producer = result.compiled.planned[0].op.producer
    windows, patches = k * k * -(-c // cfg.block_in), -(-k * k * c // cfg.block_in)
    assert (producer.x.patches is not None) == (2 * patches <= windows)
    if producer.x.patches is None:
        return
    assert producer.x.patches == (k, stride, pad) and producer.w.patches == (k, 1, 0)
    assert (producer.kh, producer.stride, producer.pad) == (1, 1, 0)
    monkeypatch.setattr(patches_module, "GAIN", 10**9)  # the same kernel with windows, for comparison
    plain = run(source, {"x": x, "w": w, "b": b}, cfg)
    assert plain.compiled.planned[0].op.producer.x.patches is None
    assert np.array_equal(plain.outputs["y"], want)
    assert result.counters["gemm_counter"] * 2 <= plain.counters["gemm_counter"]


def test_an_input_read_twice_keeps_its_plain_layout():
    """x feeds the convolution and a max pool: one tensor has one layout, so the convolution reads windows."""
    rng = np.random.default_rng(8)
    x, w, b = rand8(rng, 1, 3, 16, 16), rand8(rng, 32, 3, 7, 7), rand32(rng, 32, lo=-5000, hi=5000)
    source = _stem(1, 3, 16, 7, 2, 3, extra="    p = max_pool(x, 2, stride=2)\n",
                   outputs=", p: int8[1, 3, 8, 8]")
    result = run(source, {"x": x, "w": w, "b": b})
    assert all(p.op.producer.x.patches is None for p in result.compiled.planned)
    want = np.clip((conv_ref(x, w, 2, 3) >> 8) + b[None, :, None, None], 0, 127).astype(np.int8)
    assert np.array_equal(result.outputs["y"], want)
    assert np.array_equal(result.outputs["p"], x.reshape(1, 3, 8, 2, 8, 2).max(axis=(3, 5)))


def test_many_channels_keep_windows():
    """64 channels of 3x3 windows are 9 taps of 4 blocks, as patches 36 blocks: nothing to gain."""
    rng = np.random.default_rng(9)
    source = """
kernel main(x: int8[1, 64, 8, 8], w: int8[16, 64, 3, 3]) -> y: int8[1, 16, 8, 8] {
    y = clip(conv2d(x, w, stride=1, pad=1) >> 8, -128, 127)
}
"""
    x, w = rand8(rng, 1, 64, 8, 8), rand8(rng, 16, 64, 3, 3)
    result = run(source, {"x": x, "w": w})
    assert result.compiled.planned[0].op.producer.x.patches is None
    assert np.array_equal(result.outputs["y"], np.clip(conv_ref(x, w, 1, 1) >> 8, -128, 127).astype(np.int8))


ODD_NETWORK = """
kernel stem(x: int8[{n}, 3, 37, 53], w: int8[24, 3, 5, 5], b: int32[24]) -> y: int8[{n}, 24, 13, 18] {{
    y = clip((conv2d(x, w, stride=3, pad=2) >> 7) + b, 0, 127)
}}

kernel pool(x: int8[{n}, 24, 13, 18]) -> y: int8[{n}, 24, 6, 8] {{
    y = max_pool(x, 3, stride=2)
}}

kernel main(x: int8[{n}, 3, 37, 53], w: int8[24, 3, 5, 5], b: int32[24], w2: int8[40, 24, 3, 3])
    -> y: int8[{n}, 40, 6, 8] {{
    y = clip(conv2d(pool(stem(x, w, b)), w2, stride=1, pad=1) >> 8, -128, 127)
}}
"""


@pytest.mark.parametrize("name", CONFIGS)
def test_a_non_square_stem_with_odd_stride_then_a_pool_and_a_convolution(name):
    """Shapes the layout was not written around: a 5x5 stride-3 stem over a 37x53 image, the windows of the
    pool after it overlapping, then a convolution (its first weights loaded ahead across the pool where its
    tiling allows), against numpy."""
    cfg = config(name)
    n = cfg.batch
    rng = np.random.default_rng(5)
    x, w, b, w2 = rand8(rng, n, 3, 37, 53), rand8(rng, 24, 3, 5, 5), rand32(rng, 24, lo=-500, hi=500), \
        rand8(rng, 40, 24, 3, 3)
    result = run(ODD_NETWORK.format(n=n), {"x": x, "w": w, "b": b, "w2": w2}, cfg)
    stem = np.clip((conv_ref(x, w, 3, 2) >> 7) + b[None, :, None, None], 0, 127)
    pooled = np.stack([np.stack([stem[:, :, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3].max(axis=(2, 3))
                                 for j in range(8)], axis=-1) for i in range(6)], axis=-2)
    want = np.clip(conv_ref(pooled, w2, 1, 1) >> 8, -128, 127).astype(np.int8)
    assert np.array_equal(result.outputs["y"], want)
    assert result.races == []
    assert {t.name for t in result.compiled.tensors if t.patches} == {"x", "w"}


@pytest.mark.parametrize("name", CONFIGS)
def test_an_input_added_in_the_epilogue_keeps_its_plain_layout(name):
    """x feeds the convolution and its own epilogue (a residual around a first layer): one tensor, one layout,
    so no patches, and the sum is right."""
    cfg = config(name)
    c = 8 if cfg.block_in == 32 else 3  # few enough channels that patches would pay
    rng = np.random.default_rng(9)
    x, w = rand8(rng, cfg.batch, c, 10, 10), rand8(rng, c, c, 3, 3)
    source = f"""
kernel main(x: int8[{cfg.batch}, {c}, 10, 10], w: int8[{c}, {c}, 3, 3]) -> y: int8[{cfg.batch}, {c}, 10, 10] {{
    y = clip(clip(conv2d(x, w, pad=1) >> 9, -64, 64) + x, 0, 127)
}}
"""
    result = run(source, {"x": x, "w": w}, cfg)
    want = np.clip(np.clip(conv_ref(x, w, 1, 1) >> 9, -64, 64) + x, 0, 127).astype(np.int8)
    assert np.array_equal(result.outputs["y"], want)
    assert result.compiled.planned[0].op.producer.x.patches is None

"""Strided pooling folded separably in place (vtacc/schedule/pooling.py): the same results as the definition for
max, sum and average pooling of int8 and int32 tensors, with padding before and after, on every golden
configuration; windows without a separable tap keep the fold per tap."""

from __future__ import annotations

import numpy as np
import pytest

from vtacc.schedule.pooling import separable_tap

from .harness import CONFIGS, config, rand8, rand32, run


def pool_ref(x: np.ndarray, kind: str, k: int, stride: int, pad: int, pad_end: int) -> np.ndarray:
    """The definition: each window's pixels inside the image (padding never wins a max, adds 0 to a sum)."""
    n, c, h, w = x.shape
    oh, ow = (h + pad + pad_end - k) // stride + 1, (w + pad + pad_end - k) // stride + 1
    out = np.zeros((n, c, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            y0, x0 = i * stride - pad, j * stride - pad
            win = x[:, :, max(0, y0) : y0 + k, max(0, x0) : x0 + k].astype(np.int64)
            out[:, :, i, j] = win.max(axis=(2, 3)) if kind == "max" else win.sum(axis=(2, 3))
    if kind == "avg":
        out >>= (k * k).bit_length() - 1
    return out.astype(np.int64).astype(np.int32)


def test_the_taps_that_fold_in_place():
    assert separable_tap(3, 2, 1) == 1  # ResNet's max pool: the centre; its neighbours are a stride away
    assert separable_tap(2, 2, 0) == 0
    assert separable_tap(3, 3, 0) == 0
    assert separable_tap(7, 7, 0) == 0
    assert separable_tap(3, 1, 1) is None  # stride 1: every other tap is whole strides away
    assert separable_tap(5, 2, 2) is None  # 5x5 stride 2: taps 0, 2, 4 are whole strides from each other


CASES = [("max", 3, 2, 1, 1, 17), ("max", 2, 2, 0, 0, 12), ("max", 3, 2, 0, 1, 14), ("sum", 3, 3, 0, 0, 12),
         ("avg", 2, 2, 0, 0, 10), ("max", 3, 1, 1, 1, 9), ("max", 5, 2, 2, 2, 11)]


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("kind, k, stride, pad, pad_end, h", CASES)
def test_pooling_equals_the_definition(name, kind, k, stride, pad, pad_end, h):
    cfg = config(name)
    rng = np.random.default_rng(k * 10 + stride)
    oh = (h + pad + pad_end - k) // stride + 1
    for dtype in ("int8", "int32"):
        x = rand8(rng, cfg.batch, 32, h, h) if dtype == "int8" else rand32(rng, cfg.batch, 32, h, h, lo=-200, hi=200)
        shift = 4 if kind == "sum" else 0  # window sums brought back into the int8 result's range
        source = f"""
kernel main(x: {dtype}[{cfg.batch}, 32, {h}, {h}]) -> y: int8[{cfg.batch}, 32, {oh}, {oh}] {{
    y = clip({kind}_pool(x, {k}, stride={stride}, pad={pad}, pad_end={pad_end}) >> {shift}, -128, 127)
}}
"""
        result = run(source, {"x": x}, cfg)
        want = np.clip(pool_ref(x, kind, k, stride, pad, pad_end) >> shift, -128, 127).astype(np.int8)
        assert np.array_equal(result.outputs["y"], want), (dtype, kind)
        assert result.races == []


def test_resnets_max_pool_takes_fewer_alu_executions_than_a_fold_per_tap():
    rng = np.random.default_rng(4)
    x = rand8(rng, 1, 64, 56, 56)
    source = """
kernel main(x: int8[1, 64, 56, 56]) -> y: int8[1, 64, 28, 28] {
    y = max_pool(x, 3, stride=2, pad=1)
}
"""
    result = run(source, {"x": x})
    assert np.array_equal(result.outputs["y"], pool_ref(x, "max", 3, 2, 1, 1).astype(np.int8))
    rows = 64 // 16 * 28 * 28  # output rows of 16 lanes
    # per output: a fold per tap and a fill would be 10; separably about 2 x 2 row folds + 2 column folds + a copy
    assert result.counters["alu_counter"] <= 7.5 * rows

"""The int8 reference (each kind's int8 rule, vtacc/onnx/kinds) against the definitions, layer by layer.

Every expected value here is computed element by element in Python integers from the definition of the
layer (a sum over the window, int32 wrapping, arithmetic shifts, clips), on random shapes, strides,
paddings, groups, slopes and per-channel shifts: no numpy convolution, no window helper, nothing the
reference or the product path uses.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vtacc.onnx.convert.layers import Layer, LayerKind
from vtacc.onnx.kinds import rules
from vtacc.onnx.quantised import QLayer

RNG = np.random.default_rng(37)


def _wrap(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def _int8(q: QLayer, *xs: np.ndarray) -> np.ndarray:
    return rules(q.kind).int8(q, list(xs))


def _epilogue(acc: int, q: QLayer, o: int, leaky: tuple[int, ...]) -> int:
    a = _wrap(_wrap(acc) + int(np.ravel(q.bias)[o]))
    if leaky:
        a = max(a, _wrap(sum(a >> k for k in leaky)))
    shift = int(q.shift) if np.ndim(q.shift) == 0 else int(q.shift[o])
    return min(q.high, max(q.low, a >> shift))


@pytest.mark.parametrize("case", range(12))
def test_convolution(case):
    rng = np.random.default_rng(case)
    groups = [1, 2, 4][case % 3]
    cin = {1: int(rng.integers(1, 6)), 2: 4, 4: 4}[groups]
    cout = groups * int(rng.integers(1, 3))
    k, stride, pad = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(0, 3))
    h, w = int(rng.integers(k, 8)), int(rng.integers(k, 8))
    x = rng.integers(-128, 128, (2, cin, h, w)).astype(np.int8)
    wt = rng.integers(-128, 128, (cout, cin // groups, k, k)).astype(np.int8)
    bias = rng.integers(-2**31, 2**31, cout) if case % 4 == 0 else rng.integers(-5000, 5000, cout)  # wrapping too
    shift = rng.integers(0, 12, cout) if case % 2 else int(rng.integers(0, 12))
    leaky = (1, 3) if case % 5 == 1 else ()
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    layer = Layer(LayerKind.CONV, "c", ["n"], ["x"], "y", (2, cout, oh, ow), stride=stride, pad=pad, groups=groups,
                  leaky=leaky, alpha=0.625 if leaky else 0.0)
    q = QLayer(layer, [0], 0, weight=wt, bias=bias.astype(np.int64), shift=shift, low=int(rng.integers(-128, 0)),
               high=int(rng.integers(0, 128)))
    got = _int8(q, x)
    per = cin // groups
    for n, o, r, s in itertools.product(range(2), range(cout), range(oh), range(ow)):
        g = o // (cout // groups)
        acc = 0
        for c, i, j in itertools.product(range(per), range(k), range(k)):
            row, col = r * stride + i - pad, s * stride + j - pad
            if 0 <= row < h and 0 <= col < w:
                acc += int(x[n, g * per + c, row, col]) * int(wt[o, c, i, j])
        assert got[n, o, r, s] == _epilogue(acc, q, o, leaky), (n, o, r, s)


@pytest.mark.parametrize("case", range(4))
def test_dense(case):
    rng = np.random.default_rng(100 + case)
    k, outs = int(rng.integers(1, 40)), int(rng.integers(1, 9))
    x = rng.integers(-128, 128, (3, k)).astype(np.int8)
    wt = rng.integers(-128, 128, (outs, k)).astype(np.int8)
    layer = Layer(LayerKind.DENSE, "d", ["n"], ["x"], "y", (3, outs))
    q = QLayer(layer, [0], 0, weight=wt, bias=rng.integers(-9999, 9999, outs), shift=rng.integers(0, 9, outs))
    got = _int8(q, x)
    for n, o in itertools.product(range(3), range(outs)):
        acc = sum(int(x[n, t]) * int(wt[o, t]) for t in range(k))
        assert got[n, o] == _epilogue(acc, q, o, ())


@pytest.mark.parametrize("kind", [LayerKind.MAXPOOL, LayerKind.AVGPOOL])
@pytest.mark.parametrize("case", range(6))
def test_pooling(kind, case):
    rng = np.random.default_rng(200 + case)
    size = [1, 2, 4][case % 3] if kind == LayerKind.AVGPOOL else int(rng.integers(1, 4))
    stride, pad = int(rng.integers(1, 4)), int(rng.integers(0, size))
    pad_end = int(rng.integers(0, size))
    h, w = int(rng.integers(size, 9)), int(rng.integers(size, 9))
    x = rng.integers(-128, 128, (1, 3, h, w)).astype(np.int8)
    oh, ow = (h + pad + pad_end - size) // stride + 1, (w + pad + pad_end - size) // stride + 1
    layer = Layer(kind, "p", ["n"], ["x"], "y", (1, 3, oh, ow), stride=stride, pad=pad, size=size, pad_end=pad_end)
    got = _int8(QLayer(layer, [0], 0), x)
    for c, r, s in itertools.product(range(3), range(oh), range(ow)):
        window = []
        for i, j in itertools.product(range(size), range(size)):
            row, col = r * stride + i - pad, s * stride + j - pad
            inside = 0 <= row < h and 0 <= col < w
            window.append(int(x[0, c, row, col]) if inside else (-128 if kind == LayerKind.MAXPOOL else 0))
        want = max(window) if kind == LayerKind.MAXPOOL else sum(window) // (size * size)  # floor: >> log2
        assert got[0, c, r, s] == want, (c, r, s)


@pytest.mark.parametrize("hw, exps", [((1, 1), (0, 0)), ((2, 2), (-3, -4)), ((7, 7), (-5, -7)), ((3, 5), (-2, -3)),
                                     ((13, 13), (-6, -9)), ((4, 4), (-4, -4))])
def test_global_average(hw, exps):
    """The average at a scale of its own: y = (sum * m + 2^(k-1)) >> k, clipped to int8, where m / 2^k
    (m in 1..127, k the largest that fits) is nearest the input's scale over the area times the output's,
    computed here from that definition for power-of-two scales 2^e_x and 2^e_y."""
    (h, w), (e_x, e_y) = hw, exps
    x = RNG.integers(-128, 128, (2, 5, h, w)).astype(np.int8)
    ratio = 2.0**e_x / (h * w * 2.0**e_y)
    k = max(k for k in range(32) if round(ratio * 2**k) <= 127)
    m = round(ratio * 2**k)
    layer = Layer(LayerKind.GAP, "g", ["n"], ["x"], "y", (2, 5, 1, 1))
    q = QLayer(layer, [e_x], e_y)
    rules(LayerKind.GAP).quantise(q, {"x": (2, 5, h, w)}, [])
    assert (q.multiplier, q.shift) == (m, k)
    got = _int8(q, x)
    for n, c in itertools.product(range(2), range(5)):
        total = sum(int(v) for v in x[n, c].ravel()) * m
        want = min(127, max(-128, (total + (1 << (k - 1) if k else 0)) >> k))
        assert got[n, c, 0, 0] == want


@pytest.mark.parametrize("left, shift", [((0, 0), 0), ((0, 3), 1), ((2, 0), 4), ((7, 7), 9)])
def test_add(left, shift):
    a, b = (RNG.integers(-128, 128, (1, 4, 3, 3)).astype(np.int8) for _ in range(2))
    layer = Layer(LayerKind.ADD, "a", ["n"], ["a", "b"], "y", (1, 4, 3, 3))
    q = QLayer(layer, [0, 0], 0, left=list(left), shift=shift, low=-100, high=90)
    got = _int8(q, a, b)
    for idx in itertools.product(range(1), range(4), range(3), range(3)):
        total = (int(a[idx]) << left[0]) + (int(b[idx]) << left[1]) + ((1 << (shift - 1)) if shift else 0)
        assert got[idx] == min(90, max(-100, _wrap(total) >> shift))


def test_clip_and_concat():
    x = RNG.integers(-128, 128, (1, 16, 2, 2)).astype(np.int8)
    clip = QLayer(Layer(LayerKind.CLIP, "c", ["n"], ["x"], "y", x.shape), [0], 0, low=-3, high=50)
    assert np.array_equal(_int8(clip, x), [[[[min(50, max(-3, int(v))) for v in row] for row in ch] for ch in x[0]]])
    y = RNG.integers(-128, 128, (1, 16, 2, 2)).astype(np.int8)
    cat = QLayer(Layer(LayerKind.CONCAT, "k", ["n"], ["x", "z"], "y", (1, 32, 2, 2)), [0, 0], 0)
    got = _int8(cat, x, y)
    assert all(got[0, c, i, j] == (x if c < 16 else y)[0, c % 16, i, j]
               for c, i, j in itertools.product(range(32), range(2), range(2)))

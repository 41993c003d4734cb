"""Convolutions and dense layers: int8 weights with a power-of-two scale per output channel, an int32
bias with the rounding constant, a right shift (per channel where the scales differ) back to int8, and
a fused leaky slope as shifts of the accumulator."""

from __future__ import annotations

import math

import numpy as np

from vtacc.frontend.check_builtins import conv_padding
from vtasm.errors import ModelError
from vtasm.portability import SHIFT_MAX

from .. import exact
from ..arrays import conv2d
from ..convert.layers import Layer, LayerKind
from ..quantised import CoarserOutput, QLayer, exponent_for
from ..read.wire import release
from .rules import Kernel, Param, Rules, int8_type

DENSE_BLOCK_ELEMENTS = 1 << 22  # about this many weights of a large dense layer converted to float64 at a time
ROW_BLOCK_ELEMENTS = 1 << 20  # weights handled at once by the per-channel passes (bounded temporaries)


def float_product(layer: Layer, ins: list[np.ndarray]) -> np.ndarray:
    x = ins[0]
    if layer.kind == LayerKind.CONV:
        w = layer.weight.astype(np.float64, copy=False)  # held as the model stores it (convert.lowering.weight)
        release(layer.weight)  # a weight mapped from the model file: its pages go until it is used again
        y = conv2d(x, w, layer.stride, layer.sides, layer.groups)
        y += layer.bias[None, :, None, None]  # in place: a VGG's first activations are 50 MB each
        return y
    y = _dense(x.reshape(x.shape[0], -1), layer.weight) + layer.bias
    release(layer.weight)
    return y


def _dense(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x @ w.T in float64, ``w`` (as the model stores it) converted a block of output rows at a time when
    it is large: a VGG's first classifier layer (100 M float32 weights) would take 820 MB as one float64
    copy. The blocks split the outputs, never a sum, and stay large enough (DENSE_BLOCK_ELEMENTS) for BLAS
    to take the path it takes for the whole product (small products take another, rounding otherwise)."""
    if w.dtype == np.float64 or w.size <= 2 * DENSE_BLOCK_ELEMENTS:
        return x @ w.astype(np.float64, copy=False).T
    rows = -(-DENSE_BLOCK_ELEMENTS // w.shape[1] // 64) * 64
    out = np.empty((x.shape[0], w.shape[0]))
    for lo in range(0, w.shape[0], rows):
        out[:, lo : lo + rows] = x @ w[lo : lo + rows].astype(np.float64).T
        release(w[lo : lo + rows])  # mapped from the model file: a block's pages go once it is used
    return out


def products(q: QLayer, ins: list[np.ndarray]) -> np.ndarray:
    """x * w, the convolution's or matrix product's int32 sums (wrapping), before the bias."""
    layer = q.layer
    if q.kind == LayerKind.CONV:
        acc = exact.conv2d(ins[0], q.weight, layer.stride, layer.sides, layer.groups)
    else:
        acc = exact.matmul(ins[0].reshape(ins[0].shape[0], -1), q.weight)
    return exact.wrap32(acc)


def rounding(shift: np.ndarray | int) -> np.ndarray:
    """The rounding constant a right shift by ``shift`` takes in the bias: 2^(shift-1), 0 for no shift."""
    shift = np.asarray(shift)
    return np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)


def int8_product(q: QLayer, ins: list[np.ndarray]) -> np.ndarray:
    """acc = x * w + bias (int32, wrapping); with a slope, max(acc, sum of acc >> k); then acc >> shift
    (arithmetic: toward minus infinity) clipped to the bounds."""
    return requantised(q, products(q, ins))


def requantised(q: QLayer, acc: np.ndarray) -> np.ndarray:
    """The layer's int8 result from its products ``acc`` (int32, before the bias): see int8_product."""
    layer = q.layer
    acc = exact.wrap32(acc + exact.per_channel(q.bias, acc.ndim))
    if layer.leaky:  # max(a, sum of a >> k): the slope on the accumulator, rounding constant included
        acc = np.maximum(acc, exact.wrap32(sum(acc >> k for k in layer.leaky)))
    return np.clip(acc >> exact.per_channel(q.shift, acc.ndim), q.low, q.high)


def quantise_product(q: QLayer, shapes: dict[str, tuple[int, ...]], notes: list[str]) -> None:
    """Weights to int8 per output channel, the bias to int32 at the accumulator's scale with the rounding
    constant, and the shift from the accumulator's scale to the output's."""
    layer = q.layer
    _quantise_weights(q, notes)
    if layer.leaky:
        approx = sum(2.0**-k for k in layer.leaky)
        if abs(approx - layer.alpha) > 1e-12 * layer.alpha:
            terms = " + ".join(f"2^-{k}" for k in layer.leaky)
            notes.append(f"layer {layer.name}: leaky slope {layer.alpha:g} as {terms} = {approx:.6g} "
                         f"({abs(approx / layer.alpha - 1):.2%} off)")


def weight_exponents(rows: np.ndarray, factor: float = 1.0) -> np.ndarray:
    """Per output channel (row), the scale factor * 2**e with the least squared error of its int8 weights:
    the finest that holds the largest weight, or the next finer one when clipping that weight costs less
    than the rounding it saves."""
    top = np.array([exponent_for(max(-lo, hi) / factor) for lo, hi in zip(_by_rows(rows, np.min).tolist(),
                                                                    _by_rows(rows, np.max).tolist(), strict=True)],
                   dtype=np.int64)

    def error(exps: np.ndarray) -> np.ndarray:
        def squared(part: np.ndarray, lo: int) -> np.ndarray:
            step = factor * 2.0 ** exps[lo : lo + len(part), None]
            t = part / step
            np.rint(t, out=t)
            np.clip(t, -128, 127, out=t)
            t *= step
            t -= part
            t *= t
            return t.sum(axis=1)

        return _by_rows(rows, squared, with_start=True)

    finer = top - 1
    return np.where(error(finer) < error(top), finer, top)


def _by_rows(rows: np.ndarray, reduce, with_start: bool = False) -> np.ndarray:
    """A per-row reduction of a matrix, a block of rows at a time (a VGG's 100-million-weight layer makes no
    full-size temporaries); ``reduce(block)`` (or ``reduce(block, first row)``) gives each row's value."""
    step = max(1, ROW_BLOCK_ELEMENTS // max(rows.shape[1], 1))
    parts = [reduce(rows[lo : lo + step], lo) if with_start else reduce(rows[lo : lo + step], axis=1)
             for lo in range(0, len(rows), step)]
    return np.concatenate(parts) if parts else np.zeros(0)


def _quantise_weights(q: QLayer, notes: list[str]) -> None:
    """Weights at scale (m_y / m_x) * 2**e_w[c]: the accumulator's scale is then m_y * 2**(e_x + e_w[c]),
    the output's mantissa times a power of two, and the requantisation a right shift."""
    layer = q.layer
    e_x, e_y = q.in_exps[0], q.out_exp
    ratio = q.out_mant / q.in_mant(0)
    w = layer.weight
    w_exps = weight_exponents(w.reshape(w.shape[0], -1), ratio)
    shifts = e_y - e_x - w_exps
    if np.any(shifts < 0):  # the quantiser gives the output its accumulator's scale instead (quantise.py)
        raise CoarserOutput(e_x + int(w_exps.max()))
    coarse = shifts > SHIFT_MAX
    if np.any(coarse):
        notes.append(f"layer {layer.name}: {int(coarse.sum())} channel(s) need a shift over {SHIFT_MAX}; their "
                     "weights are kept coarser")
        w_exps = np.where(coarse, e_y - e_x - SHIFT_MAX, w_exps)
        shifts = e_y - e_x - w_exps
    shape = (-1,) + (1,) * (w.ndim - 1)
    q.weight = np.empty(w.shape, dtype=np.int8)
    step = max(1, ROW_BLOCK_ELEMENTS // max(w[0].size, 1))
    for lo in range(0, len(w), step):  # a block of output channels at a time
        steps = ratio * 2.0 ** w_exps[lo : lo + step].reshape(shape)
        q.weight[lo : lo + step] = np.clip(np.rint(w[lo : lo + step] / steps), -128, 127)
    release(w)  # a weight mapped from the model file: its pages go until a float run uses it again
    acc_scale = q.out_mant * 2.0 ** (e_x + w_exps)
    drift = _rounding_drift(q, w, ratio * 2.0 ** w_exps)
    bias = np.rint((layer.bias - drift) / acc_scale) + rounding(shifts)
    if np.any(np.abs(bias) >= 2**31):
        raise ModelError(f"layer {layer.name}: a bias does not fit int32 at the accumulator's scale")
    q.bias = bias.astype(np.int32)
    q.w_exps = w_exps
    q.shift = int(shifts[0]) if np.all(shifts == shifts[0]) else shifts.astype(np.int32)


def _rounding_drift(q: QLayer, w: np.ndarray, steps: np.ndarray) -> np.ndarray | float:
    """The mean error the rounded weights (q.weight times each row's step) make on the layer's mean float
    input, per output: what the bias takes off (0 when calibration gave no mean)."""
    mean = q.in_mean
    inputs = w.shape[1] * (q.layer.groups if q.kind == LayerKind.CONV else 1)
    if mean is None or mean.size != inputs:  # (a tensor read by layers of both kinds has one kind's mean)
        return 0.0
    out = np.empty(len(w))
    step = max(1, ROW_BLOCK_ELEMENTS // max(w[0].size, 1))
    for lo in range(0, len(w), step):  # a block of output channels at a time
        rows = slice(lo, lo + step)
        error = q.weight[rows] * steps[rows].reshape((-1,) + (1,) * (w.ndim - 1)) - w[rows]
        if q.kind == LayerKind.CONV:  # each output reads its group's channels, every tap the channel's mean
            per_group = len(w) // q.layer.groups
            group = np.arange(lo, min(lo + step, len(w))) // per_group
            inputs = mean.reshape(q.layer.groups, -1)[group]
            out[rows] = np.einsum("ok,ok->o", error.sum(axis=(2, 3)), inputs)
        else:
            out[rows] = error.reshape(len(error), -1) @ mean
    return out


def product_kernel(q: QLayer, x: str, bias: np.ndarray | None = None, shift: np.ndarray | int | None = None,
                   bounds: tuple[int, int] | None = None, pool: QLayer | None = None) -> Kernel:
    """A convolution's or dense layer's int8 result on input ``x``: the lines before it, its expression
    and its weight parameters. ``bias``, ``shift`` and ``bounds`` replace the layer's own (a fused add's
    rounding moved into them); ``pool``: a max pooling of the accumulator before the bias (fuse.py)."""
    layer = q.layer
    bias = q.bias if bias is None else bias
    shift = q.shift if shift is None else shift
    low, high = (q.low, q.high) if bounds is None else bounds
    params: list[Param] = [("w", int8_type("int8", q.weight.shape), q.weight),
                           ("b", int8_type("int32", bias.shape), np.asarray(bias, dtype=np.int32))]
    if np.ndim(shift):
        params.append(("s", int8_type("int32", np.shape(shift)), np.asarray(shift, dtype=np.int32)))
    amount = "s" if np.ndim(shift) else str(int(shift))
    if q.kind == LayerKind.CONV:
        opts = "".join(f", {k}={v}" for k, v, d in (("stride", layer.stride, 1), ("groups", layer.groups, 1))
                       if v != d)
        opts += f", {conv_padding(layer.sides)}" if any(layer.sides) else ""
        product = f"conv2d({x}, w{opts})"
    else:
        product = f"matmul(flatten({x}), w)" if layer.flatten else f"matmul({x}, w)"
    if pool is not None:
        p = pool.layer
        end = f", pad_end={p.pad_end}" if p.pad_end != p.pad else ""
        product = f"max_pool({product}, {p.size}, stride={p.stride}, pad={p.pad}{end})"
    before = ""
    body = f"({product} + b)"
    if layer.leaky:  # the slope as shifts of the accumulator a (see convert.activations.power_sum)
        before = f"    a = {body}\n"
        body = f"max(a, {' + '.join(f'(a >> {k})' for k in layer.leaky)})"
    body += f" >> {amount}" if amount != "0" else ""
    return before, f"clip({body}, {low}, {high})", params


def _kernel(q: QLayer, xs: list[str]) -> Kernel:
    return product_kernel(q, xs[0])


def conv_macs(layer: Layer) -> int:
    """Every output: IC/groups x KH x KW products."""
    return math.prod(layer.shape) * math.prod(layer.weight.shape[1:])


def dense_macs(layer: Layer) -> int:
    return math.prod(layer.shape) * layer.weight.shape[1]


CONV = Rules(LayerKind.CONV, float_product, int8_product, False, quantise_product, _kernel, None, conv_macs)
DENSE = Rules(LayerKind.DENSE, float_product, int8_product, False, quantise_product, _kernel, None, dense_macs)

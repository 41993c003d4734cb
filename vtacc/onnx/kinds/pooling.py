"""Poolings: max and average over square windows, which keep their input's scale (and int8's bounds: no
activation fuses into a pooling, so their kernels need no clip), and the whole-image average, which takes a
scale of its own: an average's range is narrower than its input's."""

from __future__ import annotations

import numpy as np

from .. import exact
from ..arrays import windows
from ..convert.layers import Layer, LayerKind
from ..quantised import QLayer
from .product import rounding
from .rules import Kernel, Rules, bounded, no_macs, nothing


def _window(layer: Layer) -> str:
    end = f", pad_end={layer.pad_end}" if layer.pad_end != layer.pad else ""
    return f"{layer.size}, stride={layer.stride}, pad={layer.pad}{end}"


def _float_max(layer: Layer, ins: list[np.ndarray]) -> np.ndarray:
    return windows(ins[0], layer.size, layer.stride, layer.pad, -np.inf, layer.pad_end).max(axis=-1)


def _int8_max(q: QLayer, ins: list[np.ndarray]) -> np.ndarray:
    p = q.layer
    return exact.max_pool(ins[0], p.size, p.stride, p.pad, p.pad_end)


def _max_kernel(q: QLayer, xs: list[str]) -> Kernel:
    return "", f"max_pool({xs[0]}, {_window(q.layer)})", []


def _float_average(layer: Layer, ins: list[np.ndarray]) -> np.ndarray:
    return windows(ins[0], layer.size, layer.stride, layer.pad, 0.0, layer.pad_end).mean(axis=-1)


def _int8_average(q: QLayer, ins: list[np.ndarray]) -> np.ndarray:
    """The window's sum (padding zero) over its area, a power of two: an arithmetic right shift."""
    p = q.layer
    return exact.sum_pool(ins[0], p.size, p.stride, p.pad, p.pad_end) >> ((p.size * p.size).bit_length() - 1)


def _average_kernel(q: QLayer, xs: list[str]) -> Kernel:
    return "", f"avg_pool({xs[0]}, {_window(q.layer)})", []


def _float_global(layer: Layer, ins: list[np.ndarray]) -> np.ndarray:
    return ins[0].mean(axis=(2, 3), keepdims=True)


def _int8_global(q: QLayer, ins: list[np.ndarray]) -> np.ndarray:
    """(the image's sum times m, plus 2^(k-1)) >> k, clipped: the sum written from its definition, the
    multiplier m and shift k the quantiser chose (global_avg_pool(x, multiplier=m, shift=0) is the sum
    times m, docs/language.md)."""
    total = ins[0].astype(np.int64).sum(axis=(2, 3), keepdims=True)
    return np.clip(exact.wrap32(total * q.multiplier + int(rounding(q.shift))) >> q.shift, q.low, q.high)


def _quantise_global(q: QLayer, shapes: dict[str, tuple[int, ...]], notes: list[str]) -> None:
    """The average has a scale of its own (its range is narrower than its input's): out = sum * m >> k with
    m / 2^k as near as 7 bits give to the input's scale over the area times the output's."""
    h, w = shapes[q.layer.inputs[0]][2:]
    area = h * w
    ratio = q.in_mant(0) * 2.0 ** q.in_exps[0] / (area * q.out_scale)
    q.multiplier, q.shift = _multiplier(ratio, area)
    off = q.multiplier / 2.0**q.shift / ratio - 1
    if abs(off) > 0.01:
        notes.append(f"layer {q.name}: averages {h}x{w} values as * {q.multiplier} >> {q.shift} ({abs(off):.2%} "
                     "off its scales' ratio)")


def _multiplier(ratio: float, area: int) -> tuple[int, int]:
    """The multiplier m (1..127, a weight of VTA's) and shift k (0..31) with m / 2^k nearest ``ratio``, the
    largest k whose m fits; the sum of ``area`` int8 values times m, and the rounding, stay within int32."""
    limit = (2**31 - 1) // (128 * area + 1)  # m * sum + 2^30 below 2^31 for every sum of the area
    best = (1, 31)
    for k in range(32):
        m = round(ratio * 2.0**k)
        if m > min(127, limit):
            break
        if m >= 1:
            best = (m, k)
    return best


def _global_kernel(q: QLayer, xs: list[str]) -> Kernel:
    total = f"global_avg_pool({xs[0]}, multiplier={q.multiplier}, shift=0)"
    if q.shift:
        total = f"({total} + {int(rounding(q.shift))}) >> {q.shift}"
    return "", bounded(total, q), []


MAXPOOL = Rules(LayerKind.MAXPOOL, _float_max, _int8_max, True, nothing, _max_kernel, None, no_macs)
AVGPOOL = Rules(LayerKind.AVGPOOL, _float_average, _int8_average, True, nothing, _average_kernel, None, no_macs)
GAP = Rules(LayerKind.GAP, _float_global, _int8_global, False, _quantise_global, _global_kernel, None, no_macs)

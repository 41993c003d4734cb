"""Poolings: max and average over square windows, and the whole-image average. Each keeps its input's scale
and its bounds are int8's own (no activation fuses into a pooling), so its kernel needs no clip."""

from __future__ import annotations

import numpy as np

from vtacc.frontend.check_builtins import average_multiplier

from .. import exact
from ..arrays import windows
from ..convert.layers import Layer, LayerKind
from ..quantised import QLayer
from .rules import Kernel, Rules, no_macs, nothing


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
    """The image's sum times m >> s, as the kernel language defines global_avg_pool over an area A: for a
    power of two, m = 1 and s = log2(A); else s = floor(log2(A)) + 7 and m = round(2^s / A), at most 127
    (written here from that definition, docs/language.md, not taken from the compiler)."""
    x = ins[0]
    area = x.shape[2] * x.shape[3]
    if area & (area - 1) == 0:
        multiplier, shift = 1, area.bit_length() - 1
    else:
        shift = area.bit_length() - 1 + 7
        multiplier = min(127, round(2**shift / area))
    total = x.astype(np.int64).sum(axis=(2, 3), keepdims=True)
    return exact.wrap32(total * multiplier) >> shift


def _quantise_global(q: QLayer, shapes: dict[str, tuple[int, ...]], notes: list[str]) -> None:
    """Nothing to set; the compiler's multiplier for the image's area is noted where it is not exact."""
    h, w = shapes[q.layer.inputs[0]][2:]
    multiplier, shift = average_multiplier(h * w)
    if multiplier != 1:
        off = multiplier / 2.0**shift * (h * w) - 1
        notes.append(f"layer {q.name}: averages {h}x{w} values as * {multiplier} >> {shift} "
                     f"({abs(off):.2%} off 1/{h * w})")


def _global_kernel(q: QLayer, xs: list[str]) -> Kernel:
    return "", f"global_avg_pool({xs[0]})", []


MAXPOOL = Rules(LayerKind.MAXPOOL, _float_max, _int8_max, True, nothing, _max_kernel, None, no_macs)
AVGPOOL = Rules(LayerKind.AVGPOOL, _float_average, _int8_average, True, nothing, _average_kernel, None, no_macs)
GAP = Rules(LayerKind.GAP, _float_global, _int8_global, True, _quantise_global, _global_kernel, None, no_macs)

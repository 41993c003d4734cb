"""Additions of two tensors: each input aligned to the finer scale by a left shift, the sum rounded and
shifted to the output's scale."""

from __future__ import annotations

import numpy as np

from .. import exact
from ..convert.layers import Layer, LayerKind
from ..quantised import QLayer
from .rules import Kernel, Rules, bounded, no_macs


def _float(layer: Layer, ins: list[np.ndarray]) -> np.ndarray:
    return ins[0] + ins[1]


def _int8(q: QLayer, ins: list[np.ndarray]) -> np.ndarray:
    """clip(((a << la) + (b << lb) + 2^(k-1)) >> k): the sum wraps as int32 does."""
    a, b = (v.astype(np.int64) << left for v, left in zip(ins, q.left, strict=True))
    rounding = (1 << (q.shift - 1)) if q.shift > 0 else 0
    return np.clip(exact.wrap32(a + b + rounding) >> q.shift, q.low, q.high)


def _quantise(q: QLayer, shapes: dict[str, tuple[int, ...]], notes: list[str]) -> None:
    base = min(q.in_exps)
    q.left = [e - base for e in q.in_exps]
    q.shift = max(0, q.out_exp - base)
    if q.out_exp < base:
        notes.append(f"layer {q.name}: output scale 2^{q.out_exp} is finer than its inputs'; kept at 2^{base}")
        q.out_exp = base


def sum_expression(q: QLayer, terms: list[str]) -> str:
    """An add layer's expression over its inputs' expressions: aligned, summed, rounded, clipped."""
    shifted = [f"({t} << {left})" if left else t for t, left in zip(terms, q.left, strict=True)]
    total = " + ".join(shifted)
    if q.shift:
        total = f"({total} + {1 << (q.shift - 1)}) >> {q.shift}"
    return bounded(total, q)


def _kernel(q: QLayer, xs: list[str]) -> Kernel:
    return "", sum_expression(q, xs), []


ADD = Rules(LayerKind.ADD, _float, _int8, False, _quantise, _kernel, None, no_macs)

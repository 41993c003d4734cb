"""Additions of two tensors: each input aligned to the finer scale by a left shift, the sum rounded and
shifted to the output's scale. Inputs whose scales lie more than 2^ALIGN apart meet ALIGN below the coarser
one instead (the finer input shifted right): int8 values shifted further would leave int32."""

from __future__ import annotations

import numpy as np

from .. import exact
from ..convert.layers import Layer, LayerKind
from ..quantised import QLayer
from .rules import Kernel, Rules, bounded, no_macs

ALIGN = 22  # the widest left shift of an int8 input: two of them and a rounding constant stay within int32


def _float(layer: Layer, ins: list[np.ndarray]) -> np.ndarray:
    return ins[0] + ins[1]


def _int8(q: QLayer, ins: list[np.ndarray]) -> np.ndarray:
    """clip(((a << la) + (b << lb) + 2^(k-1)) >> k): the sum wraps as int32 does."""
    a, b = (_aligned(v.astype(np.int64), left) for v, left in zip(ins, q.left, strict=True))
    rounding = (1 << (q.shift - 1)) if q.shift > 0 else 0
    return np.clip(exact.wrap32(a + b + rounding) >> q.shift, q.low, q.high)


def _aligned(v: np.ndarray, left: int) -> np.ndarray:
    """v << left, or v >> -left (arithmetic) for a negative ``left``."""
    return v << left if left >= 0 else v >> -left


def _quantise(q: QLayer, shapes: dict[str, tuple[int, ...]], notes: list[str]) -> None:
    base = min(q.in_exps)
    if max(q.in_exps) - base > ALIGN:
        lo, hi = base, max(q.in_exps)
        base = hi - ALIGN
        notes.append(f"layer {q.name}: its inputs' scales 2^{lo} and 2^{hi} are 2^{hi - lo} apart; the finer "
                     f"input is shifted right by {base - lo} to meet the coarser within int32 (what it holds below "
                     f"2^{base} is dropped)")
    q.left = [e - base for e in q.in_exps]
    q.shift = max(0, q.out_exp - base)
    if q.out_exp < base:
        notes.append(f"layer {q.name}: output scale 2^{q.out_exp} is finer than its inputs'; kept at 2^{base}")
        q.out_exp = base


def sum_expression(q: QLayer, terms: list[str]) -> str:
    """An add layer's expression over its inputs' expressions: aligned, summed, rounded, clipped."""
    shifted = [f"({t} << {left})" if left > 0 else f"({t} >> {-left})" if left < 0 else t
               for t, left in zip(terms, q.left, strict=True)]
    total = " + ".join(shifted)
    if q.shift:
        total = f"({total} + {1 << (q.shift - 1)}) >> {q.shift}"
    return bounded(total, q)


def _kernel(q: QLayer, xs: list[str]) -> Kernel:
    return "", sum_expression(q, xs), []


ADD = Rules(LayerKind.ADD, _float, _int8, False, _quantise, _kernel, None, no_macs)

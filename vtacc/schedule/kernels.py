"""Micro-op kernels: an iteration space folded onto two hardware loops and a micro-op list.

A GEMM or ALU instruction runs ``iter_out x iter_in`` repetitions of a list of
micro-ops, and each index (dst, src, wgt) is affine in the loop counters. An
iteration space is a list of dimensions, each with an extent and a stride per
index; the builder picks the two dimensions that become hardware loops and
enumerates the others as micro-ops. It prefers, in order: a micro-op list
whose consecutive entries never write the same accumulator element (the
runtime forbids that pattern: a read-after-write hazard in the pipelined
hardware), then the fewest micro-ops.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .steps import Kernel

MAX_ITER = (1 << 14) - 1  # iter_out / iter_in are 14-bit fields


@dataclass(frozen=True)
class Dim:
    """One dimension of an iteration space: extent and strides of dst, src and wgt."""

    name: str
    extent: int
    dst: int
    src: int
    wgt: int = 0


def _uop_list(dims: list[Dim], base: tuple[int, int, int]) -> tuple[tuple[int, int, int], ...]:
    uops = []
    for idx in itertools.product(*[range(d.extent) for d in dims]):
        uops.append((
            base[0] + sum(i * d.dst for i, d in zip(idx, dims, strict=True)),
            base[1] + sum(i * d.src for i, d in zip(idx, dims, strict=True)),
            base[2] + sum(i * d.wgt for i, d in zip(idx, dims, strict=True)),
        ))
    return tuple(uops)


def _hazard_free_order(dims: list[Dim]) -> list[Dim] | None:
    """The micro-op dims ordered so the innermost moves dst (None if impossible)."""
    if not dims:
        return []
    movers = [d for d in dims if d.dst != 0 and d.extent > 1]
    if not movers:
        return dims if all(d.extent == 1 for d in dims) else None
    inner = movers[-1]
    return [d for d in dims if d is not inner] + [inner]


def build_kernel(dims: list[Dim], base: tuple[int, int, int], max_uops: int | None = None) -> Kernel:
    """Fold an iteration space (outermost dimension first) into a kernel."""
    live = [d for d in dims if d.extent > 1]
    one = Dim("one", 1, 0, 0, 0)
    pairs = [(one, one)]
    pairs += [(one, d) for d in live]
    pairs += [(a, b) for a, b in itertools.permutations(live, 2)]
    best = None
    for outer, inner in pairs:
        if outer.extent > MAX_ITER or inner.extent > MAX_ITER:
            continue
        rest = [d for d in live if d is not outer and d is not inner]
        n_uops = 1
        for d in rest:
            n_uops *= d.extent
        if max_uops is not None and n_uops > max_uops:
            continue
        ordered = _hazard_free_order(rest)
        # executions keep program order: outer loop, inner loop, then micro-ops
        score = (ordered is None and n_uops > 1, n_uops, -outer.extent)
        if best is None or score < best[0]:
            best = (score, outer, inner, ordered if ordered is not None else rest)
    if best is None:
        raise ValueError("iteration space does not fit the micro-op buffer")
    _, outer, inner, order = best
    return Kernel(
        uops=_uop_list(order, base),
        iter_out=outer.extent,
        iter_in=inner.extent,
        dst=(outer.dst, inner.dst),
        src=(outer.src, inner.src),
        wgt=(outer.wgt, inner.wgt),
    )


def contiguous(count: int, dst: int, src: int = 0, wgt: int = 0, src_step: int = 0, wgt_step: int = 0) -> Kernel:
    """A kernel over ``count`` consecutive accumulator elements (one micro-op, loops do the rest)."""
    if count <= MAX_ITER:
        return Kernel(((dst, src, wgt),), 1, count, (0, 1), (0, src_step), (0, wgt_step))
    for outer in range(2, MAX_ITER + 1):
        if count % outer == 0 and count // outer <= MAX_ITER:
            inner = count // outer
            return Kernel(((dst, src, wgt),), outer, inner, (inner, 1), (inner * src_step, src_step),
                          (inner * wgt_step, wgt_step))
    raise ValueError(f"{count} elements do not fit two 14-bit loops")

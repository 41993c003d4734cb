"""Micro-op kernels: an iteration space folded onto two hardware loops and a micro-op list.

A GEMM or ALU instruction runs ``iter_out x iter_in`` repetitions of a list of
micro-ops, and each index (dst, src, wgt) is affine in the loop counters. An
iteration space is a list of dimensions, each with an extent and a stride per
index; the builder merges dimensions that enumerate like one, picks the two
that become hardware loops and enumerates the others as micro-ops, those that
move dst innermost. Every kernel it returns keeps two rules (isa.md section 7,
declared in vtasm.portability): no micro-op writes the element of either of
the two before it in the list (the runtime refuses such kernels), and no
execution touches an element that one of the two executions before it wrote,
across loop iterations too (the HLS design does not see those writes; the
2019 Chisel core loses back-to-back ones). Among the kernels that do, it
takes the fewest micro-ops.

A sum of several terms into a single element cannot keep the rules by
ordering alone: given a ``Spare`` region, the builder spreads the terms over
partial-sum copies of the tile (the caller resets them and adds them back
with the ALU); integer sums wrap, so any order gives the same bits.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from dataclasses import dataclass

from vtasm import portability as port

from .steps import Kernel

MAX_ITER = (1 << 14) - 1  # iter_out / iter_in are 14-bit fields
FIELDS = ("dst", "src", "wgt")


@dataclass(frozen=True)
class Dim:
    """One dimension of an iteration space: extent and strides of dst, src and wgt."""

    name: str
    extent: int
    dst: int
    src: int
    wgt: int = 0


@dataclass(frozen=True)
class Spare:
    """Room for partial sums: copy c (1..count) of the tile element ``acc + o`` is ``base + (c - 1) * stride + o``."""

    acc: int
    base: int
    stride: int
    count: int

    def offset(self, copy: int) -> int:
        """What copy ``copy`` (0 is the tile itself) adds to a tile element's index."""
        return 0 if copy == 0 else self.base + (copy - 1) * self.stride - self.acc

    def used(self, kernel: Kernel) -> int:
        """How many copies the kernel's micro-ops write."""
        return max(((u[0] - self.base) // self.stride + 1 for u in kernel.uops if u[0] >= self.base), default=0)


ONE = Dim("one", 1, 0, 0, 0)
NO_COPIES = Spare(0, 0, 1, 0)


def _uop_list(dims: list[Dim], base: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    uops = []
    for idx in itertools.product(*[range(d.extent) for d in dims]):
        uops.append((
            base[0] + sum(i * d.dst for i, d in zip(idx, dims, strict=True)),
            base[1] + sum(i * d.src for i, d in zip(idx, dims, strict=True)),
            base[2] + sum(i * d.wgt for i, d in zip(idx, dims, strict=True)),
        ))
    return uops


def _merge(dims: list[Dim]) -> list[Dim]:
    """Fold each pair of dimensions that enumerates like one (outer strides = inner strides x inner extent)."""
    dims = list(dims)
    for a, b in itertools.permutations(dims, 2):
        if a.extent * b.extent <= MAX_ITER and all(getattr(a, f) == getattr(b, f) * b.extent for f in FIELDS):
            merged = Dim(f"{a.name}.{b.name}", a.extent * b.extent, b.dst, b.src, b.wgt)
            return _merge([merged if d is a else d for d in dims if d is not b])
    return dims


def _splits(dims: list[Dim]) -> list[list[Dim]]:
    """The dimensions with one of them cut into an outer and an inner factor, every way."""
    out = []
    for k, d in enumerate(dims):
        for f in range(2, d.extent):
            if d.extent % f == 0:
                hi = Dim(f"{d.name}/{f}", d.extent // f, d.dst * f, d.src * f, d.wgt * f)
                lo = Dim(f"{d.name}%{f}", f, d.dst, d.src, d.wgt)
                out.append([*dims[:k], hi, lo, *dims[k + 1:]])
    return out


def keeps_rules(kernel: Kernel) -> bool:
    """Whether the kernel keeps the runtime's list rule and the accumulator-distance rule (vtasm.portability)."""
    dst = [u[0] for u in kernel.uops]
    if port.list_hazard(dst) is not None:
        return False
    return port.acc_hazard(dst, None, kernel.iter_out, kernel.iter_in, kernel.dst) is None


def _next_iteration(dsts: list[int], iter_out: int, iter_in: int, dst: tuple[int, int]) -> list[tuple[int, int]]:
    """(distance in the list, element) of the next iteration's first micro-ops, as seen from the list's end."""
    shifts = set()
    if iter_in > 1:
        shifts.add(dst[1])
    if iter_out > 1:
        shifts.add(dst[0] - (iter_in - 1) * dst[1])
    return [(k, d + s) for k, d in enumerate(dsts[: port.MIN_ACC_DISTANCE - 1]) for s in shifts]


def _assign_copies(dsts: list[int], iter_out: int, iter_in: int, dst: tuple[int, int],
                   spare: Spare) -> list[int] | None:
    """The list's dst indices moved to partial-sum copies where the rules need it (None: no assignment found).

    Greedy: each micro-op takes the first copy whose element none of the two
    micro-ops before it writes, nor (near the list's end) the next
    iteration's first ones; the finished kernel is checked whole.
    """
    gap = port.MIN_ACC_DISTANCE - 1
    out: list[int] = []
    n = len(dsts)
    for t, d in enumerate(dsts):
        ahead = _next_iteration(out, iter_out, iter_in, dst) if t >= n - gap else []
        for c in range(spare.count + 1):
            v = d + spare.offset(c)
            if v in out[-gap:] or any(v == e for k, e in ahead if (n - t) + k < port.MIN_ACC_DISTANCE):
                continue
            out.append(v)
            break
        else:
            return None
    probe = Kernel(tuple((v, 0, 0) for v in out), iter_out, iter_in, dst, (0, 0))
    return out if keeps_rules(probe) else None


def _candidates(dims: list[Dim], max_uops: int | None):
    """(score, outer, inner, list dims) of every loop choice, best score first."""
    live = [d for d in dims if d.extent > 1]
    pairs = [(ONE, ONE), *((ONE, d) for d in live), *itertools.permutations(live, 2)]
    found = []
    for outer, inner in pairs:
        if outer.extent > MAX_ITER or inner.extent > MAX_ITER:
            continue
        rest = [d for d in live if d is not outer and d is not inner]
        n_uops = 1
        for d in rest:
            n_uops *= d.extent
        if max_uops is not None and n_uops > max_uops:
            continue
        # executions keep program order: outer loop, inner loop, then micro-ops, those that move dst innermost
        order = [d for d in rest if d.dst == 0] + [d for d in rest if d.dst != 0]
        found.append(((n_uops, -outer.extent), outer, inner, order))
    return sorted(found, key=lambda c: c[0])


def _search(variants: list[list[Dim]], base: tuple[int, int, int], max_uops: int | None,
            spare: Spare) -> Kernel | None:
    """The kernel of fewest micro-ops that keeps the rules, over every variant and loop choice."""
    best: tuple | None = None
    for dims in variants:
        for score, outer, inner, order in _candidates(dims, max_uops):
            if best is not None and score >= best[0]:
                break
            uops = _uop_list(order, base)
            moved = _assign_copies([u[0] for u in uops], outer.extent, inner.extent, (outer.dst, inner.dst), spare)
            if moved is not None:
                kernel = Kernel(tuple((v, u[1], u[2]) for v, u in zip(moved, uops, strict=True)), outer.extent,
                                inner.extent, (outer.dst, inner.dst), (outer.src, inner.src), (outer.wgt, inner.wgt))
                best = (score, kernel)
                break
    return best[1] if best else None


def build_kernel(dims: list[Dim], base: tuple[int, int, int], max_uops: int | None = None,
                 spare: Spare | None = None) -> Kernel:
    """Fold an iteration space (outermost dimension first) into a kernel that keeps the dst rules.

    ``spare`` is for accumulating GEMMs only: any execution may then write a
    partial-sum copy of its element instead. Without it, an iteration space
    whose every folding breaks the rules is an error. Kernels are cached
    without their base: the rules compare indices with one another, never
    with a place in the buffer, so a kernel found at one base holds moved to
    any other (every tile, thread slot and candidate the tiler confirms folds
    the same iteration spaces at other bases).
    """
    relative = None if spare is None else dataclasses.replace(spare, acc=0, base=spare.base - spare.acc)
    kernel = _build(tuple(dims), max_uops, relative)
    if base == (0, 0, 0):
        return kernel
    bd, bs, bw = base
    return Kernel(tuple([(d + bd, s + bs, w + bw) for d, s, w in kernel.uops]), kernel.iter_out, kernel.iter_in,
                  kernel.dst, kernel.src, kernel.wgt)


@functools.lru_cache(maxsize=8192)
def _build(dims: tuple[Dim, ...], max_uops: int | None, spare: Spare | None) -> Kernel:
    """The kernel of an iteration space at base (0, 0, 0); ``spare`` with its offsets relative to acc 0."""
    base = (0, 0, 0)
    live = [d for d in dims if d.extent > 1]
    merged = _merge(live)
    variants = [merged] if merged == live else [merged, live]
    kernel = _search(variants, base, max_uops, NO_COPIES)
    if kernel is None and spare is not None and spare.count:
        kernel = _search([merged, *_splits(merged)], base, max_uops, spare)
    if kernel is None:
        raise ValueError("no micro-op kernel of this iteration space fits the micro-op buffer and keeps "
                         "executions on one accumulator element 3 apart")
    return kernel


def copies_needed(elems: int, terms: int) -> int:
    """Partial-sum copies (beyond the tile itself) that a tile of ``elems`` elements needs when one GEMM adds
    ``terms`` terms into each: executions on one element must be ``MIN_ACC_DISTANCE`` apart."""
    if terms < 2 or elems >= port.MIN_ACC_DISTANCE:
        return 0
    return -(-port.MIN_ACC_DISTANCE // elems) - 1


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

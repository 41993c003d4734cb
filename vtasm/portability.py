"""Where VTA's hardware designs differ from the behavioral simulator (isa.md section 7), declared once.

The designs are named as the timing profiles are. Each rule says which
designs a program that breaks it computes wrong numbers on (or stalls, or is
refused by the runtime); the simulator's lint reports them and the compiler
keeps them. ``acc_hazard`` is the one statement of the accumulator-distance
rule: within one GEMM or ALU instruction, no execution may read an
accumulator element that one of the ``MIN_ACC_DISTANCE - 1`` executions just
before it wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vtasm.designs import CHISEL_2019, CHISEL_2021, DESIGNS, HLS

RUNTIME = "the VTA runtime"

SHIFT_MIN, SHIFT_MAX = -16, 15  # the HLS design reads a shift amount's low 5 bits as a signed number
MIN_ACC_DISTANCE = 3  # the HLS design: an execution does not see the writes of the two just before it
UOP_ENTRIES = 2048  # the micro-op buffer of the measured Chisel builds (2019 core, 2021 design)
TOKEN_CAPACITY = {CHISEL_2019: 255, CHISEL_2021: 255, HLS: 1024}  # 8-bit counters; the Pynq block design
HLS_SIM_QUEUE = 8  # the token queues of the HLS simulation top (vta_test), not of a bitstream
IMM_ZERO_EXTENDED = frozenset({"min", "max", "add"})  # the 2019 core zero-extends these 16-bit immediates


def portable_uop_entries(uop_depth: int) -> int:
    """The micro-op entries a program may use and still run on every measured design."""
    return min(uop_depth, UOP_ENTRIES)


@dataclass(frozen=True)
class Rule:
    """One difference: the designs it breaks on and what goes wrong there."""

    name: str
    designs: tuple[str, ...]
    effect: str
    note: bool = False  # a fact worth knowing that portable code need not avoid


RULES = {r.name: r for r in (
    Rule("mul", DESIGNS, "MUL is not implemented"),
    Rule("stale-store", DESIGNS, "STORE reads an output buffer that only GEMM and ALU write"),
    Rule("shift-range", (HLS,), "shift amounts are read as 5-bit signed numbers (-16..15)"),
    Rule("shift-negative-tensor", (CHISEL_2019, CHISEL_2021), "negative shift amounts from a tensor are not "
         "handled (only negative immediates are)"),
    Rule("pad-ignored", (HLS,), "WGT and UOP loads ignore their padding fields"),
    Rule("load-no-rows", (CHISEL_2021,), "a LOAD with y_size 0 and x_size > 0 never completes: the whole design "
         "hangs there"),
    Rule("acc8", DESIGNS, "ACC_8BIT loads exist only in the behavioral simulator and the Intel OpenCL design"),
    Rule("queue-depth", DESIGNS, "token queues are bounded (8-bit counters in the Chisel designs, 1024 entries "
         "in the Pynq block design)"),
    Rule("queue-depth-sim", (HLS,), f"the HLS simulation top's token queues hold {HLS_SIM_QUEUE} tokens (the "
         "bitstreams' hold 1024)", note=True),
    Rule("uop-list-hazard", (RUNTIME,), "the runtime refuses a micro-op kernel whose micro-op has the dst of "
         "either of the two before it in the list"),
    Rule("acc-distance", DESIGNS, f"an execution that reads an accumulator element written fewer than "
         f"{MIN_ACC_DISTANCE} executions before it reads the old value"),
    Rule("imm-src", (CHISEL_2021,), "an ALU instruction with an immediate reads its operand at src, not dst"),
    Rule("uop-capacity", (CHISEL_2019, CHISEL_2021), f"the measured builds' micro-op buffer holds {UOP_ENTRIES} "
         "entries"),
    Rule("imm-zero-extend", (CHISEL_2019,), "MIN, MAX and ADD immediates are zero-extended from 16 bits "
         "(a defect of that early core)", note=True),
)}


def rowless_load(y_size: int, x_size: int) -> bool:
    """A LOAD the 2021 Chisel design never completes (rule load-no-rows): no rows, some columns."""
    return y_size == 0 and x_size > 0


def breaks(rule: str, designs: Sequence[str] | None = None) -> str:
    """'breaks on hls, chisel-2019' for a rule (or for the subset of designs a case breaks on)."""
    found = RULES[rule]
    names = ", ".join(designs or found.designs)
    return f"{'matters on' if found.note else 'breaks on'} {names}"


@dataclass(frozen=True)
class Hazard:
    """An execution that reads an element written ``distance`` executions before it (positions are (i, j, u))."""

    distance: int
    writer: tuple[int, int, int]
    reader: tuple[int, int, int]
    element: int
    via: str  # "dst" or "src": which of the reader's indices reads the element

    def designs(self, gemm: bool) -> tuple[str, ...]:
        """The designs on which the stale read changes the result."""
        if self.distance >= 2:
            return (HLS,)
        return (CHISEL_2019, HLS) if gemm else (CHISEL_2021, HLS)


def acc_hazard(dst: Sequence[int], src: Sequence[int] | None, iter_out: int, iter_in: int,
               dst_factors: tuple[int, int], src_factors: tuple[int, int] = (0, 0)) -> Hazard | None:
    """The closest read-after-write on the accumulator within one instruction, or None.

    ``dst`` and ``src`` are the micro-ops' indices (src None when the
    instruction reads no accumulator operand at src: a GEMM, an ALU with an
    immediate). Every execution reads and writes its dst. The distance between
    two executions only depends on the micro-ops and on which loop boundaries
    lie between them, so probing the micro-ops of iteration (0, j) for j in
    {0, iter_in - 2, iter_in - 1} covers every pair of executions fewer than
    MIN_ACC_DISTANCE apart.
    """
    n = len(dst)
    total = iter_out * iter_in * n
    if total < 2:
        return None
    if src is not None and not _overlap(dst, src, iter_out, iter_in, dst_factors, src_factors):
        src = None
    if src is not None and tuple(src_factors) != tuple(dst_factors):
        return _enumerated(dst, src, iter_out, iter_in, dst_factors, src_factors)
    per_out = iter_in * n

    def where(p: int) -> tuple[int, int, int]:
        i, rest = divmod(p, per_out)
        return (i, *divmod(rest, n))

    def index(values: Sequence[int], pos: tuple[int, int, int]) -> int:
        return values[pos[2]] + pos[0] * dst_factors[0] + pos[1] * dst_factors[1]

    for distance in range(1, MIN_ACC_DISTANCE):
        for j in sorted({0, iter_in - 2, iter_in - 1} - {-1}):
            for u in range(n):
                p = j * n + u
                if p + distance >= total:
                    continue
                writer, reader = where(p), where(p + distance)
                element = index(dst, writer)
                if index(dst, reader) == element:
                    return Hazard(distance, writer, reader, element, "dst")
                if src is not None and index(src, reader) == element:
                    return Hazard(distance, writer, reader, element, "src")
    return None


def _span(values: Sequence[int], iter_out: int, iter_in: int, factors: tuple[int, int]) -> tuple[int, int]:
    lo, hi = min(values), max(values)
    for f, count in zip(factors, (iter_out, iter_in), strict=True):
        step = f * (count - 1)
        lo, hi = lo + min(0, step), hi + max(0, step)
    return lo, hi


def _overlap(dst, src, iter_out, iter_in, dst_factors, src_factors) -> bool:
    d, s = _span(dst, iter_out, iter_in, dst_factors), _span(src, iter_out, iter_in, src_factors)
    return d[0] <= s[1] and s[0] <= d[1]


def _enumerated(dst, src, iter_out, iter_in, dst_factors, src_factors) -> Hazard | None:
    """The same check over every execution (src moves unlike dst, so distances change along the loops)."""
    import numpy as np

    def flat(values, factors):
        return (np.arange(iter_out)[:, None, None] * factors[0] + np.arange(iter_in)[None, :, None] * factors[1]
                + np.asarray(values, dtype=np.int64)[None, None, :]).reshape(-1)

    d, s = flat(dst, dst_factors), flat(src, src_factors)
    n, per_out = len(dst), iter_in * len(dst)
    for distance in range(1, MIN_ACC_DISTANCE):
        for via, reads in (("dst", d), ("src", s)):
            hits = np.flatnonzero(reads[distance:] == d[:-distance])
            if hits.size:
                p = int(hits[0])
                where = [(q // per_out, *divmod(q % per_out, n)) for q in (p, p + distance)]
                return Hazard(distance, where[0], where[1], int(d[p]), via)
    return None


def list_hazard(dst: Sequence[int]) -> tuple[int, int] | None:
    """The runtime's rule: the first (earlier, later) micro-op pair, 1 or 2 apart in the list, with one dst."""
    for t in range(1, len(dst)):
        for back in (1, 2):
            if t - back >= 0 and dst[t] == dst[t - back]:
                return t - back, t
    return None

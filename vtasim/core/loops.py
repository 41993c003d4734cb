"""Index plans for the two hardware loops of GEMM and ALU instructions.

An instruction runs ``iter_out x iter_in x (uop_end - uop_bgn)`` micro-op
executions; execution (i, j, u) touches ``uop.f + i * f_out + j * f_in`` for
each index f (dst, src, wgt). A plan holds these indices flattened in execution
order for a box of executions (a range of i, of j, of u), plus derived facts
the units reuse (bounds, groupings).

An instruction of at most ``chunk_size`` executions has one plan, cached by its
loop fields and the micro-op generation, so a stream that repeats the same
kernel computes it once. A larger one runs as a series of chunk plans, boxes
that follow one another in execution order, each within the chunk budget: the
memory a unit needs stays bounded whatever the loop counts, and its time
proportional to the executions. The cache itself is bounded by ``CACHE_LANES``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from vtasim.core.state import MachineState
from vtasm import isa
from vtasm.config import VTAConfig
from vtasm.encoding import Instruction

CHUNK_LANES = 1 << 20  # lanes one chunk of executions may gather (its inputs, products or accumulators)
CACHE_LANES = 1 << 22  # what the cached plans may hold, counted in 8-byte values (32 MiB)
PLAN_LANES = 16  # 8-byte values a cached plan holds per execution: indices, groupings, orders
FIELDS = ("dst", "src", "wgt")


def chunk_size(cfg: VTAConfig) -> int:
    """The most executions one plan covers: CHUNK_LANES over the lanes one execution reads or writes."""
    return max(1, CHUNK_LANES // (cfg.batch * max(cfg.block_in, cfg.block_out)))


@dataclass
class LoopPlan:
    """Flattened per-execution indices of one GEMM/ALU instruction, or of one chunk of it.

    ``index`` holds the (dst, src, wgt) index arrays; a plan moved from a
    template (``moved``) makes them from the template's only when something
    reads them: most moved kernels run from what the units carried over.
    """

    iter_out: int
    iter_in: int
    n_uops: int
    index: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None  # None: a moved plan's, not made yet
    shape: tuple = ()  # loop fields and micro-ops relative to the first one: equal for shifted kernels
    extra: dict = field(default_factory=dict)  # facts derived by the units, cached with the plan
    shapes: dict = field(default_factory=dict)  # facts that depend only on ``shape``, shared between plans
    origin: tuple[int, int, int] = (0, 0, 0)  # the (i, j, u) of the first execution, for a chunk
    lanes: int = 0  # 8-byte values the plan holds, with what the units cached in ``extra``
    moved_from: tuple[LoopPlan, tuple[int, int, int]] | None = None  # template and (dst, src, wgt) offsets

    @property
    def dst(self) -> np.ndarray:
        return (self.index or self._moved_index())[0]

    @property
    def src(self) -> np.ndarray:
        return (self.index or self._moved_index())[1]

    @property
    def wgt(self) -> np.ndarray | None:
        return (self.index or self._moved_index())[2]

    def _moved_index(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        template, (dst, src, wgt) = self.moved_from
        self.index = (template.dst + dst, template.src + src, None if template.wgt is None else template.wgt + wgt)
        return self.index  # already counted in ``lanes`` when the plan was made (moved)

    def first(self, name: str) -> int:
        """The first execution's ``name`` index (dst, src or wgt; 0 when there is none), read without making
        a moved plan's indices."""
        if self.index is None:
            template, offsets = self.moved_from
            return template.first(name) + offsets[FIELDS.index(name)] if template.count else 0
        values = self.index[FIELDS.index(name)]
        return int(values[0]) if values is not None and values.size else 0

    def unmoved(self) -> LoopPlan:
        """The plan this one was moved from (itself when not moved): what does not change when indices move
        by constants (which of them repeat, which are equal) can be read off its indices."""
        return self if self.moved_from is None else self.moved_from[0].unmoved()

    @property
    def count(self) -> int:
        return self.iter_out * self.iter_in * self.n_uops

    def position(self, k: int) -> str:
        """Where execution k sits: 'iteration (i, j), micro-op u'."""
        per_out = self.iter_in * self.n_uops
        i, rest = divmod(int(k), per_out)
        j, u = divmod(rest, self.n_uops)
        i0, j0, u0 = self.origin
        return f"iteration ({i0 + i}, {j0 + j}), micro-op {u0 + u}"


def moved(plan: LoopPlan, dst: int, src: int, wgt: int) -> LoopPlan:
    """The plan of the same kernel placed elsewhere: every index moved by a constant (no facts yet).

    Its indices are made from the template's when first read, but counted in
    its lanes from the start (a cache that counts a plan once, when it keeps
    it, then stays within its budget whatever reads them later), with what
    the units carry over to it (gemm.carry_layout, alu.carry_facts) and cache.
    """
    index_lanes = plan.count * (2 if plan.unmoved().wgt is None else 3)
    return LoopPlan(plan.iter_out, plan.iter_in, plan.n_uops, None, plan.shape, shapes=plan.shapes,
                    origin=plan.origin, lanes=index_lanes, moved_from=(plan, (dst, src, wgt)))


Box = tuple[int, int, int, int, int, int]  # i0, i1, j0, j1, u0, u1


def boxes(iter_out: int, iter_in: int, n_uops: int, limit: int) -> Iterator[Box]:
    """Boxes of at most ``limit`` executions that cover the loops in execution order."""
    per_out = iter_in * n_uops
    if per_out <= limit:
        step = limit // per_out
        for i in range(0, iter_out, step):
            yield i, min(iter_out, i + step), 0, iter_in, 0, n_uops
    elif n_uops <= limit:
        step = limit // n_uops
        for i in range(iter_out):
            for j in range(0, iter_in, step):
                yield i, i + 1, j, min(iter_in, j + step), 0, n_uops
    else:
        for i in range(iter_out):
            for j in range(iter_in):
                for u in range(0, n_uops, limit):
                    yield i, i + 1, j, j + 1, u, min(n_uops, u + limit)


def _whole_box(insn: Instruction) -> Box:
    return 0, insn["iter_out"], 0, insn["iter_in"], 0, max(0, insn["uop_end"] - insn["uop_bgn"])


def _indices(base: np.ndarray, box: Box, f_out: int, f_in: int) -> np.ndarray:
    i0, i1, j0, j1, u0, u1 = box
    outer = np.arange(i0, i1, dtype=np.int64) * f_out
    inner = np.arange(j0, j1, dtype=np.int64) * f_in
    return (outer[:, None, None] + inner[None, :, None] + base[None, None, u0:u1]).reshape(-1)


def _factors(insn: Instruction, name: str) -> tuple[int, int]:
    if name == "wgt" and insn.kind != "gemm":
        return 0, 0
    return insn[f"{name}_factor_out"], insn[f"{name}_factor_in"]


def highest(state: MachineState, insn: Instruction, name: str) -> int:
    """The largest ``name`` index any execution touches (-1 for none): indices only grow along the loops."""
    bgn, end = insn["uop_bgn"], insn["uop_end"]
    io, ii = insn["iter_out"], insn["iter_in"]
    if io <= 0 or ii <= 0 or end <= bgn:
        return -1
    f_out, f_in = _factors(insn, name)
    return int(getattr(state, f"uop_{name}")[bgn:end].max()) + (io - 1) * f_out + (ii - 1) * f_in


def _plan(state: MachineState, insn: Instruction, box: Box, shapes: dict) -> LoopPlan:
    """The plan of one box of an instruction's executions."""
    gemm = insn.kind == "gemm"
    bgn = insn["uop_bgn"]
    i0, i1, j0, j1, u0, u1 = box
    uops = {f: getattr(state, f"uop_{f}")[bgn:insn["uop_end"]] for f in FIELDS[: 3 if gemm else 2]}
    index = {f: _indices(u, box, *_factors(insn, f)) for f, u in uops.items()}
    dims = (i1 - i0, j1 - j0, u1 - u0)
    parts = tuple(u[u0:u1] for u in uops.values())
    shape = (gemm, *dims, *(v for f in uops for v in _factors(insn, f)))
    shape += tuple((u - u[0]).tobytes() if u.size else b"" for u in parts)
    if not gemm and parts[0].size:
        shape += (int(index["src"][0]) - int(index["dst"][0]),)
    return LoopPlan(*dims, (index["dst"], index["src"], index.get("wgt")), shape, shapes=shapes,
                    origin=(i0, j0, u0), lanes=PLAN_LANES * dims[0] * dims[1] * dims[2])


class PlanCache:
    """Caches loop plans keyed by loop fields and micro-op generation, within CACHE_LANES."""

    def __init__(self, limit: int = 256):
        self._plans: dict[tuple, LoopPlan] = {}
        self._limit = limit
        self.shapes: dict[tuple, object] = {}  # facts that depend only on a plan's shape, shared by plans

    @staticmethod
    def count(insn: Instruction) -> int:
        """The instruction's micro-op executions."""
        return isa.executions(insn)

    def chunked(self, state: MachineState, insn: Instruction) -> bool:
        """Whether the instruction runs as several chunk plans."""
        return self.count(insn) > chunk_size(state.cfg)

    def plan(self, state: MachineState, insn: Instruction) -> LoopPlan:
        """The plan of all the instruction's executions (cached unless it is chunked)."""
        plan = self.whole(state, insn)
        if plan is None:
            plan = _plan(state, insn, _whole_box(insn), {})
        return plan

    def whole(self, state: MachineState, insn: Instruction) -> LoopPlan | None:
        """The cached plan of all the instruction's executions; None when it is chunked."""
        gemm = insn.kind == "gemm"
        key = (
            gemm,
            state.uop_generation,
            insn["uop_bgn"],
            insn["uop_end"],
            insn["iter_out"],
            insn["iter_in"],
            insn["dst_factor_out"],
            insn["dst_factor_in"],
            insn["src_factor_out"],
            insn["src_factor_in"],
            insn["wgt_factor_out"] if gemm else 0,
            insn["wgt_factor_in"] if gemm else 0,
        )
        found = self._plans.get(key)
        if found is not None:
            return found
        if self.chunked(state, insn):
            return None
        plan = _plan(state, insn, _whole_box(insn), self.shapes)
        held = sum(p.lanes for p in self._plans.values())
        if len(self._plans) >= self._limit or held + plan.lanes > CACHE_LANES:
            self._plans.clear()
            self.shapes.clear()
        self._plans[key] = plan
        return plan

    def chunks(self, state: MachineState, insn: Instruction) -> Iterator[LoopPlan]:
        """The plans of the instruction's executions, in execution order, each within the chunk budget."""
        plan = self.whole(state, insn)
        if plan is not None:
            yield plan
            return
        shapes: dict = {}  # shared by this instruction's chunks only: the cache keeps no chunk
        n_uops = insn["uop_end"] - insn["uop_bgn"]
        for box in boxes(insn["iter_out"], insn["iter_in"], n_uops, chunk_size(state.cfg)):
            yield _plan(state, insn, box, shapes)

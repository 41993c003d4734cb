"""Index plans for the two hardware loops of GEMM and ALU instructions.

An instruction runs ``iter_out x iter_in x (uop_end - uop_bgn)`` micro-op
executions; execution (i, j, u) touches ``uop.f + i * f_out + j * f_in`` for
each index f (dst, src, wgt). A plan holds these indices flattened in execution
order, plus derived facts the units reuse (bounds, groupings). Plans are cached
by the instruction's loop fields and the micro-op generation, so a stream that
repeats the same kernel computes them once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vtasm.encoding import Instruction

from .state import MachineState


@dataclass
class LoopPlan:
    """Flattened per-execution indices of one GEMM/ALU instruction."""

    iter_out: int
    iter_in: int
    n_uops: int
    dst: np.ndarray
    src: np.ndarray
    wgt: np.ndarray | None
    shape: tuple = ()  # loop fields and micro-ops relative to the first one: equal for shifted kernels
    extra: dict = field(default_factory=dict)  # facts derived by the units, cached with the plan

    @property
    def count(self) -> int:
        return self.iter_out * self.iter_in * self.n_uops

    def position(self, k: int) -> str:
        """Where execution k sits: 'iteration (i, j), micro-op u'."""
        per_out = self.iter_in * self.n_uops
        i, rest = divmod(int(k), per_out)
        j, u = divmod(rest, self.n_uops)
        return f"iteration ({i}, {j}), micro-op {u}"


def _indices(base: np.ndarray, iter_out: int, iter_in: int, f_out: int, f_in: int) -> np.ndarray:
    outer = np.arange(iter_out, dtype=np.int64) * f_out
    inner = np.arange(iter_in, dtype=np.int64) * f_in
    return (outer[:, None, None] + inner[None, :, None] + base[None, None, :]).reshape(-1)


class PlanCache:
    """Caches loop plans keyed by loop fields and micro-op generation."""

    def __init__(self, limit: int = 256):
        self._plans: dict[tuple, LoopPlan] = {}
        self._limit = limit
        self.shapes: dict[tuple, object] = {}  # facts that depend only on a plan's shape, shared by plans

    def plan(self, state: MachineState, insn: Instruction) -> LoopPlan:
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
        if len(self._plans) >= self._limit:
            self._plans.clear()
        bgn, end = insn["uop_bgn"], insn["uop_end"]
        n_uops = max(0, end - bgn)
        io, ii = insn["iter_out"], insn["iter_in"]
        dst = _indices(state.uop_dst[bgn:end], io, ii, insn["dst_factor_out"], insn["dst_factor_in"])
        src = _indices(state.uop_src[bgn:end], io, ii, insn["src_factor_out"], insn["src_factor_in"])
        wgt = (
            _indices(state.uop_wgt[bgn:end], io, ii, insn["wgt_factor_out"], insn["wgt_factor_in"])
            if gemm
            else None
        )
        uops = [state.uop_dst[bgn:end], state.uop_src[bgn:end]] + ([state.uop_wgt[bgn:end]] if gemm else [])
        shape = key[:1] + key[4:] + tuple((u - u[0]).tobytes() if u.size else b"" for u in uops)
        if not gemm and n_uops:
            shape += (int(state.uop_src[bgn]) - int(state.uop_dst[bgn]),)
        plan = LoopPlan(io, ii, n_uops, dst, src, wgt, shape)
        self._plans[key] = plan
        if len(self.shapes) > 4 * self._limit:
            self.shapes.clear()
        return plan

"""Faults for GEMM/ALU instructions whose indices leave their buffers.

An instruction is checked whole before any of its executions runs, so a
faulting instruction changes nothing. A chunked instruction is checked from
its highest indices (indices only grow along the loops); only when one leaves
its buffer are the chunks walked to name the first execution that does.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from vtasim.core.faults import fault
from vtasim.core.loops import LoopPlan, PlanCache, highest
from vtasim.core.state import MachineState
from vtasm.encoding import Instruction


def check_uop_range(state: MachineState, index: int, insn: Instruction) -> None:
    """Fault if the instruction's micro-op range leaves the micro-op buffer."""
    if insn["uop_end"] > insn["uop_bgn"] and insn["uop_end"] > state.cfg.uop_depth:
        raise fault(
            index, insn,
            f"micro-op range {insn['uop_bgn']}..{insn['uop_end'] - 1} overflows the micro-op buffer "
            f"(0..{state.cfg.uop_depth - 1})",
        )


def check_bounds(index: int, insn: Instruction, plan: LoopPlan, name: str, values: np.ndarray,
                 depth: int) -> None:
    """Fault naming the plan's first execution whose index leaves its buffer."""
    key = f"bounds_{name}_{depth}"
    ok = plan.extra.get(key)
    if ok is None:
        ok = bool(values.size == 0 or (values.min() >= 0 and values.max() < depth))
        plan.extra[key] = ok
    if not ok:
        k = int(np.argmax((values < 0) | (values >= depth)))
        raise fault(
            index, insn,
            f"{name} index {int(values[k])} outside the buffer (0..{depth - 1}) at {plan.position(k)}",
        )


def checked_plans(state: MachineState, index: int, insn: Instruction, plans: PlanCache,
                  checks: list[tuple[str, str, int]]) -> Iterable[LoopPlan]:
    """The instruction's plans in execution order, once every index is known to be inside its buffer.

    ``checks`` lists (name in messages, plan field, buffer depth), in the order faults are looked for.
    """
    plan = plans.whole(state, insn)
    if plan is not None:
        for name, field, depth in checks:
            check_bounds(index, insn, plan, name, getattr(plan, field), depth)
        return [plan]
    for name, field, depth in checks:
        if highest(state, insn, field) >= depth:
            for plan in plans.chunks(state, insn):
                check_bounds(index, insn, plan, name, getattr(plan, field), depth)
    return plans.chunks(state, insn)

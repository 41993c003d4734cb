"""The vector ALU, vectorised while keeping the reference's strict execution order.

Each micro-op execution k does ``acc[dst_k] = op(acc[dst_k], imm or acc[src_k])``
on every lane, and later executions see the results of earlier ones. The unit
picks the fastest exact strategy for an instruction (cached with its loop
plan):

- ``parallel``: destinations are distinct and no execution reads an element an
  earlier execution of the same instruction wrote, so all executions can read
  first and write after.
- ``reduce``: several executions fold into the same destination with a
  commutative, associative op (MIN, MAX, ADD, MUL on tensors; MIN, MAX, ADD
  with an immediate) and no source is written by the instruction: each
  destination takes one reduction over its sources.
- ``waves``: anything else runs in dependency waves: an execution goes in the
  first wave after every earlier execution it depends on (read after write,
  write after write) and not before any earlier reader of what it writes; each
  wave is parallel.

A chunked instruction (see loops.py) runs its chunks in execution order, each
with its own strategy: every chunk sees the results of the ones before.

Arithmetic is done in int64 on sign-extended lanes and wrapped to ACC_WIDTH.
SHR by y >= 0 is an arithmetic right shift, by y < 0 a left shift by -y; the
shift count is taken modulo 32, as the x86 build of the reference does.
"""

from __future__ import annotations

import numpy as np

from vtasim.core.bounds import check_uop_range, checked_plans
from vtasim.core.faults import fault
from vtasim.core.loops import LoopPlan, PlanCache
from vtasim.core.state import MachineState
from vtasm import isa
from vtasm.encoding import Instruction

MIN, MAX, ADD, SHR, MUL = (isa.ALU_OPS[n] for n in ("min", "max", "add", "shr", "mul"))


# The ALU operations of two operands as numpy ufuncs (SHR, whose operand's sign picks the direction, apart).
TENSOR_UFUNCS = {MIN: np.minimum, MAX: np.maximum, ADD: np.add, MUL: np.multiply}


# SHR shifts an int32 lane right (arithmetic) by a non-negative amount, left by a negative one, by the
# amount's low 5 bits (the reference's x86 build); the compiled loop takes the mask as -DVTA_SHIFT_MASK
SHIFT_MASK = 31


def shift_amounts(shift):
    """(right, left): the distances SHR by ``shift`` (an int or an array) moves a lane right when ``shift``
    >= 0 and left otherwise."""
    return shift & SHIFT_MASK, -shift & SHIFT_MASK


def apply_op(op: int, a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """One ALU operation on int64 lanes (result not yet wrapped)."""
    ufunc = TENSOR_UFUNCS.get(op)
    if ufunc is not None:
        return ufunc(a, b)
    shift = np.asarray(b, dtype=np.int64)
    right, left = shift_amounts(shift)
    return np.where(shift >= 0, np.right_shift(a, right), np.left_shift(a, left))


def alu_strategy(plan: LoopPlan, op: int, use_imm: bool) -> str:
    """How the plan's executions can run and stay exact: "parallel" (all at once), "reduce" (folded per
    destination) or "waves" (in hazard-free groups); kept on the plan."""
    key = ("alu", op, use_imm)
    found = plan.extra.get(key)
    if found is not None:
        return found
    dst, src = plan.dst, plan.src
    k = np.arange(dst.size)
    d_sorted = np.sort(dst)
    unique = bool(d_sorted.size == 0 or (d_sorted[1:] != d_sorted[:-1]).all())
    if unique:
        if use_imm:
            strategy = "parallel"
        else:
            writer = np.full(int(max(dst.max(), src.max())) + 1, dst.size, dtype=np.int64)
            writer[dst] = k
            strategy = "parallel" if not (writer[src] < k).any() else "waves"
    else:
        foldable = op in (MIN, MAX, ADD) or (op == MUL and not use_imm)
        if foldable and (use_imm or not np.isin(src, dst).any()):
            strategy = "reduce"
        else:
            strategy = "waves"
    plan.extra[key] = strategy
    return strategy


def carry_facts(template: LoopPlan, plan: LoopPlan, by_dst: int, by_src: int, op: int) -> None:
    """Give ``plan``, the template's kernel with dst moved by ``by_dst`` and src by ``by_src``
    (loops.moved), what the template's facts tell about it.

    Moved together, dst and src keep every hazard: the strategy, waves and
    grouping carry over. Moved apart, the caller has checked that no src
    reaches a dst: no execution reads what another writes, so a tensor
    operation runs all at once when its destinations are distinct, or folds
    per destination when it can; the grouping by destination carries over.
    """
    for key, value in template.extra.items():
        if by_dst == by_src and isinstance(key, tuple) and key[0] in ("alu", "waves"):
            plan.extra[key] = value
        elif key == "by_dst":
            order, starts, dsts, counts = value
            plan.extra[key] = (order, starts, dsts + by_dst, counts)
            plan.lanes += order.size + starts.size + dsts.size + counts.size  # counted with every plan holding them
    if by_dst != by_src:
        d_sorted = np.sort(template.dst)  # whether destinations repeat does not change when they move
        if not (d_sorted[1:] == d_sorted[:-1]).any():
            plan.extra[("alu", op, False)] = "parallel"
        elif op in (MIN, MAX, ADD, MUL):
            plan.extra[("alu", op, False)] = "reduce"


def _waves(plan: LoopPlan, use_imm: bool) -> list[np.ndarray]:
    cached = plan.extra.get(("waves", use_imm))
    if cached is not None:
        return cached
    last_write: dict[int, int] = {}
    last_read: dict[int, int] = {}
    levels = np.empty(plan.dst.size, dtype=np.int64)
    for k, (d, s) in enumerate(zip(plan.dst.tolist(), plan.src.tolist(), strict=True)):
        level = max(last_write.get(d, -1) + 1, last_read.get(d, 0))
        if not use_imm:
            level = max(level, last_write.get(s, -1) + 1)
            last_read[s] = max(last_read.get(s, 0), level)
        last_read[d] = max(last_read.get(d, 0), level)
        last_write[d] = level
        levels[k] = level
    order = np.argsort(levels, kind="stable")
    bounds = np.flatnonzero(np.r_[True, np.diff(levels[order]) != 0, True])
    waves = [order[bounds[i] : bounds[i + 1]] for i in range(bounds.size - 1)]
    plan.extra[("waves", use_imm)] = waves
    return waves


def _reduce(state: MachineState, plan: LoopPlan, op: int, use_imm: bool, imm: int) -> None:
    acc = state.acc
    order = plan.extra.get("by_dst")
    if order is None:
        order = np.argsort(plan.dst, kind="stable")
        d2 = plan.dst[order]
        starts = np.flatnonzero(np.r_[True, d2[1:] != d2[:-1]])
        counts = np.diff(np.r_[starts, d2.size])
        plan.extra["by_dst"] = order = (order, starts, d2[starts], counts)
    order, starts, dsts, counts = order
    old = acc[dsts].astype(np.int64)
    if use_imm:
        if op == ADD:
            new = old + counts[:, None, None] * imm
        else:
            new = apply_op(op, old, imm)
    else:
        vals = acc[plan.src[order]].astype(np.int64)
        ufunc = TENSOR_UFUNCS[op]
        if op == MUL:  # keep products bounded: wrap each partial product to the lane width
            vals = vals.astype(acc.dtype)
            folded = np.multiply.reduceat(vals, starts, axis=0).astype(np.int64)
        else:
            folded = ufunc.reduceat(vals, starts, axis=0)
        new = apply_op(op, old, folded)
    acc[dsts] = new.astype(acc.dtype)


def run_alu(state: MachineState, index: int, insn: Instruction, plans: PlanCache) -> int:
    """Execute an ALU instruction; returns the micro-op executions it counts."""
    cfg = state.cfg
    op = insn["alu_opcode"]
    if op not in isa.ALU_OP_NAMES:
        raise fault(index, insn, f"unknown ALU opcode {op}")
    n = isa.counted_executions(insn)
    if n <= 0:
        return n
    check_uop_range(state, index, insn)
    use_imm = bool(insn["use_imm"])
    checks = [("acc dst", "dst", cfg.acc_depth)] + ([] if use_imm else [("acc src", "src", cfg.acc_depth)])
    for plan in checked_plans(state, index, insn, plans, checks):
        run_plan(state, plan, op, use_imm, insn["imm"])
    return n


def run_plan(state: MachineState, plan: LoopPlan, op: int, use_imm: bool, imm: int) -> None:
    """The plan's executions, in order."""
    acc = state.acc
    strategy = alu_strategy(plan, op, use_imm)
    if strategy == "reduce":
        _reduce(state, plan, op, use_imm, imm)
        return
    waves = [slice(None)] if strategy == "parallel" else _waves(plan, use_imm)
    for sel in waves:
        dst = plan.dst[sel]
        b = imm if use_imm else acc[plan.src[sel]].astype(np.int64)
        acc[dst] = apply_op(op, acc[dst].astype(np.int64), b).astype(acc.dtype)

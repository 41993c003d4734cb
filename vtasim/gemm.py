"""The GEMM core, vectorised over whole instructions.

For every micro-op execution k, ``acc[dst_k] += inp[src_k] @ wgt[wgt_k]^T``
with wrapping ACC_WIDTH arithmetic. GEMM sources are never written by the
instruction and wrapping addition is associative, so the order of executions
does not matter and the instruction becomes three array steps:

1. products: executions are grouped by weight tile, and each group is one real
   matrix product ``inp rows (n*BATCH x BLOCK_IN) @ W^T`` (batched into a single
   ``matmul`` call when all groups have the same size). Floating point is exact
   here: one product sum is at most BLOCK_IN * 2^(INP+WGT-2), far below 2^24
   (float32) for 8-bit data; wider data uses float64 (exact below 2^53).
2. reduction: products landing on the same accumulator element are summed in
   int64 (sorted by destination, ``add.reduceat``).
3. update: ``acc = wrap(acc + sum)``.

The grouping and sorting depend only on the micro-ops and loop fields, so they
are cached in the loop plan and reused by every instruction with that kernel.
"""

from __future__ import annotations

import numpy as np

from vtasm.encoding import Instruction

from .faults import fault
from .loops import LoopPlan, PlanCache
from .state import MachineState


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
    """Fault naming the first execution whose index leaves its buffer."""
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


def _im2col_layout(plan: LoopPlan) -> dict | None:
    """The (destination x tap) grid of a convolution-shaped instruction, if it has one.

    When every destination receives the same number T of products and the
    weight tiles of those products come in the same sequence for every
    destination, the whole instruction is one matrix product
    ``[D*BATCH, T*BLOCK_IN] @ [T*BLOCK_IN, BLOCK_OUT]`` (im2col).
    """
    order = np.argsort(plan.dst, kind="stable")
    d_sorted = plan.dst[order]
    starts = np.flatnonzero(np.r_[True, d_sorted[1:] != d_sorted[:-1]])
    taps = d_sorted.size // starts.size
    if taps < 2 or starts.size * taps != d_sorted.size or (np.diff(starts) != taps).any():
        return None
    w_grid = plan.wgt[order].reshape(starts.size, taps)
    if (w_grid != w_grid[0]).any():
        return None
    return {
        "kind": "im2col",
        "src": plan.src[order].reshape(starts.size, taps),
        "weights": w_grid[0],
        "dst": d_sorted[starts],
        "taps": taps,
    }


def _gemm_layout(plan: LoopPlan) -> dict:
    """Grouping by weight tile and by destination, computed once per plan."""
    cached = plan.extra.get("gemm")
    if cached is not None:
        return cached
    im2col = _im2col_layout(plan)
    if im2col is not None:
        plan.extra["gemm"] = im2col
        return im2col
    order = np.argsort(plan.wgt, kind="stable")
    w_sorted = plan.wgt[order]
    starts = np.flatnonzero(np.r_[True, w_sorted[1:] != w_sorted[:-1]])
    counts = np.diff(np.r_[starts, w_sorted.size])
    src_sorted = plan.src[order]
    dst_sorted = plan.dst[order]
    by_dst = np.argsort(dst_sorted, kind="stable")
    d2 = dst_sorted[by_dst]
    d_starts = np.flatnonzero(np.r_[True, d2[1:] != d2[:-1]])
    layout = {
        "kind": "grouped",
        "src": src_sorted,
        "weights": w_sorted[starts],
        "starts": starts,
        "equal": bool(counts.size and (counts == counts[0]).all()),
        "group": int(counts[0]) if counts.size else 0,
        "unique_dst": d_starts.size == d2.size,
        "dst": dst_sorted,
        "by_dst": by_dst,
        "dst_starts": d_starts,
        "dst_unique_values": d2[d_starts],
    }
    plan.extra["gemm"] = layout
    return layout


def _exact_float(cfg, terms: int) -> type:
    """float32 when sums of ``terms`` BLOCK_IN-long dot products stay below 2^24, else float64."""
    return np.float32 if _product_bound(cfg, terms) < (1 << 24) else np.float64


def _add_to_acc(state: MachineState, dst: np.ndarray, prod: np.ndarray, bound: int) -> None:
    """acc[dst] += prod (distinct dst), wrapping at ACC_WIDTH; ``bound`` limits |prod|."""
    acc = state.acc
    if acc.dtype.itemsize == 4 and bound < (1 << 31):
        acc[dst] += prod.astype(np.int32)  # int32 arithmetic wraps like the hardware
    else:
        acc[dst] = (acc[dst].astype(np.int64) + prod.astype(np.int64)).astype(acc.dtype)


def _product_bound(cfg, terms: int) -> int:
    return terms * cfg.block_in << (cfg.inp_width + cfg.wgt_width - 2)


def _run_im2col(state: MachineState, plan: LoopPlan, lay: dict) -> None:
    cfg = state.cfg
    bound = _product_bound(cfg, lay["taps"])
    ftype = np.float32 if bound < (1 << 24) else np.float64
    d, taps = lay["src"].shape
    x = np.take(state.inp, lay["src"], axis=0).astype(ftype)  # (D, T, B, BI)
    x = x.transpose(0, 2, 1, 3).reshape(d * cfg.batch, taps * cfg.block_in)
    cached = plan.extra.get("im2col_w")  # the weight matrix, valid until weights are reloaded
    if cached is not None and cached[0] == state.wgt_generation:
        w = cached[1]
    else:
        w = np.take(state.wgt, lay["weights"], axis=0).astype(ftype)  # (T, BO, BI)
        w = np.ascontiguousarray(w.transpose(0, 2, 1).reshape(taps * cfg.block_in, cfg.block_out))
        plan.extra["im2col_w"] = (state.wgt_generation, w)
    prod = (x @ w).reshape(d, cfg.batch, cfg.block_out)
    _add_to_acc(state, lay["dst"], prod, bound)


def run_gemm(state: MachineState, index: int, insn: Instruction, plans: PlanCache) -> int:
    """Execute a GEMM instruction; returns its micro-op executions (resets included)."""
    cfg = state.cfg
    n = insn["iter_out"] * insn["iter_in"] * (insn["uop_end"] - insn["uop_bgn"])
    if n <= 0:
        return n
    check_uop_range(state, index, insn)
    plan = plans.plan(state, insn)
    check_bounds(index, insn, plan, "acc", plan.dst, cfg.acc_depth)
    if insn["reset"]:
        state.acc[plan.dst] = 0
        return n
    check_bounds(index, insn, plan, "inp", plan.src, cfg.inp_depth)
    check_bounds(index, insn, plan, "wgt", plan.wgt, cfg.wgt_depth)
    lay = _gemm_layout(plan)
    if lay["kind"] == "im2col":
        _run_im2col(state, plan, lay)
        return n
    ftype = _exact_float(cfg, 1)
    x = np.take(state.inp, lay["src"], axis=0).astype(ftype)  # (K, B, BI) in weight-group order
    w = np.take(state.wgt, lay["weights"], axis=0).astype(ftype)  # (G, BO, BI)
    groups = lay["weights"].size
    if lay["equal"]:
        size = lay["group"]
        prod = np.matmul(x.reshape(groups, size * cfg.batch, cfg.block_in), w.transpose(0, 2, 1))
    else:
        prod = np.empty((x.shape[0] * cfg.batch, cfg.block_out), dtype=ftype)
        bounds = np.r_[lay["starts"], x.shape[0]]
        for g in range(groups):
            lo, hi = bounds[g], bounds[g + 1]
            prod[lo * cfg.batch : hi * cfg.batch] = x[lo:hi].reshape(-1, cfg.block_in) @ w[g].T
    prod = prod.reshape(-1, cfg.batch, cfg.block_out)
    if lay["unique_dst"]:
        _add_to_acc(state, lay["dst"], prod, _product_bound(cfg, 1))
    else:
        sums = np.add.reduceat(np.take(prod.astype(np.int64), lay["by_dst"], axis=0), lay["dst_starts"], axis=0)
        _add_to_acc(state, lay["dst_unique_values"], sums, 1 << 62)
    return n

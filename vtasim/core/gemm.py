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
A chunked instruction (loops.py) takes these steps chunk by chunk; since the
order of executions does not matter, the result is the same.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from vtasim.core.bounds import check_uop_range, checked_plans
from vtasim.core.loops import LoopPlan, PlanCache
from vtasim.core.state import MachineState
from vtasim.core.views import strided
from vtasm import isa
from vtasm.encoding import Instruction

MAX_IM2COL_CLASSES = 64  # weight-sequence classes handled as im2col products; more fall back to grouping
MAX_IM2COL_WEIGHT_LANES = 1 << 22  # the classes' weight matrices together; larger ones are grouped
ROW_HASH_TAPS = 1 << 14  # the longest weight sequence the row hash covers


@lru_cache(maxsize=1)
def _row_hash() -> np.ndarray:
    """Pseudo-random multipliers in [1, 2^62): a row's wrapping dot product with them is its hash.

    The splitmix64 sequence, computed with numpy (numpy.random alone takes 10 ms to import);
    rows of equal hash are compared exactly afterwards, so the hash only has to spread them.
    """
    z = np.arange(1, ROW_HASH_TAPS + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return ((z >> np.uint64(2)) | np.uint64(1)).astype(np.int64)


def distinct_rows(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first row of each distinct row of an int64 matrix (their positions) and each row's number among
    them: rows hashed, then checked exactly (np.unique(axis=0) sorts rows as bytes, several times slower,
    and runs only when two different rows share a hash)."""
    keys = values @ _row_hash()[: values.shape[1]]
    _, first, which = np.unique(keys, return_index=True, return_inverse=True)
    which = which.reshape(-1)
    if (values[first][which] != values).any():
        _, first, which = np.unique(values, axis=0, return_index=True, return_inverse=True)
        which = which.reshape(-1)
    return first, which


def _im2col_structure(plan: LoopPlan, tile_lanes: int) -> dict | None:
    """How an instruction's executions form (destination x tap) grids, or None if they do not.

    When every destination receives the same number T of products, and the
    destinations fall into a few classes whose weight tiles come in the same
    sequence (one class per output-channel block of a tile), each class is one
    matrix product ``[D*BATCH, T*BLOCK_IN] @ [T*BLOCK_IN, BLOCK_OUT]`` (im2col);
    classes of equal size run as one batched product. The structure depends
    only on the kernel's shape, not on its buffer offsets, so it is shared by
    every instruction with the same shape. The classes' weight matrices hold
    ``classes * T`` tiles of ``tile_lanes``; beyond MAX_IM2COL_WEIGHT_LANES
    (many taps on few destinations) grouping by weight tile is leaner.
    """
    order = np.argsort(plan.dst, kind="stable")
    d_sorted = plan.dst[order]
    starts = np.flatnonzero(np.r_[True, d_sorted[1:] != d_sorted[:-1]])
    taps = d_sorted.size // starts.size
    if taps < 2 or starts.size * taps != d_sorted.size or (np.diff(starts) != taps).any():
        return None
    w_grid = plan.wgt[order].reshape(starts.size, taps)
    if (w_grid == w_grid[0]).all():
        classes = np.zeros(starts.size, dtype=np.int64)
        first = np.zeros(1, dtype=np.int64)
    else:
        if taps > ROW_HASH_TAPS:
            return None
        first, classes = distinct_rows(w_grid)  # classes of equal rows
        if len(first) > MAX_IM2COL_CLASSES:
            return None
    if len(first) * taps * tile_lanes > MAX_IM2COL_WEIGHT_LANES:
        return None
    groups = [np.flatnonzero(classes.reshape(-1) == k) for k in range(len(first))]
    by_place = sorted(range(len(groups)), key=lambda k: int(groups[k][0]))  # classes in accumulator order
    groups, first = [groups[k] for k in by_place], first[by_place]
    return {"order": order, "taps": taps, "first": first, "groups": groups,
            "equal": len({g.size for g in groups}) == 1}


def _im2col_layout(plan: LoopPlan, tile_lanes: int) -> dict | None:
    """The im2col grids of one instruction: its indices arranged by the shared structure."""
    shapes = plan.shapes
    if plan.shape not in shapes:
        shapes[plan.shape] = _im2col_structure(plan, tile_lanes)
    st = shapes[plan.shape]
    if st is None:
        return None
    taps = st["taps"]
    order = st["order"]
    src_grid = plan.src[order].reshape(-1, taps)
    dsts = plan.dst[order][::taps]
    groups = st["groups"]
    return {
        "kind": "im2col",
        "taps": taps,
        "weights": plan.wgt[order].reshape(-1, taps)[st["first"]],  # (K, T): each class's weight sequence
        "src": [src_grid[g] for g in groups],  # per class (D_k, T)
        "dst": [as_range(dsts[g]) for g in groups],
        "stacked_src": np.stack([src_grid[g] for g in groups]) if st["equal"] else None,
        "stacked_dst": as_range(np.concatenate([dsts[g] for g in groups])),
        "shared_src": _shared_grid([src_grid[g] for g in groups]) if st["equal"] and len(groups) > 1 else None,
        "blocks": _blocks([dsts[g] for g in groups]) if st["equal"] else None,
    }


def _blocks(dsts: list[np.ndarray]) -> tuple[int, int] | None:
    """(first, step) when class k's destinations are the consecutive rows first + k*step + [0, D), else None."""
    d = dsts[0].size
    first = int(dsts[0][0])
    step = int(dsts[1][0]) - first if len(dsts) > 1 else d
    if step < d:
        return None
    for k, rows in enumerate(dsts):
        start = first + k * step
        if int(rows[0]) != start or int(rows[-1]) != start + d - 1 or (d > 1 and (np.diff(rows) != 1).any()):
            return None
    return first, step


def _shared_grid(grids: list[np.ndarray]) -> np.ndarray | None:
    """The one input grid every class reads (a convolution's output-channel blocks read the same patches)."""
    first = grids[0]
    return first if all(np.array_equal(first, g) for g in grids[1:]) else None


def carry_layout(template: LoopPlan, plan: LoopPlan, dst: int, src: int, wgt: int) -> None:
    """Give ``plan``, the template's kernel moved by (dst, src, wgt) (loops.moved), the template's
    grouping moved with it: the grouping depends only on where indices sit relative to each other."""
    lay = template.extra.get("gemm")
    if lay is None:
        return
    if lay["kind"] == "im2col":
        shared = lay["shared_src"] is not None
        plan.extra["gemm"] = moved_lay = {
            "kind": "im2col",
            "taps": lay["taps"],
            "weights": lay["weights"] + wgt,
            "src": None if shared else [grid + src for grid in lay["src"]],  # with shared patches only they are read
            "dst": [_moved(d, dst) for d in lay["dst"]],
            "stacked_src": None if lay["stacked_src"] is None or shared else lay["stacked_src"] + src,
            "stacked_dst": _moved(lay["stacked_dst"], dst),
            "shared_src": None if lay["shared_src"] is None else lay["shared_src"] + src,
            "blocks": None if lay["blocks"] is None else (lay["blocks"][0] + dst, lay["blocks"][1]),
        }
        plan.lanes += _lanes(moved_lay)
        return
    plan.extra["gemm"] = moved_lay = dict(lay, src=lay["src"] + src, weights=lay["weights"] + wgt,
                                          dst=_moved(lay["dst"], dst), dst_unique_values=lay["dst_unique_values"] + dst)
    plan.lanes += _lanes(moved_lay)


def _lanes(lay: dict) -> int:
    """The 8-byte values a layout's arrays hold (arrays shared with its template counted too: an upper bound)."""
    total = 0
    for value in lay.values():
        for a in value if isinstance(value, list) else (value,):
            if isinstance(a, np.ndarray):
                total += a.size
    return total


def _moved(index: np.ndarray | slice, by: int) -> np.ndarray | slice:
    return slice(index.start + by, index.stop + by) if isinstance(index, slice) else index + by


def as_range(index: np.ndarray) -> np.ndarray | slice:
    """A slice when the indices are consecutive and ascending (a slice updates in place, without gathering)."""
    if index.size and int(index[-1]) - int(index[0]) == index.size - 1 and (np.diff(index) == 1).all():
        return slice(int(index[0]), int(index[-1]) + 1)
    return index


def _gemm_layout(plan: LoopPlan, tile_lanes: int) -> dict:
    """Grouping by weight tile and by destination, computed once per plan."""
    cached = plan.extra.get("gemm")
    if cached is not None:
        return cached
    im2col = _im2col_layout(plan, tile_lanes)
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
        "dst": as_range(dst_sorted) if d_starts.size == d2.size else dst_sorted,
        "by_dst": by_dst,
        "dst_starts": d_starts,
        "dst_unique_values": d2[d_starts],
    }
    plan.extra["gemm"] = layout
    return layout


def exact_float(cfg, terms: int) -> type:
    """float32 when sums of ``terms`` BLOCK_IN-long dot products stay below 2^24, else float64."""
    return np.float32 if product_bound(cfg, terms) < (1 << 24) else np.float64


def _add_to_acc(state: MachineState, dst: np.ndarray, prod: np.ndarray, bound: int) -> None:
    """acc[dst] += prod (distinct dst), wrapping at ACC_WIDTH; ``bound`` limits |prod|."""
    acc = state.acc
    if acc.dtype.itemsize == 4 and bound < (1 << 31):
        acc[dst] += prod.astype(np.int32)  # int32 arithmetic wraps like the hardware
    else:
        acc[dst] = (acc[dst].astype(np.int64) + prod.astype(np.int64)).astype(acc.dtype)


def product_bound(cfg, terms: int) -> int:
    """The largest magnitude a sum of ``terms`` BLOCK_IN-long dot products of int inputs and weights reaches."""
    return terms * cfg.block_in << (cfg.inp_width + cfg.wgt_width - 2)


def _im2col_weights(state: MachineState, plan: LoopPlan, lay: dict, ftype: type) -> np.ndarray:
    """The classes' weight matrices (K, T*BLOCK_IN, BLOCK_OUT), cached until weights are reloaded."""
    cached = plan.extra.get("im2col_w")
    if cached is not None and cached[0] == state.wgt_generation:
        return cached[1]
    cfg = state.cfg
    k, taps = lay["weights"].shape
    w = np.take(state.wgt, lay["weights"], axis=0).astype(ftype)  # (K, T, BO, BI)
    w = np.ascontiguousarray(w.transpose(0, 1, 3, 2).reshape(k, taps * cfg.block_in, cfg.block_out))
    if cached is None:
        plan.lanes += w.size
    plan.extra["im2col_w"] = (state.wgt_generation, w)
    return w


def _run_im2col(state: MachineState, plan: LoopPlan, lay: dict) -> None:
    cfg = state.cfg
    bound = product_bound(cfg, lay["taps"])
    ftype = np.float32 if bound < (1 << 24) else np.float64
    if lay["shared_src"] is not None:
        _run_shared_im2col(state, plan, lay, ftype, bound)
        return
    taps = lay["taps"]
    w = _im2col_weights(state, plan, lay, ftype)
    rows = cfg.batch
    if lay["stacked_src"] is not None:
        k, d, _ = lay["stacked_src"].shape
        cached = plan.extra.get("im2col_x")
        if cached is not None and cached[0] == state.inp_generation:
            x = cached[1]  # the same inputs gathered for this kernel already: reuse them
        else:
            x = np.take(state.inp_as(ftype), lay["stacked_src"], axis=0)  # (K, D, T, B, BI)
            x = x.transpose(0, 1, 3, 2, 4).reshape(k, d * rows, taps * cfg.block_in)
            if cached is None:
                plan.lanes += x.size * x.itemsize // 8
            plan.extra["im2col_x"] = (state.inp_generation, x)
        prod = np.matmul(x, w).reshape(k * d, rows, cfg.block_out)
        _add_to_acc(state, lay["stacked_dst"], prod, bound)
        return
    for cls, (src, dst) in enumerate(zip(lay["src"], lay["dst"], strict=True)):
        x = np.take(state.inp_as(ftype), src, axis=0)  # (D, T, B, BI)
        x = x.transpose(0, 2, 1, 3).reshape(src.shape[0] * rows, taps * cfg.block_in)
        prod = (x @ w[cls]).reshape(src.shape[0], rows, cfg.block_out)
        _add_to_acc(state, dst, prod, bound)


def _wide_weights(state: MachineState, plan: LoopPlan, lay: dict, ftype: type) -> np.ndarray:
    """Every class's weight matrix side by side, ``[T*BLOCK_IN, K*BLOCK_OUT]``: column block k holds
    class k's taps stacked (W_t^T), built in one gather and cached until weights are reloaded."""
    cached = plan.extra.get("im2col_w_wide")
    if cached is not None and cached[0] == state.wgt_generation:
        return cached[1]
    cfg = state.cfg
    k, taps = lay["weights"].shape
    w = np.take(state.wgt, lay["weights"].T, axis=0)  # (T, K, BO, BI)
    wide = np.ascontiguousarray(w.transpose(0, 3, 1, 2), dtype=ftype).reshape(taps * cfg.block_in, k * cfg.block_out)
    if cached is None:
        plan.lanes += wide.size
    plan.extra["im2col_w_wide"] = (state.wgt_generation, wide)
    return wide


def _run_shared_im2col(state: MachineState, plan: LoopPlan, lay: dict, ftype: type, bound: int) -> None:
    """All classes reading the same patches: gather them once, one product against every class's weights side by
    side ``[D*BATCH, T*BLOCK_IN] @ [T*BLOCK_IN, K*BLOCK_OUT]``, inputs and wide weights kept while unchanged."""
    cfg = state.cfg
    wide = _wide_weights(state, plan, lay, ftype)
    grid = lay["shared_src"]
    d, taps = grid.shape
    k = wide.shape[1] // cfg.block_out
    # the gathered patches are kept only for a kernel seen to run twice on the same inputs: most run once per
    # input load, and keeping them would only hold memory
    gen = state.inp_generation
    cached = plan.extra.get("im2col_x1")
    if cached is not None and cached[0] == gen and cached[1] is not None:
        x = cached[1]
    else:
        x = np.take(state.inp, grid, axis=0)  # (D, T, B, BI) in the buffer's integers: a quarter of the bytes
        x = x.transpose(0, 2, 1, 3).reshape(d * cfg.batch, taps * cfg.block_in).astype(ftype)
        keep = cached is not None and (cached[0] == gen or cached[1] is not None)
        if keep and cached[1] is None:
            plan.lanes += x.size * x.itemsize // 8
        plan.extra["im2col_x1"] = (gen, x if keep else None)
    prod = (x @ wide).reshape(d, cfg.batch, k, cfg.block_out)
    view = _acc_blocks(state, plan, lay, bound, k, d)
    if view is not None:
        ints = np.empty(view.shape, dtype=np.int32)
        np.copyto(ints, prod.transpose(2, 0, 1, 3), casting="unsafe")  # converted into the accumulator's order
        view += ints  # int32 arithmetic wraps like the hardware
        return
    _add_to_acc(state, lay["stacked_dst"], prod.transpose(2, 0, 1, 3).reshape(k * d, cfg.batch, cfg.block_out),
                bound)


def _acc_blocks(state: MachineState, plan: LoopPlan, lay: dict, bound: int, k: int, d: int) -> np.ndarray | None:
    """The classes' accumulator rows as one (K, D, BATCH, BLOCK_OUT) view, when they lie in equally spaced
    blocks and int32 wrapping applies; kept with the plan (the buffer stays put)."""
    view = plan.extra.get("im2col_acc")
    if view is not None:
        return view
    acc = state.acc
    if lay["blocks"] is None or acc.dtype.itemsize != 4 or bound >= 1 << 31:
        return None
    first, step = lay["blocks"]
    view = strided(acc, first, (k, d), (step, 1))
    plan.extra["im2col_acc"] = view
    return view


def run_gemm(state: MachineState, index: int, insn: Instruction, plans: PlanCache) -> int:
    """Execute a GEMM instruction; returns its micro-op executions (resets included)."""
    cfg = state.cfg
    n = isa.counted_executions(insn)
    if n <= 0:
        return n
    check_uop_range(state, index, insn)
    checks = [("acc", "dst", cfg.acc_depth)]
    if not insn["reset"]:
        checks += [("inp", "src", cfg.inp_depth), ("wgt", "wgt", cfg.wgt_depth)]
    for plan in checked_plans(state, index, insn, plans, checks):
        if insn["reset"]:
            state.acc[plan.dst] = 0
        else:
            accumulate(state, plan)
    return n


def accumulate(state: MachineState, plan: LoopPlan) -> None:
    """acc[dst] += inp[src] @ wgt[wgt]^T for every execution of the plan."""
    cfg = state.cfg
    lay = _gemm_layout(plan, cfg.block_in * cfg.block_out)
    if lay["kind"] == "im2col":
        _run_im2col(state, plan, lay)
        return
    ftype = exact_float(cfg, 1)
    x = np.take(state.inp_as(ftype), lay["src"], axis=0)  # (K, B, BI) in weight-group order
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
        _add_to_acc(state, lay["dst"], prod, product_bound(cfg, 1))
    else:
        sums = np.add.reduceat(np.take(prod.astype(np.int64), lay["by_dst"], axis=0), lay["dst_starts"], axis=0)
        _add_to_acc(state, lay["dst_unique_values"], sums, 1 << 62)

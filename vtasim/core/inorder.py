"""Running a program that runs in program order, straight from its columns.

When order.in_order says the pipeline would run the program in program
order, nothing needs scheduling: this loop walks the stream once. Each
instruction's fields come from the decoded columns as one short list (no
Instruction objects), loads and stores of whole tiles are slices of DRAM and
of a buffer, and a GEMM or ALU instruction is prepared once per distinct
kernel (loop fields, micro-ops, operation): its indices are checked against
the buffers and, where the executions walk the accumulator with constant
steps, turned into strided views so the work is one numpy call. Whatever is
unusual (micro-op loads, ACC_8BIT loads, overlapping stores, indices out of
range, huge instructions run in chunks) goes through the units of
memory.py, gemm.py and alu.py with the instruction itself, exactly as the
pipeline would run it; faults are raised there.

The profiler's counters depend only on the instruction fields (counters.py).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable

import numpy as np

from vtasim.core.alu import SHR, TENSOR_UFUNCS, alu_strategy, carry_facts, run_alu, run_plan, shift_amounts
from vtasim.core.gemm import accumulate, carry_layout, distinct_rows, exact_float, product_bound, run_gemm
from vtasim.core.loops import CACHE_LANES, LoopPlan, PlanCache, moved
from vtasim.core.memory import dram_fits, run_load, run_store, sram_fits
from vtasim.core.native import CONTIGUOUS, LOAD_ROW, PADDED, ROWS, STORE_ROW, UNIT, native_run, operands
from vtasim.core.state import MachineState, int_dtype
from vtasim.core.views import rows, strided
from vtasm import isa
from vtasm.columns import StreamColumns
from vtasm.locate import executable
from vtasm.program import Program

LOAD, STORE, GEMM, ALU, FINISH = (isa.OPCODES[k] for k in ("load", "store", "gemm", "alu", "finish"))
UOP, WGT, INP, ACC, OUT, ACC8 = (isa.MEM_TYPES[n] for n in ("uop", "wgt", "inp", "acc", "out", "acc8"))


DMA_FIELDS = operands("load")
GemmKernel = namedtuple("GemmKernel", operands("gemm"))  # a GEMM's fields: what its kernel does
AluKernel = namedtuple("AluKernel", operands("alu"))
LoadRow = namedtuple("LoadRow", LOAD_ROW)  # a LOAD's DMA entry (_load_entries)
StoreRow = namedtuple("StoreRow", STORE_ROW)  # a STORE's (_store_entries)
KERNELS = {GEMM: GemmKernel, ALU: AluKernel}
TEMPLATE_LANES = CACHE_LANES // 2  # the part of the plan budget that the templates of moved kernels may hold


ROW_TYPES = {LOAD: LoadRow, STORE: StoreRow, GEMM: GemmKernel, ALU: AluKernel}  # each row kind after the opcode
_WIDTHS = {op: len(row._fields) for op, row in ROW_TYPES.items()}
TABLE_WIDTH = 1 + max(_WIDTHS.values())  # int64 values per instruction in _table: the opcode, then the row


def _table(cols: StreamColumns, dram_size: int) -> np.ndarray:
    """Every instruction as one row of int64: its opcode (-1 for the FINISH and anything else), then a
    LOAD's or STORE's DMA entry (_load_entries, _store_entries) or a GEMM's or ALU's kernel fields (in
    GemmKernel's or AluKernel's order). native_inorder.c reads this table as it is."""
    table = np.zeros((len(cols), TABLE_WIDTH), dtype=np.int64)
    table[:, 0] = -1
    for op in (LOAD, STORE, GEMM, ALU):
        index = np.flatnonzero(cols.opcode == op)
        if not index.size:
            continue
        kernel = KERNELS.get(op)
        values = np.stack([cols.column(name)[index] for name in (kernel._fields if kernel else DMA_FIELDS)], axis=1)
        if not kernel:
            values = (_load_entries if op == LOAD else _store_entries)(values, cols.cfg, dram_size)
        table[index, 0] = op
        table[index, 1 : 1 + values.shape[1]] = values
    return table


def _rows(table: np.ndarray) -> tuple[list, list]:
    """Per instruction: a LOAD's or STORE's DMA entry as Python ints; a GEMM's or ALU's kernel number, an
    index into the second list, which holds each distinct kernel once (a GemmKernel or AluKernel)."""
    rows: list = [None] * len(table)
    kernels: list = []
    ops = table[:, 0]
    for op in (LOAD, STORE, GEMM, ALU):
        index = np.flatnonzero(ops == op)
        if not index.size:
            continue
        values = table[index, 1 : 1 + _WIDTHS[op]]
        kernel = KERNELS.get(op)
        if kernel:
            first, which = distinct_rows(values)
            numbers = (which + len(kernels)).tolist()
            kernels += [kernel(*fields) for fields in values[first].tolist()]
        else:
            numbers = [ROW_TYPES[op](*v) for v in values.tolist()]
        for i, row in zip(index.tolist(), numbers, strict=True):
            rows[i] = row
    return rows, kernels


def _row(table: np.ndarray, i: int):
    """Instruction i's entry as _rows gives it, with its kernel itself in place of a kernel's number."""
    op = int(table[i, 0])
    values = table[i, 1 : 1 + _WIDTHS.get(op, 0)].tolist()
    return ROW_TYPES[op](*values) if op in ROW_TYPES else values


# what a DMA entry asks for: the unit (anything unusual; it faults as the pipeline would), one contiguous
# copy, rows copied between strided views, or a padded tile (zeroed, then its inner rows copied)


def _load_entries(v: np.ndarray, cfg, dram_size: int) -> np.ndarray:
    """Every LOAD as (how, memory type, buffer byte start, end, DRAM byte base, rows, row bytes, DRAM step,
    tile rows, tile row bytes, first padded row, first byte in a padded row), worked out for all at once."""
    f = dict(zip(DMA_FIELDS, v.T, strict=True))
    mtype, sram, ys, xs = f["memory_type"], f["sram_base"], f["y_size"], f["x_size"]
    yp0, xp0 = f["y_pad_0"], f["x_pad_0"]
    elem = np.zeros_like(mtype)
    depth = np.zeros_like(mtype)
    for t in (INP, WGT, ACC):  # the rest (micro-ops, ACC_8BIT, unknown types) go through the unit
        elem[mtype == t], depth[mtype == t] = isa.elem_bytes(cfg, t), isa.load_depth(cfg, t)
    ytot, xtot = yp0 + ys + f["y_pad_1"], xp0 + xs + f["x_pad_1"]
    end = sram + xtot * ytot
    base, row, step = f["dram_base"] * elem, xs * elem, f["x_stride"] * elem
    fits = (elem > 0) & (xs > 0) & sram_fits(sram, xtot * ytot, depth) & dram_fits(base, row, step, ys, dram_size)
    fits &= (ys <= 1) | (step >= row)  # rows that overlap in DRAM: the unit copies them
    padded = (ytot != ys) | (xtot != xs)
    how = np.where(padded, PADDED, np.where((ys <= 1) | (step == row), CONTIGUOUS, ROWS))
    how = np.where(fits, how, UNIT)
    entry = {"how": how, "mem_type": mtype, "start": sram * elem, "end": end * elem, "base": base, "rows": ys,
             "row_bytes": row, "step": step, "tile_rows": ytot, "tile_row_bytes": xtot * elem, "pad_row": yp0,
             "pad_byte": xp0 * elem}
    return np.stack([entry[name] for name in LOAD_ROW], axis=1)


def _store_entries(v: np.ndarray, cfg, dram_size: int) -> np.ndarray:
    """Every STORE as (how, accumulator row start, end, DRAM byte base, rows, row bytes, DRAM step)."""
    f = dict(zip(DMA_FIELDS, v.T, strict=True))
    sram, ys, xs = f["sram_base"], f["y_size"], f["x_size"]
    elem = cfg.out_elem_bytes
    end = sram + xs * ys
    base, row, step = f["dram_base"] * elem, xs * elem, f["x_stride"] * elem
    fits = (f["memory_type"] == OUT) & (xs > 0) & (ys > 0)
    fits &= (f["y_pad_0"] == 0) & (f["y_pad_1"] == 0) & (f["x_pad_0"] == 0) & (f["x_pad_1"] == 0)
    fits &= sram_fits(sram, xs * ys, cfg.acc_depth) & dram_fits(base, row, step, ys, dram_size)
    fits &= (ys == 1) | (step >= row)  # rows that overlap in DRAM: the unit writes them in order
    how = np.where(fits, np.where((ys == 1) | (step == row), CONTIGUOUS, ROWS), UNIT)
    entry = {"how": how, "start": sram, "end": end, "base": base, "rows": ys, "row_bytes": row, "step": step}
    return np.stack([entry[name] for name in STORE_ROW], axis=1)


def _affine_view(buf: np.ndarray, plan: LoopPlan, name: str, uops: np.ndarray,
                 f_out: int, f_in: int) -> np.ndarray | None:
    """The elements ``name`` indices of a plan walk, as one strided view of ``buf``, or None."""
    n_uops = plan.n_uops
    if n_uops > 1:
        steps = np.diff(uops)
        if (steps != steps[0]).any() or steps[0] < 0:
            return None
        step = int(steps[0])
    else:
        step = 0
    first = plan.first(name)
    return strided(buf, first, (plan.iter_out, plan.iter_in, n_uops), (f_out, f_in, step))


def _imm_op(op: int, imm: int) -> Callable[[np.ndarray], None] | None:
    """dst = op(dst, imm) in place on int32 lanes (wrapping as the hardware does), or None."""
    ufunc = TENSOR_UFUNCS.get(op)
    if ufunc is not None:
        return lambda d: ufunc(d, imm, out=d)
    right, left = shift_amounts(imm)
    if imm >= 0:
        return lambda d: np.right_shift(d, right, out=d)
    return lambda d: np.left_shift(d, left, out=d)


class InOrderRun:
    """One run of a machine's program in program order (see the module docstring)."""

    def __init__(self, program: Program, state: MachineState, plans: PlanCache, cols: StreamColumns):
        self.program = program
        self.plans = plans
        self.state = state
        self.cols = cols
        self.prepared: dict[tuple, Callable[[], None]] = {}  # by micro-op generation and fields: a quick key
        self.by_content: dict[tuple, Callable[[], None]] = {}  # by the kernel's micro-op words and fields
        self.templates: dict[tuple, tuple] = {}  # by the kernel without its place: (plan, place, index ranges)
        cfg = self.state.cfg
        s = self.state
        self.int32_acc = s.acc.dtype.itemsize == 4
        self.flat = {INP: s.inp_bytes.reshape(-1), WGT: s.wgt_bytes.reshape(-1), ACC: s.acc_bytes.reshape(-1)}
        self.acc_rows = s.acc.reshape(cfg.acc_depth, -1)  # one accumulator row per element, its lanes in order
        self.out_dtype = int_dtype(cfg.out_width)
        self.out_size = self.out_dtype.itemsize  # lanes stored are this many bytes each (OUT_WIDTH >= 8)
        self.dram_out = s.dram[: s.dram.size // self.out_size * self.out_size].view(self.out_dtype)
        self.held = 0  # plan lanes the prepared kernels keep alive, bounded by CACHE_LANES - TEMPLATE_LANES
        self.template_lanes = 0  # plan lanes the templates keep alive, bounded by TEMPLATE_LANES

    def insn(self, i: int):
        """The instruction itself, as the units take it (built only for what needs it)."""
        return executable(self.program.instructions[i])

    def run(self, native: bool = True) -> None:
        """Run to the FINISH (the last instruction): in the compiled loop where it can (native.py) unless
        ``native`` is False, the rest here."""
        ops = self.cols.opcode.tolist()
        table = _table(self.cols, self.state.dram.size)
        last = len(ops) - 1  # the last instruction is the FINISH
        fast = native_run(self.state, table) if native else None
        if fast is None:
            rows, kernels = _rows(table)
            for i in range(last):
                op = ops[i]
                self._one(i, op, rows[i], kernels[rows[i]] if op == ALU or op == GEMM else None)
            return
        i = fast.run(0, last)
        while i < last:  # the instruction the compiled loop left to Python, then the loop again
            row = _row(table, i)
            self._one(i, ops[i], row, row)  # a kernel is its own key
            i = fast.run(i + 1, last)

    def _one(self, i: int, op: int, row, kernel) -> None:
        """Instruction i: ``row`` its DMA entry, or (a GEMM or ALU) what identifies its kernel, ``kernel``."""
        if op == ALU or op == GEMM:
            key = (row, self.state.uop_generation)
            work = self.prepared.get(key)
            if work is None:
                work = self._prepare(i, op, kernel, key)
            work()
        elif op == LOAD:
            self._load(i, row)
        elif op == STORE:
            self._store(i, row)

    # -- DMA -------------------------------------------------------------------
    def _load(self, i: int, e: LoadRow) -> None:
        how, mtype, t0, t1, base, ys = e.how, e.mem_type, e.start, e.end, e.base, e.rows
        row, step, ytot, xrow, yp0, xp0 = e.row_bytes, e.step, e.tile_rows, e.tile_row_bytes, e.pad_row, e.pad_byte
        if how == UNIT:
            run_load(self.state, i, self.insn(i))
            return
        flat = self.flat[mtype]
        dram = self.state.dram
        if how == CONTIGUOUS:
            flat[t0:t1] = dram[base : base + t1 - t0]
        elif how == ROWS:
            flat[t0:t1].reshape(ys, row)[...] = rows(dram, base, ys, row, step)
        else:
            tile = flat[t0:t1]
            tile.fill(0)
            if ys:
                tile.reshape(ytot, xrow)[yp0 : yp0 + ys, xp0 : xp0 + row] = rows(dram, base, ys, row, step)
        if mtype == WGT:
            self.state.wgt_generation += 1
        elif mtype == INP:
            self.state.inp_generation += 1

    def _store(self, i: int, e: StoreRow) -> None:
        how, sram, end, base, ys, row, step = e.how, e.start, e.end, e.base, e.rows, e.row_bytes, e.step
        if how == UNIT:
            run_store(self.state, i, self.insn(i))
            return
        values = self.acc_rows[sram:end]
        size = self.out_size
        if how == CONTIGUOUS:
            np.copyto(self.dram_out[base // size : (base + row * ys) // size], values.reshape(-1), casting="unsafe")
        else:  # keeping the low OUT_WIDTH bits, as the unit's conversion does
            out = rows(self.state.dram, base, ys, row, step).view(self.out_dtype)
            np.copyto(out, values.reshape(ys, -1), casting="unsafe")

    # -- GEMM and ALU ------------------------------------------------------------
    def _prepare(self, i: int, op: int, r: tuple, key: tuple) -> Callable[[], None]:
        """What runs this kernel: prepared before under other micro-op loads that left its micro-ops
        as they were, or prepared now by running the instruction through its unit (checks and
        faults as in the pipeline) once.

        Returns what still has to run for this instruction; what runs the
        kernel from then on is kept under ``key`` when the instruction has one
        whole plan.
        """
        same = (op, self.state.uop_words[r.uop_bgn : r.uop_end].tobytes(), *r)
        found = self.by_content.get(same)
        if found is not None:
            self.prepared[key] = found
            return found
        placed = self._placement(op, r)
        work = self._moved_kernel(op, r, *placed) if placed is not None else None
        if work is not None:
            self.prepared[key] = self.by_content[same] = work
            return work
        work = self._prepare_now(i, op, r, placed)
        if work is not None:
            self.prepared[key] = self.by_content[same] = work
        return _nothing  # this execution already ran

    def _prepare_now(self, i: int, op: int, r: tuple,
                     placed: tuple[tuple, tuple[int, int, int]] | None) -> Callable[[], None] | None:
        """Run the instruction through its unit; return what runs its kernel from then on (None: not kept)."""
        state, plans = self.state, self.plans
        insn = self.insn(i)
        unit = run_gemm if op == GEMM else run_alu
        unit(state, i, insn, plans)
        if not isa.executions(r._asdict()):
            return _nothing
        if plans.chunked(state, insn):
            return None  # ran in chunks; not kept (each run of it goes through its unit)
        plan = plans.whole(state, insn)
        work = self._keep(plan, op, r)
        if placed is not None:
            reach = [(int(a.min()), int(a.max())) for a in (plan.dst, plan.src, plan.wgt if op == GEMM else plan.dst)]
            self.template_lanes += plan.lanes
            if self.template_lanes > TEMPLATE_LANES:
                self.templates.clear()
                self.template_lanes = plan.lanes
            self.templates[placed[0]] = (plan, placed[1], reach)
        return work

    def _keep(self, plan: LoopPlan, op: int, r: tuple) -> Callable[[], None]:
        """What runs a kernel from its plan, counted against the budget of prepared kernels (when it is
        spent they are all let go; the templates, under their own budget, stay to be moved again)."""
        work = self._gemm_work(plan, r) if op == GEMM else self._alu_work(plan, r)
        self.held += plan.lanes
        if self.held > CACHE_LANES - TEMPLATE_LANES:
            self.prepared.clear()
            self.by_content.clear()
            self.held = plan.lanes
        return work

    # -- kernels met before elsewhere in the buffers -----------------------------
    def _placement(self, op: int, r: tuple) -> tuple[tuple, tuple[int, int, int]] | None:
        """The kernel without its place (fields and micro-ops relative to the first one) and its place:
        the first execution's (dst, src, wgt)."""
        s = self.state
        b, e = r.uop_bgn, r.uop_end
        if not 0 <= b < e <= len(s.uop_dst):
            return None
        dst, src = s.uop_dst[b:e], s.uop_src[b:e]
        at = (int(dst[0]), int(src[0]), int(s.uop_wgt[b]) if op == GEMM else 0)
        shape = ((dst - at[0]).tobytes(), (src - at[1]).tobytes())
        kernel = (op, *r._replace(uop_bgn=0, uop_end=e - b))
        if op == GEMM:
            return (*kernel, *shape, (s.uop_wgt[b:e] - at[2]).tobytes()), at
        return (*kernel, *(shape[:1] if r.use_imm else shape)), at  # an immediate: src unread

    def _moved_kernel(self, op: int, r: tuple, shape: tuple, at: tuple[int, int, int]) -> Callable[[], None] | None:
        """What runs a kernel that was prepared before at another place, moved here, without planning it
        again; None when there is none or when its indices would leave a buffer (the unit reports that)."""
        found = self.templates.get(shape)
        if found is None:
            return None
        template, there, reach = found
        by = (at[0] - there[0], at[1] - there[1], at[2] - there[2])
        cfg = self.state.cfg
        if op == GEMM:
            depths = (cfg.acc_depth,) if r.reset else (cfg.acc_depth, cfg.inp_depth, cfg.wgt_depth)
        else:
            depths = (cfg.acc_depth,) if r.use_imm else (cfg.acc_depth, cfg.acc_depth)
        for (lo, hi), move, depth in zip(reach, by, depths, strict=False):
            if lo + move < 0 or hi + move >= depth:
                return None
        if op == ALU and not r.use_imm and by[0] != by[1]:
            (dlo, dhi), (slo, shi) = reach[0], reach[1]
            if dlo + by[0] <= shi + by[1] and slo + by[1] <= dhi + by[0]:
                return None  # src moved against dst onto it: the hazards are new, the unit finds them
        plan = moved(template, *by)
        if op == GEMM:
            carry_layout(template, plan, *by)
        else:
            carry_facts(template, plan, by[0], by[1] if not r.use_imm else by[0], r.alu_opcode)
        return self._keep(plan, op, r)

    def _gemm_work(self, plan: LoopPlan, r: tuple) -> Callable[[], None]:
        state = self.state
        if r.reset:
            view = _affine_view(state.acc, plan, "dst", state.uop_dst[r.uop_bgn : r.uop_end], r.dst_factor_out,
                                r.dst_factor_in)
            if view is not None:
                return lambda: view.fill(0)
            dst = plan.dst
            return lambda: state.acc.__setitem__(dst, 0)
        return self._gemm_one_weight(plan, r) or (lambda: accumulate(state, plan))

    def _gemm_one_weight(self, plan: LoopPlan, r: tuple) -> Callable[[], None] | None:
        """acc[dst] += inp[src] @ W^T as one product of strided views, when every execution uses the
        same weight tile and walks inp and acc with constant steps to distinct accumulators."""
        state = self.state
        cfg = state.cfg
        bound = product_bound(cfg, 1)
        pattern = plan.unmoved()  # the same weights and repeats as the plan's own indices
        if not self.int32_acc or bound >= 1 << 31 or pattern.wgt.size == 0 or (pattern.wgt != pattern.wgt[0]).any():
            return None
        d_sorted = np.sort(pattern.dst)  # distinct destinations (np.unique would import numpy.ma: 10 ms)
        if (d_sorted[1:] == d_sorted[:-1]).any():
            return None
        dst = _affine_view(state.acc, plan, "dst", state.uop_dst[r.uop_bgn : r.uop_end], r.dst_factor_out,
                           r.dst_factor_in)
        src = _affine_view(state.inp, plan, "src", state.uop_src[r.uop_bgn : r.uop_end], r.src_factor_out,
                           r.src_factor_in)
        if dst is None or src is None:
            return None
        ftype = exact_float(cfg, 1)
        tile = plan.first("wgt")
        weights: list = [-1, None, 0]  # (weight generation, W^T as floats, +1/-1 when W is +-identity else 0)

        def work() -> None:
            if weights[0] != state.wgt_generation:
                w = state.wgt[tile]
                weights[:] = state.wgt_generation, w.T.astype(ftype), _sign_of_identity(w)
            sign = weights[2]
            if sign > 0:  # moving int8 data into the accumulator (vtacc's identity weights): no product needed
                dst[...] += src
            elif sign < 0:
                dst[...] -= src
            else:
                prod = src.reshape(-1, cfg.block_in).astype(ftype) @ weights[1]  # one pass converts the view
                dst[...] += prod.astype(np.int32).reshape(dst.shape)

        return work

    def _alu_work(self, plan: LoopPlan, r: tuple) -> Callable[[], None]:
        state = self.state
        op, use_imm, imm = r.alu_opcode, bool(r.use_imm), r.imm

        def generic() -> None:
            run_plan(state, plan, op, use_imm, imm)

        if not self.int32_acc or alu_strategy(plan, op, use_imm) != "parallel":
            return generic
        dst = _affine_view(state.acc, plan, "dst", state.uop_dst[r.uop_bgn : r.uop_end], r.dst_factor_out,
                           r.dst_factor_in)
        if dst is None:
            return generic
        if use_imm:
            apply = _imm_op(op, imm)
            return lambda: apply(dst)
        src = _affine_view(state.acc, plan, "src", state.uop_src[r.uop_bgn : r.uop_end], r.src_factor_out,
                           r.src_factor_in)
        if src is None or op == SHR:
            return generic
        ufunc = TENSOR_UFUNCS[op]
        return lambda: ufunc(dst, src, out=dst)


def _sign_of_identity(w: np.ndarray) -> int:
    """1 when the weight tile is the identity matrix, -1 when it is its negation, else 0."""
    if w.shape[0] != w.shape[1]:
        return 0
    eye = np.eye(w.shape[0], dtype=w.dtype)
    return 1 if np.array_equal(w, eye) else -1 if np.array_equal(w, -eye) else 0


def _nothing() -> None:
    return None

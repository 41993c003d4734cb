"""The tiled schedule of one operator: loops over tiles, producing groups of steps.

For every output tile: the producer's loads and GEMM (or pooling) work into the
tile's accumulator slot, the epilogue on the resident tile, and the store.
Buffers are split into slots: with two virtual threads, consecutive tiles use
alternate slots, so the loads of one tile do not touch what the other is
computing on and the token pass lets them overlap. The operator's last tile
runs its epilogue and store in parts, so its store drains while the ALU
finishes the rest.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from vtasm.config import VTAConfig

from .convolution import gemm_chunks, input_loads, weight_dma
from .cost import EPILOGUE_PARTS
from .dma import box_dmas
from .epilogue import Evaluator, Needs, Target, constant_name
from .kernels import Dim, build_kernel, contiguous
from .layouts import DramTensor
from .operators import GemmProducer, Operator, PoolProducer
from .pooling import fold_steps, pool_steps
from .problem import Problem, conv_problem, pooled_region, pooled_window, problem_of, window_cols, window_rows
from .steps import ACC, INP, WGT, Alu, Dma, Gemm, Group, Load, Store
from .tiling import Tiling, partial_elems

IDENTITY, NEG_IDENTITY = "__identity", "__neg_identity"


@dataclass
class Slots:
    """SRAM bases of one operator's slots (per virtual thread)."""

    inp: list[int]
    inp_temp: list[int]
    wgt: list[int]
    acc: list[int]  # base of the thread's acc slots; slot k at acc + k * tile_elems
    bias: dict[str, int]  # SRAM base of each bias vector (by tensor name), loaded whole once per operator
    identity: int
    neg_identity: int
    pool_acc: list[int]
    partial: list[int]  # spare accumulators for partial sums (tiling.partial_elems of them), per thread
    partial_elems: int


@dataclass
class Tile:
    """One output tile: its origin and extent in tile units, and its thread."""

    n0: int
    nn: int
    c0: int  # channel tile within the group
    nc: int
    h0: int
    nh: int
    w0: int
    nw: int
    group: int
    thread: int
    c_base: int = 0  # first channel block of the tile's group (group * blocks per group)

    @property
    def channel(self) -> int:
        """The tile's first channel block in the whole tensor."""
        return self.c_base + self.c0

    @property
    def elems(self) -> int:
        return self.nn * self.nc * self.nh * self.nw


def _weight_slot(t: Tiling, pr: Problem) -> int:
    """Weight buffer elements of one rotating slot: a tile's output channels by the input channels a turn
    brings (all of them when the weights stay resident or the inputs order keeps a tile's weights whole)."""
    return t.toc * (pr.ic_t if (t.resident or t.order == "inputs") else t.tic) * pr.kh * pr.kw


def _plan_slots(t: Tiling, pr: Problem, needs: Needs, op: Operator) -> Slots:
    e = t.tn * t.toc * t.th * t.tw
    th_in = (t.th - 1) * pr.stride + pr.kh
    tw_in = (t.tw - 1) * pr.stride + pr.kw
    gemm = isinstance(op.producer, GemmProducer)
    pool = isinstance(op.producer, PoolProducer)
    n = t.threads
    inp_tile = pool_tile = 0
    if gemm and pr.pool:  # the convolution's window over the product rows the pooled tile reads
        rows, cols, crows, ccols = pooled_region(pr, t.th, t.tw)
        cpr = conv_problem(pr)
        inp_tile = t.tn * (pr.ic_t if t.order == "inputs" else t.tic) * window_rows(cpr, crows) \
            * window_cols(cpr, ccols)
        pool_tile = t.tn * t.toc * rows * cols
    elif gemm:
        inp_tile = t.tn * (pr.ic_t if t.order == "inputs" else t.tic) * window_rows(pr, t.th) * window_cols(pr, t.tw)
    elif pool:
        inp_tile = pool_tile = t.tn * t.toc * th_in * tw_in
    inp = [i * inp_tile for i in range(n)]
    inp_temp = [n * inp_tile + i * e for i in range(n)] if needs.inp_temp else []
    wgt_base = int(needs.identity) + int(needs.neg_identity)
    wslot = _weight_slot(t, pr) if gemm else 0
    wgt = [wgt_base + i * wslot for i in range(n)]
    acc_thread = e * needs.acc_slots
    spare = partial_elems(t, pr, gemm)
    acc = [i * (acc_thread + pool_tile + spare) for i in range(n)]
    after = n * (acc_thread + pool_tile + spare)  # every bias vector, whole, after the threads' slots
    bias = {v.name: after + k * v.c_tiles for k, v in enumerate(bias_vectors(op, needs))}
    pool_acc = [a + acc_thread for a in acc]
    partial = [a + acc_thread + pool_tile for a in acc]
    identity = 0
    neg = 1 if needs.identity else 0
    return Slots(inp, inp_temp, wgt, acc, bias, identity, neg, pool_acc, partial, spare)


class TileTarget(Target):
    """Emits the epilogue steps of one tile into a group."""

    def __init__(self, op: Operator, tile: Tile, slots: Slots, needs: Needs, group: Group, cfg: VTAConfig,
                 offset: int = 0):
        self.op, self.tile, self.slots, self.needs, self.group, self.cfg = op, tile, slots, needs, group, cfg
        self.offset = offset  # of a part of the tile inside the thread's accumulator slot
        self.free_slots = list(range(needs.acc_slots))
        self.loaded: set[int] = set()  # slots last written by an ACC load (not yet by GEMM/ALU)

    def base(self, slot: int) -> int:
        return self.slots.acc[self.tile.thread] + self.offset + slot * self.tile.elems

    def alloc(self) -> int:
        return self.free_slots.pop(0)

    def claim(self, slot: int) -> None:
        self.free_slots.remove(slot)

    def free(self, slot: int) -> None:
        self.free_slots.insert(0, slot)

    def _box(self, tensor: DramTensor) -> tuple[tuple, tuple]:
        t = self.tile
        return (t.n0, t.channel, t.h0, t.w0), (t.nn, t.nc, t.nh, t.nw)

    def load_full(self, tensor: DramTensor, slot: int) -> None:
        start, extent = self._box(tensor)
        dims = (tensor.n_tiles, tensor.c_tiles, tensor.dims[2], tensor.dims[3])
        for dma in box_dmas(dims, start, extent, self.base(slot)):
            self.group.steps.append(Load(ACC, tensor.name, dma))
        self.loaded.add(slot)

    def gemm_int8(self, tensor: DramTensor, slot: int, negate: bool, accumulate: bool) -> None:
        start, extent = self._box(tensor)
        dims = (tensor.n_tiles, tensor.c_tiles, tensor.dims[2], tensor.dims[3])
        temp = self.slots.inp_temp[self.tile.thread]
        for dma in box_dmas(dims, start, extent, temp):
            self.group.steps.append(Load(INP, tensor.name, dma))
        e = self.tile.elems
        if not accumulate:
            self.group.steps.append(Gemm(contiguous(e, self.base(slot)), reset=True))
        wgt = self.slots.neg_identity if negate else self.slots.identity
        self.group.steps.append(Gemm(contiguous(e, self.base(slot), temp, wgt, src_step=1)))

    def alu_imm(self, slot: int, op: str, imm: int) -> None:
        self.group.steps.append(Alu(contiguous(self.tile.elems, self.base(slot)), op, imm))
        self.loaded.discard(slot)

    def ready_to_store(self, slot: int) -> None:
        """Hardware stores from a buffer only GEMM/ALU write: copy loaded data with '>> 0' first."""
        if slot in self.loaded:
            self.alu_imm(slot, "shr", 0)

    def alu_tensor(self, slot: int, op: str, src_slot: int) -> None:
        k = contiguous(self.tile.elems, self.base(slot), self.base(src_slot), src_step=1)
        self.group.steps.append(Alu(k, op))
        self.loaded.discard(slot)

    def alu_bias(self, slot: int, op: str, tensor: DramTensor) -> None:
        t = self.tile
        at = self.slots.bias[tensor.name] + t.channel
        pix = t.nh * t.nw
        dims = [Dim("n", t.nn, t.nc * pix, 0), Dim("c", t.nc, pix, 1), Dim("pix", pix, 1, 0)]
        kernel = build_kernel(dims, (self.base(slot), at, 0))
        self.group.steps.append(Alu(kernel, op))
        self.loaded.discard(slot)

    def alu_const(self, slot: int, op: str, value: int) -> None:
        self.alu_bias(slot, op, self.op.constants[value])

    def zero(self, slot: int) -> None:
        self.group.steps.append(Gemm(contiguous(self.tile.elems, self.base(slot)), reset=True))
        self.loaded.discard(slot)

    def copy(self, dst: int, src: int) -> None:
        e = self.tile.elems
        self.group.steps.append(Gemm(contiguous(e, self.base(dst)), reset=True))
        self.group.steps.append(Alu(contiguous(e, self.base(dst), self.base(src), src_step=1), "add"))


def _tiles(t: Tiling, pr: Problem, order: str):
    """Output tiles in loop order (the thread is assigned by the caller)."""
    for g in range(pr.groups):
        if order == "weights":
            for c0 in range(0, pr.oc_t, t.toc):
                for n0 in range(0, pr.n_t, t.tn):
                    for h0 in range(0, pr.oh, t.th):
                        for w0 in range(0, pr.ow, t.tw):
                            yield g, c0, n0, h0, w0
        else:
            for n0 in range(0, pr.n_t, t.tn):
                for h0 in range(0, pr.oh, t.th):
                    for w0 in range(0, pr.ow, t.tw):
                        for c0 in range(0, pr.oc_t, t.toc):
                            yield g, c0, n0, h0, w0


def tile_count(op: Operator, t: Tiling, cfg: VTAConfig) -> tuple[int, int]:
    """How many tiles (step groups after the constants' group) an operator has under a tiling, and after how
    many the schedule repeats itself at the least (the innermost loop's trips times the threads)."""
    pr = problem_of(op, cfg)
    inner = math.ceil(pr.ow / t.tw) if t.order == "weights" else math.ceil(pr.oc_t / t.toc)
    return _tile_total(t, pr), math.lcm(inner, t.threads)


def _tile_total(t: Tiling, pr: Problem) -> int:
    """How many tiles _tiles yields."""
    return pr.groups * math.ceil(pr.oc_t / t.toc) * math.ceil(pr.n_t / t.tn) * math.ceil(pr.oh / t.th) \
        * math.ceil(pr.ow / t.tw)


def schedule_operator(op: Operator, t: Tiling, needs: Needs, cfg: VTAConfig, limit: int | None = None,
                      preload: tuple[int, int] = (0, 0)) -> list[Group]:
    """All step groups of one operator (with ``limit``: the constants and the first ``limit`` tiles only,
    for timing a sample of a candidate tiling). ``preload`` = (base, count): with the inputs order, the
    first ``count`` tiles' weights go to slots of their own from weight element ``base`` up, which the
    compiler loads ahead of the operator before (compiler._preload_weights)."""
    pr = problem_of(op, cfg)
    slots = _plan_slots(t, pr, needs, op)
    groups: list[Group] = []
    setup = Group(f"{op.out.name}: constants", op.span)
    if needs.identity:
        setup.steps.append(Load(WGT, IDENTITY, Dma(0, 1, 1, 1, slots.identity)))
    if needs.neg_identity:
        setup.steps.append(Load(WGT, NEG_IDENTITY, Dma(0, 1, 1, 1, slots.neg_identity)))
    for tensor in bias_vectors(op, needs):  # bias vectors stay resident for the whole operator
        whole = (1, tensor.c_tiles, 1, 1)
        setup.steps.append(Load(ACC, tensor.name, box_dmas(whole, (0, 0, 0, 0), whole, slots.bias[tensor.name])[0]))
    if setup.steps:
        groups.append(setup)
    gemm = op.producer if isinstance(op.producer, GemmProducer) else None
    counter = 0
    last_weights: tuple | None = None
    wcount = 0
    last_inputs: tuple | None = None
    icount = 0
    chunk_count = 0
    tiles = _tile_total(t, pr)
    for g, c0, n0, h0, w0 in _tiles(t, pr, t.order):
        if limit is not None and counter >= limit:
            break
        tile = Tile(n0, min(t.tn, pr.n_t - n0), c0, min(t.toc, pr.oc_t - c0), h0, min(t.th, pr.oh - h0),
                    w0, min(t.tw, pr.ow - w0), g, counter % t.threads, g * pr.oc_t)
        counter += 1
        group = Group(_title(op, tile, cfg), op.span)
        cpr, ctile, acc, region = pr, tile, slots.acc[tile.thread], None
        if gemm is not None and pr.pool:  # the product's rows the pooled tile reads, into its window region
            cpr, ctile, acc, region, window = _product_tile(pr, tile, slots.pool_acc[tile.thread])
        if gemm is not None:
            if t.order == "weights" and t.resident:
                key = (g, c0)
                if key != last_weights:
                    wslot = slots.wgt[wcount % t.threads]
                    wcount += 1
                    last_weights = key
                    group.steps.append(Load(WGT, gemm.w.name, weight_dma(gemm, pr, g, c0, tile.nc, 0, pr.ic_t, wslot)))
                wbase = slots.wgt[(wcount - 1) % t.threads]
            else:
                wbase = slots.wgt[tile.thread]
            if t.order == "inputs" and counter <= preload[1]:  # a preloaded tile: its own slot
                wbase = preload[0] + (counter - 1) * _weight_slot(t, pr)
            if t.order == "inputs":
                key = (g, n0, h0, w0)
                if key != last_inputs:
                    ibase = slots.inp[icount % t.threads]
                    icount += 1
                    last_inputs = key
                    group.steps += input_loads(gemm, cpr, ctile, 0, pr.ic_t, ibase)
                ibase = slots.inp[(icount - 1) % t.threads]
                group.steps.append(Load(WGT, gemm.w.name, weight_dma(gemm, pr, g, c0, tile.nc, 0, pr.ic_t, wbase)))
                gemm_chunks(group, gemm, cpr, ctile, acc, [ibase], [wbase], [(0, pr.ic_t)],
                            pr.ic_t, load_inputs=False, load_weights=False, spare=slots.partial[tile.thread],
                            spare_elems=slots.partial_elems, region=region)
            else:
                # streamed chunks rotate through the threads' input (and weight) slots chunk by chunk, so a
                # chunk's loads overlap the GEMM of the chunk before, inside a tile as across tiles
                chunks = [(c, min(t.tic, pr.ic_t - c)) for c in range(0, pr.ic_t, t.tic)]
                turns = [(chunk_count + k) % t.threads for k in range(len(chunks))]
                chunk_count += len(chunks)
                wbases = [wbase] * len(chunks) if t.resident else [slots.wgt[k] for k in turns]
                gemm_chunks(group, gemm, cpr, ctile, acc, [slots.inp[k] for k in turns], wbases,
                            chunks, pr.ic_t if t.resident else t.tic, load_inputs=True, load_weights=not t.resident,
                            spare=slots.partial[tile.thread], spare_elems=slots.partial_elems, region=region)
            if region is not None:
                size, stride, pad = pr.pool
                group.steps += fold_steps("max", size, stride, pad, window, tile, region[0],
                                          slots.acc[tile.thread], None)
        elif isinstance(op.producer, PoolProducer):
            group.steps += pool_steps(op.producer, pr, tile, slots, cfg)
        last = counter == tiles
        for part, offset in epilogue_parts(tile, needs, last):
            _epilogue(op, part, slots, needs, group, cfg, offset)
        groups.append(group)
    return groups


def _product_tile(pr: Problem, tile: Tile, base: int) -> tuple[Problem, Tile, int, tuple, tuple]:
    """A pooled tile's product: the convolution's problem, its tile of the rows and columns the pooling reads
    inside the product, where its first element goes in the window region at ``base``, the region (base,
    elements, plane, row pitch) and the window (rows, columns, padding before and after on each)."""
    rows, first_row, y0, y1 = pooled_window(pr.pool, tile.h0, tile.nh, pr.ch)
    cols, first_col, x0, x1 = pooled_window(pr.pool, tile.w0, tile.nw, pr.cw)
    ctile = dataclasses.replace(tile, h0=first_row + y0, nh=rows - y0 - y1, w0=first_col + x0, nw=cols - x0 - x1)
    plane = rows * cols
    region = (base, tile.nn * tile.nc * plane, plane, cols)
    return conv_problem(pr), ctile, base + y0 * cols + x0, region, (rows, cols, y0, y1, x0, x1)


def weight_slots(op: Operator, t: Tiling, needs: Needs, cfg: VTAConfig) -> int:
    """The weight buffer's elements up to the end of the operator's rotating slots (identity tiles included)."""
    if not isinstance(op.producer, GemmProducer):
        return 0
    pr = problem_of(op, cfg)
    return _plan_slots(t, pr, needs, op).wgt[-1] + _weight_slot(t, pr)


def weight_slot_elems(op: Operator, t: Tiling, cfg: VTAConfig) -> int:
    """Weight buffer elements one tile's weights take with the inputs order (0 for other orders and producers)."""
    if not isinstance(op.producer, GemmProducer) or t.order != "inputs":
        return 0
    return _weight_slot(t, problem_of(op, cfg))


def epilogue_parts(tile: Tile, needs: Needs, last: bool) -> list[tuple[Tile, int]]:
    """The tile's epilogue and store in parts, with each part's offset in the accumulator slot.

    The operator's last tile runs them in up to EPILOGUE_PARTS parts of its
    output channels, so the store of one part drains while the ALU works on
    the next instead of after the whole epilogue. Only an epilogue that keeps
    one slot alive splits (its parts do not overlap).
    """
    if not last or needs.acc_slots != 1 or tile.nn != 1 or tile.nc < 2:
        return [(tile, 0)]
    count = min(tile.nc, EPILOGUE_PARTS)
    bounds = [tile.nc * k // count for k in range(count + 1)]
    pixels = tile.nh * tile.nw
    return [(dataclasses.replace(tile, c0=tile.c0 + lo, nc=hi - lo), lo * pixels)
            for lo, hi in zip(bounds, bounds[1:], strict=False)]


def _epilogue(op: Operator, tile: Tile, slots: Slots, needs: Needs, group: Group, cfg: VTAConfig,
              offset: int) -> None:
    """The epilogue of a tile (or of a part of one, ``offset`` elements into its slot) and its store."""
    target = TileTarget(op, tile, slots, needs, group, cfg, offset)
    producer_slot = None
    if op.producer is not None:
        producer_slot = 0
        target.claim(0)
    result = Evaluator(op.expr, op.producer.node if op.producer else None, op.operands, target).run(producer_slot)
    target.ready_to_store(result)
    out, c0 = op.out, 0
    if out.slice_of is not None:  # a concat part: its channels of the whole tensor
        out, c0 = out.slice_of, out.slice_c0
    dims = (out.n_tiles, out.c_tiles, out.dims[2], out.dims[3])
    start = (tile.n0, c0 + tile.channel, tile.h0, tile.w0)
    for dma in box_dmas(dims, start, (tile.nn, tile.nc, tile.nh, tile.nw), target.base(result)):
        group.steps.append(Store(out.name, dma))


def bias_vectors(op: Operator, needs: Needs) -> list[DramTensor]:
    """The DRAM vectors behind Needs.biases, in its order (operands by name, constants by value)."""
    out = []
    for name in needs.biases:
        found = [t for t in op.operands.values() if t.name == name]
        found += [t for value, t in op.constants.items() if constant_name(value) == name]
        if not found:
            raise AssertionError(f"no vector {name} among the operator's operands and constants")
        out.append(found[0])
    return out


def _title(op: Operator, tile: Tile, cfg: VTAConfig) -> str:
    b, bo = cfg.batch, cfg.block_out
    parts = []
    if tile.nn * b > 1 or tile.n0:
        parts.append(f"n {tile.n0 * b}..{(tile.n0 + tile.nn) * b - 1}")
    c_lo = tile.channel * bo
    parts.append(f"channels {c_lo}..{c_lo + tile.nc * bo - 1}")
    if op.out_dims[2] > 1:
        parts.append(f"rows {tile.h0}..{tile.h0 + tile.nh - 1}")
    if op.out_dims[3] > 1 and tile.nw < op.out_dims[3]:
        parts.append(f"cols {tile.w0}..{tile.w0 + tile.nw - 1}")
    return f"{op.kernel}: {op.out.name} tile {', '.join(parts)} (thread {tile.thread})"

"""Choosing tiles: what fits the on-chip buffers and moves the fewest DRAM bytes.

An operator's output [N, C, H, W] (in batch tiles, channel tiles, rows,
columns) is cut into tiles of tn x toc x th x tw. A GEMM producer also cuts its
input channels into chunks of tic tiles. Two loop orders exist:

- ``weights``: output-channel groups outermost; when the weights of a group
  (all input channels) fit, they are loaded once and stay resident while the
  spatial tiles stream through, and inputs are re-read once per group.
- ``inputs``: spatial tiles outermost; an input tile with all its channels is
  loaded once and stays resident while the output-channel groups stream their
  weights through.

Every candidate is checked against the buffer depths, with two copies of each
streamed buffer when two virtual threads double-buffer, and scored by the
cycles the cost model (cost.py) predicts under the compiler's hardware
profile, DRAM bytes breaking ties; the fastest wins. A ``schedule`` block can
fix any choice; a fixed choice that does not fit is an error naming the buffer
and by how much it overflows.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from vtasm.config import VTAConfig
from vtasm.errors import CompileError
from vtasm.portability import MIN_ACC_DISTANCE

from .convolution import chunk_window
from .cost import CostModel
from .epilogue import Needs
from .operators import GemmProducer, Operator, PoolProducer
from .problem import (
    Problem,
    conv_problem,
    in_extent,
    pooled_region,
    problem_of,
    product_span,
    skips_rows,
    window_cols,
    window_rows,
)

# DRAM traffic a tiling may move, against the compulsory minimum (every byte once), unless none can: the
# bandwidth is shared with the other layers of a network and costs energy, which one operator's cycles
# do not show.
TRAFFIC_LIMIT = 1.5
NEAR_TIE = 0.02  # predicted cycles this close to the fastest count as a tie, which DRAM bytes break
INSN_BYTES = 16  # DRAM bytes the fetch module reads per instruction
CONFIRM = 3  # near-tied candidates timed by the full model (with the fewest-bytes one)
PARTIAL_ELEMS = 6  # spare accumulators per thread for partial sums: three copies of a tile of up to two elements


@dataclass(frozen=True)
class Tiling:
    """A chosen tiling (tile units: batch tiles, channel blocks, rows, columns) and its modelled cost."""

    tn: int
    toc: int
    th: int
    tw: int
    tic: int = 0
    order: str = "weights"
    resident: bool = False
    threads: int = 2
    dram_bytes: int = 0
    instructions: int = 0
    cycles: int = 0  # predicted by the cost model (cost.py) under the compiler's hardware profile
    occupancy: dict = field(default_factory=dict, compare=False)  # buffer -> elements used

    def describe(self, cfg: VTAConfig) -> str:
        parts = [f"n={self.tn * cfg.batch}", f"c={self.toc * cfg.block_out}", f"h={self.th}", f"w={self.tw}"]
        if self.tic:
            parts.append(f"ic={self.tic * cfg.block_in}")
            parts.append(f"order={self.order}{' (weights resident)' if self.resident else ''}")
        parts.append(f"threads={self.threads}")
        return ", ".join(parts)


def _candidates(n: int, fixed: int | None = None) -> list[int]:
    if fixed is not None:
        return [min(fixed, n)]  # a tile larger than the extent is the whole extent
    values = {n, 1}
    values |= {d for d in range(1, n + 1) if n % d == 0}
    p = 1
    while p < n:
        values.add(p)
        p *= 2
    values |= {math.ceil(n / k) for k in range(1, min(n, 16) + 1)}
    return sorted(values)


def _valid_rows(start: int, count: int, stride: int, k: int, pad: int, size: int) -> int:
    lo = start * stride - pad
    hi = lo + in_extent(count, stride, k)
    return max(0, min(hi, size) - max(lo, 0))


@functools.lru_cache(maxsize=4096)
def _spatial_sum(pr: Problem, th: int, tw: int, gemm: bool = False) -> tuple[int, int]:
    """(number of spatial tiles, sum over them of valid input pixels) for one channel plane."""
    # a tile's valid rows depend on its first row only and its columns on its first column only, so the sum
    # over the grid of tiles is the product of the two sums; a pooled convolution's tile reads the input
    # window of the product rows and columns its pooling reads
    spans_h = [(h0, min(th, pr.oh - h0)) for h0 in range(0, pr.oh, th)]
    spans_w = [(w0, min(tw, pr.ow - w0)) for w0 in range(0, pr.ow, tw)]
    if pr.pool:
        spans_h = [product_span(pr.pool, h0, n, pr.ch) for h0, n in spans_h]
        spans_w = [product_span(pr.pool, w0, n, pr.cw) for w0, n in spans_w]
        pr = conv_problem(pr)
    rows = [n if gemm and skips_rows(pr) else _valid_rows(h0, n, pr.stride, pr.kh, pr.pad, pr.ih)
            for h0, n in spans_h]
    cols = []
    for w0, n in spans_w:
        c = _valid_rows(w0, n, pr.stride, pr.kw, pr.pad_left, pr.iw)
        cols.append(max(c, min(window_cols(pr, n), pr.iw)) if gemm and n >= pr.ow else c)
    return len(rows) * len(cols), sum(rows) * sum(cols)


def partial_elems(t: Tiling, pr: Problem, gemm: bool) -> int:
    """Spare accumulator elements per thread for partial sums (kernels.Spare).

    A GEMM into a tile of one or two elements that sums several terms cannot
    keep consecutive writes to one element apart by ordering alone.
    """
    if not gemm or pr.pool or pr.ic_t * pr.kh * pr.kw < 2:  # a pooled product's region is never that small
        return 0
    smallest = math.prod(_last_tile(size, extent)
                         for size, extent in ((t.tn, pr.n_t), (t.toc, pr.oc_t), (t.th, pr.oh), (t.tw, pr.ow)))
    return PARTIAL_ELEMS if smallest <= 2 else 0


def _evaluate(t: Tiling, pr: Problem, needs: Needs, cfg: VTAConfig, gemm: bool, pool: bool,
              extra_bytes: int, model: CostModel | None = None) -> Tiling | None:
    threads = t.threads
    e = t.tn * t.toc * t.th * t.tw
    th_in, tw_in = in_extent(t.th, pr.stride, pr.kh), in_extent(t.tw, pr.stride, pr.kw)
    kk = pr.kh * pr.kw
    n_bias = len(needs.biases)
    acc = threads * (e * needs.acc_slots + partial_elems(t, pr, gemm)) + n_bias * pr.groups * pr.oc_t
    inp = 0
    wgt = int(needs.identity) + int(needs.neg_identity)
    if needs.inp_temp:
        inp += threads * e
    gemm_pr, gth, gtw = pr, t.th, t.tw  # the convolution's problem and its largest tile
    if gemm and pr.pool:
        rows, cols, gth, gtw = pooled_region(pr, t.th, t.tw)
        gemm_pr = conv_problem(pr)
        planes = _last_tile(t.tn, pr.n_t) * _last_tile(t.toc, pr.oc_t)
        if pr.ic_t * kk > 1 and _smallest_product(pr, t.th, t.tw) * planes < MIN_ACC_DISTANCE:
            return None  # its GEMM could not keep writes to one element apart (no partial sums in a region)
        acc += threads * t.tn * t.toc * rows * cols  # the pooling's window over the product
    if gemm:
        whole_ic = t.order == "inputs"
        inp += threads * t.tn * (pr.ic_t if whole_ic else t.tic) * window_rows(gemm_pr, gth) \
            * window_cols(gemm_pr, gtw)
        wgt += threads * t.toc * (pr.ic_t if (t.resident or whole_ic) else t.tic) * kk
    elif pool:
        inp += threads * t.tn * t.toc * th_in * tw_in
        acc += threads * t.tn * t.toc * th_in * tw_in
    if acc > cfg.acc_depth or inp > cfg.inp_depth or wgt > cfg.wgt_depth:
        return None
    # traffic (bytes)
    groups = pr.groups
    n_groups = math.ceil(pr.n_t / t.tn)
    oc_groups = math.ceil(pr.oc_t / t.toc)
    sp_tiles, pixels = _spatial_sum(pr, t.th, t.tw, gemm)
    in_plane_bytes = pixels * cfg.inp_elem_bytes  # one channel tile of one batch tile
    out_bytes = pr.n_t * pr.oc_t * groups * pr.oh * pr.ow * cfg.out_elem_bytes
    bias_bytes = n_bias * groups * pr.oc_t * cfg.acc_elem_bytes  # loaded once, resident
    insns = 0
    tiles = groups * oc_groups * n_groups * sp_tiles
    if gemm:
        w_total = groups * pr.oc_t * pr.ic_t * kk * cfg.wgt_elem_bytes
        x_total = groups * pr.n_t * pr.ic_t * in_plane_bytes
        chunks = math.ceil(pr.ic_t / t.tic) if t.order == "weights" else 1
        if t.order == "weights":
            x_bytes = oc_groups * x_total
            w_bytes = w_total * (1 if t.resident else n_groups * sp_tiles)
        else:
            x_bytes = x_total
            w_bytes = w_total * n_groups * sp_tiles
        nic = t.tic if t.order == "weights" else pr.ic_t
        x_loads_per_chunk = len(chunk_window(gemm_pr, t.tn, nic, gth, gtw))
        insns += tiles * (chunks * (x_loads_per_chunk + 1 + 1) + 1 + (2 * pr.pool[0] + 1 if pr.pool else 0))
        traffic = x_bytes + w_bytes
    elif pool:
        traffic = pr.n_t * pr.oc_t * in_plane_bytes
        insns += tiles * (t.tn * t.toc * (1 + kk) + 2)
    else:
        traffic = 0
    insns += tiles * (3 + 2 * t.tn)
    total = traffic + out_bytes + bias_bytes + extra_bytes
    cycles = 0
    if model is not None:
        cycles = model.tiling_cycles(pr, needs, t.tn, t.toc, t.th, t.tw, t.tic, t.order, t.resident, threads,
                                     "gemm" if gemm else "pool" if pool else "")
    return Tiling(t.tn, t.toc, t.th, t.tw, t.tic, t.order, t.resident, threads, total, insns,
                  cycles, {"inp": inp, "wgt": wgt, "acc": acc})


def _last_tile(size: int, extent: int) -> int:
    """The smaller of a tile size and the last tile's along an axis of ``extent``."""
    return min(size, extent % size or size)


@functools.lru_cache(maxsize=4096)
def _smallest_product(pr: Problem, th: int, tw: int) -> int:
    """The fewest product pixels a tile of a pooled convolution computes (a plane's)."""
    return smallest_product(pr.pool, (pr.ch, pr.cw), (pr.oh, pr.ow), th, tw)


def smallest_product(pool: tuple[int, int, int], product_hw: tuple[int, int], pooled_hw: tuple[int, int],
                     th: int, tw: int) -> int:
    """The fewest product pixels (of a plane) that a tile of ``th`` x ``tw`` pooled pixels reads, over the
    tiles of a max pooling (size, stride, pad) of a ``product_hw`` convolution result."""
    (ch, cw), (oh, ow) = product_hw, pooled_hw
    rows = min(product_span(pool, h0, min(th, oh - h0), ch)[1] for h0 in range(0, oh, th))
    cols = min(product_span(pool, w0, min(tw, ow - w0), cw)[1] for w0 in range(0, ow, tw))
    return rows * cols


def pooling_compiles(pool: tuple[int, int, int], product_hw: tuple[int, int], pooled_hw: tuple[int, int]) -> bool:
    """Whether max_pool(conv2d(...)) compiles as one operator on every configuration: its tile of the whole
    image reads enough product pixels, in one channel plane, for the distance rule (_evaluate) whatever the
    channels and the reduction, so at least that tiling is allowed."""
    return smallest_product(pool, product_hw, pooled_hw, *pooled_hw) >= MIN_ACC_DISTANCE


def _compulsory_parts(pr: Problem, needs: Needs, cfg: VTAConfig, gemm: bool, pool: bool,
                      extra_bytes: int) -> tuple[int, int, int]:
    """(bytes read, bytes written, of the reads the weights' bytes)."""
    out = pr.groups * pr.n_t * pr.oc_t * pr.oh * pr.ow * cfg.out_elem_bytes
    reads = len(needs.biases) * pr.groups * pr.oc_t * cfg.acc_elem_bytes + extra_bytes
    weights = 0
    if gemm:
        reads += pr.groups * pr.n_t * pr.ic_t * pr.ih * pr.iw * cfg.inp_elem_bytes
        weights = pr.groups * pr.oc_t * pr.ic_t * pr.kh * pr.kw * cfg.wgt_elem_bytes
        reads += weights
    elif pool:
        reads += pr.n_t * pr.oc_t * pr.ih * pr.iw * cfg.inp_elem_bytes
    return reads, out, weights


def compulsory_traffic(op: Operator, needs: Needs, cfg: VTAConfig) -> tuple[int, int]:
    """(bytes read, bytes written) an operator moves at the least: every byte of its tensors once."""
    return compulsory_parts(op, needs, cfg)[:2]


def compulsory_parts(op: Operator, needs: Needs, cfg: VTAConfig) -> tuple[int, int, int]:
    """(bytes read, bytes written, of the reads the weights' bytes) an operator moves at the least."""
    extra = sum(t.nbytes for t in {id(t): t for t in op.operands.values()}.values()
                if t.name not in needs.biases)
    return _compulsory_parts(problem_of(op, cfg), needs, cfg, isinstance(op.producer, GemmProducer),
                             isinstance(op.producer, PoolProducer), extra)


def choose_tiling(op: Operator, needs: Needs, cfg: VTAConfig, fixed: dict, threads: int | None,
                  order: str | None, extra_bytes: int, span, model: CostModel,
                  confirm: Callable[[Tiling], int] | None = None) -> Tiling:
    """The tiling with the fewest predicted cycles that fits (DRAM bytes break ties), honouring the schedule.

    ``confirm`` (a tiling -> its cycles under the full timing model) settles
    near ties: the CONFIRM fastest estimates and the fewest-bytes candidate
    among them are timed, and the fastest of those wins.
    """
    pr = problem_of(op, cfg)
    gemm = isinstance(op.producer, GemmProducer)
    pool = isinstance(op.producer, PoolProducer)
    best: Tiling | None = None
    closest: tuple[float, list] | None = None
    orders = [order] if order else (["weights", "inputs"] if gemm else ["weights"])
    if order == "inputs" and fixed.get("ic") is not None and fixed["ic"] < pr.ic_t:
        raise CompileError("order with the channel axis inside keeps each input tile with all its input channels; "
                           "tile_ic cannot split them (drop one of the two settings)", span)
    # two virtual threads (over at least two tiles) unless nothing fits that way
    attempts = [(t, two) for t in ([threads] if threads else [2, 1]) for two in ((True, False) if t == 2 else (False,))]
    for th_, two_tiles in attempts:
        fitting = [got for cand in _space(pr, fixed, gemm, orders, th_, two_tiles, blocks=pool or pr.pool is not None,
                                          room=cfg.acc_depth // th_)
                   if (got := _evaluate(cand, pr, needs, cfg, gemm, pool, extra_bytes, model)) is not None]
        if fitting:
            # within the traffic budget, the fewest DRAM bytes (data and the instruction stream the fetch module
            # reads) among the candidates within NEAR_TIE of the fastest
            least = min(got.dram_bytes for got in fitting)
            budget = max(least, TRAFFIC_LIMIT * sum(compulsory_traffic(op, needs, cfg)))
            fitting = [got for got in fitting if got.dram_bytes <= budget]
            fastest = min(got.cycles for got in fitting)
            near = [got for got in fitting if got.cycles <= fastest * (1 + NEAR_TIE)]
            best = min(near, key=_bytes)
            if confirm is not None and len(near) > 1:
                best = _confirmed(near, confirm)
            break
    if best is None:
        for th_ in [threads] if threads else [1]:
            for cand in _space(pr, fixed, gemm, orders, th_, False):
                closest = _overflow(cand, pr, needs, cfg, gemm, pool, closest)
        if closest is not None:
            parts = [f"{need} {buf} elements, {need - depth} more than the {depth} the {buf} buffer holds"
                     for buf, need, depth in closest[1]]
            raise CompileError("no tiling fits the on-chip buffers: the closest choice needs " + "; and ".join(parts),
                               span)
        if pr.pool:  # every candidate refused by the distance rule alone (_evaluate), whatever the buffers
            raise CompileError(
                f"max_pool of a conv2d: every tiling{' the schedule allows' if fixed else ''} has a tile whose "
                f"windows read fewer than {MIN_ACC_DISTANCE} product elements (pixels times channel blocks), and "
                "VTA cannot add into one accumulator element in consecutive executions (a pooled region keeps no "
                "partial sums); pool the convolution's int8 result in a kernel of its own", span)
        raise CompileError("no tiling fits the on-chip buffers", span)
    return best


def _bytes(t: Tiling) -> int:
    """DRAM bytes a tiling moves, with the instruction stream the fetch module reads."""
    return t.dram_bytes + INSN_BYTES * t.instructions


def _confirmed(near: list[Tiling], confirm: Callable[[Tiling], int]) -> Tiling:
    """Of near-tied candidates, the one the full timing model finds fastest (fewest bytes on a tie)."""
    picked = sorted(near, key=lambda t: (t.cycles, _bytes(t)))[:CONFIRM]
    least = min(near, key=_bytes)
    if least not in picked:
        picked.append(least)
    return min(picked, key=lambda t: (confirm(t), _bytes(t)))


def _space(pr: Problem, fixed: dict, gemm: bool, orders: list[str], threads: int, two_tiles: bool,
           blocks: bool = False, room: int | None = None):
    """Candidate tilings (before checking capacity). ``blocks``: also parts of several rows (a pooling, whose
    windows overlap between tiles: a taller tile loads fewer rows twice). ``room``: the accumulator elements
    of a thread, where a pooled convolution's window regions that cannot fit are left out early (_evaluate
    would refuse them)."""
    if fixed.get("w") is not None:  # a fixed width: any number of rows
        tw = min(fixed["w"], pr.ow)
        spatial = [(th, tw) for th in _candidates(pr.oh, fixed.get("h"))]
    else:  # whole rows, or a part of one row (or of several)
        spatial = [(th, pr.ow) for th in _candidates(pr.oh, fixed.get("h"))]
        if fixed.get("h") in (None, 1):
            spatial += [(1, tw) for tw in _candidates(pr.ow) if tw < pr.ow]
        if blocks:
            spatial += [(th, tw) for th in _candidates(pr.oh, fixed.get("h")) if th > 1
                        for tw in _candidates(pr.ow) if tw < pr.ow]
    region = {}
    if pr.pool and room is not None:
        region = {(th, tw): math.prod(pooled_region(pr, th, tw)[:2]) for th, tw in spatial}
        spatial = [(th, tw) for th, tw in spatial if region[th, tw] <= room]
    for tn in _candidates(pr.n_t, fixed.get("n")):
        for toc in _candidates(pr.oc_t, fixed.get("c")):
            for th, tw in spatial:
                if region and tn * toc * region[th, tw] > room:
                    continue
                if two_tiles and tn >= pr.n_t and toc >= pr.oc_t and th >= pr.oh and tw >= pr.ow and \
                        pr.n_t * pr.oc_t * pr.oh * pr.ow > 1:
                    continue  # double buffering needs at least two tiles
                for od in orders:
                    for tic in (_candidates(pr.ic_t, fixed.get("ic")) if gemm else [0]):
                        if od == "inputs" and tic != pr.ic_t:
                            continue
                        for resident in ([True, False] if gemm and od == "weights" else [False]):
                            yield Tiling(tn, toc, th, tw, tic, od, resident, threads)


def _overflow(t: Tiling, pr: Problem, needs: Needs, cfg: VTAConfig, gemm: bool, pool: bool, closest):
    """Keep the rejected candidate that overflows the least, with what each buffer lacks (for the error)."""
    roomy = dataclasses.replace(cfg, log_inp_buff_size=40, log_wgt_buff_size=40, log_acc_buff_size=40)
    got = _evaluate(t, pr, needs, roomy, gemm, pool, 0)
    if got is None:
        return closest
    over = [(buf, got.occupancy[buf], depth)
            for buf, depth in (("acc", cfg.acc_depth), ("inp", cfg.inp_depth), ("wgt", cfg.wgt_depth))
            if got.occupancy[buf] > depth]
    score = sum((need - depth) / depth for _, need, depth in over)
    if over and (closest is None or score < closest[0]):
        return (score, over)
    return closest

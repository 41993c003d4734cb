"""One operator's sizes in tile units, as the tiler, the scheduler and the cost model see them."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from vtasm.config import VTAConfig

from .operators import GemmProducer, Operator, PoolProducer


def in_extent(out: int, stride: int, k: int) -> int:
    return (out - 1) * stride + k


@dataclass(frozen=True)
class Problem:
    """Sizes of one operator in tile units."""

    n_t: int
    oc_t: int  # output-channel tiles per group
    oh: int
    ow: int
    ic_t: int = 0  # input-channel tiles per group (GEMM)
    groups: int = 1
    kh: int = 1
    kw: int = 1
    stride: int = 1
    pad: int = 0
    ih: int = 1
    iw: int = 1
    # a max pooling folded into a convolution (size, stride, pad): oh and ow are then the pooled output's, and
    # ch and cw the convolution's own rows and columns
    pool: tuple[int, int, int] | None = None
    ch: int = 0
    cw: int = 0
    pad_left: int = 0  # columns of padding before the image (``pad``: rows before; what follows, oh and ow say)


def conv_problem(pr: Problem) -> Problem:
    """A pooled convolution's product alone: its own output rows and columns, no pooling."""
    return dataclasses.replace(pr, oh=pr.ch, ow=pr.cw, pool=None, ch=0, cw=0) if pr.pool else pr


def pooled_window(pool: tuple[int, int, int], start: int, count: int, extent: int) -> tuple[int, int, int, int]:
    """On one axis, the product's rows ``count`` pooled rows from ``start`` read: (window rows, padding
    included; the first one's index in the product, negative in the padding; padding rows before the
    product's first row; after its last)."""
    size, stride, pad = pool
    rows = in_extent(count, stride, size)
    first = start * stride - pad
    return rows, first, max(0, -first), max(0, first + rows - extent)


def pooled_region(pr: Problem, th: int, tw: int) -> tuple[int, int, int, int]:
    """A pooled convolution's tile of ``th`` x ``tw`` pooled pixels: the rows and columns of its window over
    the product (padding included), and at most how many of them lie inside the product."""
    size, stride, _ = pr.pool
    rows, cols = in_extent(th, stride, size), in_extent(tw, stride, size)
    return rows, cols, min(rows, pr.ch), min(cols, pr.cw)


def product_span(pool: tuple[int, int, int], start: int, count: int, extent: int) -> tuple[int, int]:
    """(first product row, how many) that ``count`` pooled rows from ``start`` read inside the product."""
    rows, first, before, after = pooled_window(pool, start, count, extent)
    return first + before, rows - before - after


def problem_of(op: Operator, cfg: VTAConfig) -> Problem:
    """An operator's sizes in tile units."""
    n, c, h, w = op.out_dims
    n_t, c_t = math.ceil(n / cfg.batch), math.ceil(c / cfg.block_out)
    p = op.producer
    if isinstance(p, GemmProducer):
        g = p.groups
        ic = p.x.dims[1]
        return Problem(n_t, c_t // g if g > 1 else c_t, h, w, math.ceil(ic / g / cfg.block_in) if g > 1 else
                       math.ceil(ic / cfg.block_in), g, p.kh, p.kw, p.stride, p.pad, p.x.dims[2], p.x.dims[3],
                       p.pool, p.out_dims[2] if p.pool else 0, p.out_dims[3] if p.pool else 0, p.pad_left)
    if isinstance(p, PoolProducer):
        return Problem(n_t, c_t, h, w, 0, 1, p.size, p.size, p.stride, p.pad, p.x.dims[2], p.x.dims[3],
                       pad_left=p.pad)
    return Problem(n_t, c_t, h, w)


def unpadded(pr: Problem) -> bool:
    """Whether a convolution's windows lie inside the image on every side (no padding anywhere)."""
    oh, ow = (pr.ch, pr.cw) if pr.pool else (pr.oh, pr.ow)
    return pr.pad == pr.pad_left == 0 and in_extent(oh, pr.stride, pr.kh) <= pr.ih \
        and in_extent(ow, pr.stride, pr.kw) <= pr.iw


def skips_rows(pr: Problem) -> bool:
    """Whether a GEMM tile's input window holds only the rows the kernel reads.

    A one-row kernel with a stride (a 1x1 stride-2 convolution) reads every
    ``stride``-th input row: the window loads just those, one DMA row each
    ``stride`` image rows apart, instead of every row in between.
    """
    return pr.ic_t > 0 and pr.kh == 1 and pr.stride > 1 and unpadded(pr)


def window_rows(pr: Problem, th: int) -> int:
    """Rows of a GEMM tile's input window in SRAM (``th`` output rows)."""
    return th if skips_rows(pr) else in_extent(th, pr.stride, pr.kh)


def window_cols(pr: Problem, tw: int) -> int:
    """Columns of a GEMM tile's input window in SRAM.

    A tile as wide as the output, without padding, takes whole input rows (a
    few columns more than it reads when the stride skips the last ones), so
    that its rows and channel planes are contiguous and one DMA loads a whole
    chunk instead of one DMA per channel plane.
    """
    cols = in_extent(tw, pr.stride, pr.kw)
    if unpadded(pr) and tw >= pr.ow and cols < pr.iw:
        return pr.iw
    return cols

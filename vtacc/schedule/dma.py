"""Cutting 4-D boxes of packed tensors into 2-D DMA transfers.

A packed tensor is an array of elements [NT, CT, H, W] (batch tiles, channel
tiles, rows, columns). A box of it is copied to or from SRAM packed in the same
order. The DMA moves ``y`` rows of ``x`` contiguous elements, rows ``stride``
apart, so the box is cut where it stops being contiguous: the innermost run
that covers whole rows of the tensor is merged as far out as possible, the next
dimension becomes the DMA's rows, and any outer dimensions become separate
transfers.
"""

from __future__ import annotations

from .steps import Dma

MAX_FIELD = (1 << 16) - 1


def box_dmas(dims: tuple[int, int, int, int], start: tuple[int, int, int, int],
             extent: tuple[int, int, int, int], sram: int) -> list[Dma]:
    """DMAs moving box [start, start+extent) of a [NT, CT, H, W] element array, SRAM packed from ``sram``."""
    strides = [dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1]
    # innermost contiguous run: merge dims while the inner ones are whole
    run = 1
    k = 3
    while k >= 0:
        run *= extent[k]
        if k > 0 and extent[k] == dims[k] and run * extent[k - 1] <= MAX_FIELD:
            k -= 1
            continue
        break
    # k: outermost dim merged into the run; rows dim is k - 1
    rows_dim = k - 1
    rows = extent[rows_dim] if rows_dim >= 0 else 1
    row_stride = strides[rows_dim] if rows_dim >= 0 else run
    if rows > MAX_FIELD or row_stride > MAX_FIELD:
        rows_dim, rows, row_stride = -1, 1, run
    if rows == 1:
        row_stride = run
    outer = list(range(rows_dim)) if rows_dim >= 0 else list(range(k))
    dmas = []
    index = [0, 0, 0, 0]

    def emit(idx: list[int], sram_at: int) -> None:
        elem = sum((start[i] + idx[i]) * strides[i] for i in range(4))
        dmas.append(Dma(elem, rows, run, row_stride, sram_at))

    def walk(level: int, sram_at: int) -> None:
        if level == len(outer):
            emit(index, sram_at)
            return
        d = outer[level]
        inner_size = 1
        for j in range(d + 1, 4):
            inner_size *= extent[j]
        for i in range(extent[d]):
            index[d] = i
            walk(level + 1, sram_at + i * inner_size)
        index[d] = 0

    walk(0, sram)
    return dmas


def padded_plane_dma(dims: tuple[int, int, int, int], n: int, c: int, row0: int, rows: int, col0: int,
                     cols: int, sram: int) -> list[Dma]:
    """DMAs filling one channel plane's window [row0, row0+rows) x [col0, col0+cols), zero outside the image.

    Usually one DMA whose padding fields supply the zeros. A window that lies
    wholly in the padding reads nothing: its zeros come from loads with
    ``y_size = 0`` whose row padding covers it (a load with ``x_size = 0`` would
    be a no-op), at most 15 + 15 rows each.
    """
    _, _, h, w = dims
    r_lo, r_hi = max(row0, 0), min(row0 + rows, h)
    c_lo, c_hi = max(col0, 0), min(col0 + cols, w)
    if r_hi > r_lo and c_hi > c_lo:
        pads = (r_lo - row0, row0 + rows - r_hi, c_lo - col0, col0 + cols - c_hi)
        elem = ((n * dims[1] + c) * h + r_lo) * w + c_lo
        return [Dma(elem, r_hi - r_lo, c_hi - c_lo, w, sram, pads)]
    dmas = []
    for start in range(0, rows, 30):
        part = min(30, rows - start)
        top = min(part, 15)
        dmas.append(Dma(0, 0, cols, cols, sram + start * cols, (top, part - top, 0, 0)))
    return dmas

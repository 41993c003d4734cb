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

from collections.abc import Iterable

import numpy as np

from vtasm import isa
from vtasm.config import VTAConfig

from .layouts import ACC as ACC_KIND
from .layouts import ACT, DramTensor, dram_tensor
from .steps import ACC, INP, Dma, Load

_WIDTHS = {f.name: f.width for f in isa.MEM_FIELDS}  # fixed widths: no configuration changes them
MAX_FIELD = (1 << _WIDTHS["y_size"](None)) - 1
MAX_PAD = (1 << _WIDTHS["y_pad_0"](None)) - 1  # the most rows or columns one padding field adds
ZERO_ROW = {INP: "__zero_row", ACC: "__zero_row_acc"}  # the all-zero rows padding-only windows read
ZERO_NAMES = frozenset(ZERO_ROW.values())


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


def padded_plane_loads(buffer: str, tensor: str, dims: tuple[int, int, int, int], n: int, c: int, row0: int,
                       rows: int, col0: int, cols: int, sram: int) -> list[Load]:
    """Loads filling one channel plane's window [row0, row0+rows) x [col0, col0+cols) of ``tensor`` into
    ``buffer`` (INP or ACC), zero outside the image.

    Usually one DMA whose padding fields supply the zeros. A window that lies
    wholly in the padding reads one row of the compiler's all-zero tensor
    (``ZERO_ROW[buffer]``) with one padding row fewer, up to 15 + 1 + 15 rows a
    load, and of that row only what the column padding cannot supply (one
    element for windows up to 31 columns wide: padding costs the HLS design
    half what reading does). A load of no rows would be shorter, but the 2021
    Chisel design never completes a LOAD with ``y_size`` 0 (isa.md section 7),
    and one with ``x_size`` 0 is a no-op.
    """
    _, _, h, w = dims
    r_lo, r_hi = max(row0, 0), min(row0 + rows, h)
    c_lo, c_hi = max(col0, 0), min(col0 + cols, w)
    if r_hi > r_lo and c_hi > c_lo:
        pads = (r_lo - row0, row0 + rows - r_hi, c_lo - col0, col0 + cols - c_hi)
        elem = ((n * dims[1] + c) * h + r_lo) * w + c_lo
        return [Load(buffer, tensor, Dma(elem, r_hi - r_lo, c_hi - c_lo, w, sram, pads))]
    x = max(1, cols - 2 * MAX_PAD)  # the row's own elements; padding supplies the rest, as it does the rows
    left = min(cols - x, MAX_PAD)
    loads = []
    for start in range(0, rows, 2 * MAX_PAD + 1):
        part = min(2 * MAX_PAD + 1, rows - start)
        top = min(part - 1, MAX_PAD)
        loads.append(Load(buffer, ZERO_ROW[buffer], Dma(0, 1, x, x, sram + start * cols,
                                                        (top, part - 1 - top, left, cols - x - left))))
    return loads


def zero_rows(loads: Iterable[Load], cfg: VTAConfig) -> tuple[list[DramTensor], dict[str, bytes]]:
    """The all-zero tensors that ``loads`` read (as wide as the widest such load) and their bytes."""
    widths: dict[str, int] = {}
    for ld in loads:
        if ld.tensor in ZERO_NAMES:
            widths[ld.buffer] = max(widths.get(ld.buffer, 0), ld.dma.x)
    tensors, data = [], {}
    for buffer, width in sorted(widths.items()):
        kind, dtype = (ACT, "int8") if buffer == INP else (ACC_KIND, "int32")
        shape = (cfg.batch, cfg.block_in, 1, width)
        tensor = dram_tensor(ZERO_ROW[buffer], dtype, shape, kind, cfg, constant=True)
        tensors.append(tensor)
        data[tensor.name] = tensor.tensor_info().pack(np.zeros(shape, dtype=dtype))
    return tensors, data

"""The convolution producer on the GEMM core: input and weight loads, reset and GEMM steps.

A matrix product is a 1x1 convolution of a 1x1 image, so this serves both.
Input tiles are loaded with their halo; where the window crosses the image
border the DMA's padding fields supply the zeros, one channel plane per load.
A strided one-row kernel's window holds only the rows it reads.
The GEMM iteration space of a tile (batch, output block, input block, kernel
row and column, output row and column) is folded into a micro-op kernel by
kernels.build_kernel. A tile that no ordering keeps from writing one element
in consecutive executions (a single element that sums several terms) spreads
the terms over partial-sum copies in a spare accumulator region, reset with
the tile and added back into it with the ALU.
"""

from __future__ import annotations

import functools

from .dma import MAX_FIELD, box_dmas, padded_plane_loads
from .kernels import Dim, Spare, build_kernel, contiguous
from .operators import GemmProducer
from .problem import Problem, skips_rows, window_cols, window_rows
from .steps import INP, WGT, Alu, Dma, Gemm, Group, Load


def weight_dma(gemm: GemmProducer, pr: Problem, g: int, c0: int, nc: int, ic0: int, nic: int, sram: int):
    """One DMA for the weights of ``nc`` output blocks x ``nic`` input blocks, all kernel taps, of group g."""
    kk = pr.kh * pr.kw
    oc = g * pr.oc_t + c0
    return box_dmas((gemm.w.n_tiles, pr.ic_t, 1, kk), (oc, ic0, 0, 0), (nc, nic, 1, kk), sram)[0]


@functools.lru_cache(maxsize=4096)
def chunk_window(pr: Problem, nn: int, nic: int, nh: int, nw: int) -> tuple[Dma, ...]:
    """The DMAs of one chunk's input window as a tiling of ``pr`` cuts it (from the origin, at SRAM 0): what
    the tiler counts and the cost model times, once per size."""
    dims = (pr.n_t, pr.groups * pr.ic_t, pr.ih, pr.iw)
    return tuple(ld.dma for ld in window_loads("", dims, pr, 0, nn, 0, nic, 0, nh, 0, nw, 0))


def window_loads(tensor: str, dims: tuple[int, int, int, int], pr: Problem, n0: int, nn: int, c0: int, nic: int,
                 h0: int, nh: int, w0: int, nw: int, sram: int) -> list[Load]:
    """Loads filling the input window of ``nh`` x ``nw`` output pixels from ``(h0, w0)``, ``nic`` channel
    blocks from ``c0``, packed [n][c][row][col] at ``sram`` (``dims``: the packed input's [NT, CT, H, W])."""
    s = pr.stride
    rows, cols = window_rows(pr, nh), window_cols(pr, nw)
    row0, col0 = h0 * s - pr.pad, w0 * s - pr.pad_left
    plane = rows * cols
    if skips_rows(pr):  # rows s apart; whole-height windows run on from one plane into the next
        merged = rows * s == dims[2] and nic * rows <= MAX_FIELD
        loads = []
        for n in range(nn):
            for c in range(1 if merged else nic):
                elem = (((n0 + n) * dims[1] + c0 + c) * dims[2] + row0) * dims[3] + col0
                loads.append(Load(INP, tensor, Dma(elem, nic * rows if merged else rows, cols, s * dims[3],
                                                   sram + (n * nic + c) * plane)))
        return loads
    if row0 >= 0 and col0 >= 0 and row0 + rows <= dims[2] and col0 + cols <= dims[3]:
        return [Load(INP, tensor, d) for d in box_dmas(dims, (n0, c0, row0, col0), (nn, nic, rows, cols), sram)]
    loads = []
    for n in range(nn):
        for c in range(nic):
            loads += padded_plane_loads(INP, tensor, dims, n0 + n, c0 + c, row0, rows, col0, cols,
                                        sram + (n * nic + c) * plane)
    return loads


def input_loads(gemm: GemmProducer, pr: Problem, tile, ic0: int, nic: int, sram: int) -> list[Load]:
    """Loads of a tile's input window (with halo) for ``nic`` input blocks, packed [n][c][row][col]."""
    x = gemm.x
    dims = (x.n_tiles, x.c_tiles, x.dims[2], x.dims[3])
    c_base = tile.group * pr.ic_t + ic0  # input channels of the tile's group
    return window_loads(x.name, dims, pr, tile.n0, tile.nn, c_base, nic, tile.h0, tile.nh, tile.w0, tile.nw, sram)


def _dims(pr: Problem, tile, nic: int, w_per_oc: int, out: tuple[int, int] | None = None) -> list[Dim]:
    """The GEMM iteration space of one tile and input-channel chunk (outermost first); ``out``: the
    accumulator's plane and row pitch when the tile sits in a larger region (else packed)."""
    s = pr.stride
    tw_in = window_cols(pr, tile.nw)
    plane = window_rows(pr, tile.nh) * tw_in
    row_step = 1 if skips_rows(pr) else s  # window rows per output row
    kk = pr.kh * pr.kw
    pix, pitch = out or (tile.nh * tile.nw, tile.nw)
    return [
        Dim("n", tile.nn, tile.nc * pix, nic * plane, 0),
        Dim("oc", tile.nc, pix, 0, w_per_oc * kk),
        Dim("ic", nic, 0, plane, kk),
        Dim("kh", pr.kh, 0, tw_in, pr.kw),
        Dim("kw", pr.kw, 0, 1, 1),
        Dim("oh", tile.nh, pitch, row_step * tw_in, 0),
        Dim("ow", tile.nw, 1, s, 0),
    ]


def gemm_chunks(group: Group, gemm: GemmProducer, pr: Problem, tile, acc: int, ibases: list[int],
                wbases: list[int], chunks: list[tuple[int, int]], w_ic: int, load_inputs: bool, load_weights: bool,
                spare: int, spare_elems: int, region: tuple[int, int, int, int] | None = None) -> None:
    """Reset, then per input-channel chunk: input and weight loads when streamed, and the GEMM.

    Chunk k reads its inputs at ``ibases[k]`` and its weights at ``wbases[k]``:
    when consecutive chunks use different slots, the loads of one overlap the
    GEMM of the one before (double buffering inside a tile).
    ``w_ic`` is the number of input-channel tiles per output channel in the weight slot.
    A tile whose kernel needs partial sums keeps them in the ``spare_elems``
    accumulator elements at ``spare`` (reset first, added into the tile last).
    ``region`` = (base, elements, plane, row pitch): the tile, at ``acc``, is part of a larger accumulator
    region (a pooling's window over the product), reset whole.
    """
    kk = pr.kh * pr.kw
    room = Spare(acc, spare, tile.elems, spare_elems // tile.elems)
    kernels = []
    for (ic0, nic), ibase, wbase in zip(chunks, ibases, wbases, strict=True):
        w_off = 0 if load_weights else ic0 * kk
        dims = _dims(pr, tile, nic, nic if load_weights else w_ic, region[2:] if region else None)
        kernels.append(build_kernel(dims, (acc, ibase, wbase + w_off), spare=room))
    copies = max(room.used(k) for k in kernels)
    group.steps.append(Gemm(contiguous(region[1], region[0]) if region else contiguous(tile.elems, acc),
                            reset=True))
    if copies:
        group.steps.append(Gemm(contiguous(copies * tile.elems, spare), reset=True))
    for (ic0, nic), kernel, ibase, wbase in zip(chunks, kernels, ibases, wbases, strict=True):
        if load_inputs:
            group.steps += input_loads(gemm, pr, tile, ic0, nic, ibase)
        if load_weights:
            group.steps.append(Load(WGT, gemm.w.name, weight_dma(gemm, pr, tile.group, tile.c0, tile.nc, ic0, nic,
                                                                  wbase)))
        group.steps.append(Gemm(kernel))
    for c in range(copies):  # one instruction per copy: its executions write distinct elements
        group.steps.append(Alu(contiguous(tile.elems, acc, room.base + c * room.stride, src_step=1), "add"))

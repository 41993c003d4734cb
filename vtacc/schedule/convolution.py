"""The convolution producer on the GEMM core: input and weight loads, reset and GEMM steps.

A matrix product is a 1x1 convolution of a 1x1 image, so this serves both.
Input tiles are loaded with their halo; where the window crosses the image
border the DMA's padding fields supply the zeros, one channel plane per load.
The GEMM iteration space of a tile (batch, output block, input block, kernel
row and column, output row and column) is folded into a micro-op kernel by
kernels.build_kernel. A tile that no ordering keeps from writing one element
in consecutive executions (a single element that sums several terms) spreads
the terms over partial-sum copies in a spare accumulator region, reset with
the tile and added back into it with the ALU.
"""

from __future__ import annotations

from .dma import box_dmas, padded_plane_dma
from .kernels import Dim, Spare, build_kernel, contiguous
from .operators import GemmProducer
from .problem import Problem, window_cols
from .steps import INP, WGT, Alu, Gemm, Group, Load


def weight_dma(gemm: GemmProducer, pr: Problem, g: int, c0: int, nc: int, ic0: int, nic: int, sram: int):
    """One DMA for the weights of ``nc`` output blocks x ``nic`` input blocks, all kernel taps, of group g."""
    kk = pr.kh * pr.kw
    oc = g * pr.oc_t + c0
    return box_dmas((gemm.w.n_tiles, pr.ic_t, 1, kk), (oc, ic0, 0, 0), (nc, nic, 1, kk), sram)[0]


def input_loads(gemm: GemmProducer, pr: Problem, tile, ic0: int, nic: int, sram: int) -> list[Load]:
    """Loads of a tile's input window (with halo) for ``nic`` input blocks, packed [n][c][row][col]."""
    x = gemm.x
    dims = (x.n_tiles, x.c_tiles, x.dims[2], x.dims[3])
    s = pr.stride
    rows = (tile.nh - 1) * s + pr.kh
    cols = window_cols(pr, tile.nw)
    row0, col0 = tile.h0 * s - pr.pad, tile.w0 * s - pr.pad
    c_base = tile.group * pr.ic_t + ic0  # input channels of the tile's group
    inside = row0 >= 0 and col0 >= 0 and row0 + rows <= dims[2] and col0 + cols <= dims[3]
    if inside:
        return [Load(INP, x.name, d) for d in box_dmas(dims, (tile.n0, c_base, row0, col0),
                                                      (tile.nn, nic, rows, cols), sram)]
    loads = []
    plane = rows * cols
    for n in range(tile.nn):
        for c in range(nic):
            at = sram + (n * nic + c) * plane
            loads += [Load(INP, x.name, d) for d in padded_plane_dma(dims, tile.n0 + n, c_base + c, row0, rows,
                                                                     col0, cols, at)]
    return loads


def _dims(pr: Problem, tile, nic: int, w_per_oc: int) -> list[Dim]:
    """The GEMM iteration space of one tile and input-channel chunk (outermost first)."""
    s = pr.stride
    tw_in = window_cols(pr, tile.nw)
    plane = ((tile.nh - 1) * s + pr.kh) * tw_in
    kk = pr.kh * pr.kw
    pix = tile.nh * tile.nw
    return [
        Dim("n", tile.nn, tile.nc * pix, nic * plane, 0),
        Dim("oc", tile.nc, pix, 0, w_per_oc * kk),
        Dim("ic", nic, 0, plane, kk),
        Dim("kh", pr.kh, 0, tw_in, pr.kw),
        Dim("kw", pr.kw, 0, 1, 1),
        Dim("oh", tile.nh, tile.nw, s * tw_in, 0),
        Dim("ow", tile.nw, 1, s, 0),
    ]


def gemm_chunks(group: Group, gemm: GemmProducer, pr: Problem, tile, acc: int, ibases: list[int],
                wbases: list[int], chunks: list[tuple[int, int]], w_ic: int, load_inputs: bool, load_weights: bool,
                spare: int, spare_elems: int) -> None:
    """Reset, then per input-channel chunk: input and weight loads when streamed, and the GEMM.

    Chunk k reads its inputs at ``ibases[k]`` and its weights at ``wbases[k]``:
    when consecutive chunks use different slots, the loads of one overlap the
    GEMM of the one before (double buffering inside a tile).
    ``w_ic`` is the number of input-channel tiles per output channel in the weight slot.
    A tile whose kernel needs partial sums keeps them in the ``spare_elems``
    accumulator elements at ``spare`` (reset first, added into the tile last).
    """
    kk = pr.kh * pr.kw
    room = Spare(acc, spare, tile.elems, spare_elems // tile.elems)
    kernels = []
    for (ic0, nic), ibase, wbase in zip(chunks, ibases, wbases, strict=True):
        w_off = 0 if load_weights else ic0 * kk
        dims = _dims(pr, tile, nic, nic if load_weights else w_ic)
        kernels.append(build_kernel(dims, (acc, ibase, wbase + w_off), spare=room))
    copies = max(room.used(k) for k in kernels)
    group.steps.append(Gemm(contiguous(tile.elems, acc), reset=True))
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

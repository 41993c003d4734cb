"""Pooling on the vector ALU.

The input window of a tile (with the DMA's zero padding) reaches an
accumulator region: int8 inputs through the input buffer and the GEMM core
(identity weight tile), int32 inputs by an ACC load. The output slot starts at
the neutral value (0 for sums; the smallest value of the input type for max
pooling, so nothing loses to it) and then one ALU instruction per window
position folds in that position for every output whose input pixel lies inside
the image (padding never takes part): all executions of one instruction write
distinct outputs from a separate region, so none depends on another.
"""

from __future__ import annotations

from vtasm.config import VTAConfig

from .dma import padded_plane_dma
from .kernels import contiguous
from .layouts import ACT
from .steps import ACC, INP, Alu, Gemm, Kernel, Load, Step


def _valid(pad_before: int, extent_in: int, pad_after: int, count: int, stride: int, k: int) -> list[int]:
    """Output positions (a contiguous run) whose tap k reads an image pixel rather than padding."""
    return [o for o in range(count) if pad_before <= o * stride + k < extent_in - pad_after]


def pool_steps(pool, pr, tile, slots, cfg: VTAConfig) -> list[Step]:
    """Loads, identity GEMM and ALU folds of one pooling tile into its accumulator slot 0."""
    x = pool.x
    dims = (x.n_tiles, x.c_tiles, x.dims[2], x.dims[3])
    s, k = pool.stride, pool.size
    rows, cols = (tile.nh - 1) * s + k, (tile.nw - 1) * s + k
    row0, col0 = tile.h0 * s - pool.pad, tile.w0 * s - pool.pad
    plane_in = rows * cols
    plane_out = tile.nh * tile.nw
    planes = tile.nn * tile.nc
    inp = slots.inp[tile.thread]
    region = slots.pool_acc[tile.thread]
    out = slots.acc[tile.thread]
    steps: list[Step] = []
    int8 = x.kind == ACT
    for n in range(tile.nn):
        for c in range(tile.nc):
            at = (inp if int8 else region) + (n * tile.nc + c) * plane_in
            for dma in padded_plane_dma(dims, tile.n0 + n, tile.c0 + c, row0, rows, col0, cols, at):
                steps.append(Load(INP if int8 else ACC, x.name, dma))
    if int8:
        steps.append(Gemm(contiguous(planes * plane_in, region), reset=True))
        steps.append(Gemm(contiguous(planes * plane_in, region, inp, slots.identity, src_step=1)))
    steps.append(Gemm(contiguous(planes * plane_out, out), reset=True))
    if pool.kind == "max":
        fill = contiguous(planes * plane_out, out)
        if int8:
            steps.append(Alu(fill, "add", -(1 << (cfg.inp_width - 1))))
        else:  # -2**31 = -1 << 31, in portable shift steps
            steps += [Alu(fill, "add", -1), Alu(fill, "shr", -16), Alu(fill, "shr", -15)]
    y0 = max(0, -row0)  # padding rows and columns of the window (the same for every plane)
    y1 = max(0, row0 + rows - x.dims[2])
    x0 = max(0, -col0)
    x1 = max(0, col0 + cols - x.dims[3])
    op = "max" if pool.kind == "max" else "add"
    for kh in range(k):
        out_rows = _valid(y0, rows, y1, tile.nh, s, kh)
        if not out_rows:
            continue
        for kw in range(k):
            out_cols = _valid(x0, cols, x1, tile.nw, s, kw)
            if not out_cols:
                continue
            r, q = out_rows[0], out_cols[0]
            uops = tuple((out + p * plane_out + r * tile.nw + q, region + p * plane_in + (r * s + kh) * cols +
                          q * s + kw, 0) for p in range(planes))
            kernel = Kernel(uops, len(out_rows), len(out_cols), (tile.nw, 1), (s * cols, s))
            steps.append(Alu(kernel, op))
    return steps

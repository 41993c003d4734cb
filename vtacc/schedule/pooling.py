"""Pooling on the vector ALU.

The input window of a tile (with the DMA's zero padding) reaches an
accumulator region: int8 inputs through the input buffer and the GEMM core
(identity weight tile), int32 inputs by an ACC load. The output slot starts at
the neutral value (0 for sums; the smallest value of the input type for max
pooling, so nothing loses to it) and then one ALU instruction per window
position folds in that position for every output whose input pixel lies inside
the image (padding never takes part): all executions of one instruction write
distinct outputs from a separate region, so none depends on another.

A window with a stride (ResNet's 3x3 stride-2 max pool) folds separably
instead, in the input region itself: into the pixel of a tap every output
reads inside the image, first each image row's column taps, then those
results' row taps, then one copy into the zeroed output slot. The tap is
chosen so that no other tap lies whole strides away from it: no fold reads
where an output's result is gathering, so the order of the folds does not
matter, and max and wrapping sums are the same in any order. A 3x3 window
takes 2 + 2 folds (the first two over about twice the outputs) and a copy
instead of 9 folds and a fill: on the 2019 Chisel core's 6 cycles a tensor
fold, ResNet-18's first max pool 1.32 M -> about 1.1 M cycles.
"""

from __future__ import annotations

from vtasm.config import VTAConfig

from .dma import padded_plane_loads
from .kernels import contiguous
from .layouts import ACT
from .problem import pooled_window
from .steps import ACC, INP, Alu, Gemm, Kernel, Step


def _valid(pad_before: int, extent_in: int, pad_after: int, count: int, stride: int, k: int) -> list[int]:
    """Output positions (a contiguous run) whose tap k reads an image pixel rather than padding."""
    return [o for o in range(count) if pad_before <= o * stride + k < extent_in - pad_after]


def separable_tap(k: int, stride: int, pad: int) -> int | None:
    """The window tap a pooling folds into in place, separably (module docstring), or None: a tap every
    output reads inside the image (pad <= tap <= k - 1 - pad) that no other tap's offset from it reaches by
    whole strides (so no fold reads where another output's result goes)."""
    for tap in range(pad, k - pad):
        if stride > 1 and all((other - tap) % stride for other in range(k) if other != tap):
            return tap
    return None


def pool_steps(pool, pr, tile, slots, cfg: VTAConfig) -> list[Step]:
    """Loads, identity GEMM and ALU folds of one pooling tile into its accumulator slot 0."""
    x = pool.x
    dims = (x.n_tiles, x.c_tiles, x.dims[2], x.dims[3])
    s, k = pool.stride, pool.size
    rows, row0, y0, y1 = pooled_window((k, s, pool.pad), tile.h0, tile.nh, x.dims[2])
    cols, col0, x0, x1 = pooled_window((k, s, pool.pad), tile.w0, tile.nw, x.dims[3])
    plane_in = rows * cols
    planes = tile.nn * tile.nc
    inp = slots.inp[tile.thread]
    region = slots.pool_acc[tile.thread]
    out = slots.acc[tile.thread]
    steps: list[Step] = []
    int8 = x.kind == ACT
    for n in range(tile.nn):
        for c in range(tile.nc):
            at = (inp if int8 else region) + (n * tile.nc + c) * plane_in
            steps += padded_plane_loads(INP if int8 else ACC, x.name, dims, tile.n0 + n, tile.c0 + c, row0, rows,
                                        col0, cols, at)
    if int8:
        steps.append(Gemm(contiguous(planes * plane_in, region), reset=True))
        steps.append(Gemm(contiguous(planes * plane_in, region, inp, slots.identity, src_step=1)))
    return steps + fold_steps(pool.kind, k, s, pool.pad, (rows, cols, y0, y1, x0, x1), tile, region, out,
                              -(1 << (cfg.inp_width - 1)) if int8 else None)


def fold_steps(kind: str, k: int, s: int, pad: int, window: tuple[int, ...], tile, region: int, out: int,
               lowest: int | None) -> list[Step]:
    """The output slot zeroed, then the windows of the input region (``window``: its rows and columns, padding
    included, and the padding rows and columns before and after the image) folded into it: separably where
    a tap suits (module docstring), else a fold per window position over a filled slot. ``lowest``: the
    smallest value of the input (max pooling's fill; None: int32's)."""
    rows, cols, y0, y1, x0, x1 = window
    plane_in, plane_out = rows * cols, tile.nh * tile.nw
    planes = tile.nn * tile.nc
    steps: list[Step] = [Gemm(contiguous(planes * plane_out, out), reset=True)]
    op = "max" if kind == "max" else "add"
    tap = separable_tap(k, s, pad)
    if tap is not None and _valid(y0, rows, y1, tile.nh, s, tap) == list(range(tile.nh)) \
            and _valid(x0, cols, x1, tile.nw, s, tap) == list(range(tile.nw)):
        return steps + _separable(tap, op, k, s, window, tile, planes, region, out)
    if kind == "max":
        fill = contiguous(planes * plane_out, out)
        if lowest is not None:
            steps.append(Alu(fill, "add", lowest))
        else:  # -2**31 = -1 << 31, in portable shift steps
            steps += [Alu(fill, "add", -1), Alu(fill, "shr", -16), Alu(fill, "shr", -15)]
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


def _separable(tap: int, op: str, k: int, s: int, window: tuple[int, ...], tile, planes: int, region: int,
               out: int) -> list[Step]:
    """The window folded in place where tap (tap, tap) of each output sits: along each image row first (a
    fold per other column tap, over the rows inside the image), then down the columns (a fold per other
    row tap, over those results), then copied into the output slot (zeroed before): 2(k - 1) folds of
    about twice the output and one copy instead of k*k folds and a fill."""
    rows, cols, y0, y1, x0, x1 = window
    plane_in, plane_out = rows * cols, tile.nh * tile.nw
    steps: list[Step] = []
    image_rows = rows - y0 - y1
    for kw in range(k):
        out_cols = _valid(x0, cols, x1, tile.nw, s, kw)
        if kw == tap or not out_cols or not image_rows:
            continue
        first = y0 * cols + out_cols[0] * s
        at = [region + p * plane_in + first for p in range(planes)]
        uops = tuple((a + tap, a + kw, 0) for a in at)
        steps.append(Alu(Kernel(uops, image_rows, len(out_cols), (cols, s), (cols, s)), op))
    for kh in range(k):
        out_rows = _valid(y0, rows, y1, tile.nh, s, kh)
        if kh == tap or not out_rows:
            continue
        r = out_rows[0] * s
        uops = tuple((region + p * plane_in + (r + tap) * cols + tap, region + p * plane_in + (r + kh) * cols + tap, 0)
                     for p in range(planes))
        steps.append(Alu(Kernel(uops, len(out_rows), tile.nw, (s * cols, s), (s * cols, s)), op))
    uops = tuple((out + p * plane_out, region + p * plane_in + tap * cols + tap, 0) for p in range(planes))
    steps.append(Alu(Kernel(uops, tile.nh, tile.nw, (tile.nw, 1), (s * cols, s)), "add"))
    return steps

"""How kernel tensors are laid out in DRAM: VTA's tiled layouts, seen as 4-D arrays.

Every tensor the back end touches is viewed as NCHW: a matrix [N, C] is
[N, C, 1, 1], a vector [C] is [1, C, 1, 1]. Its packed DRAM form splits N by
BATCH and C by BLOCK (BLOCK_IN == BLOCK_OUT), giving elements
[N/BATCH, C/BLOCK, H, W], each one VTA buffer element (a BATCH x BLOCK tile).
Weights [OC, IC, KH, KW] are packed as [OC/BLOCK, IC/BLOCK, KH, KW] elements of
BLOCK x BLOCK. Dimensions that are not multiples are zero padded. The tensor
table of the program records the logical shape and tiles, so `vtasim --input`
and `--output` work on logical arrays.

Vectors [C] (per-channel biases, or rank-1 tensors) are stored as one element
per channel block, with the BLOCK values repeated for each of the BATCH rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vtasm.config import VTAConfig
from vtasm.program import TensorInfo

ACT, WGT, ACC, BIAS = "act", "wgt", "acc", "bias"


@dataclass(frozen=True)
class DramTensor:
    """A tensor in DRAM: its name, dtype, 4-D view and how its elements are packed."""

    name: str
    dtype: str
    logical: tuple[int, ...]  # the shape as declared
    dims: tuple[int, int, int, int]  # N, C, H, W (weights: OC, IC, KH, KW)
    kind: str  # ACT (int8 or int32 activation tiles), WGT, ACC (int32 tiles), BIAS
    cfg: VTAConfig
    constant: bool = False  # made by the compiler (identity tiles), not a kernel tensor
    view: tuple[int, ...] | None = None  # weights: the logical array reshaped to this before packing
    spread: tuple[int, int] | None = None  # grouped weights: (groups, width) of the block-diagonal expansion
    slice_of: DramTensor | None = None  # a channel slice of this tensor (written in place by a concat part)
    slice_c0: int = 0  # the slice's first channel tile in that tensor
    patches: tuple[int, int, int] | None = None  # (K, stride, pad): stored as a convolution's windows (patches.py)

    @property
    def n_tiles(self) -> int:
        """Extent of the first packed axis (batch tiles; output-channel tiles for weights)."""
        return math.ceil(self.dims[0] / (self.cfg.block_out if self.kind == WGT else self.cfg.batch))

    @property
    def c_tiles(self) -> int:
        return math.ceil(self.dims[1] / self.cfg.block_in)

    def element(self, n: int, c: int, h: int = 0, w: int = 0) -> int:
        """Index of element (n tile, c tile, h, w) in units of this tensor's elements."""
        _, _, hh, ww = self.dims
        return ((n * self.c_tiles + c) * hh + h) * ww + w

    @property
    def elem_bytes(self) -> int:
        cfg = self.cfg
        if self.kind == WGT:
            return cfg.wgt_elem_bytes
        if self.kind in (ACC, BIAS):
            return cfg.acc_elem_bytes
        return cfg.inp_elem_bytes if self.dtype == "int8" else cfg.acc_elem_bytes

    @property
    def n_elements(self) -> int:
        if self.kind == BIAS:
            return self.c_tiles
        return self.n_tiles * self.c_tiles * self.dims[2] * self.dims[3]

    @property
    def nbytes(self) -> int:
        return self.n_elements * self.elem_bytes

    def tensor_info(self) -> TensorInfo:
        """The tensor-table entry that packs and unpacks the logical array."""
        cfg = self.cfg
        rank = len(self.logical)
        if rank == 1 and self.kind != WGT:
            # one element per channel block; its BATCH rows hold copies (rows past the first are padding
            # for activations, and the same bias for every row for per-channel vectors)
            return TensorInfo(self.name, self.dtype, self.logical, (cfg.block_out,), repeat=cfg.batch)
        first = cfg.block_out if self.kind == WGT else cfg.batch
        if self.view is not None or self.spread is not None or self.patches is not None:
            return TensorInfo(self.name, self.dtype, self.logical, (first, cfg.block_in, 1, 1), view=self.view,
                              groups=self.spread, patches=self.patches)
        return TensorInfo(self.name, self.dtype, self.logical, (first, cfg.block_in) + (1,) * (rank - 2))


def view4(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The NCHW view of a logical shape of rank 1, 2 or 4."""
    if len(shape) == 1:
        return (1, shape[0], 1, 1)
    if len(shape) == 2:
        return (shape[0], shape[1], 1, 1)
    if len(shape) == 4:
        return shape  # type: ignore[return-value]
    raise ValueError(f"rank {len(shape)}")


def dram_tensor(name: str, dtype: str, shape: tuple[int, ...], kind: str, cfg: VTAConfig,
                constant: bool = False, view: tuple[int, ...] | None = None,
                spread: tuple[int, int] | None = None, patches: tuple[int, int, int] | None = None) -> DramTensor:
    """A DramTensor for a logical tensor used as ``kind`` (weights possibly reshaped or spread, a 4-D tensor
    possibly laid out as patches: see TensorInfo)."""
    dims = view4(tuple(view or shape))
    if spread is not None:
        dims = (dims[0], spread[1], dims[2], dims[3])
    if patches is not None:
        k, stride, pad = patches
        n, c, h, w = dims
        dims = (n, k * k * c, (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1)
    return DramTensor(name, dtype, tuple(shape), dims, kind, cfg, constant, view, spread, patches=patches)

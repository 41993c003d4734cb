"""The in-memory form of a VTA program: what a .vbin or raw directory holds.

A program is an instruction stream, a micro-op table placed in DRAM, named data
segments at DRAM byte addresses, a tensor table giving some segments a logical
shape and packed layout, the DRAM ranges that are its results, and an optional
source map from instruction index to source file and line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .config import VTAConfig
from .encoding import Instruction, MicroOp
from .errors import FormatError

DTYPES = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "uint8": np.uint8}


def first_overlap(ranges: list[tuple[int, int]]) -> tuple[int, int] | None:
    """Of DRAM ranges [start, end), the first two non-empty ones that overlap when scanned by address, as
    their positions in ``ranges`` (the earlier listed first); None when they all lie apart."""
    widest: int | None = None
    for i in sorted((i for i, (lo, hi) in enumerate(ranges) if hi > lo), key=lambda i: (ranges[i][0], i)):
        if widest is not None and ranges[i][0] < ranges[widest][1]:
            return min(widest, i), max(widest, i)
        if widest is None or ranges[i][1] > ranges[widest][1]:
            widest = i
    return None


def zero_bytes(size: int) -> memoryview:
    """``size`` zero bytes, read-only, whose pages are not touched until something reads them."""
    zeros = np.zeros(size, dtype=np.uint8)  # calloc: the memory is the kernel's zero page until written
    zeros.flags.writeable = False
    return zeros.data


@dataclass
class Segment:
    """Bytes placed at a DRAM byte address before the run."""

    name: str
    addr: int
    data: bytes | memoryview  # read-only; a view of the file it was read from
    file: str | None = None  # raw-directory file name when not ``name + '.bin'``
    zero: bool = field(default=False, compare=False)  # declared all zero (zero_bytes): nothing to read or scan

    @property
    def end(self) -> int:
        return self.addr + len(self.data)

    @property
    def file_name(self) -> str:
        return self.file or f"{self.name}.bin"


@dataclass(frozen=True)
class TensorInfo:
    """The logical view of a segment: dtype, logical shape and tile per dimension.

    The packed layout splits every logical dimension d of extent n_d by its tile
    t_d: the packed array has shape [ceil(n_0/t_0), ..., ceil(n_k/t_k)] followed by
    the tiles greater than one, in dimension order; logical indices past n_d are
    zero padding. VTA's layouts are all of this form: a [rows, cols] matrix with
    tile (BATCH, BLOCK_IN) is [rows/B, cols/BI, B, BI]; NCHW with tile
    (BATCH, BLOCK_IN, 1, 1) is [N/B, C/BI, H, W, B, BI].

    Two optional steps come before the tiling. ``view`` reshapes the logical
    array (C order): a dense layer's weight [O, C*H*W] read after a flattened
    convolution output is tiled as [O, C, H, W]. ``groups`` = (G, width)
    spreads the weight of a grouped convolution, [OC, IC/G, KH, KW], over
    ``width`` input channels: group g's channels start at (g * IC/G) mod width
    and every other entry is zero (block-diagonal tiles). ``patches`` = (K,
    stride, pad) stores a 4-D array [N, C, H, W] as the K x K windows a
    convolution of that stride and padding reads: [N, K*K*C, Ho, Wo], channel
    (ky*K + kx)*C + c of position (yo, xo) holding element (c, yo*stride - pad
    + ky, xo*stride - pad + kx) (zero outside the array). A convolution's
    weights [OC, C, K, K] with patches (K, 1, 0) are [OC, K*K*C, 1, 1] in the
    same order, so the convolution is a 1x1 one over the patches (vtacc lays
    out a network's first layer so: 3 channels padded to a block of 16 would
    waste 13/16 of its multiplies). Unpacking takes each element from a window
    that holds it (one a stride leaves out comes back zero).
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    tile: tuple[int, ...]
    repeat: int = 1  # each tile stored this many times (a broadcast axis before the tile axes)
    view: tuple[int, ...] | None = None  # the logical array reshaped to this before tiling
    groups: tuple[int, int] | None = None  # (G, width): grouped weights spread block-diagonally
    patches: tuple[int, int, int] | None = None  # (K, stride, pad): stored as a convolution's windows

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """The shape the tiles split: the logical shape after ``view``, ``groups`` and ``patches``."""
        shape = self.view or self.shape
        if self.groups is not None:
            shape = (shape[0], self.groups[1]) + tuple(shape[2:])
        if self.patches is not None:
            k, stride, pad = self.patches
            n, c, h, w = shape
            shape = (n, k * k * c, (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1)
        return shape

    def layout_problem(self) -> str | None:
        """Why ``view``, ``groups`` and ``tile`` do not fit the shape, or None."""
        if self.view is not None and math.prod(self.view) != math.prod(self.shape):
            return f"view {list(self.view)} does not hold the {math.prod(self.shape)} elements of {list(self.shape)}"
        if self.groups is not None:
            base = self.view or self.shape
            g, width = self.groups
            if len(base) != 4:
                return "groups spread a 4-D weight [OC, IC/G, KH, KW]"
            if g < 1 or base[0] % g:
                return f"groups={g} must divide the {base[0]} output channels"
            if width < base[1] or width % base[1]:
                return f"the width {width} must be a multiple of the {base[1]} channels per group"
        if self.patches is not None:
            if len(self.shape) != 4 or self.view is not None or self.groups is not None:
                return "patches lay out a 4-D array [N, C, H, W] (with no view or groups)"
            k, stride, pad = self.patches
            if k < 1 or stride < 1 or pad < 0:
                return f"patches [K, stride, pad] must be positive (pad at least 0), got {list(self.patches)}"
            if min(self.shape[2:]) + 2 * pad < k:
                return f"a {k}x{k} patch does not fit the {self.shape[2]}x{self.shape[3]} array padded by {pad}"
        if len(self.tile) != len(self.stored_shape):
            return f"tile has {len(self.tile)} values for {len(self.stored_shape)} dimensions"
        return None

    def _to_patches(self, arr: np.ndarray) -> np.ndarray:
        k, stride, pad = self.patches  # type: ignore[misc]
        n, c = arr.shape[:2]
        _, _, ho, wo = self.stored_shape
        padded = np.pad(arr, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        windows = np.lib.stride_tricks.sliding_window_view(padded, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]
        windows = windows[:, :, :ho, :wo]  # [N, C, Ho, Wo, ky, kx]
        return np.ascontiguousarray(windows.transpose(0, 4, 5, 1, 2, 3)).reshape(n, k * k * c, ho, wo)

    def _from_patches(self, stored: np.ndarray) -> np.ndarray:
        k, stride, pad = self.patches  # type: ignore[misc]
        n, c, h, w = self.shape
        _, _, ho, wo = self.stored_shape
        windows = stored.reshape(n, k, k, c, ho, wo)
        padded = np.zeros((n, c, h + 2 * pad, w + 2 * pad), dtype=stored.dtype)
        for ky in range(k):
            for kx in range(k):
                padded[:, :, ky : ky + stride * (ho - 1) + 1 : stride, kx : kx + stride * (wo - 1) + 1 : stride] = \
                    windows[:, ky, kx]
        return padded[:, :, pad : pad + h, pad : pad + w]

    def _spread(self, base: np.ndarray) -> np.ndarray:
        g, width = self.groups  # type: ignore[misc]
        oc, icg = base.shape[0], base.shape[1]
        out = np.zeros((oc, width) + base.shape[2:], dtype=base.dtype)
        for o in range(oc):
            start = (o // (oc // g) * icg) % width
            out[o, start:start + icg] = base[o]
        return out

    def _gather(self, stored: np.ndarray) -> np.ndarray:
        g, width = self.groups  # type: ignore[misc]
        base = self.view or self.shape
        oc, icg = base[0], base[1]
        out = np.zeros(base, dtype=stored.dtype)
        for o in range(oc):
            start = (o // (oc // g) * icg) % width
            out[o] = stored[o, start:start + icg]
        return out

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(DTYPES[self.dtype])

    @property
    def outer_shape(self) -> tuple[int, ...]:
        return tuple(math.ceil(n / t) for n, t in zip(self.stored_shape, self.tile, strict=True))

    @property
    def tiled_dims(self) -> tuple[int, ...]:
        return tuple(i for i, t in enumerate(self.tile) if t > 1)

    @property
    def packed_shape(self) -> tuple[int, ...]:
        rep = (self.repeat,) if self.repeat > 1 else ()
        return self.outer_shape + rep + tuple(self.tile[i] for i in self.tiled_dims)

    @property
    def nbytes(self) -> int:
        return math.prod(self.packed_shape) * self.np_dtype.itemsize

    def conform(self, array: np.ndarray, origin: str) -> np.ndarray:
        """The array in this tensor's dtype: the same dtype, or integers that all fit it; else FormatError."""
        want = self.np_dtype
        if tuple(array.shape) != self.shape:
            raise FormatError(f"{origin}: tensor {self.name} is {self.dtype}{list(self.shape)}, "
                              f"the file holds {array.dtype}{list(array.shape)}")
        if array.dtype == want:
            return array
        if not np.issubdtype(array.dtype, np.integer):
            raise FormatError(f"{origin}: tensor {self.name} is {self.dtype}, the file holds {array.dtype}")
        if array.size:
            info = np.iinfo(want)
            lo, hi = int(array.min()), int(array.max())
            if lo < info.min or hi > info.max:
                raise FormatError(f"{origin}: tensor {self.name} is {self.dtype}, "
                                  f"the file's values {lo}..{hi} do not fit it")
        return array.astype(want)

    def pack(self, array: np.ndarray) -> bytes:
        """Logical array -> packed little-endian bytes (zero padded)."""
        arr = np.asarray(array)
        if tuple(arr.shape) != self.shape:
            raise FormatError(
                f"tensor {self.name}: expected shape {list(self.shape)}, got {list(arr.shape)}"
            )
        if arr.dtype != self.np_dtype:
            raise FormatError(f"tensor {self.name}: expected dtype {self.dtype}, got {arr.dtype}")
        if self.view is not None:
            arr = arr.reshape(self.view)
        if self.groups is not None:
            arr = self._spread(arr)
        if self.patches is not None:
            arr = self._to_patches(arr)
        padded_shape = tuple(o * t for o, t in zip(self.outer_shape, self.tile, strict=True))
        padded = np.zeros(padded_shape, dtype=self.np_dtype)
        padded[tuple(slice(0, n) for n in arr.shape)] = arr
        tiled = _tile(padded, self.tile)
        if self.repeat > 1:
            rank = len(self.tile)
            tiled = np.broadcast_to(np.expand_dims(tiled, rank), self.packed_shape)
        return np.ascontiguousarray(tiled, dtype=self.np_dtype.newbyteorder("<")).tobytes()  # one copy, then the bytes

    def unpack(self, data: bytes) -> np.ndarray:
        """Packed bytes -> logical array."""
        if len(data) != self.nbytes:
            raise FormatError(f"tensor {self.name}: expected {self.nbytes} bytes, got {len(data)}")
        packed = np.frombuffer(data, dtype=self.np_dtype.newbyteorder("<")).reshape(self.packed_shape)
        if self.repeat > 1:
            packed = packed.take(0, axis=len(self.tile))
        padded = _untile(packed, self.tile, len(self.tile)).astype(self.np_dtype)
        stored = padded[tuple(slice(0, n) for n in self.stored_shape)]
        if self.groups is not None:
            stored = self._gather(stored)
        if self.patches is not None:
            stored = self._from_patches(stored)
        return np.ascontiguousarray(stored.reshape(self.shape))


def _tile(padded: np.ndarray, tile: tuple[int, ...]) -> np.ndarray:
    split_shape = []
    for n, t in zip(padded.shape, tile, strict=True):
        split_shape += [n // t, t]
    split = padded.reshape(split_shape)
    rank = len(tile)
    order = [2 * i for i in range(rank)] + [2 * i + 1 for i in range(rank) if tile[i] > 1]
    order += [2 * i + 1 for i in range(rank) if tile[i] == 1]
    return np.ascontiguousarray(split.transpose(order)).reshape(
        [padded.shape[i] // tile[i] for i in range(rank)] + [t for t in tile if t > 1]
    )


def _untile(packed: np.ndarray, tile: tuple[int, ...], rank: int) -> np.ndarray:
    outer = packed.shape[:rank]
    full = packed.reshape(list(packed.shape) + [1] * sum(1 for t in tile if t == 1))
    order = [2 * i for i in range(rank)] + [2 * i + 1 for i in range(rank) if tile[i] > 1]
    order += [2 * i + 1 for i in range(rank) if tile[i] == 1]
    inverse = np.argsort(order)
    merged = full.transpose(inverse)
    return merged.reshape([o * t for o, t in zip(outer, tile, strict=True)])


@dataclass(frozen=True)
class DumpRange:
    """A DRAM range that is one of the program's results."""

    addr: int
    nbytes: int
    file: str


@dataclass(frozen=True)
class SourceLoc:
    """Where an instruction came from: a file name and line."""

    file: str
    line: int


@dataclass
class Program:
    """A complete VTA program for one configuration."""

    config: VTAConfig
    instructions: list[Instruction] = field(default_factory=list)
    uops: list[MicroOp] = field(default_factory=list)
    insn_addr: int = 0
    uop_addr: int = 0
    segments: list[Segment] = field(default_factory=list)
    tensors: list[TensorInfo] = field(default_factory=list)
    dumps: list[DumpRange] = field(default_factory=list)
    uop_labels: dict[str, int] = field(default_factory=dict)
    source_map: dict[int, SourceLoc] | None = None
    dram_bytes: int | None = None
    insn_file: str = "insn.bin"
    uop_file: str = "uop.bin"

    @property
    def insn_end(self) -> int:
        return self.insn_addr + 16 * len(self.instructions)

    @property
    def uop_end(self) -> int:
        return self.uop_addr + 4 * len(self.uops)

    def dram_size(self) -> int:
        """Bytes of DRAM the program needs (explicit, else the highest end address)."""
        if self.dram_bytes is not None:
            return self.dram_bytes
        ends = [self.insn_end, self.uop_end]
        ends += [s.end for s in self.segments]
        ends += [d.addr + d.nbytes for d in self.dumps]
        return max(ends)

    def segment(self, name: str) -> Segment:
        for seg in self.segments:
            if seg.name == name:
                return seg
        raise FormatError(f"no segment named {name}")

    def tensor(self, name: str) -> TensorInfo:
        for t in self.tensors:
            if t.name == name:
                return t
        known = ", ".join(t.name for t in self.tensors) or "none"
        raise FormatError(f"no tensor named {name} (tensors: {known})")

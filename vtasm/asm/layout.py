"""Data segments and DRAM placement for the assembler.

A segment is declared by ``.data`` or ``.tensor`` and filled by content
directives. Sizes are known before placement; values of ``.int*`` lists are
evaluated after it, so they may hold segment addresses. Placement follows
docs/assembly.md: ``@ ADDR`` segments where they say, the others first-fit from
0x1000 at their alignment, then the micro-op table and the instruction stream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vtasm.errors import AsmError, FormatError, SourceSpan
from vtasm.fileio import read_bytes, read_npy
from vtasm.program import DTYPES, TensorInfo, first_overlap

from . import ast
from .expr import Symbols
from .parse import suggest

FIRST_FREE = 0x1000  # the first page is left empty (address 0 is null for some tools)
DEFAULT_ALIGN = 4096
TABLE_ALIGN = 4096
INT_DIRECTIVES = {".int8": "int8", ".int16": "int16", ".int32": "int32", ".uint8": "uint8"}
CONTENT_DIRECTIVES = frozenset(INT_DIRECTIVES) | {".hex", ".zero", ".file"}
_TENSOR_OPTIONS = {"from": " (use .file for raw data)", "repeat": "", "view": "", "groups": "", "patches": ""}


@dataclass
class SegmentDecl:
    """A ``.data`` / ``.tensor`` directive and the content directives after it."""

    directive: ast.Directive
    contents: list[ast.Directive] = field(default_factory=list)

    @property
    def name(self) -> ast.Name:
        return self.directive.args[0]


@dataclass
class PreparedSegment:
    """A segment whose size is known: content pieces, options, tensor view."""

    decl: SegmentDecl
    size: int
    pieces: list  # bytes, or (dtype name, exprs) to evaluate after placement
    tensor: TensorInfo | None
    addr: int | None
    align: int
    file: str | None

    def data(self, symbols: Symbols) -> bytes:
        """The segment's bytes (``.int*`` values evaluated now, zero padded to its size)."""
        out = bytearray()
        for piece in self.pieces:
            out += piece if isinstance(piece, bytes) else _pack_ints(piece[0], piece[1], symbols)
        return bytes(out) + bytes(self.size - len(out))


@dataclass(frozen=True)
class Region:
    """A placed DRAM range, for overlap checks."""

    what: str
    addr: int
    size: int
    span: SourceSpan | None

    @property
    def end(self) -> int:
        return self.addr + self.size


def prepare_segment(decl: SegmentDecl, symbols: Symbols, base_dir: Path,
                    default_align: int = DEFAULT_ALIGN) -> PreparedSegment:
    """Evaluate a segment's options, tensor view and content sizes."""
    d = decl.directive
    options: dict[str, tuple[object, SourceSpan]] = {}
    for key, value, span in d.options:
        if key in options:
            raise AsmError(f"option '{key}' is given twice", span)
        if key in _TENSOR_OPTIONS and d.name != ".tensor":
            raise AsmError(f"'{key}' is only for .tensor{_TENSOR_OPTIONS[key]}", span)
        options[key] = (value, span)
    addr = _non_negative(symbols, options["@"][0], "address") if "@" in options else None
    align = default_align
    if "align" in options:
        align = symbols.eval(options["align"][0])
        if align <= 0:
            raise AsmError(f"alignment must be positive, got {align}", options["align"][1])
    file = options["file"][0].value if "file" in options else None
    pieces = [_content(c, symbols, base_dir) for c in decl.contents]
    size = sum(len(p) if isinstance(p, bytes) else len(p[1]) * np.dtype(p[0]).itemsize for p in pieces)
    tensor = None
    if d.name == ".tensor":
        repeat = _positive(symbols, options["repeat"][0], "repeat") if "repeat" in options else 1
        tensor = _tensor_info(d, symbols, repeat, options)
        if "from" in options:
            src, span = options["from"]
            if decl.contents:
                raise AsmError(f"tensor {tensor.name} takes its content from a file or from "
                               "content directives, not both", decl.contents[0].span)
            try:
                path = base_dir / src.value
                pieces = [tensor.pack(tensor.conform(read_npy(path), str(path)))]
            except FormatError as exc:
                raise AsmError(exc.message, span) from None
        elif size > tensor.nbytes:
            raise AsmError(f"the content of tensor {tensor.name} is {size} bytes, more than its "
                           f"packed size ({tensor.nbytes} bytes)", d.span)
        size = tensor.nbytes
    return PreparedSegment(decl, size, pieces, tensor, addr, align, file)


def _non_negative(symbols: Symbols, expr: ast.Expr, what: str) -> int:
    value = symbols.eval(expr)
    if value < 0:
        raise AsmError(f"{what} must not be negative, got {value}", expr.span)
    return value


def _tensor_info(d: ast.Directive, symbols: Symbols, repeat: int, options: dict) -> TensorInfo:
    name, dtype, dims, tile = d.args
    if dtype.value not in DTYPES:
        raise AsmError(f"unknown dtype '{dtype.value}'{suggest(dtype.value, DTYPES)} "
                       f"(dtypes: {', '.join(DTYPES)})", dtype.span)
    if not dims:
        raise AsmError(f"tensor {name.value} needs at least one dimension", d.span)
    shape = tuple(_positive(symbols, e, "a dimension") for e in dims)
    tiles = tuple(_positive(symbols, e, "a tile") for e in tile or ())
    view = tuple(_positive(symbols, e, "a view dimension") for e in options["view"][0]) if "view" in options else None
    groups = None
    if "groups" in options:
        g, width = (_positive(symbols, e, "a groups value") for e in options["groups"][0])
        groups = (g, width)
    patches = None
    if "patches" in options:
        k, stride, pad = options["patches"][0]
        patches = (_positive(symbols, k, "a patch size"), _positive(symbols, stride, "a patch stride"),
                   _non_negative(symbols, pad, "a patch padding"))
    if view is None and groups is None and len(tiles) != len(shape):
        raise AsmError(f"tile has {len(tiles)} values for {len(shape)} dimensions", d.span)
    tensor = TensorInfo(name.value, dtype.value, shape, tiles, repeat, view, groups, patches)
    problem = tensor.layout_problem()
    if problem is not None:
        raise AsmError(f"tensor {name.value}: {problem}", d.span)
    return tensor


def _positive(symbols: Symbols, expr: ast.Expr, what: str) -> int:
    value = symbols.eval(expr)
    if value < 1:
        raise AsmError(f"{what} must be at least 1, got {value}", expr.span)
    return value


def _content(d: ast.Directive, symbols: Symbols, base_dir: Path) -> bytes | tuple[str, tuple]:
    if d.name in INT_DIRECTIVES:
        return (INT_DIRECTIVES[d.name], d.args[0])
    if d.name == ".zero":
        return bytes(_non_negative(symbols, d.args[0], "a size"))
    if d.name == ".hex":
        out = bytearray()
        for s in d.args:
            digits = re.sub(r"\s+", "", s.value)
            if len(digits) % 2 or not re.fullmatch(r"[0-9A-Fa-f]*", digits):
                raise AsmError("'.hex' takes pairs of hex digits", s.span)
            out += bytes.fromhex(digits)
        return bytes(out)
    path = base_dir / d.args[0].value  # .file
    try:
        if path.suffix == ".npy":
            arr = read_npy(path)
            return np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        return read_bytes(path, "data file")
    except FormatError as exc:
        raise AsmError(exc.message, d.args[0].span) from None


def _pack_ints(dtype: str, exprs: tuple[ast.Expr, ...], symbols: Symbols) -> bytes:
    info = np.iinfo(dtype)
    out = bytearray()
    for expr in exprs:
        value = symbols.eval(expr)
        if not info.min <= value <= info.max:
            raise AsmError(f"value {value} does not fit {dtype} ({info.min}..{info.max})", expr.span)
        out += value.to_bytes(info.bits // 8, "little", signed=info.min < 0)
    return bytes(out)


# -- placement ----------------------------------------------------------------------


def align_up(value: int, align: int) -> int:
    return -(-value // align) * align


def first_fit(size: int, align: int, taken: list[Region]) -> int:
    """The lowest address >= 0x1000, aligned, where ``size`` bytes overlap nothing taken."""
    need = max(size, 1)
    addr = align_up(FIRST_FREE, align)
    moved = True
    while moved:
        moved = False
        for r in taken:
            if r.size and addr < r.end and r.addr < addr + need:
                addr = align_up(r.end, align)
                moved = True
    return addr


def after_all(taken: list[Region]) -> int:
    """The first table-aligned address after everything placed so far (at least 0x1000)."""
    return align_up(max([FIRST_FREE] + [r.end for r in taken]), TABLE_ALIGN)


TABLE_NAMES = {"uop": "the micro-op table", "insn": "the instruction stream"}


def place(
    segments: list[PreparedSegment], tables: dict[str, tuple[int | None, int]], layout_span: SourceSpan | None
) -> dict[str, int]:
    """Give every segment and table an address and check that nothing overlaps.

    ``tables`` maps "uop" and "insn" to (address from .layout or None, size);
    returns their addresses. Explicit addresses are taken first, then the other
    segments first-fit in order, then the tables after everything.
    """
    taken = [Region(TABLE_NAMES[k], addr, size, layout_span) for k, (addr, size) in tables.items()
             if addr is not None]
    fixed = list(taken)
    taken += [_region(s) for s in segments if s.addr is not None]
    for seg in segments:
        if seg.addr is None:
            seg.addr = first_fit(seg.size, seg.align, taken)
            taken.append(_region(seg))
    out = {}
    for key, (addr, size) in tables.items():
        if addr is None:
            addr = after_all(taken)
            taken.append(Region(TABLE_NAMES[key], addr, size, None))
        out[key] = addr
    check_overlaps([_region(s) for s in segments] + fixed)
    return out


def _region(seg: PreparedSegment) -> Region:
    return Region(f"segment {seg.decl.name.value}", seg.addr, seg.size, seg.decl.directive.span)


def check_overlaps(regions: list[Region]) -> None:
    """Raise for the first two non-empty regions that overlap (reported at the later one)."""
    pair = first_overlap([(r.addr, r.end) for r in regions])
    if pair is not None:
        first, second = regions[pair[0]], regions[pair[1]]
        raise AsmError(
            f"{second.what} ({second.addr:#x}..{second.end:#x}) overlaps "
            f"{first.what} ({first.addr:#x}..{first.end:#x})",
            second.span or first.span,
        )

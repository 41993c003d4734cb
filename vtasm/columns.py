"""A whole instruction stream decoded at once: one numpy column per field.

Reading a program decodes every instruction; doing it one instruction at a
time with bitstruct costs seconds on large programs. Here the stream is read
as pairs of little-endian 64-bit words (the reference header declares its
bit-fields over ``uint64_t`` and no field straddles two words), and every field
of every kind is cut out of all the instructions of that kind with a shift and
a mask. The layouts come from :mod:`vtasm.isa`, as the bitstruct formats of
:mod:`vtasm.encoding` do; tests check that both decoders agree on the golden
vectors and on random words.

:class:`InstructionList` keeps the columns and builds an
:class:`~vtasm.encoding.Instruction` only when one is asked for, so a tool that
runs the stream from its columns (the simulator) never builds them at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter

import numpy as np

from . import isa
from .config import VTAConfig
from .encoding import Instruction
from .errors import EncodeError
from .lazy import LazyList

INSN_BYTES = isa.INSN_BITS // 8


@dataclass
class StreamColumns:
    """Every instruction's fields as columns.

    ``fields[name][i]`` is field ``name`` of instruction i as its opcode's kind
    lays it out (zero when that kind has no such field); instructions whose
    opcode names no kind get the fields every kind shares (the head: opcode and
    dependency flags). ``canonical[i]`` says instruction i has no bit set outside
    its kind's fields, i.e. it decodes to a plain (not raw) instruction.
    """

    cfg: VTAConfig
    data: bytes
    opcode: np.ndarray
    known: np.ndarray
    canonical: np.ndarray
    fields: dict[str, np.ndarray]

    def __len__(self) -> int:
        return self.opcode.size

    def column(self, name: str) -> np.ndarray:
        """The column of one field (zeros for a field no instruction has)."""
        found = self.fields.get(name)
        return found if found is not None else np.zeros(len(self), dtype=np.int64)


def _cut(halves: tuple[np.ndarray, np.ndarray], f: isa.PlacedField, out: np.ndarray | None = None) -> np.ndarray:
    """Field ``f`` of every instruction from its (lo, hi) words, sign-extended when the field is signed
    (written into ``out``, an int64 row, when given)."""
    word, offset = divmod(f.offset, isa.WORD_BITS)
    values = np.right_shift(halves[word], np.uint64(offset), out=None if out is None else out.view(np.uint64))
    values &= np.uint64((1 << f.width) - 1)
    values = values.view(np.int64)  # fields are narrower than 64 bits: the same numbers
    if f.signed:
        values -= (values >> (f.width - 1)) << f.width
    return values


def _field_mask(placed: tuple[isa.PlacedField, ...]) -> tuple[int, int]:
    """The (lo, hi) word masks of the bits a layout's fields occupy."""
    masks = [0, 0]
    for f in placed:
        word, offset = divmod(f.offset, isa.WORD_BITS)
        masks[word] |= ((1 << f.width) - 1) << offset
    return masks[0], masks[1]


def decode_columns(data: bytes, cfg: VTAConfig) -> StreamColumns:
    """Decode a whole stream (a multiple of 16 bytes) into columns."""
    if len(data) % INSN_BYTES:
        raise EncodeError(f"instruction stream of {len(data)} bytes is not a multiple of 16")
    words = np.frombuffer(data, dtype="<u8").reshape(-1, 2)
    n = words.shape[0]
    opcode = (words[:, 0] & np.uint64(0x7)).astype(np.int64)
    known = np.zeros(n, dtype=bool)
    canonical = np.zeros(n, dtype=bool)
    layouts = [(spec.opcode, isa.layout(spec.name, cfg)) for spec in isa.KIND_BY_OPCODE.values()]
    unknown = ~np.isin(opcode, [op for op, _ in layouts])
    layouts.append((None, isa.layout("finish", cfg)))  # the head fields of unknown opcodes
    # which rows lay each field out where: a placement shared by several kinds is cut once for all of them
    placements: dict[str, dict[isa.PlacedField, np.ndarray]] = {}
    for op, placed in layouts:
        rows = unknown if op is None else opcode == op
        if not rows.any():
            continue
        if op is not None:
            known |= rows
            lo, hi = _field_mask(placed)
            stray = (words[:, 0] & np.uint64(~lo & (2**64 - 1))) | (words[:, 1] & np.uint64(~hi & (2**64 - 1)))
            canonical |= rows & (stray == 0)
        for f in placed:
            where = placements.setdefault(f.name, {})
            where[f] = where[f] | rows if f in where else rows
    halves = (np.ascontiguousarray(words[:, 0]), np.ascontiguousarray(words[:, 1]))
    block = np.empty((len(placements), n), dtype=np.int64)  # every column in one allocation
    fields: dict[str, np.ndarray] = {}
    for column, (name, where) in zip(block, placements.items(), strict=True):
        for k, (f, rows) in enumerate(where.items()):
            if k == 0:
                _cut(halves, f, column)
                column *= rows  # zero where no kind lays the field out
            else:
                np.copyto(column, _cut(halves, f), where=rows)
        fields[name] = column
    return StreamColumns(cfg, bytes(data), opcode, known, canonical, fields)


def _decode_order(placed: tuple[isa.PlacedField, ...]) -> list[str]:
    """Field names in the order Codec.decode lists them (top bit first), so dicts print alike."""
    return [f.name for f in sorted(placed, key=lambda f: -f.offset)]


class InstructionList(LazyList[Instruction]):
    """A decoded stream that builds each Instruction on first use (same objects as Codec.decode)."""

    noun = "instruction"

    def __init__(self, columns: StreamColumns, built: Sequence[Instruction] | None = None):
        """``built``: the Instruction objects of these columns, when the caller has them (handed out as they
        are instead of being built again)."""
        self.columns = columns
        self._names = {op: _decode_order(isa.layout(spec.name, columns.cfg)) for op, spec in isa.KIND_BY_OPCODE.items()}
        self._head = _decode_order(isa.layout("finish", columns.cfg))
        super().__init__(len(columns), self._build, built)

    @property
    def data(self) -> bytes:
        """The stream's bytes, as read."""
        return self.columns.data

    def _build(self, i: int) -> Instruction:
        c = self.columns
        op = int(c.opcode[i])
        names = self._names[op] if c.known[i] else self._head
        fields = {name: int(c.fields[name][i]) for name in names}
        if c.known[i] and c.canonical[i]:
            return Instruction(isa.KIND_BY_OPCODE[op].name, fields)
        return Instruction("raw", fields, raw=c.data[i * INSN_BYTES : (i + 1) * INSN_BYTES])


def decode_stream(data: bytes, cfg: VTAConfig) -> InstructionList:
    """A whole stream decoded at once (the same instructions as Codec.decode on each 16 bytes)."""
    return InstructionList(decode_columns(data, cfg))


def encode_instructions(instructions: Sequence[Instruction], cfg: VTAConfig) -> bytes:
    """The stream's bytes, field by field over all instructions of a kind (same bytes as Codec.encode_stream).

    Raw instructions keep their bytes; a field out of range raises the
    EncodeError Codec.encode gives for the first instruction that has one.
    """
    insns = list(instructions)
    n = len(insns)
    words = np.zeros((n, 2), dtype=np.uint64)
    kinds = [insn.kind for insn in insns]
    for i, insn in enumerate(insns):
        if insn.raw is not None:
            words[i] = np.frombuffer(insn.raw, dtype="<u8")
    for kind in isa.KINDS:
        rows = [i for i, k in enumerate(kinds) if k == kind and insns[i].raw is None]
        if not rows:
            continue
        index = np.array(rows, dtype=np.int64)
        placed = isa.layout(kind, cfg)
        table = _field_table([insns[i].fields for i in rows], [f.name for f in placed])
        for column, f in enumerate(placed):
            values = table[:, column]
            bad = (values < f.min_value) | (values > f.max_value)
            if bad.any():
                first = min(rows[k] for k in np.flatnonzero(bad))
                _raise_range(insns, first, cfg)
            word, offset = divmod(f.offset, isa.WORD_BITS)
            bits = (values.astype(np.int64) & ((1 << f.width) - 1)).astype(np.uint64) << np.uint64(offset)
            words[index, word] |= bits
    unknown = [i for i, k in enumerate(kinds) if k not in isa.KINDS and insns[i].raw is None]
    if unknown:
        from .encoding import codec_for

        codec_for(cfg).encode(insns[unknown[0]], f"instruction {unknown[0]}")
    return words.astype("<u8").tobytes()


def _field_table(fields: list[dict[str, int]], names: list[str]) -> np.ndarray:
    """One row per instruction, one column per field name (0 where a field is absent): int64 where every
    value fits, else Python ints (a value out of range is then still seen as such)."""
    get = itemgetter(*names)
    try:
        rows = [get(f) for f in fields]
    except KeyError:
        rows = [tuple(f.get(name, 0) for name in names) for f in fields]
    try:
        return np.array(rows, dtype=np.int64).reshape(len(fields), len(names))
    except OverflowError:
        return np.array(rows, dtype=object).reshape(len(fields), len(names))


def _raise_range(insns: list[Instruction], first: int, cfg: VTAConfig) -> None:
    """Raise Codec's range error for the earliest instruction with a field out of range."""
    from .encoding import codec_for

    codec = codec_for(cfg)
    for i in range(first + 1):
        if insns[i].raw is None and insns[i].kind in isa.KINDS:
            codec.check_fields(insns[i].kind, insns[i].fields, f"instruction {i}")
    raise AssertionError("a field out of range was found but not reported")  # pragma: no cover


def encoded_stream(instructions: Sequence[Instruction], cfg: VTAConfig) -> InstructionList:
    """The instructions encoded once (fields checked as encode_instructions checks them), as a stream that
    keeps its bytes and columns for whoever reads them and hands out these same Instruction objects."""
    insns = list(instructions)
    return InstructionList(decode_columns(encode_instructions(insns, cfg), cfg), built=insns)


def stream_bytes(instructions: Sequence[Instruction], cfg: VTAConfig) -> bytes:
    """The encoded stream: kept from decoding, or encoded field by field."""
    if isinstance(instructions, InstructionList) and instructions.columns.cfg == cfg:
        return instructions.data
    return encode_instructions(instructions, cfg)


def stream_columns(instructions: Sequence[Instruction], cfg: VTAConfig) -> StreamColumns:
    """The columns of any instruction sequence: kept from decoding, or decoded from its encoded bytes."""
    if isinstance(instructions, InstructionList) and instructions.columns.cfg == cfg:
        return instructions.columns
    return decode_columns(stream_bytes(instructions, cfg), cfg)

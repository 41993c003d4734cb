"""Encoder and decoder for instructions and micro-ops, built from the ISA tables.

Each layout of :mod:`vtasm.isa` becomes one compiled bitstruct format per
configuration. bitstruct packs most-significant bit first, so the format lists
the fields from the top bit down and the bytes are reversed to give the
little-endian words of the reference header.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

try:
    import bitstruct.c as bitstruct
except ImportError:  # pragma: no cover - the C extension ships with bitstruct wheels
    import bitstruct  # type: ignore[no-redef]

import numpy as np

from . import isa
from .config import VTAConfig
from .errors import EncodeError
from .lazy import LazyList


@dataclass
class Instruction:
    """One decoded instruction: its kind and every field value by spec name.

    ``raw`` holds the 16 bytes of an instruction that has no valid decoding
    (unknown opcode, or bits set outside every field); such an instruction is
    kept byte-for-byte and printed as raw data by the disassembler.
    """

    kind: str
    fields: dict[str, int] = field(default_factory=dict)
    raw: bytes | None = None

    def __getitem__(self, name: str) -> int:
        return self.fields.get(name, 0)

    @property
    def opcode(self) -> int:
        return self.fields.get("opcode", 0)

    @property
    def stage(self) -> str:
        return isa.stage_of(self.opcode, self.fields.get("memory_type", 0))


def make_instruction(kind: str, **values: int) -> Instruction:
    """An instruction of a kind with all fields zero except the opcode and ``values``."""
    fields = blank_fields(kind)
    if not values.keys() <= fields.keys():
        unknown = next(name for name in values if name not in fields)
        raise EncodeError(f"{kind} has no field {unknown}")
    fields.update(values)
    return Instruction(kind, fields)


def blank_fields(kind: str) -> dict[str, int]:
    """A new dict of every field of an instruction kind, zero but the opcode (a code generator fills in the
    rest by name; the encoder checks names and ranges when the stream is encoded)."""
    return _BLANK[kind].copy()


_BLANK = {kind: {f.name: (spec.opcode if f.name == "opcode" else 0) for f in spec.fields}
          for kind, spec in isa.KINDS.items()}


@dataclass(frozen=True)
class MicroOp:
    """One micro-op: accumulator, input (or ALU source) and weight indices.

    ``raw``, when set, is the 32-bit word to write as is (``uop.raw`` in
    assembly, or a decoded word with bits set outside every field); it is not
    part of equality, which compares the field values.
    """

    dst_idx: int
    src_idx: int
    wgt_idx: int
    raw: int | None = field(default=None, compare=False)


class _Format:
    """A compiled bitstruct format for one layout, packing LSB-first little-endian."""

    def __init__(self, placed: tuple[isa.PlacedField, ...], total_bits: int):
        self.placed = placed
        self.names = [f.name for f in placed]
        parts: list[str] = []
        pos = total_bits
        for f in sorted(placed, key=lambda f: -f.offset):
            top = f.offset + f.width
            if pos > top:
                parts.append(f"p{pos - top}")
            parts.append(f"{'s' if f.signed else 'u'}{f.width}")
            pos = f.offset
        if pos > 0:
            parts.append(f"p{pos}")
        self._order = [f.name for f in sorted(placed, key=lambda f: -f.offset)]
        self._fmt = bitstruct.compile("".join(parts))
        self.nbytes = total_bits // 8

    def pack(self, values: dict[str, int]) -> bytes:
        return self._fmt.pack(*[values[n] for n in self._order])[::-1]

    def unpack(self, data: bytes) -> dict[str, int]:
        return dict(zip(self._order, self._fmt.unpack(data[::-1]), strict=True))


class Codec:
    """Encoder/decoder of instructions and micro-ops for one configuration."""

    def __init__(self, cfg: VTAConfig):
        self.cfg = cfg
        self._formats = {kind: _Format(isa.layout(kind, cfg), isa.INSN_BITS) for kind in isa.KINDS}
        self._uop = _Format(isa.layout("uop", cfg), isa.UOP_BITS)
        self._head = _Format(isa.layout("finish", cfg), isa.INSN_BITS)
        # (name, lowest, highest) of every field, per kind, for fast range checks
        self._ranges = {kind: [(f.name, f.min_value, f.max_value) for f in isa.layout(kind, cfg)]
                        for kind in (*isa.KINDS, "uop")}

    # -- checking ------------------------------------------------------------
    def check_fields(self, kind: str, values: dict[str, int], where: str = "") -> None:
        """Raise EncodeError naming the first field whose value does not fit."""
        for name, low, high in self._ranges[kind]:
            value = values.get(name, 0)
            if not low <= value <= high:
                width = next(f.width for f in isa.layout(kind, self.cfg) if f.name == name)
                prefix = f"{where}: " if where else ""
                raise EncodeError(
                    f"{prefix}{kind} field {name} = {value} is out of range "
                    f"{low}..{high} ({width} bits, config {self.cfg.describe()})"
                )

    # -- instructions --------------------------------------------------------
    def encode(self, insn: Instruction, where: str = "") -> bytes:
        """The 16 little-endian bytes of an instruction."""
        if insn.raw is not None:
            return insn.raw
        self.check_fields(insn.kind, insn.fields, where)
        fields = insn.fields
        values = {name: fields.get(name, 0) for name, _, _ in self._ranges[insn.kind]}
        return self._formats[insn.kind].pack(values)

    def decode(self, data: bytes) -> Instruction:
        """Decode 16 bytes; anything that does not re-encode exactly stays raw."""
        if len(data) != isa.INSN_BITS // 8:
            raise EncodeError(f"an instruction is 16 bytes, got {len(data)}")
        opcode = data[0] & 0x7
        spec = isa.KIND_BY_OPCODE.get(opcode)
        if spec is None:
            fields = self._head.unpack(data)
            return Instruction("raw", fields, raw=bytes(data))
        fields = self._formats[spec.name].unpack(data)
        insn = Instruction(spec.name, fields)
        if self._formats[spec.name].pack(fields) != bytes(data):
            return Instruction("raw", fields, raw=bytes(data))
        return insn

    def encode_stream(self, insns: Sequence[Instruction]) -> bytes:
        """A whole stream's bytes, one instruction at a time (vtasm.columns does it field by field)."""
        return b"".join(self.encode(insn, f"instruction {i}") for i, insn in enumerate(insns))

    def decode_stream(self, data: bytes) -> list[Instruction]:
        """A whole stream decoded one instruction at a time (vtasm.columns does it field by field)."""
        if len(data) % 16:
            raise EncodeError(f"instruction stream of {len(data)} bytes is not a multiple of 16")
        return [self.decode(data[i : i + 16]) for i in range(0, len(data), 16)]

    # -- micro-ops -----------------------------------------------------------
    def encode_uop(self, uop: MicroOp, where: str = "") -> bytes:
        if uop.raw is not None:
            return uop.raw.to_bytes(isa.UOP_BITS // 8, "little")
        values = {"dst_idx": uop.dst_idx, "src_idx": uop.src_idx, "wgt_idx": uop.wgt_idx}
        self.check_fields("uop", values, where)
        return self._uop.pack(values)

    def decode_uop(self, data: bytes) -> MicroOp:
        """Decode 4 bytes; a word with bits outside every field keeps them in ``raw``."""
        v = self._uop.unpack(data)
        raw = None if self.uop_is_canonical(data) else int.from_bytes(data, "little")
        return MicroOp(v["dst_idx"], v["src_idx"], v["wgt_idx"], raw=raw)

    def uop_is_canonical(self, data: bytes) -> bool:
        """Whether a micro-op word has no bits set outside its fields."""
        return self._uop.pack(self._uop.unpack(data)) == bytes(data)

    def encode_uops(self, uops: list[MicroOp]) -> bytes:
        """All micro-ops at once (vectorised; same bytes as encode_uop on each)."""
        if isinstance(uops, MicroOpList) and uops.cfg == self.cfg:
            return uops.data  # decoded words keep every bit (stray ones in ``raw``): they encode as read
        if not uops:
            return b""
        rows = np.array([(u.dst_idx, u.src_idx, u.wgt_idx, -1 if u.raw is None else u.raw) for u in uops],
                        dtype=np.int64)
        words = np.zeros(len(uops), dtype=np.int64)
        for col, f in enumerate(isa.layout("uop", self.cfg)):
            bad = (rows[:, col] < f.min_value) | (rows[:, col] > f.max_value)
            bad &= rows[:, 3] < 0
            if bad.any():
                i = int(np.argmax(bad))
                self.encode_uop(uops[i], f"micro-op {i}")  # raises the one-line range error
            words |= rows[:, col] << f.offset
        raw = rows[:, 3] >= 0
        words[raw] = rows[raw, 3]
        return words.astype("<u4").tobytes()

    def decode_uops(self, data: bytes) -> MicroOpList:
        """All micro-ops at once (vectorised; same results as decode_uop on each), each built on first use."""
        if len(data) % 4:
            raise EncodeError(f"micro-op data of {len(data)} bytes is not a multiple of 4")
        return MicroOpList(bytes(data), self.cfg)


class MicroOpList(LazyList[MicroOp]):
    """Decoded micro-op words that build each MicroOp on first use (equal to Codec.decode_uop's).

    The words are kept as read, so encoding the list again gives them back
    without a pass over MicroOp objects (Codec.encode_uops).
    """

    noun = "micro-op"

    def __init__(self, data: bytes, cfg: VTAConfig):
        self.data, self.cfg = data, cfg
        words = np.frombuffer(data, dtype="<u4").astype(np.int64)
        known = 0
        self._fields = []
        for f in isa.layout("uop", cfg):  # dst, src, wgt: MicroOp's field order
            self._fields.append((words >> f.offset) & ((1 << f.width) - 1))
            known |= ((1 << f.width) - 1) << f.offset
        self._words, self._stray = words, (words & ~known) != 0
        super().__init__(len(words), self._build)

    def _build(self, i: int) -> MicroOp:
        d, s, w = (int(col[i]) for col in self._fields)
        return MicroOp(d, s, w, raw=int(self._words[i]) if self._stray[i] else None)


@lru_cache(maxsize=16)
def codec_for(cfg: VTAConfig) -> Codec:
    """The (cached) codec of a configuration."""
    return Codec(cfg)

"""The .vbin container: one file holding a whole program (docs/vbin.md).

Layout: a 16-byte header (magic, format version, chunk count), then the chunks
META, INSN, UOPS, DATA and optionally SMAP, each with a tag, the CRC-32 and
length of its payload, the payload and zero padding to 8 bytes. The same
Program always gives the same bytes; the reader checks everything and reports
the first problem as one FormatError line.
"""

from __future__ import annotations

import json
from pathlib import Path

from vtasm import budget
from vtasm.columns import decode_stream, stream_bytes
from vtasm.config import LOG_KEYS, VTAConfig
from vtasm.encoding import codec_for
from vtasm.errors import FormatError, VtaError
from vtasm.fileio import read_mapped, write_atomic
from vtasm.isa import MAX_DRAM_BYTES
from vtasm.program import Program, Segment, zero_bytes

from .chunks import DataCheck, framed, read_chunks, read_header
from .jsonfields import parse_json
from .magic import VBIN
from .meta import LazySourceMap, Meta, all_zero, build_meta, meta_from_json, smap_from_json, smap_to_json

MAGIC = VBIN
VERSION = 1
CHUNK_ORDER = ("META", "INSN", "UOPS", "DATA", "SMAP")
REQUIRED_CHUNKS = 4


def canonical_json(value: object) -> bytes:
    """The canonical UTF-8 JSON of a value: sorted keys, no white space, ASCII only."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def write_vbin(program: Program) -> bytes:
    """The .vbin bytes of a program (deterministic)."""
    codec = codec_for(program.config)
    insn = stream_bytes(program.instructions, program.config)
    uops = codec.encode_uops(program.uops)
    data = b"".join(seg.data for seg in program.segments if not all_zero(seg.data))
    meta = build_meta(program)
    meta_from_json(meta, "cannot write .vbin: META")  # refuse anything the reader would refuse
    chunks = [("META", canonical_json(meta)), ("INSN", insn), ("UOPS", uops), ("DATA", data)]
    if program.source_map is not None:
        smap = smap_to_json(program.source_map)
        smap_from_json(smap, len(program.instructions), "cannot write .vbin: SMAP")
        chunks.append(("SMAP", canonical_json(smap)))
    return framed(MAGIC, VERSION, chunks)


def _split_chunks(data: bytes, origin: str, later: DataCheck | None = None) -> dict[str, bytes]:
    """Check the header and framing; return each chunk's payload by tag. A large DATA chunk's CRC is left
    to ``later`` (checked on another thread while the caller decodes the rest), when one is given."""
    count = read_header(data, MAGIC, VERSION, origin, ".vbin file", ".vbin format")
    chunks: dict[str, bytes] = {}

    def tag_at(raw_tag: bytes, index: int) -> str:
        tag = _check_tag(raw_tag, index, chunks, origin)
        chunks[tag] = b""  # seen (a duplicate is refused)
        return tag

    for tag, payload in read_chunks(data, count, origin, tag_at, later):
        chunks[tag] = payload if tag == "DATA" else bytes(payload)  # DATA is cut into segments without a copy
    for tag in CHUNK_ORDER[:REQUIRED_CHUNKS]:
        if tag not in chunks:
            raise FormatError(f"{origin}: missing chunk {tag}")
    return chunks


def _check_tag(raw_tag: bytes, index: int, seen: dict[str, bytes], origin: str) -> str:
    tag = raw_tag.decode("latin-1")
    if tag not in CHUNK_ORDER:
        raise FormatError(f"{origin}: unknown chunk {tag!r} (chunk {index + 1})")
    if tag in seen:
        raise FormatError(f"{origin}: duplicate chunk {tag}")
    expected = CHUNK_ORDER[index] if index < len(CHUNK_ORDER) else None
    if tag != expected:
        if expected in CHUNK_ORDER[:REQUIRED_CHUNKS]:
            raise FormatError(f"{origin}: chunk {tag} out of order (expected {expected} first)")
        raise FormatError(f"{origin}: chunk {tag} out of order")
    return tag


def read_vbin(data: bytes, origin: str = "<vbin>", lazy_source_map: bool = False) -> Program:
    """Parse and validate .vbin bytes into a Program (FormatError on any problem).

    With ``lazy_source_map`` the SMAP chunk (its CRC checked here) is parsed
    and checked only when the source map is first used.
    """
    if not isinstance(data, bytes) and not (isinstance(data, memoryview) and data.readonly):
        data = bytes(data)  # segments are views of the data: it must not change under them
    later = DataCheck()
    error: VtaError | None = None
    try:
        program = _read_chunks(_split_chunks(data, origin, later), origin, lazy_source_map)
    except VtaError as exc:
        error = exc
    finally:
        data_ok = later.wait()  # the thread never outlives the call
    if not data_ok:  # a corrupt DATA chunk comes first in file order: it is the error to report
        raise FormatError(f"{origin}: CRC mismatch in chunk DATA (the file is corrupt)")
    if error is not None:
        raise error
    return program


def _read_chunks(chunks: dict[str, bytes], origin: str, lazy_source_map: bool) -> Program:
    """The program from the checked chunks."""
    meta = meta_from_json(parse_json(chunks["META"], f"{origin}: META"), f"{origin}: META")
    _check_sizes(meta, chunks, origin)
    codec = codec_for(meta.config)
    insn_bytes, uop_bytes = chunks["INSN"], chunks["UOPS"]
    instructions = decode_stream(insn_bytes, meta.config)
    uops = codec.decode_uops(uop_bytes)  # keeps every word as read (stray bits in ``raw``)
    blob = chunks["DATA"]
    segments = [Segment(s.name, s.addr, zero_bytes(s.size), s.file, zero=True) if s.zero
                else Segment(s.name, s.addr, blob[s.offset : s.offset + s.size], s.file) for s in meta.segments]
    source_map = None
    if "SMAP" in chunks and lazy_source_map:
        source_map = LazySourceMap(chunks["SMAP"], meta.n_insns, f"{origin}: SMAP")
    elif "SMAP" in chunks:
        where = f"{origin}: SMAP"
        source_map = smap_from_json(parse_json(chunks["SMAP"], where), meta.n_insns, where)
    return Program(
        config=meta.config,
        instructions=instructions,
        uops=uops,
        insn_addr=meta.insn_addr,
        uop_addr=meta.uop_addr,
        segments=segments,
        tensors=meta.tensors,
        dumps=meta.dumps,
        uop_labels=meta.uop_labels,
        source_map=source_map,
        dram_bytes=meta.dram_bytes,
        insn_file=meta.insn_file,
        uop_file=meta.uop_file,
    )


def _check_sizes(meta: Meta, chunks: dict[str, bytes], origin: str) -> None:
    extent = max([s.addr + s.size for s in meta.segments] + [d.addr + d.nbytes for d in meta.dumps]
                 + [meta.dram_bytes or 0])
    if extent > MAX_DRAM_BYTES:
        raise FormatError(f"{origin}: the program needs {extent:#x} bytes of DRAM; a VTA program addresses at most "
                          f"{MAX_DRAM_BYTES:#x} (4 GiB)")
    budget.check(extent, f"{origin}: the program's DRAM (its segments reach byte {extent:,})")
    for tag, count, unit, what in (
        ("INSN", meta.n_insns, 16, "instructions"),
        ("UOPS", meta.n_uops, 4, "micro-ops"),
    ):
        if len(chunks[tag]) != count * unit:
            raise FormatError(
                f"{origin}: chunk {tag} has {len(chunks[tag])} bytes but META counts {count} {what}"
                f" ({count * unit} bytes)"
            )
    size = len(chunks["DATA"])
    for seg in meta.segments:
        if seg.offset + seg.stored > size:
            raise FormatError(
                f"{origin}: segment '{seg.name}' (offset {seg.offset}, {seg.size} bytes) lies outside"
                f" the DATA chunk ({size} bytes)"
            )
    used = sum(seg.stored for seg in meta.segments)
    if used != size:
        raise FormatError(f"{origin}: chunk DATA has {size} bytes but the segments hold {used}")


def save_vbin(program: Program, path: str | Path) -> None:
    """Write a program to a .vbin file atomically."""
    data = write_vbin(program)
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise FormatError(f"{path}: cannot write: {exc.strerror or exc}") from None


def load_vbin(path: str | Path) -> Program:
    """Read and validate a .vbin file."""
    return read_vbin(read_mapped(path, ".vbin file"), str(path))


def is_vbin(data: bytes) -> bool:
    """Whether bytes start with the .vbin magic."""
    return bytes(data[: len(MAGIC)]) == MAGIC


def config_difference(a: VTAConfig, b: VTAConfig) -> str | None:
    """The first LOG_* key whose value differs between two configurations, or None."""
    va, vb = a.log_values(), b.log_values()
    return next((key for key in LOG_KEYS if va[key] != vb[key]), None)


def check_config_matches(program: Program, cfg: VTAConfig) -> None:
    """Refuse a --config whose LOG_* values differ from the program's."""
    key = config_difference(program.config, cfg)
    if key is not None:
        ours, theirs = program.config.log_values()[key], cfg.log_values()[key]
        raise FormatError(
            f"program was built for {program.config.describe()} ({key}={ours}) "
            f"but --config gives {key}={theirs}"
        )


__all__ = [
    "MAGIC",
    "VERSION",
    "check_config_matches",
    "config_difference",
    "is_vbin",
    "load_vbin",
    "read_vbin",
    "save_vbin",
    "write_vbin",
]

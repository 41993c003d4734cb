"""Large programs are read as mapped files: same program, same errors, no copy held on the heap."""

from __future__ import annotations

import json
import mmap
import zlib

import numpy as np
import pytest

from vtasm.config import default_config
from vtasm.encoding import make_instruction
from vtasm.errors import FormatError
from vtasm.fileio import MAP_AT_LEAST, PIECE_BYTES, pieces, read_mapped
from vtasm.formats.raw import export_raw, import_raw, load_program
from vtasm.formats.vbin import load_vbin, save_vbin
from vtasm.program import Program, Segment

from .test_vbin import chunk_table


def big_program(nbytes: int, seed: int = 7) -> Program:
    """A FINISH-only program carrying two random segments, the first of ``nbytes``."""
    rng = np.random.default_rng(seed)
    first = rng.integers(0, 256, nbytes, dtype=np.uint8).tobytes()
    second = rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    return Program(
        config=default_config(),
        instructions=[make_instruction("finish")],
        uops=[],
        insn_addr=0,
        uop_addr=0x1000,
        segments=[Segment("big", 0x10000, first), Segment("tail", 0x10000 + nbytes + 64, second)],
    )


def test_a_large_vbin_is_mapped_and_reads_back_the_same(tmp_path):
    program = big_program(PIECE_BYTES + 12345)  # more than one piece
    path = tmp_path / "big.vbin"
    save_vbin(program, path)
    loaded = load_vbin(path)
    big, tail = loaded.segments
    assert isinstance(big.data, memoryview) and isinstance(big.data.obj, mmap.mmap)
    assert big.data.readonly
    assert bytes(big.data) == program.segments[0].data and bytes(tail.data) == program.segments[1].data
    # the file itself, read per the documented layout, holds the same DATA chunk
    raw = path.read_bytes()
    (data_at, length), = [(p, n) for tag, _, p, n in chunk_table(raw) if tag == "DATA"]
    assert raw[data_at : data_at + length] == program.segments[0].data + program.segments[1].data
    assert load_program(path).segments[0].data == program.segments[0].data


def test_corruption_past_the_first_piece_is_found(tmp_path):
    path = tmp_path / "big.vbin"
    save_vbin(big_program(PIECE_BYTES + 4096), path)
    raw = bytearray(path.read_bytes())
    (data_at, _), = [(p, n) for tag, _, p, n in chunk_table(bytes(raw)) if tag == "DATA"]
    raw[data_at + PIECE_BYTES + 100] ^= 0x40
    path.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match=r"big\.vbin: CRC mismatch in chunk DATA"):
        load_vbin(path)


def test_replacing_a_mapped_file_leaves_the_loaded_program_intact(tmp_path):
    path = tmp_path / "big.vbin"
    first, second = big_program(MAP_AT_LEAST * 2, seed=1), big_program(MAP_AT_LEAST * 2, seed=2)
    save_vbin(first, path)
    loaded = load_vbin(path)
    save_vbin(second, path)  # written atomically: the mapping still sees the file it was made from
    assert bytes(loaded.segments[0].data) == first.segments[0].data
    save_vbin(loaded, path)  # a program saved over the file it was loaded from
    assert load_vbin(path).segments[0].data == first.segments[0].data


def test_a_raw_directory_maps_its_large_segment_files(tmp_path):
    program = big_program(MAP_AT_LEAST + 3)
    export_raw(program, tmp_path / "prog")
    loaded = import_raw(tmp_path / "prog", default_config())
    big = next(s for s in loaded.segments if len(s.data) == MAP_AT_LEAST + 3)
    assert isinstance(big.data, memoryview)
    assert big.data == program.segments[0].data


def test_pieces_cover_a_buffer_in_order_and_mapped_data_stays_readable(tmp_path):
    payload = np.random.default_rng(3).integers(0, 256, 3 * PIECE_BYTES // 2 + 17, dtype=np.uint8).tobytes()
    for buffer in (payload, memoryview(payload)[5:]):
        got = list(pieces(buffer))
        assert [o for o, _ in got] == list(range(0, len(buffer), PIECE_BYTES))
        assert b"".join(bytes(p) for _, p in got) == bytes(buffer)
    path = tmp_path / "blob"
    path.write_bytes(payload)
    mapped = read_mapped(path)
    view = mapped[4097:]  # not page aligned
    crc = 0
    for _, piece in pieces(view):
        crc = zlib.crc32(piece, crc)
    assert crc == zlib.crc32(payload[4097:])
    assert bytes(view) == payload[4097:]  # pages handed back are read again from the file


def test_small_files_and_unreadable_ones(tmp_path):
    small = tmp_path / "small.bin"
    small.write_bytes(b"abc")
    assert read_mapped(small) == b"abc"
    with pytest.raises(FormatError, match=r"missing\.vbin: cannot read \.vbin file"):
        load_vbin(tmp_path / "missing.vbin")
    with pytest.raises(FormatError, match="cannot read"):
        read_mapped(tmp_path)


def test_segments_of_a_mapped_file_serialise_like_bytes(tmp_path):
    program = big_program(MAP_AT_LEAST)
    save_vbin(program, tmp_path / "a.vbin")
    loaded = load_vbin(tmp_path / "a.vbin")
    save_vbin(loaded, tmp_path / "b.vbin")
    assert (tmp_path / "a.vbin").read_bytes() == (tmp_path / "b.vbin").read_bytes()
    export_raw(loaded, tmp_path / "raw")
    layout = json.loads((tmp_path / "raw" / "layout.json").read_text())
    big = next(s for s in layout["segments"] if s["addr"] == 0x10000)
    assert (tmp_path / "raw" / big["file"]).read_bytes() == program.segments[0].data


def test_a_large_data_chunk_checked_on_a_thread_still_reports_first_in_file_order(tmp_path):
    """A large DATA chunk's CRC is checked on a thread while the rest is decoded (vbin.DataCheck): a corrupt
    DATA chunk is still the error reported, also when a later problem (bytes after the last chunk) is
    found first, and no thread is left behind."""
    import threading

    path = tmp_path / "big.vbin"
    save_vbin(big_program(2 * MAP_AT_LEAST), path)
    raw = bytearray(path.read_bytes())
    (data_at, _), = [(p, n) for tag, _, p, n in chunk_table(bytes(raw)) if tag == "DATA"]
    raw[data_at + 100] ^= 0x01
    threads = threading.active_count()
    path.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match=r"CRC mismatch in chunk DATA"):
        load_vbin(path)
    path.write_bytes(bytes(raw) + bytes(16))
    with pytest.raises(FormatError, match=r"CRC mismatch in chunk DATA"):
        load_vbin(path)
    assert threading.active_count() == threads

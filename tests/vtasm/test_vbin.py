"""The .vbin container: layout per docs/vbin.md, round trips, and one-line errors."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from vtasm.config import DEFAULT_CONFIG, config_from_dict, default_config
from vtasm.encoding import MicroOp, codec_for, make_instruction
from vtasm.errors import FormatError
from vtasm.formats.raw import load_program
from vtasm.formats.vbin import check_config_matches, load_vbin, read_vbin, save_vbin, write_vbin
from vtasm.program import DumpRange, Program, Segment, SourceLoc, TensorInfo

MAGIC = b"VTA\x00VBIN"


def sample(source_map: bool = True) -> Program:
    """A program using every part of the format."""
    insns = [
        make_instruction("load", memory_type=0, dram_base=0x800, x_size=2, y_size=1, x_stride=2),
        make_instruction("load", memory_type=2, dram_base=0x100, x_size=1, y_size=1, x_stride=1, push_next=1),
        make_instruction("gemm", pop_prev=1, uop_end=1, iter_out=1, iter_in=1, push_next=1),
        make_instruction("alu", alu_opcode=3, use_imm=1, imm=-3, uop_bgn=1, uop_end=2, iter_out=1, iter_in=1),
        make_instruction("store", memory_type=4, pop_prev=1, x_size=1, y_size=1, x_stride=1),
        codec_for(default_config()).decode(bytes([7] + [0] * 15)),  # unknown opcode: kept raw
        make_instruction("finish"),
    ]
    a = TensorInfo("a", "int8", (1, 16), (1, 16))
    return Program(
        config=default_config(),
        instructions=insns,
        uops=[MicroOp(0, 0, 0), MicroOp(1, 2, 3)],
        insn_addr=0x3000,
        uop_addr=0x2000,
        segments=[Segment("a", 0x1000, bytes(range(16))), Segment("raw_bytes", 0x1800, b"\x01\x02\x03", "r.dat")],
        tensors=[a],
        dumps=[DumpRange(0x1000, 16, "out.bin")],
        uop_labels={"gemm_k": 0, "alu_k": 1},
        source_map={0: SourceLoc("main.vasm", 4), 2: SourceLoc("main.vasm", 9), 5: SourceLoc("lib.vasm", 1)}
        if source_map
        else None,
        dram_bytes=1 << 20,
    )


def chunk_table(data: bytes) -> list[tuple[str, int, int, int]]:
    """(tag, header offset, payload offset, length) of each chunk, read per the documented layout."""
    magic, version, count = struct.unpack_from("<8sII", data, 0)
    assert magic == MAGIC and version == 1
    pos, out = 16, []
    for _ in range(count):
        tag, crc, length = struct.unpack_from("<4sIQ", data, pos)
        payload = data[pos + 16 : pos + 16 + length]
        assert zlib.crc32(payload) == crc
        out.append((tag.decode(), pos, pos + 16, length))
        pos += 16 + length + (-length % 8)
    assert pos == len(data)
    return out


def build(chunks: list[tuple[bytes, bytes]], count: int | None = None, version: int = 1) -> bytes:
    """A .vbin assembled by hand from (tag, payload) pairs, with correct CRCs and padding."""
    out = struct.pack("<8sII", MAGIC, version, len(chunks) if count is None else count)
    for tag, payload in chunks:
        out += struct.pack("<4sIQ", tag, zlib.crc32(payload), len(payload)) + payload + bytes(-len(payload) % 8)
    return out


def payloads(data: bytes) -> dict[str, bytes]:
    return {tag: data[start : start + n] for tag, _, start, n in chunk_table(data)}


def error(data: bytes) -> str:
    with pytest.raises(FormatError) as info:
        read_vbin(data, "p.vbin")
    message = info.value.render()
    assert "\n" not in message
    assert message.startswith("p.vbin: ")
    return message


# -- layout and round trip ----------------------------------------------------


def test_layout_follows_the_documented_format():
    program = sample()
    data = write_vbin(program)
    table = chunk_table(data)
    assert [t[0] for t in table] == ["META", "INSN", "UOPS", "DATA", "SMAP"]
    assert all(header % 8 == 0 for _, header, _, _ in table)
    parts = payloads(data)
    assert len(parts["INSN"]) == 16 * 7 and len(parts["UOPS"]) == 8
    assert parts["DATA"] == bytes(range(16)) + b"\x01\x02\x03"
    assert parts["INSN"][5 * 16 : 6 * 16] == bytes([7] + [0] * 15)
    assert parts["INSN"][6 * 16 : 7 * 16] == bytes([3] + [0] * 15)  # FINISH: opcode 3 only
    meta = json.loads(parts["META"])
    assert parts["META"] == json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
    assert meta["config"] == DEFAULT_CONFIG
    assert meta["counts"] == {"insns": 7, "uops": 2}
    assert meta["segments"] == [
        {"name": "a", "addr": 0x1000, "size": 16, "offset": 0, "file": None},
        {"name": "raw_bytes", "addr": 0x1800, "size": 3, "offset": 16, "file": "r.dat"},
    ]
    assert meta["tensors"] == [{"name": "a", "dtype": "int8", "shape": [1, 16], "tile": [1, 16]}]
    assert meta["dumps"] == [{"addr": 0x1000, "nbytes": 16, "file": "out.bin"}]
    assert meta["uop_labels"] == [["gemm_k", 0], ["alu_k", 1]]
    assert (meta["insn_addr"], meta["uop_addr"], meta["dram_bytes"]) == (0x3000, 0x2000, 1 << 20)
    assert (meta["insn_file"], meta["uop_file"]) == ("insn.bin", "uop.bin")
    assert json.loads(parts["SMAP"]) == {
        "files": ["main.vasm", "lib.vasm"],
        "entries": [[0, 0, 4], [2, 0, 9], [5, 1, 1]],
    }


def test_round_trip_and_determinism():
    program = sample()
    data = write_vbin(program)
    back = read_vbin(data)
    assert back == program
    assert list(back.uop_labels) == ["gemm_k", "alu_k"]
    assert write_vbin(back) == data
    assert write_vbin(sample()) == data


def test_no_source_map_means_no_smap_chunk():
    data = write_vbin(sample(source_map=False))
    assert [t[0] for t in chunk_table(data)] == ["META", "INSN", "UOPS", "DATA"]
    assert read_vbin(data).source_map is None


def test_save_and_load(tmp_path):
    path = tmp_path / "p.vbin"
    save_vbin(sample(), path)
    assert load_vbin(path) == sample()
    assert load_program(path) == sample()
    assert not [p for p in tmp_path.iterdir() if p.name != "p.vbin"]  # no temporary left behind


# -- corruption: each class gives its one-line message -----------------------


def test_bad_magic():
    data = write_vbin(sample())
    assert "not a .vbin file (bad magic)" in error(b"XTA\x00VBIN" + data[8:])
    assert "bad magic" in error(b"")
    assert "bad magic" in error(b"PK\x03\x04")


def test_unsupported_version():
    data = bytearray(write_vbin(sample()))
    data[8:12] = struct.pack("<I", 2)
    assert "unsupported .vbin format version 2" in error(bytes(data))


@pytest.mark.parametrize("tag", ["META", "INSN", "UOPS", "DATA", "SMAP"])
def test_flipped_byte_is_a_crc_error_naming_the_chunk(tag):
    data = bytearray(write_vbin(sample()))
    start = next(s for t, _, s, n in chunk_table(bytes(data)) if t == tag)
    data[start + 1] ^= 0x40
    assert f"CRC mismatch in chunk {tag}" in error(bytes(data))


def test_truncation_names_the_chunk_and_missing_bytes():
    data = write_vbin(sample())
    table = {t: (s, n) for t, _, s, n in chunk_table(data)}
    start, n = table["DATA"]  # DATA holds 19 bytes + 5 padding
    assert "truncated: chunk DATA is missing 10 bytes" in error(data[: start + 14])
    start, n = table["META"]
    assert f"chunk META is missing {n + (-n % 8) - 5}" in error(data[: start + 5])
    assert "truncated: header is missing 6 bytes" in error(data[:10])
    assert "truncated" in error(data[:-1])
    smap_header = next(h for t, h, _, _ in chunk_table(data) if t == "SMAP")
    assert "announces 5 chunks but the file ends after 4" in error(data[:smap_header])


def test_chunk_order_and_presence():
    parts = payloads(write_vbin(sample()))
    meta, insn, uops, blob = (parts[t] for t in ("META", "INSN", "UOPS", "DATA"))
    good = [(b"META", meta), (b"INSN", insn), (b"UOPS", uops), (b"DATA", blob)]
    assert read_vbin(build(good)) == sample(source_map=False)
    assert "missing chunk DATA" in error(build(good[:3]))
    assert "chunk UOPS out of order (expected INSN" in error(build([good[0], good[2], good[1], good[3]]))
    assert "unknown chunk 'XTRA'" in error(build(good + [(b"XTRA", b"")]))
    assert "duplicate chunk META" in error(build(good + [(b"META", meta)]))
    assert "unexpected bytes after the last chunk" in error(build(good) + bytes(8))
    assert "padding bytes are not zero" in error(build(good)[:-1] + b"\x01")


def meta_variant(**changes) -> bytes:
    """The sample (without source map) with its META changed, re-framed with valid CRCs."""
    parts = payloads(write_vbin(sample(source_map=False)))
    meta = json.loads(parts["META"])
    meta.update(changes)
    return build(
        [
            (b"META", json.dumps(meta).encode()),
            (b"INSN", parts["INSN"]),
            (b"UOPS", parts["UOPS"]),
            (b"DATA", parts["DATA"]),
        ]
    )


def test_meta_problems():
    parts = payloads(write_vbin(sample(source_map=False)))
    others = [(b"INSN", parts["INSN"]), (b"UOPS", parts["UOPS"]), (b"DATA", parts["DATA"])]
    assert "META:1:2: invalid JSON" in error(build([(b"META", b"{,}")] + others))
    assert "META: not valid UTF-8" in error(build([(b"META", b"\xff")] + others))
    assert "META: expected a JSON object" in error(build([(b"META", b"[]")] + others))
    assert "missing key 'counts'" in error(_without("counts"))
    assert "unknown key 'extra'" in error(meta_variant(extra=1))
    assert "counts" in error(meta_variant(counts={"insns": 8, "uops": 2}))
    assert "chunk UOPS has 8 bytes but META counts 3" in error(meta_variant(counts={"insns": 7, "uops": 3}))
    assert "insn_addr: expected an integer" in error(meta_variant(insn_addr="0x3000"))
    assert "label 'x' points at micro-op 9" in error(meta_variant(uop_labels=[["x", 9]]))


def _without(key: str) -> bytes:
    parts = payloads(write_vbin(sample(source_map=False)))
    meta = json.loads(parts["META"])
    del meta[key]
    return build(
        [
            (b"META", json.dumps(meta).encode()),
            (b"INSN", parts["INSN"]),
            (b"UOPS", parts["UOPS"]),
            (b"DATA", parts["DATA"]),
        ]
    )


def test_invalid_config_in_meta():
    bad = dict(DEFAULT_CONFIG, LOG_UOP_BUFF_SIZE=16)
    assert "META config: GEMM instruction needs more than 128 bits" in error(meta_variant(config=bad))
    assert "META config: missing key LOG_INP_WIDTH" in error(meta_variant(config={"LOG_BATCH": 0}))


def test_segments_and_tensors_must_fit_data():
    seg_a = {"name": "a", "addr": 0x1000, "size": 16, "offset": 0, "file": None}
    seg_b = {"name": "raw_bytes", "addr": 0x1800, "size": 3, "offset": 16, "file": "r.dat"}
    too_big = dict(seg_b, size=30)
    assert "segment 'raw_bytes' (offset 16, 30 bytes) lies outside the DATA chunk (19 bytes)" in error(
        meta_variant(segments=[seg_a, too_big])
    )
    assert "chunk DATA has 19 bytes but the segments hold 16" in error(meta_variant(segments=[seg_a]))
    assert "has offset 4" in error(meta_variant(segments=[seg_a, dict(seg_b, offset=4)]))
    assert "duplicate segment name 'a'" in error(meta_variant(segments=[seg_a, dict(seg_b, name="a")]))
    wrong = [{"name": "a", "dtype": "int8", "shape": [2, 16], "tile": [1, 16]}]
    assert "tensor 'a' packs to 32 bytes but its segment holds 16" in error(meta_variant(tensors=wrong))
    orphan = [{"name": "z", "dtype": "int8", "shape": [1, 16], "tile": [1, 16]}]
    assert "tensor 'z' has no segment" in error(meta_variant(tensors=orphan))
    odd = [{"name": "a", "dtype": "float32", "shape": [1, 16], "tile": [1, 16]}]
    assert "unknown dtype 'float32'" in error(meta_variant(tensors=odd))


def test_source_map_problems():
    parts = payloads(write_vbin(sample()))
    base = [(b"META", parts["META"]), (b"INSN", parts["INSN"]), (b"UOPS", parts["UOPS"]), (b"DATA", parts["DATA"])]

    def smap(value) -> str:
        return error(build(base + [(b"SMAP", json.dumps(value).encode())]))

    assert "instruction 7 does not exist" in smap({"files": ["a"], "entries": [[7, 0, 1]]})
    assert "sorted" in smap({"files": ["a"], "entries": [[2, 0, 1], [1, 0, 1]]})
    assert "file index 1" in smap({"files": ["a"], "entries": [[0, 1, 1]]})


def test_micro_op_bits_outside_fields_are_refused():
    # acc depth 16-0-4-5+3 = 10 bits, src max(10, 11) = 11, wgt 10: a 31-bit micro-op, bit 31 unused
    cfg = config_from_dict(dict(DEFAULT_CONFIG, LOG_ACC_BUFF_SIZE=16))
    program = Program(cfg, [make_instruction("finish")], [MicroOp(1, 1, 1)])
    parts = payloads(write_vbin(program))
    word = bytes(parts["UOPS"][:3]) + bytes([parts["UOPS"][3] | 0x80])
    data = build([(b"META", parts["META"]), (b"INSN", parts["INSN"]), (b"UOPS", word), (b"DATA", b"")])
    try:
        back = read_vbin(data, "p.vbin")
    except FormatError as exc:  # the codec cannot keep the word: refused, naming it
        value = int.from_bytes(word, "little")
        assert exc.render() == f"p.vbin: UOPS: micro-op 0 (0x{value:08x}) has bits set outside its fields"
    else:  # the codec keeps such words: they must survive byte for byte
        assert payloads(write_vbin(back))["UOPS"] == word


# -- configuration checks ------------------------------------------------------


def test_config_mismatch_names_the_first_key(tmp_path):
    program = sample()
    check_config_matches(program, config_from_dict(dict(DEFAULT_CONFIG, TARGET="pynq")))
    other = config_from_dict(dict(DEFAULT_CONFIG, LOG_BLOCK=5))
    with pytest.raises(FormatError) as info:
        check_config_matches(program, other)
    assert info.value.render() == "program was built for 1x16x16 (LOG_BLOCK=4) but --config gives LOG_BLOCK=5"
    path = tmp_path / "p.vbin"
    save_vbin(program, path)
    with pytest.raises(FormatError, match="LOG_BLOCK=5"):
        load_program(path, other)


def test_load_program_refuses_other_files(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("hello")
    with pytest.raises(FormatError, match="bad magic"):
        load_program(path)
    with pytest.raises(FormatError, match="cannot read"):
        load_program(tmp_path / "absent.vbin")


def test_writer_refuses_what_the_reader_would_refuse():
    program = sample()
    program.tensors = [TensorInfo("missing", "int8", (1, 16), (1, 16))]
    with pytest.raises(FormatError, match="cannot write .vbin.*no segment"):
        write_vbin(program)


def test_a_lazy_source_map_reads_the_same_and_reports_the_same_problems():
    data = write_vbin(sample())
    eager, lazy = read_vbin(data), read_vbin(data, "p.vbin", lazy_source_map=True)
    assert lazy.source_map == eager.source_map and dict(lazy.source_map) == eager.source_map
    parts = payloads(data)
    base = [(b"META", parts["META"]), (b"INSN", parts["INSN"]), (b"UOPS", parts["UOPS"]), (b"DATA", parts["DATA"])]
    bad = build(base + [(b"SMAP", json.dumps({"files": ["a"], "entries": [[7, 0, 1]]}).encode())])
    program = read_vbin(bad, "p.vbin", lazy_source_map=True)  # read: nothing looked at the map yet
    with pytest.raises(FormatError) as info:
        program.source_map.get(0)
    assert info.value.render() == error(bad)


def _with_zero_segment() -> Program:
    """A program whose output segment (1 MiB) holds no data yet."""
    program = sample(source_map=False)
    program.segments.append(Segment("result", 0x100000, bytes(1 << 20)))
    return program


def test_a_segment_of_zeros_is_declared_not_stored():
    program = _with_zero_segment()
    data = write_vbin(program)
    assert len(data) < 4096  # not the megabyte
    meta = json.loads(payloads(data)["META"])
    entry = meta["segments"][-1]
    assert entry == {"addr": 0x100000, "file": None, "name": "result", "offset": entry["offset"], "size": 1 << 20,
                     "zero": True}
    again = read_vbin(data)
    assert bytes(again.segment("result").data) == bytes(1 << 20)
    assert write_vbin(again) == data


def test_files_that_store_their_zeros_still_load(monkeypatch):
    """Files written before zero segments were declared (every byte in DATA) read as before."""
    import vtasm.formats.meta as meta_module
    import vtasm.formats.vbin as vbin_module

    program = _with_zero_segment()
    monkeypatch.setattr(meta_module, "all_zero", lambda data: False)
    monkeypatch.setattr(vbin_module, "all_zero", lambda data: False)
    old = write_vbin(program)
    monkeypatch.undo()
    assert len(old) > 1 << 20 and b'"zero"' not in old
    loaded = read_vbin(old)
    assert bytes(loaded.segment("result").data) == bytes(1 << 20)
    assert write_vbin(loaded) == write_vbin(program)


def test_zero_flag_must_be_true():
    parts = payloads(write_vbin(_with_zero_segment()))
    meta = json.loads(parts["META"])
    meta["segments"][-1]["zero"] = False
    parts["META"] = json.dumps(meta).encode()
    assert "zero: expected true" in error(build([(tag.encode(), payload) for tag, payload in parts.items()]))

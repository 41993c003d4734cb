"""The column decoder and encoder (vtasm.columns) against the bitstruct codec and the golden vectors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vtasm import isa
from vtasm.columns import decode_columns, decode_stream, encode_instructions
from vtasm.config import load_config
from vtasm.encoding import Codec, Instruction, make_instruction
from vtasm.errors import EncodeError

from .paths import GOLDEN, require

GOOD = ["default", "batch2", "batch4", "block8", "block32", "uop14"]


def _golden(name: str):
    cfg = load_config(require(GOLDEN / f"{name}.config.json"))
    path = require(GOLDEN / f"{name}.jsonl")
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return cfg, [r for r in recs[1:] if r["kind"] in isa.KINDS]


def _one_by_one(codec: Codec, data: bytes) -> list[Instruction]:
    return [codec.decode(data[i : i + 16]) for i in range(0, len(data), 16)]


@pytest.mark.parametrize("name", GOOD)
def test_golden_stream_decodes_to_the_golden_fields(name):
    cfg, recs = _golden(name)
    data = b"".join(bytes.fromhex(r["hex"]) for r in recs)
    insns = decode_stream(data, cfg)
    assert len(insns) == len(recs)
    for insn, rec in zip(insns, recs, strict=True):
        values = {k: v for k, v in rec.items() if k not in ("kind", "hex")}
        assert insn.kind == rec["kind"] and insn.raw is None
        assert insn.fields == {**values, "opcode": isa.OPCODES[rec["kind"]]}
    plain = _one_by_one(Codec(cfg), data)
    assert insns == plain
    assert [list(i.fields) for i in insns] == [list(i.fields) for i in plain]  # same order, so same printing


@pytest.mark.parametrize("name", GOOD)
def test_golden_instructions_encode_to_the_golden_bytes(name):
    cfg, recs = _golden(name)
    insns = [make_instruction(r["kind"], **{k: v for k, v in r.items() if k not in ("kind", "hex", "opcode")})
             for r in recs]
    assert encode_instructions(insns, cfg).hex() == "".join(r["hex"] for r in recs)


@pytest.mark.parametrize("name", GOOD)
def test_random_words_decode_as_bitstruct_decodes_them(name):
    """Random bytes: unknown opcodes, stray bits and signed fields all decode as Codec.decode does."""
    cfg, _ = _golden(name)
    codec = Codec(cfg)
    rng = np.random.default_rng(7)
    noisy = rng.integers(0, 256, 16 * 400, dtype=np.uint8).tobytes()
    # canonical words: each kind's fields drawn at random, then re-encoded by bitstruct
    clean = []
    for k in range(400):
        kind = list(isa.KINDS)[k % len(isa.KINDS)]
        values = {f.name: int(rng.integers(f.min_value, f.max_value + 1)) for f in isa.layout(kind, cfg)
                  if f.name != "opcode"}
        clean.append(codec.encode(make_instruction(kind, **values)))
    data = noisy + b"".join(clean)
    ours = decode_stream(data, cfg)
    theirs = _one_by_one(codec, data)
    assert list(ours) == theirs
    assert sum(i.kind == "raw" for i in ours) >= 300  # the noisy words are mostly raw
    assert encode_instructions(theirs, cfg) == data == codec.encode_stream(ours)


def test_columns_give_each_kind_its_own_layout():
    cfg, recs = _golden("default")
    data = b"".join(bytes.fromhex(r["hex"]) for r in recs)
    cols = decode_columns(data, cfg)
    for i, rec in enumerate(recs):
        for key, value in rec.items():
            if key not in ("kind", "hex"):
                assert cols.fields[key][i] == value, (i, key)
    assert cols.known.all() and cols.canonical.all()


def test_lazy_list_behaves_like_a_list():
    cfg, recs = _golden("default")
    data = b"".join(bytes.fromhex(r["hex"]) for r in recs)
    insns = decode_stream(data, cfg)
    plain = _one_by_one(Codec(cfg), data)
    assert insns[-1] == plain[-1] and insns[1:4] == plain[1:4]
    assert insns == plain and plain == list(insns)
    with pytest.raises(IndexError):
        insns[len(plain)]


def test_a_field_out_of_range_names_the_first_instruction_and_field():
    cfg, _ = _golden("default")
    insns = [make_instruction("finish"), make_instruction("alu", imm=1 << 20), make_instruction("load", x_size=-1)]
    with pytest.raises(EncodeError) as info:
        encode_instructions(insns, cfg)
    with pytest.raises(EncodeError) as expected:
        Codec(cfg).encode(insns[1], "instruction 1")
    assert str(info.value) == str(expected.value)
    assert "instruction 1" in str(info.value) and "imm" in str(info.value)


def test_a_stream_that_is_not_whole_instructions_is_refused():
    cfg, _ = _golden("default")
    with pytest.raises(EncodeError, match="not a multiple of 16"):
        decode_stream(bytes(20), cfg)

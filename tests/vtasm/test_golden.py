"""The codec against the reference header's encodings (spec/golden)."""

from __future__ import annotations

import json

import pytest

from vtasm import isa
from vtasm.config import load_config
from vtasm.encoding import Codec, MicroOp, make_instruction
from vtasm.errors import ConfigError

from .paths import GOLDEN, require

GOOD = ["default", "batch2", "batch4", "block8", "block32", "uop14"]

# What overflows in each bad configuration, worked out by hand from isa.md sections 1 and 3:
# bad_acc18: acc depth 18-0-4-5+3 = 12, inp depth 11, wgt depth 10 -> uop 12 + 12 + 10 = 34 bits.
# bad_block8: acc 17-0-3-5+3 = 12, inp 15-0-3-3+3 = 12, wgt 18-6-3+3 = 12 -> 36 bits.
# bad_uop16: uop depth 14; GEMM word 0 = 7+1+14+15+14 = 51 bits, iter_in moves to word 1
#   (64-78), dst 78-100, src 100-122, wgt_factor_out 122-132 > 128.
BAD = {
    "bad_acc18": ("micro-op", "34"),
    "bad_block8": ("micro-op", "36"),
    "bad_uop16": ("instruction", "wgt_factor_out"),
}


def records(name: str) -> list[dict]:
    path = require(GOLDEN / f"{name}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(params=GOOD)
def golden(request):
    cfg = load_config(require(GOLDEN / f"{request.param}.config.json"))
    return cfg, records(request.param)


def test_every_golden_set_is_present():
    for name in GOOD:
        assert len(records(name)) > 1


def test_sizes_line(golden):
    cfg, recs = golden
    sizes = recs[0]
    assert sizes["kind"] == "sizes"
    assert sizes["insn_bytes"] == cfg.insn_bytes == 16
    assert sizes["uop_bytes"] == cfg.uop_elem_bytes == 4
    for key, kind in (("mem", "load"), ("gemm", "gemm"), ("alu", "alu")):
        end = max(f.offset + f.width for f in isa.layout(kind, cfg))
        words = -(-end // isa.WORD_BITS)
        assert words * isa.WORD_BITS // 8 == sizes[key]


def test_instructions_encode_and_decode(golden):
    cfg, recs = golden
    codec = Codec(cfg)
    seen = set()
    for rec in recs[1:]:
        kind = rec["kind"]
        if kind == "uop":
            continue
        seen.add(kind)
        values = {k: v for k, v in rec.items() if k not in ("kind", "hex")}
        expected = bytes.fromhex(rec["hex"])
        assert codec.encode(make_instruction(kind, **values)).hex() == rec["hex"], rec
        decoded = codec.decode(expected)
        assert decoded.kind == kind and decoded.raw is None
        assert decoded.fields.pop("opcode") == isa.OPCODES[kind]
        assert decoded.fields == values
    assert seen == set(isa.KINDS)


def test_micro_ops_encode_and_decode(golden):
    cfg, recs = golden
    codec = Codec(cfg)
    uops = [r for r in recs if r["kind"] == "uop"]
    assert uops
    for rec in uops:
        uop = MicroOp(rec["dst_idx"], rec["src_idx"], rec["wgt_idx"])
        assert codec.encode_uop(uop).hex() == rec["hex"]
        decoded = codec.decode_uop(bytes.fromhex(rec["hex"]))
        assert (decoded.dst_idx, decoded.src_idx, decoded.wgt_idx) == (uop.dst_idx, uop.src_idx, uop.wgt_idx)


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_configs_are_refused_naming_the_field(name):
    path = require(GOLDEN / f"{name}.config.json")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = info.value.render()
    assert "\n" not in message
    for word in BAD[name]:
        assert word in message


def test_every_bad_config_is_listed():
    found = {p.name.removesuffix(".config.json") for p in require(GOLDEN).glob("bad_*.config.json")}
    assert found == set(BAD)


def test_every_good_config_is_accepted():
    for path in require(GOLDEN).glob("*.config.json"):
        if not path.name.startswith("bad_"):
            load_config(path)

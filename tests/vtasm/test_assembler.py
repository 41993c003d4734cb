"""The assembler against independent facts: golden encodings, hand-computed addresses and layouts."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from vtasm.asm.assembler import assemble, assemble_file
from vtasm.config import config_from_dict, default_config
from vtasm.encoding import codec_for
from vtasm.errors import AsmError
from vtasm.program import SourceLoc

from .asm_helpers import asm, asm_error, golden_config, golden_records, insn_hex
from .paths import REPO

GOLDEN_CONFIGS = ("default", "batch2", "batch4", "block8", "block32", "uop14")

# -- encodings: one line of assembly, the bytes the reference header gives (golden/default.jsonl) --------

TWO_LINE = [
    ("load.inp  sram=58675 dram=0xe9508a390 y=34157 x=1319 stride=46829 ypad=(0, 5) xpad=(4, 10) pop=g2l",
     "10cd94e72842a5036d852705edb650a4"),
    ("load.acc  sram=862 dram=0x6d178b600 y=57117 x=28131 stride=38392 ypad=(3, 14) xpad=(0, 8) pop=s2g",
     "90790d608b176d001ddfe36df895e380"),
    ("load.acc8 sram=7722 dram=0xcf2798960 y=12839 x=23939 stride=22520 ypad=(7, 13) xpad=(6, 13) "
     "pop=s2g push=g2l,g2s", "f0aa7858629e3c032732835df857d7d6"),
    ("load.uop  sram=60536 dram=0x2f5156680 y=47891 x=59557 stride=8756 ypad=(0, 6) xpad=(15, 2) "
     "pop=l2g,s2g push=g2l", "38e0b1836615f50213bba5e83422602f"),
    # load stage: pop_prev and push_prev have no queue, so they are written by spec name
    ("load.inp  sram=38241 dram=0x91773c0b0 y=45235 x=1810 stride=31132 ypad=(15, 11) xpad=(6, 10) "
     "pop=g2l push=l2g pop_prev=1 push_prev=1", "7885552ef0dc4502b3b012079c79bfa6"),
    ("store     sram=12239 dram=0x21daa500 y=1284 x=42510 stride=62658 ypad=(11, 4) xpad=(6, 12) pop=g2s push=s2g",
     "293ebf40a976080004050ea6c2f44bc6"),
    ("gemm      uop=4343:6998 iter=(10720, 7987) dst=(1485, 598) src=(1154, 571) wgt=(287, 1005)",
     "02f7d06a034f673ecdb5922077f451fb"),
    ("gemm      reset uop=5176:6608 iter=(14563, 12242) dst=(269, 1119) src=(711, 754) wgt=(695, 170) "
     "pop=s2g push=g2l", "b238143a1bc7a55f0df9e2b1e475ab2a"),
    ("alu.max   uop=4898:4676 iter=(13920, 16012) dst=(1265, 440) src=(1931, 1268) imm=32324 pop=l2g,s2g",
     "1c22934802b3197df1c4cde2e999447e"),
    ("alu.shr   uop=1854:12976 iter=(10069, 6875) dst=(1838, 1728) src=(1101, 645) imm=4435 use_imm=0 "
     "pop=l2g push=g2s", "4c3e0756ae3ab7352e0776130b355311"),
    ("alu.shr   reset uop=5539:11144 iter=(6495, 15405) dst=(21, 1077) src=(877, 379) imm=-11556 "
     "pop=s2g push=g2l", "b4a31571fdca5a7815a861dbf6b2dcd2"),
    ("finish    push=g2s", "43000000000000000000000000000000"),
    ("finish    pop=s2g push=g2l,g2s", "73000000000000000000000000000000"),
    # the runtime's NOPs (isa.md section 6), worked out by hand: opcode bits 0-2, flags 3-6, memory type 7-9
    ("nop.load push=l2g", "40010000000000000000000000000000"),
    ("nop.compute pop=l2g", "08000000000000000000000000000000"),
    ("nop.store pop=g2s", "09000000000000000000000000000000"),
]


@pytest.mark.parametrize(("line", "expected"), TWO_LINE)
def test_short_operands_encode_to_the_golden_bytes(line, expected):
    assert insn_hex(asm(line)) == expected


def spec_name_line(record: dict) -> str:
    """A golden record written with spec-name operands only (bare kinds)."""
    operands = [f"{k}={v}" for k, v in record.items() if k not in ("kind", "hex")]
    return f"{record['kind']} {' '.join(operands)}"


@pytest.mark.parametrize("name", GOLDEN_CONFIGS)
def test_every_golden_record_assembles_from_spec_names(name):
    cfg = golden_config(name)
    records = golden_records(name)
    insns = [r for r in records if r["kind"] != "uop"]
    uops = [r for r in records if r["kind"] == "uop"]
    text = ".uops\n" + "".join(f"uop {spec_name_line(r)[4:]}\n" for r in uops)
    text += ".text\n" + "".join(spec_name_line(r) + "\n" for r in insns)
    program = assemble(text, "golden.vasm", cfg)
    codec = codec_for(cfg)
    assert [codec.encode(i).hex() for i in program.instructions] == [r["hex"] for r in insns]
    assert [codec.encode_uop(u).hex() for u in program.uops] == [r["hex"] for r in uops]


def test_raw_instruction_and_micro_op_words_are_kept_exactly():
    p = asm("""
        .uops
            uop.raw 0xdeadbeef
            uop 1, 2, 3
        .text
            .insn "0700 0000 0000 0000 0000 0000 0000 00ff"
    """)
    codec = codec_for(p.config)
    # uop 1, 2, 3: dst bits 0-10, src 11-21, wgt 22-31 -> 1 | 2 << 11 | 3 << 22 = 0x00c01001
    assert codec.encode_uops(p.uops) == bytes.fromhex("efbeadde") + bytes.fromhex("0110c000")
    assert p.instructions[0].kind == "raw"
    assert codec.encode(p.instructions[0]) == bytes.fromhex("070000000000000000000000000000ff")


def test_bare_kinds_take_unnamed_memory_types_and_alu_opcodes():
    p = asm("""
        load memory_type=6 sram=1 dram_base=2 x=1
        store memory_type=7
        store.acc
        alu alu_opcode=7 imm=-1
    """)
    assert [i["memory_type"] for i in p.instructions[:3]] == [6, 7, 3]
    alu = p.instructions[3]
    assert (alu["alu_opcode"], alu["imm"], alu["use_imm"]) == (7, -1, 1)


# -- DRAM byte addresses --------------------------------------------------------------------

# element bytes (uop, wgt, inp, acc, out, acc8), from isa.md section 1 by hand
ELEMENT_BYTES = {
    "default": (4, 256, 16, 64, 16, 16),
    "batch2": (4, 256, 32, 128, 32, 32),
    "block8": (4, 64, 8, 32, 8, 8),
    "block32": (4, 1024, 32, 128, 32, 32),
}
MEM_MNEMONICS = ("load.uop", "load.wgt", "load.inp", "load.acc", "store.out", "load.acc8")


@pytest.mark.parametrize("name", ELEMENT_BYTES)
def test_dram_byte_addresses_become_element_indices(name):
    cfg = golden_config(name)
    for mnemonic, elem in zip(MEM_MNEMONICS, ELEMENT_BYTES[name], strict=True):
        program = asm(f"{mnemonic} dram=0x40000 + 3*{elem}", cfg=cfg)
        assert program.instructions[0]["dram_base"] == 0x40000 // elem + 3
        if elem > 1:
            exc = asm_error(f"{mnemonic} dram=0x40000 + {elem // 2}", cfg=cfg)
            mem = {"store.out": "OUT", "load.acc8": "ACC_8BIT"}.get(mnemonic, mnemonic[5:].upper())
            assert exc.message == (
                f"dram address {0x40000 + elem // 2:#x} is not a multiple of the {mem} element size ({elem} bytes)"
            )


def test_segment_names_are_byte_addresses_and_labels_are_indices():
    p = asm("""
        .data A
            .zero 64
        .uops
        first:  uop 0, 0, 0
        second: uop 1, 1, 1
        end:
        .text
            load.inp  sram=second dram=A+32 x=1
            load.uop  dram=second x=2
            load.uop  dram=second+1 x=1
            gemm      uop=second:end
    """)
    assert p.segments[0].addr == 0x1000
    assert p.uop_addr == 0x2000 and p.insn_addr == 0x3000
    inp, uop1, uop2, gemm = p.instructions
    assert (inp["sram_base"], inp["dram_base"]) == (1, (0x1000 + 32) // 16)
    assert uop1["dram_base"] == (0x2000 + 4) // 4  # a micro-op expression: the micro-op's DRAM address
    assert uop2["dram_base"] == (0x2000 + 8) // 4
    assert (gemm["uop_bgn"], gemm["uop_end"]) == (1, 2)
    assert p.uop_labels == {"first": 0, "second": 1, "end": 2}


def test_only_label_plus_numbers_is_a_micro_op_expression():
    # 2*second is a plain number (2): byte address 2 is not a multiple of 4
    exc = asm_error(".uops\nfirst: uop 0,0,0\nsecond: uop 0,0,0\n.text\nload.uop dram=2*second")
    assert exc.message == "dram address 0x2 is not a multiple of the UOP element size (4 bytes)"
    # outside load.uop a label is its index
    exc = asm_error(".uops\nfirst: uop 0,0,0\nsecond: uop 0,0,0\n.text\nload.inp dram=second")
    assert exc.message == "dram address 0x1 is not a multiple of the INP element size (16 bytes)"


def test_constants_builtins_and_forward_references():
    p = asm("""
        .equ N, M * 2 + 1
        .equ M, BATCH * 100 + BLOCK_IN
        load.inp sram=N y=INP_ELEM x=ACC_DEPTH stride=WGT_DEPTH / 2
    """, cfg=golden_config("batch2"))
    insn = p.instructions[0]
    # batch2: BATCH 2, BLOCK_IN 16, inp element 2*16 bytes, acc depth 2^(17-1-4-5+3), wgt depth 2^(18-8-3+3)
    assert (insn["sram_base"], insn["y_size"], insn["x_size"], insn["x_stride"]) == (433, 32, 1024, 512)


# -- queues ------------------------------------------------------------------------------------

# (instruction, operand, the flag it sets), from the stage table of isa.md section 5
QUEUE_FLAGS = [
    ("load.inp", "pop=g2l", "pop_next"), ("load.inp", "push=l2g", "push_next"),
    ("load.wgt", "pop=g2l", "pop_next"), ("nop.load", "push=l2g", "push_next"),
    ("load.uop", "pop=l2g", "pop_prev"), ("load.acc", "pop=s2g", "pop_next"),
    ("load.acc8", "push=g2l", "push_prev"), ("nop.compute", "push=g2s", "push_next"),
    ("gemm", "pop=l2g", "pop_prev"), ("alu.add", "push=g2s", "push_next"),
    ("finish", "pop=s2g", "pop_next"), ("load memory_type=7", "push=g2l", "push_prev"),
    ("store", "pop=g2s", "pop_prev"), ("store", "push=s2g", "push_prev"),
    ("nop.store", "pop=g2s", "pop_prev"), ("store.acc", "push=s2g", "push_prev"),
]


@pytest.mark.parametrize(("insn", "operand", "flag"), QUEUE_FLAGS)
def test_queue_names_map_to_the_flags_of_the_stage(insn, operand, flag):
    fields = asm(f"{insn} {operand}").instructions[0].fields
    assert [f for f in ("pop_prev", "pop_next", "push_prev", "push_next") if fields[f]] == [flag]


# -- data, tensors, placement ---------------------------------------------------------------------


def test_content_directives_append_little_endian_bytes():
    p = asm("""
        .data D
            .int8 1, -1, 127
            .uint8 255
            .int16 -2
            .int32 0x12345678, D
            .hex "00ff 10"
            .zero 2
    """)
    seg = p.segments[0]
    assert seg.data == bytes.fromhex("01ff7fff" "feff" "78563412" "00100000" "00ff10" "0000")


def test_tensor_from_npy_is_packed(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(6, dtype=np.int32).reshape(2, 3))
    (tmp_path / "k.vasm").write_text('.tensor A int32[2, 3] tile(1, 2) from "a.npy"\n')
    p = assemble_file(tmp_path / "k.vasm")
    # tile (1, 2): packed [2, 2, 2]; row r holds (a[r,0], a[r,1]) then (a[r,2], padding 0)
    assert p.segments[0].data == np.array([0, 1, 2, 0, 3, 4, 5, 0], dtype="<i4").tobytes()
    assert (p.tensors[0].shape, p.tensors[0].tile) == ((2, 3), (1, 2))


def test_tensor_tiles_use_configuration_constants(tmp_path):
    a = np.arange(64, dtype=np.int8).reshape(2, 32)
    np.save(tmp_path / "a.npy", a)
    p = assemble('.tensor A int8[2, 32] tile(BATCH, BLOCK_OUT) from "a.npy"\n', "k.vasm",
                 golden_config("batch2"), tmp_path)
    # batch2 tile (2, 16): packed [1, 2, 2, 16] = column block, then batch row, then 16 lanes
    assert p.segments[0].data == a.reshape(2, 2, 16).transpose(1, 0, 2).tobytes()


def test_tensor_repeat_stores_every_tile_several_times(tmp_path):
    bias = np.arange(1, 17, dtype=np.int32)
    np.save(tmp_path / "b.npy", bias)
    p = assemble('.tensor B int32[16] tile(16) repeat 2 from "b.npy"\n', "k.vasm", base_dir=tmp_path)
    # packed [1, 2, 16]: the 16 values, then the same 16 values again
    assert p.segments[0].data == np.concatenate([bias, bias]).astype("<i4").tobytes()
    assert p.tensors[0].repeat == 2


def test_tensor_content_directives_are_packed_bytes_zero_padded():
    p = asm(".tensor T int16[3] tile(4)\n    .int16 7\n")
    assert p.segments[0].data == bytes.fromhex("0700") + bytes(6)


def test_file_directive_reads_raw_and_npy_data(tmp_path):
    (tmp_path / "b.bin").write_bytes(b"\x01\x02\x03")
    np.save(tmp_path / "c.npy", np.array([[1, 2], [3, 4]], dtype=">i2"))  # big-endian on disk
    p = assemble('.data D\n  .file "b.bin"\n  .file "c.npy"\n', "k.vasm", base_dir=tmp_path)
    assert p.segments[0].data == b"\x01\x02\x03" + bytes.fromhex("0100020003000400")


def test_placement_first_fit_then_tables():
    p = asm("""
        .data A
            .zero 10
        .data B align 16
            .zero 4
        .data C @ 0x1010
            .zero 16
        .data D
            .zero 1
        .uops
            uop 0, 0, 0
        .text
            finish
            finish
    """)
    assert [(s.name, s.addr) for s in p.segments] == [("A", 0x1000), ("B", 0x1020), ("C", 0x1010), ("D", 0x2000)]
    assert (p.uop_addr, p.insn_addr) == (0x3000, 0x4000)


def test_layout_directive_places_tables_and_names_files():
    p = asm("""
        .layout insn=0x100 uop=0x200 dram=0x10000 insn_file="i.bin" uop_file="u.bin"
        .data A
            .zero 4
        .text
            finish
    """)
    assert (p.insn_addr, p.uop_addr, p.dram_bytes, p.insn_file, p.uop_file) == (0x100, 0x200, 0x10000, "i.bin", "u.bin")
    assert p.segments[0].addr == 0x1000
    assert asm("finish").dram_bytes is None


def test_dump_ranges():
    p = asm("""
        .data A file "a.raw"
            .zero 32
        .dump A
        .dump A + 16, 8, "tail.bin"
    """)
    assert [(d.addr, d.nbytes, d.file) for d in p.dumps] == [(0x1000, 32, "A.bin"), (0x1010, 8, "tail.bin")]
    assert p.segments[0].file == "a.raw"


# -- configuration and source map ----------------------------------------------------------------------

FULL_CONFIG = ('.config TARGET="pynq" LOG_INP_WIDTH=3 LOG_WGT_WIDTH=3 LOG_ACC_WIDTH=5 LOG_BATCH=1 LOG_BLOCK=4 '
               'LOG_UOP_BUFF_SIZE=15 LOG_INP_BUFF_SIZE=15 LOG_WGT_BUFF_SIZE=18 LOG_ACC_BUFF_SIZE=17\n')


def test_configuration_comes_from_the_directive_or_the_caller():
    assert asm("finish").config == default_config()
    batch2 = golden_config("batch2")
    assert asm("finish", cfg=batch2).config == batch2
    p = asm(FULL_CONFIG + "finish", cfg=batch2)  # same LOG values: accepted, the directive's extras kept
    assert p.config.batch == 2 and p.config.to_dict()["TARGET"] == "pynq"
    exc = asm_error(FULL_CONFIG + "finish", cfg=default_config())
    assert exc.message == ".config differs from the configuration given to the assembler: LOG_BATCH=1 here but 0 given"


def test_config_values_can_be_strings_numbers_and_json_words():
    p = asm(FULL_CONFIG.replace('TARGET="pynq"', 'A="x" B=-2 C=1.5 D=true E=null "odd key"=0'))
    extras = dict(p.config.extra)
    assert extras == {"A": "x", "B": -2, "C": 1.5, "D": True, "E": None, "odd key": 0}


def test_source_map_defaults_to_each_instruction_line():
    p = assemble("; comment\nfinish\n\n  finish\n", "/some/dir/prog.vasm")
    assert p.source_map == {0: SourceLoc("prog.vasm", 2), 1: SourceLoc("prog.vasm", 4)}


def test_loc_directives_and_sourcemap_off():
    p = asm("""
        finish
        .loc "net.vk" 12
        finish
        finish
        .loc off
        finish
    """)
    assert p.source_map == {0: SourceLoc("k.vasm", 2), 1: SourceLoc("net.vk", 12), 2: SourceLoc("net.vk", 12)}
    assert asm(".sourcemap off\nfinish").source_map is None


# -- the examples of docs/assembly.md ---------------------------------------------------------------

DOC = REPO / "docs" / "assembly.md"


def doc_blocks() -> list[str]:
    return re.findall(r"^```[^\n]*\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def test_doc_examples_assemble():
    examples = [b for b in doc_blocks() if ".text" in b]
    assert examples
    for block in examples:
        program = assemble(block, "example.vasm")
        assert program.instructions


def test_examples_directory_assembles():
    for path in sorted(Path(REPO / "examples").glob("*.vasm")):
        assert assemble_file(path).instructions


def test_doc_error_examples_are_the_messages_given():
    """Each error line of the doc, produced by a source that puts the problem at that line and column."""
    sources = {
        "unknown mnemonic": "        lod.inp sram=0",
        "x_size": "        load.inp  sram=0 y=1 x=70000",
        "dram address": "        load.inp dram=0x1008",
        "queue": "        store pop=l2g",
        "undefined symbol": ".data B\n.text\nload.inp   y=Bx",
    }
    lines = [b for b in doc_blocks() if "k.vasm:" in b][0].strip().splitlines()
    assert len(lines) == len(sources)
    for expected in lines:
        line = int(expected.split(":")[1])
        key = next(k for k in sources if k in expected)
        source = sources[key]
        text = "\n" * (line - 1 - source.count("\n")) + source
        with pytest.raises(AsmError) as info:
            assemble(text, "k.vasm")
        assert info.value.render().splitlines()[0] == expected


def test_config_helper_is_independent_of_the_golden_files():
    cfg = config_from_dict({"LOG_INP_WIDTH": 3, "LOG_WGT_WIDTH": 3, "LOG_ACC_WIDTH": 5, "LOG_BATCH": 0,
                            "LOG_BLOCK": 4, "LOG_UOP_BUFF_SIZE": 15, "LOG_INP_BUFF_SIZE": 15,
                            "LOG_WGT_BUFF_SIZE": 18, "LOG_ACC_BUFF_SIZE": 17})
    assert asm("finish", cfg=cfg).config == default_config()

"""The disassembler's canonical text, checked against hand-written expectations."""

from __future__ import annotations

import pytest

from vtasm.asm.assembler import assemble
from vtasm.asm.disassembler import disassemble
from vtasm.config import DEFAULT_CONFIG, config_from_dict, default_config
from vtasm.encoding import MicroOp, codec_for, make_instruction
from vtasm.errors import FormatError
from vtasm.formats.vbin import write_vbin
from vtasm.program import DumpRange, Program, Segment, SourceLoc, TensorInfo

CFG = default_config()
CONFIG_LINE = (".config TARGET=\"sim\" HW_VER=\"0.0.2\" LOG_INP_WIDTH=3 LOG_WGT_WIDTH=3 LOG_ACC_WIDTH=5 LOG_BATCH=0 "
               "LOG_BLOCK=4 LOG_UOP_BUFF_SIZE=15 LOG_INP_BUFF_SIZE=15 LOG_WGT_BUFF_SIZE=18 LOG_ACC_BUFF_SIZE=17")


def text_lines(program: Program) -> list[str]:
    """The instruction lines (after .text), without .loc lines."""
    lines = disassemble(program).splitlines()
    return [line.strip() for line in lines[lines.index(".text") + 1 :] if not line.startswith(".loc")]


def vadd() -> Program:
    """VTA's vector-add tutorial, built field by field."""
    tensors = [TensorInfo(n, d, (1, 1024), (1, 16)) for n, d in (("A", "int32"), ("B", "int32"), ("C", "int8"))]
    segments = [Segment("A", 0x1000, bytes([1]) + bytes(4095)), Segment("B", 0x2000, bytes(4096)),
                Segment("C", 0x3000, bytes(1024))]
    insns = [
        make_instruction("load", memory_type=0, dram_base=0x4000 // 4, y_size=1, x_size=1, x_stride=1),
        make_instruction("load", memory_type=3, dram_base=0x1000 // 64, y_size=1, x_size=64, x_stride=64),
        make_instruction("load", memory_type=3, sram_base=64, dram_base=0x2000 // 64, y_size=1, x_size=64,
                         x_stride=64),
        make_instruction("alu", alu_opcode=2, uop_end=1, iter_out=1, iter_in=64, dst_factor_in=1,
                         src_factor_in=1, push_next=1),
        make_instruction("store", memory_type=4, dram_base=0x3000 // 16, y_size=1, x_size=64, x_stride=64,
                         pop_prev=1, push_prev=1),
        make_instruction("finish", pop_next=1),
    ]
    return Program(CFG, insns, [MicroOp(0, 64, 0)], insn_addr=0x5000, uop_addr=0x4000, segments=segments,
                   tensors=tensors, dumps=[DumpRange(0x3000, 1024, "C.bin")], uop_labels={"add_k": 0},
                   source_map={i: SourceLoc("vadd.vasm", 20 + i) for i in range(5)} | {5: SourceLoc("vadd.vasm", 24)})


def test_vector_add_canonical_text():
    assert disassemble(vadd()) == "\n".join([
        "; VTA program for 1x16x16: 6 instructions, 1 micro-op, 3 segments (vtasm disasm)",
        CONFIG_LINE,
        ".layout insn=0x5000 uop=0x4000",
        ".tensor A int32[1, 1024] tile(1, 16) @ 0x1000",
        '        .hex "01"',
        ".tensor B int32[1, 1024] tile(1, 16) @ 0x2000",
        ".tensor C int8[1, 1024] tile(1, 16) @ 0x3000",
        ".dump C",
        ".uops",
        "add_k:",
        "        uop dst=0 src=64 wgt=0",
        ".text",
        '.loc "vadd.vasm" 20',
        "        load.uop    sram=0 dram=add_k y=1 x=1 stride=1",
        '.loc "vadd.vasm" 21',
        "        load.acc    sram=0 dram=A y=1 x=64 stride=64",
        '.loc "vadd.vasm" 22',
        "        load.acc    sram=64 dram=B y=1 x=64 stride=64",
        '.loc "vadd.vasm" 23',
        "        alu.add     uop=add_k:add_k+1 iter=(1, 64) dst=(0, 1) src=(0, 1) push=g2s",
        '.loc "vadd.vasm" 24',
        "        store       sram=0 dram=C y=1 x=64 stride=64 pop=g2s push=s2g",
        "        finish      pop=s2g",
        "",
    ])


RAW_LOAD = bytes.fromhex("00000000000000fc0000000000000000")  # bits 58-63 are outside every field
INSTRUCTION_LINES = [
    (make_instruction("load", memory_type=6, sram_base=1, dram_base=2, y_size=3, x_size=4, x_stride=5),
     "load        memory_type=6 sram=1 dram_base=2 y=3 x=4 stride=5"),
    (make_instruction("store", memory_type=7), "store       memory_type=7"),
    (make_instruction("alu", alu_opcode=7, iter_out=1, iter_in=1),
     "alu         alu_opcode=7 uop=0:0 iter=(1, 1) dst=(0, 0) src=(0, 0)"),
    (make_instruction("load", memory_type=2, y_size=3, x_pad_1=2, push_next=1), "nop.load    y=3 xpad=(0, 2) push=l2g"),
    (make_instruction("load", memory_type=0, pop_prev=1, pop_next=1), "nop.compute pop=l2g,s2g"),
    (make_instruction("store", memory_type=0, push_prev=1), "nop.store   push=s2g"),
    (make_instruction("load", memory_type=1), "load.wgt"),
    (make_instruction("load", memory_type=2, x_size=1, pop_prev=1, push_prev=1),
     "load.inp    sram=0 dram=0x0 y=0 x=1 stride=0 pop_prev=1 push_prev=1"),
    (make_instruction("store", memory_type=4, x_size=1, pop_next=1, push_next=1),
     "store       sram=0 dram=0x0 y=0 x=1 stride=0 pop_next=1 push_next=1"),
    (make_instruction("load", memory_type=2, x_size=1, dram_base=(0x1000 + 0x30) // 16),
     "load.inp    sram=0 dram=A+0x30 y=0 x=1 stride=0"),
    (make_instruction("load", memory_type=3, x_size=1, dram_base=(0x1000 + 0x40) // 64),
     "load.acc    sram=0 dram=0x1040 y=0 x=1 stride=0"),  # just past the end of A
    (make_instruction("load", memory_type=0, x_size=1, dram_base=(0x2000 + 4) // 4),
     "load.uop    sram=0 dram=k y=0 x=1 stride=0"),
    (make_instruction("load", memory_type=0, x_size=1, dram_base=0x2000 // 4),
     "load.uop    sram=0 dram=0x2000 y=0 x=1 stride=0"),  # no label at or before micro-op 0
    (make_instruction("load", memory_type=0, x_size=1, dram_base=(0x2000 + 8) // 4),
     "load.uop    sram=0 dram=0x2008 y=0 x=1 stride=0"),  # just past the table
    (make_instruction("gemm", reset=1, uop_bgn=1, uop_end=16383, wgt_factor_in=1023),
     "gemm        reset uop=k:k+16382 iter=(0, 0) dst=(0, 0) src=(0, 0) wgt=(0, 1023)"),
    (make_instruction("gemm", uop_bgn=5, uop_end=2),
     "gemm        uop=5:2 iter=(0, 0) dst=(0, 0) src=(0, 0) wgt=(0, 0)"),
    (make_instruction("alu", alu_opcode=3, use_imm=1, imm=-5),
     "alu.shr     uop=0:0 iter=(0, 0) dst=(0, 0) src=(0, 0) imm=-5"),
    (make_instruction("alu", alu_opcode=0, imm=5),
     "alu.min     uop=0:0 iter=(0, 0) dst=(0, 0) src=(0, 0) imm=5 use_imm=0"),
    (make_instruction("finish", pop_prev=1, push_next=1), "finish      pop=l2g push=g2s"),
    (codec_for(CFG).decode(bytes([7]) + bytes(15)), '.insn "07000000000000000000000000000000"'),
    (codec_for(CFG).decode(RAW_LOAD), '.insn "00000000000000fc0000000000000000"'),
]


@pytest.mark.parametrize(("insn", "line"), INSTRUCTION_LINES)
def test_instruction_lines(insn, line):
    program = Program(CFG, [insn], [MicroOp(0, 0, 0), MicroOp(1, 1, 1)], insn_addr=0x8000, uop_addr=0x2000,
                      segments=[Segment("A", 0x1000, bytes(64))], uop_labels={"k": 1})
    assert text_lines(program) == [line]
    assert write_vbin(assemble(disassemble(program), "rt.vasm")) == write_vbin(program)


def test_header_layout_names_and_source_map():
    cfg = config_from_dict({"weird key": [1][0], **DEFAULT_CONFIG, "HW_VER": None, "F": 0.5, "OK": True})
    program = Program(
        cfg,
        [make_instruction("finish")] * 3,
        [MicroOp(1, 2, 3, raw=0xDEADBEEF)],
        insn_addr=0x100,
        uop_addr=0x200,
        segments=[Segment("in-0", 0x1000, b"\x05" + bytes(40), "in.bin"), Segment("BATCH", 0x2000, b"")],
        dumps=[DumpRange(0x1004, 4, "part.bin"), DumpRange(0x2000, 0, "BATCH.bin")],
        uop_labels={"in-0": 0, "end": 1},
        source_map={1: SourceLoc("a b.vk", 7)},
        dram_bytes=0x10000,
        insn_file="i.bin",
    )
    assert write_vbin(assemble(disassemble(program), "rt.vasm")) == write_vbin(program)
    lines = disassemble(program).splitlines()
    assert lines[1] == ('.config "weird key"=1 TARGET="sim" HW_VER=null F=0.5 OK=true LOG_INP_WIDTH=3 '
                        "LOG_WGT_WIDTH=3 LOG_ACC_WIDTH=5 LOG_BATCH=0 LOG_BLOCK=4 LOG_UOP_BUFF_SIZE=15 "
                        "LOG_INP_BUFF_SIZE=15 LOG_WGT_BUFF_SIZE=18 LOG_ACC_BUFF_SIZE=17")
    assert lines[2:] == [
        '.layout insn=0x100 uop=0x200 dram=0x10000 insn_file="i.bin"',
        '.data "in-0" @ 0x1000 file "in.bin"',
        '        .hex "05"',
        "        .zero 40",
        '.data "BATCH" @ 0x2000',
        '.dump 0x1004, 4, "part.bin"',
        '.dump 0x2000, 0, "BATCH.bin"',
        ".uops",
        '"in-0":',
        "        uop.raw 0xdeadbeef",
        "end:",
        ".text",
        ".loc off",
        "        finish",
        '.loc "a b.vk" 7',
        "        finish",
        ".loc off",
        "        finish",
    ]


def test_program_without_source_map_says_so():
    lines = disassemble(Program(CFG, [make_instruction("finish")])).splitlines()
    assert ".sourcemap off" in lines and not any(line.startswith(".loc") for line in lines)


def test_long_segments_print_32_bytes_per_hex_line():
    data = bytes(range(70)) + bytes(10)
    program = Program(CFG, segments=[Segment("D", 0x1000, data)])
    lines = disassemble(program).splitlines()
    start = lines.index(".data D @ 0x1000")
    assert lines[start + 1 : start + 5] == [
        '        .hex "00010203 04050607 08090a0b 0c0d0e0f 10111213 14151617 18191a1b 1c1d1e1f"',
        '        .hex "20212223 24252627 28292a2b 2c2d2e2f 30313233 34353637 38393a3b 3c3d3e3f"',
        '        .hex "40414243 4445"',
        "        .zero 10",
    ]


def test_tensor_repeat_is_printed():
    tensor = TensorInfo("bias", "int32", (16,), (16,), repeat=2)
    program = Program(CFG, segments=[Segment("bias", 0x1000, bytes(128))], tensors=[tensor])
    assert ".tensor bias int32[16] tile(16) repeat 2 @ 0x1000" in disassemble(program).splitlines()
    assert write_vbin(assemble(disassemble(program), "rt.vasm")) == write_vbin(program)


def test_unwritable_config_value_is_a_format_error():
    cfg = config_from_dict({**DEFAULT_CONFIG, "LIST": [1, 2]})
    with pytest.raises(FormatError, match="LIST"):
        disassemble(Program(cfg))

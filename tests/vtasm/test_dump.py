"""The runtime-style dump (isa.md section 6), against hand-written listings."""

from __future__ import annotations

import pytest

from vtasm.config import default_config
from vtasm.encoding import Instruction, MicroOp, codec_for, make_instruction
from vtasm.formats.dump import count_tokens, dump_instructions, dump_uops, format_instruction, new_queues
from vtasm.program import Program

INP, WGT, UOP, ACC, OUT, ACC8 = 2, 1, 0, 3, 4, 5


def load(mem: int, **kw) -> Instruction:
    return make_instruction("load", memory_type=mem, **kw)


MAIN = [
    load(INP, push_next=1, dram_base=0x40, y_size=1, x_size=64, x_stride=64),
    load(
        WGT,
        push_next=1,
        dram_base=0xDEADBEEF,
        sram_base=0xABC,
        y_size=2,
        y_pad_0=1,
        y_pad_1=2,
        x_size=3,
        x_stride=4,
        x_pad_0=5,
        x_pad_1=6,
    ),
    load(UOP, pop_prev=1, dram_base=0x10, sram_base=1, y_size=1, x_size=2, x_stride=2),
    make_instruction(
        "gemm",
        pop_prev=1,
        push_prev=1,
        reset=1,
        uop_bgn=2,
        uop_end=5,
        iter_out=3,
        iter_in=4,
        wgt_factor_out=5,
        src_factor_out=6,
        dst_factor_out=7,
        wgt_factor_in=8,
        src_factor_in=9,
        dst_factor_in=10,
    ),
    make_instruction(
        "alu",
        push_next=1,
        alu_opcode=2,
        use_imm=1,
        imm=-1,
        uop_end=1,
        iter_out=2,
        iter_in=3,
        dst_factor_out=4,
        src_factor_out=5,
        dst_factor_in=6,
        src_factor_in=7,
    ),
    make_instruction(
        "store",
        memory_type=OUT,
        pop_prev=1,
        push_prev=1,
        dram_base=0x100,
        sram_base=2,
        y_size=1,
        x_size=16,
        x_stride=16,
    ),
    load(INP, pop_next=1, dram_base=0x41, y_size=1, x_size=1, x_stride=1),
    load(ACC, pop_next=1, dram_base=0x7, sram_base=0x10, y_size=1, x_size=1, x_stride=1),
    make_instruction("finish", push_prev=1, push_next=1),
]

MAIN_TEXT = """There are 9 instructions
INSTRUCTION 0: LOAD INP
\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 1
\tDRAM: 0x00000040, SRAM:0x0000
\ty: size=1, pad=[0, 0]
\tx: size=64, stride=64, pad=[0, 0]
\tl2g_queue = 1, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 0
INSTRUCTION 1: LOAD WGT
\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 1
\tDRAM: 0xdeadbeef, SRAM:0x0abc
\ty: size=2, pad=[1, 2]
\tx: size=3, stride=4, pad=[5, 6]
\tl2g_queue = 2, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 0
INSTRUCTION 2: LOAD UOP
\tdep - pop prev: 1, pop next: 0, push prev: 0, push next: 0
\tDRAM: 0x00000010, SRAM:0x0001
\ty: size=1, pad=[0, 0]
\tx: size=2, stride=2, pad=[0, 0]
\tl2g_queue = 1, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 0
INSTRUCTION 3: GEMM
\tdep - pop prev: 1, pop next: 0, push prev: 1, push next: 0
\treset_out: 1
\trange (2, 5)
\touter loop - iter: 3, wgt: 5, inp: 6, acc: 7
\tinner loop - iter: 4, wgt: 8, inp: 9, acc: 10
\tl2g_queue = 0, g2l_queue = 1
\ts2g_queue = 0, g2s_queue = 0
INSTRUCTION 4: ALU - add imm
\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 1
\treset_out: 0
\trange (0, 1)
\touter loop - iter: 2, dst: 4, src: 5
\tinner loop - iter: 3, dst: 6, src: 7
\tl2g_queue = 0, g2l_queue = 1
\ts2g_queue = 0, g2s_queue = 1
INSTRUCTION 5: STORE:
\tdep - pop prev: 1, pop next: 0, push prev: 1, push next: 0
\tDRAM: 0x00000100, SRAM:0x0002
\ty: size=1, pad=[0, 0]
\tx: size=16, stride=16, pad=[0, 0]
\tl2g_queue = 0, g2l_queue = 1
\ts2g_queue = 1, g2s_queue = 0
INSTRUCTION 6: LOAD INP
\tdep - pop prev: 0, pop next: 1, push prev: 0, push next: 0
\tDRAM: 0x00000041, SRAM:0x0000
\ty: size=1, pad=[0, 0]
\tx: size=1, stride=1, pad=[0, 0]
\tl2g_queue = 0, g2l_queue = 0
\ts2g_queue = 1, g2s_queue = 0
INSTRUCTION 7: LOAD ACC
\tdep - pop prev: 0, pop next: 1, push prev: 0, push next: 0
\tDRAM: 0x00000007, SRAM:0x0010
\ty: size=1, pad=[0, 0]
\tx: size=1, stride=1, pad=[0, 0]
\tl2g_queue = 0, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 0
INSTRUCTION 8: FINISH
\tl2g_queue = 0, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 0
"""


def test_every_header_kind_and_running_counters():
    assert dump_instructions(MAIN) == MAIN_TEXT


def test_a_program_dumps_like_its_instruction_list():
    program = Program(default_config(), instructions=list(MAIN))
    assert dump_instructions(program) == MAIN_TEXT


# Byte 0 of an instruction: opcode in bits 0-2, then pop_prev, pop_next, push_prev, push_next.
UNKNOWN = codec_for(default_config()).decode(bytes([5 | 0x08] + [0] * 15))

ODD = [
    make_instruction("store", memory_type=OUT, pop_next=1, push_prev=1, push_next=1),
    load(INP, pop_prev=1, push_prev=1, push_next=1),
    load(UOP, pop_prev=1, pop_next=1),
    load(ACC, push_prev=1),
    load(WGT, pop_next=1),
    load(ACC8, push_next=1, dram_base=0x20, y_size=1, x_size=1, x_stride=1),
    load(OUT, pop_prev=1, y_size=1, x_size=1, x_stride=1),
    load(6, y_size=1, x_size=2, x_stride=2),
    load(ACC8),
    UNKNOWN,
    make_instruction("finish", pop_prev=1),
]

ODD_TEXT = """There are 11 instructions
INSTRUCTION 0: NOP-STORE-STAGE
\tdep - pop prev: 0, pop next: 1, push prev: 1, push next: 1
\tl2g_queue = 0, g2l_queue = 0
\ts2g_queue = 1, g2s_queue = 0
INSTRUCTION 1: NOP-MEMORY-STAGE
\tdep - pop prev: 1, pop next: 0, push prev: 1, push next: 1
\tl2g_queue = 1, g2l_queue = 0
\ts2g_queue = 1, g2s_queue = 0
INSTRUCTION 2: NOP-COMPUTE-STAGE
\tdep - pop prev: 1, pop next: 1, push prev: 0, push next: 0
\tl2g_queue = 0, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 0
INSTRUCTION 3: NOP-COMPUTE-STAGE
\tdep - pop prev: 0, pop next: 0, push prev: 1, push next: 0
\tl2g_queue = 0, g2l_queue = 1
\ts2g_queue = 0, g2s_queue = 0
INSTRUCTION 4: NOP-MEMORY-STAGE
\tdep - pop prev: 0, pop next: 1, push prev: 0, push next: 0
\tl2g_queue = 0, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 0
INSTRUCTION 5: LOAD ACC_8BIT
\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 1
\tDRAM: 0x00000020, SRAM:0x0000
\ty: size=1, pad=[0, 0]
\tx: size=1, stride=1, pad=[0, 0]
\tl2g_queue = 0, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 1
INSTRUCTION 6: LOAD OUT
\tdep - pop prev: 1, pop next: 0, push prev: 0, push next: 0
\tDRAM: 0x00000000, SRAM:0x0000
\ty: size=1, pad=[0, 0]
\tx: size=1, stride=1, pad=[0, 0]
\tl2g_queue = -1, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 1
INSTRUCTION 7: LOAD 6
\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 0
\tDRAM: 0x00000000, SRAM:0x0000
\ty: size=1, pad=[0, 0]
\tx: size=2, stride=2, pad=[0, 0]
\tl2g_queue = -1, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 1
INSTRUCTION 8: NOP-COMPUTE-STAGE
\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 0
\tl2g_queue = -1, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 1
INSTRUCTION 9: UNKNOWN (opcode 5)
\tl2g_queue = -1, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 1
INSTRUCTION 10: FINISH
\tl2g_queue = -1, g2l_queue = 0
\ts2g_queue = 0, g2s_queue = 1
"""


def test_nops_odd_memory_types_ignored_flags_and_unknown_opcodes():
    assert UNKNOWN.raw is not None
    assert dump_instructions(ODD) == ODD_TEXT


@pytest.mark.parametrize(
    ("alu_opcode", "use_imm", "name"),
    [
        (0, 0, "min"),
        (0, 1, "min imm"),
        (1, 0, "max"),
        (1, 1, "max imm"),
        (2, 0, "add"),
        (2, 1, "add imm"),
        (3, 0, "shr"),
        (3, 1, "shr"),
        (4, 0, "mul"),
        (4, 1, "mul"),
        (5, 0, "unknown op"),
        (6, 1, "unknown op"),
        (7, 0, "unknown op"),
    ],
)
def test_alu_operation_names(alu_opcode, use_imm, name):
    insn = make_instruction("alu", alu_opcode=alu_opcode, use_imm=use_imm, imm=3)
    text = dump_instructions([insn])
    assert text.splitlines()[1] == f"INSTRUCTION 0: ALU - {name}"


def test_raw_instruction_with_a_known_opcode_prints_its_fields():
    codec = codec_for(default_config())
    good = codec.encode(load(INP, dram_base=0x40, y_size=1, x_size=4, x_stride=4))
    stray = good[:7] + bytes([good[7] | 0x10]) + good[8:]  # bit 60: unused in LOAD
    decoded = codec.decode(stray)
    assert decoded.raw is not None
    program = Program(default_config(), instructions=[Instruction("raw", {}, raw=stray)])
    expected = (
        "There are 1 instructions\n"
        "INSTRUCTION 0: LOAD INP\n"
        "\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 0\n"
        "\tDRAM: 0x00000040, SRAM:0x0000\n"
        "\ty: size=1, pad=[0, 0]\n"
        "\tx: size=4, stride=4, pad=[0, 0]\n"
        "\tl2g_queue = 0, g2l_queue = 0\n"
        "\ts2g_queue = 0, g2s_queue = 0\n"
    )
    assert dump_instructions([decoded]) == expected
    assert dump_instructions(program) == expected


def test_format_instruction_prints_the_given_counters():
    queues = {"l2g": 3, "g2l": -2, "s2g": 0, "g2s": 8}
    assert format_instruction(7, make_instruction("finish"), queues) == (
        "INSTRUCTION 7: FINISH\n\tl2g_queue = 3, g2l_queue = -2\n\ts2g_queue = 0, g2s_queue = 8\n"
    )


def test_count_tokens_returns_new_counters():
    queues = new_queues()
    after = count_tokens(make_instruction("gemm", pop_prev=1, push_next=1), queues)
    assert queues == {"l2g": 0, "g2l": 0, "s2g": 0, "g2s": 0}
    assert after == {"l2g": -1, "g2l": 0, "s2g": 0, "g2s": 1}
    assert count_tokens(make_instruction("finish", push_next=1), after) == after


def test_empty_stream():
    assert dump_instructions([]) == "There are 0 instructions\n"


def test_uop_listing():
    uops = [MicroOp(1, 2, 3)] + [MicroOp(0, 0, 0)] * 9 + [MicroOp(2047, 2047, 1023)]
    text = dump_uops(uops)
    assert text.startswith("There are 11 uops\n[0000]\t acc=1, inp=2, wgt=3\n[0001]\t acc=0, inp=0, wgt=0\n")
    assert text.endswith("[0009]\t acc=0, inp=0, wgt=0\n[0010]\t acc=2047, inp=2047, wgt=1023\n\n")
    assert dump_uops([]) == "There are 0 uops\n\n"

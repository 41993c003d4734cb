"""Every class of assembly error: its message, and the source text under the caret."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vtasm.asm.assembler import assemble
from vtasm.config import default_config
from vtasm.errors import AsmError

from .asm_helpers import asm_error, caret_text, where

# (source, line, column, message, text under the caret)
ERRORS = [
    # syntax
    ("load.inp sram=(1, 2", 1, 20, "unexpected end of line; expected one of ')', ','", ""),
    ('load.inp sram="x"', 1, 15, "unexpected '\"x\"'; expected one of '(', '-', a name, a number", '"x"'),
    (".dta A", 1, 1, "unknown directive '.dta'; did you mean '.data'?", ".dta"),
    ("x: .int8x 3", 1, 4, "unknown directive '.int8x'; did you mean '.int8'?", ".int8x"),
    ("load.inp sram=12ab", 1, 15, "invalid number '12ab'", "12ab"),
    ('.data "a\\qb"', 1, 7, "invalid escape in string (strings use JSON escapes)", '"a\\qb"'),
    # mnemonics and operands
    ("lod.inp sram=0", 1, 1, "unknown mnemonic 'lod.inp'; did you mean 'load.inp'?", "lod.inp"),
    ("load.inp strid=1", 1, 10, "unknown operand 'strid' for load.inp; did you mean 'stride'?", "strid"),
    ("gemm rset", 1, 6, "expected an operand key=value, not 'rset'; did you mean 'reset'?", "rset"),
    ("load x=1", 1, 1, "'load' needs memory_type=N", "load"),
    ("load.inp memory_type=3", 1, 10, "memory_type is set by the mnemonic 'load.inp'", "memory_type"),
    ("load.inp x=1 x_size=2", 1, 14, "field x_size is given twice (also at column 10)", "x_size=2"),
    ("gemm uop=3", 1, 6, "operand 'uop' takes a range: uop=BEGIN:END", "uop=3"),
    ("gemm iter=3", 1, 6, "operand 'iter' takes a pair: iter=(iter_out, iter_in)", "iter=3"),
    ("load.inp y=(1,2)", 1, 10, "operand 'y' takes one value, e.g. y=N", "y=(1,2)"),
    # field ranges (from the ISA layout of the configuration)
    ("load.inp sram=0 x=70000", 1, 17, "x_size = 70000 is out of range 0..65535 (16 bits)", "x=70000"),
    ("gemm iter=(1, 20000)", 1, 15, "iter_in = 20000 is out of range 0..16383 (14 bits)", "20000"),
    ("alu.add imm=40000", 1, 9, "imm = 40000 is out of range -32768..32767 (16 bits)", "imm=40000"),
    ("alu.add reset=2", 1, 9, "reset = 2 is out of range 0..1 (1 bit)", "reset=2"),
    ("gemm dst=(2048, 0)", 1, 11, "dst_factor_out = 2048 is out of range 0..2047 (11 bits)", "2048"),
    (".uops\nuop dst=5000", 2, 5, "dst_idx = 5000 is out of range 0..2047 (11 bits)", "dst=5000"),
    (".uops\nuop.raw 0x100000000", 2, 9, "micro-op word 4294967296 is out of range 0..0xffffffff (32 bits)",
     "0x100000000"),
    # DRAM addresses
    ("load.inp dram=0x1008", 1, 15, "dram address 0x1008 is not a multiple of the INP element size (16 bytes)",
     "0x1008"),
    ("load.inp dram=-16", 1, 15, "dram address -16 is negative", "-16"),
    ("load memory_type=6 dram=0x100", 1, 25, "memory type 6 has no element size; give dram_base=N instead",
     "0x100"),
    # queues
    ("store pop=l2g", 1, 11, "queue 'l2g' is not connected to the store stage (store pops g2s, pushes s2g)", "l2g"),
    ("load.inp pop=l2g", 1, 14,
     "the load stage pushes queue 'l2g', it cannot pop it (load pops g2l, pushes l2g)", "l2g"),
    ("gemm push=g2x", 1, 11, "unknown queue 'g2x'; did you mean 'g2s'?", "g2x"),
    # symbols
    (".data B\n.text\nload.inp dram=Bx", 3, 15, "undefined symbol 'Bx'; did you mean 'B'?", "Bx"),
    (".equ A, 1\n.equ A, 2", 2, 6, "symbol 'A' is already defined as a constant (line 1)", "A"),
    (".equ BATCH, 2", 1, 6, "'BATCH' is a built-in constant and cannot be redefined", "BATCH"),
    (".equ A, B\n.equ B, A\n.text\nload.inp sram=A", 2, 9, "constant 'A' is defined in terms of itself", "A"),
    (".data A\n  .zero B\n.data B", 2, 9,
     "the address of segment 'B' is not known here (sizes, alignments and addresses of segments are needed "
     "to place them)", "B"),
    ("load.inp sram=1/0", 1, 15, "division by zero", "1/0"),
    # sections
    ("x: finish", 1, 1, "labels are only allowed in .uops sections (micro-op labels)", "x:"),
    (".uops\nfinish", 2, 1,
     "'finish' in a .uops section, which holds uop and uop.raw (write .text before instructions)", "finish"),
    ("uop 1, 2, 3", 1, 1, "'uop' belongs in a .uops section", "uop"),
    (".data A\nfinish", 2, 1, "instruction inside segment A (write .text before instructions)", "finish"),
    (".int8 1", 1, 1, "'.int8' must follow .data or .tensor", ".int8 1"),
    (".uops\nuop 1, 2", 2, 5, "uop takes dst=D src=S wgt=W, or three values: uop D, S, W", "1, 2"),
    # data and tensors
    (".data A\n .int8 300", 2, 8, "value 300 does not fit int8 (-128..127)", "300"),
    (".data A\n .hex \"0g\"", 2, 7, "'.hex' takes pairs of hex digits", '"0g"'),
    (".data A from \"x.npy\"", 1, 9, "'from' is only for .tensor (use .file for raw data)", 'from "x.npy"'),
    (".data A repeat 2", 1, 9, "'repeat' is only for .tensor", "repeat 2"),
    (".tensor A int8[4] tile(4) repeat 0", 1, 34, "repeat must be at least 1, got 0", "0"),
    (".data A align 0", 1, 9, "alignment must be positive, got 0", "align 0"),
    (".data A\n.data A", 2, 7, "segment 'A' is already declared (line 1)", "A"),
    (".tensor A int33[1] tile(1)", 1, 11,
     "unknown dtype 'int33'; did you mean 'int32'? (dtypes: int8, int16, int32, uint8)", "int33"),
    (".tensor A int8[2, 2] tile(1)", 1, 1, "tile has 1 values for 2 dimensions", ".tensor A int8[2, 2] tile(1)"),
    (".tensor A int8[] tile()", 1, 1, "tensor A needs at least one dimension", ".tensor A int8[] tile()"),
    (".tensor A int8[0] tile(1)", 1, 16, "a dimension must be at least 1, got 0", "0"),
    (".tensor A int8[4] tile(0)", 1, 24, "a tile must be at least 1, got 0", "0"),
    (".tensor A int8[4] tile(1)\n  .zero 5", 1, 1,
     "the content of tensor A is 5 bytes, more than its packed size (4 bytes)", ".tensor A int8[4] tile(1)"),
    ('.data A\n .file "nope.bin"', 2, 8, "nope.bin: cannot read data file: No such file or directory",
     '"nope.bin"'),
    ('.tensor A int8[1] tile(1) from "nope.npy"', 1, 27, "nope.npy: cannot read array: No such file or directory",
     'from "nope.npy"'),
    ('.insn "0011"', 1, 7, "'.insn' takes 32 hex digits (16 bytes in memory order)", '"0011"'),
    # placement, dumps, layout, source map, configuration
    (".data A @ 0x1000\n .zero 32\n.data B @ 0x1010\n .zero 4", 3, 1,
     "segment B (0x1010..0x1014) overlaps segment A (0x1000..0x1020)", ".data B @ 0x1010"),
    (".layout insn=0x1000\n.data A @ 0x1000\n .zero 16\n.text\nfinish", 1, 1,
     "the instruction stream (0x1000..0x1010) overlaps segment A (0x1000..0x1010)", ".layout insn=0x1000"),
    (".layout ins=0x1000", 1, 9, "unknown .layout key 'ins'; did you mean 'insn'?", "ins=0x1000"),
    (".dump 5", 1, 1, '.dump takes a segment name, or ADDR, NBYTES, "FILE"', ".dump 5"),
    ('.loc "" 1\nfinish', 1, 6, ".loc needs a file name", '""'),
    ('.loc "a.vk" -1\nfinish', 1, 13, "a line number must not be negative, got -1", "-1"),
    ('.data A\n .hex "00', 2, 7, "unterminated string", '"'),
    (".sourcemap on", 1, 12, "expected '.sourcemap off'", "on"),
    ('.loc "a" 1\n.sourcemap off', 1, 1, ".loc in a program with .sourcemap off", '.loc "a" 1'),
    (".config LOG_BATCH=0", 1, 1, ".config: missing key LOG_INP_WIDTH", ".config LOG_BATCH=0"),
]


@pytest.mark.parametrize(("source", "line", "column", "message", "underlined"), ERRORS)
def test_error_message_and_position(source, line, column, message, underlined):
    exc = asm_error(source)
    assert where(exc) == (line, column, message)
    if underlined:
        assert caret_text(exc) == underlined


def test_rendered_error_has_the_line_and_a_caret():
    with pytest.raises(AsmError) as info:
        assemble("finish\n        lod.inp sram=0\n", "k.vasm")
    assert info.value.render() == (
        "k.vasm:2:9: unknown mnemonic 'lod.inp'; did you mean 'load.inp'?\n"
        "            lod.inp sram=0\n"
        "            ^^^^^^^"
    )


def test_config_directive_must_match_the_given_configuration():
    text = (".config LOG_INP_WIDTH=3 LOG_WGT_WIDTH=3 LOG_ACC_WIDTH=5 LOG_BATCH=0 LOG_BLOCK=5 "
            "LOG_UOP_BUFF_SIZE=15 LOG_INP_BUFF_SIZE=15 LOG_WGT_BUFF_SIZE=18 LOG_ACC_BUFF_SIZE=16\nfinish\n")
    exc = asm_error(text, cfg=default_config())
    assert where(exc) == (1, 1, ".config differs from the configuration given to the assembler: "
                                "LOG_BLOCK=5 here but 4 given, LOG_ACC_BUFF_SIZE=16 here but 17 given")
    assert assemble(text, "k.vasm").config.block_in == 32  # alone, the directive decides


def test_unreadable_source_file(tmp_path):
    from vtasm.asm.assembler import assemble_file

    with pytest.raises(AsmError, match="cannot read assembly source"):
        assemble_file(tmp_path / "missing.vasm")
    (tmp_path / "bad.vasm").write_bytes(b"finish \xff\n")
    with pytest.raises(AsmError, match="not UTF-8"):
        assemble_file(tmp_path / "bad.vasm")


_pieces = st.sampled_from([
    "load.inp", "gemm", "alu.add", "uop", ".data", ".tensor", ".uops", ".text", ".equ", ".dump", ".config",
    "A", "x=", "dram=", "pop=", "(", ")", ",", ":", "1", "-", "+", "*", "/", "0x10", '"f"', "\n", " ", "int8[",
    "]", "tile(", "@", "align", ";", "reset", "l2g", ".int8", ".zero", ".loc", "off", "label:", "$", "#",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_pieces, max_size=25))
def test_any_text_assembles_or_raises_asm_error(pieces):
    try:
        assemble(" ".join(pieces), "fuzz.vasm")
    except AsmError as exc:
        assert exc.span is not None and exc.span.line >= 1

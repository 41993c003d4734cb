"""Assembly round trips: disassemble then assemble gives the same program, and canonical text is a fixed point."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vtasm.asm.assembler import assemble, assemble_file
from vtasm.asm.disassembler import disassemble
from vtasm.formats.raw import import_raw
from vtasm.formats.vbin import write_vbin

from .asm_helpers import ROUNDTRIP_CONFIGS, golden_config, instructions, programs
from .paths import CONFORMANCE, REPO, require


def reassemble(program):
    return assemble(disassemble(program), "rt.vasm")


@pytest.mark.parametrize("name", ROUNDTRIP_CONFIGS)
def test_random_programs_survive_disassembly(name):
    cfg = golden_config(name)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(programs(cfg))
    def check(program):
        assert write_vbin(reassemble(program)) == write_vbin(program)

    check()


@pytest.mark.parametrize("name", ROUNDTRIP_CONFIGS)
def test_every_instruction_kind_survives_disassembly(name):
    cfg = golden_config(name)
    from vtasm.program import Program

    @settings(max_examples=30, deadline=None)
    @given(st.lists(instructions(cfg), min_size=1, max_size=40))
    def check(insns):
        program = Program(cfg, insns, insn_addr=0x1000, source_map=None)
        assert write_vbin(reassemble(program)) == write_vbin(program)

    check()


def test_canonical_text_is_a_fixed_point():
    source = (REPO / "examples" / "vadd.vasm")
    program = assemble_file(source)
    text = disassemble(program)
    again = assemble(text, "vadd.vasm")
    assert disassemble(again) == text
    assert write_vbin(again) == write_vbin(program)


def test_hand_written_canonical_text_is_a_fixed_point():
    text = Path(__file__).with_name("canonical.vasm").read_text()
    assert disassemble(assemble(text, "canonical.vasm")) == text


@pytest.mark.parametrize("case", ["16x16_relu", "average_pooling", "lenet5_L2", "onera_compiled_matrix_maxpool"])
def test_conformance_programs_survive_disassembly(case):
    program = import_raw(require(CONFORMANCE / case))
    text = disassemble(program)
    assert write_vbin(assemble(text, "rt.vasm")) == write_vbin(program)
    assert disassemble(assemble(text, "rt.vasm")) == text


def test_names_spelled_like_keywords_survive_disassembly():
    """A configuration key or a segment named like one of the grammar's keywords (align, from, tile, ...) is
    written as a string, which the assembler reads back (the lexer would take the bare word as the keyword)."""
    import dataclasses

    from vtasm.program import Program, Segment

    cfg = dataclasses.replace(golden_config("default"), extra=(("align", None), ("from", "x"), ("TARGET", "sim")))
    program = Program(cfg, [], insn_addr=0x2000, segments=[Segment("tile", 0x1000, bytes(range(16)))],
                      source_map=None)
    text = disassemble(program)
    assert '"align"=null' in text and '"from"=' in text
    assert write_vbin(reassemble(program)) == write_vbin(program)

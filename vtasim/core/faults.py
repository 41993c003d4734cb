"""Fault messages: one line naming the instruction index, stage and offending values."""

from __future__ import annotations

from vtasm import isa
from vtasm.encoding import Instruction
from vtasm.errors import SimFault
from vtasm.program import Program


def insn_title(insn: Instruction) -> str:
    """A short name such as 'LOAD INP', 'GEMM', 'ALU add imm' or 'STORE'."""
    if insn.kind == "raw":
        return f"opcode {insn.opcode}"
    if insn.kind in ("load", "store"):
        mem = isa.MEM_TYPE_DUMP.get(insn["memory_type"], str(insn["memory_type"]))
        return f"{insn.kind.upper()} {mem}"
    if insn.kind == "alu":
        op = isa.ALU_OP_NAMES.get(insn["alu_opcode"], str(insn["alu_opcode"]))
        return f"ALU {op}{' imm' if insn['use_imm'] else ''}"
    return insn.kind.upper()


def fault(index: int, insn: Instruction, message: str) -> SimFault:
    """A SimFault for instruction ``index``: 'instruction 7 (compute stage, GEMM): ...'."""
    return SimFault(f"instruction {index} ({insn.stage} stage, {insn_title(insn)}): {message}", index)


def source_of(program: Program, index: int | None) -> str:
    """' [from k.vk:12]' when the program's source map knows instruction ``index``, else ''."""
    if index is None or not program.source_map:
        return ""
    loc = program.source_map.get(index)
    return f" [from {loc.file}:{loc.line}]" if loc is not None else ""


def located(program: Program, exc: SimFault) -> SimFault:
    """The fault with the source line of its instruction added, when the source map knows it."""
    where = source_of(program, exc.index)
    return SimFault(exc.message + where, exc.index) if where else exc

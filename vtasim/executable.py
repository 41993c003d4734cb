"""An instruction as the hardware sees it."""

from __future__ import annotations

from vtasm import isa
from vtasm.encoding import Instruction


def executable(insn: Instruction) -> Instruction:
    """The instruction its opcode's unit executes: stray bits outside the fields are ignored."""
    if insn.kind == "raw" and insn.opcode in isa.KIND_BY_OPCODE:
        return Instruction(isa.KIND_BY_OPCODE[insn.opcode].name, insn.fields)
    return insn

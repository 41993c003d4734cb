"""Where a program's pieces are: the DRAM rows a LOAD or STORE touches, the source line of an
instruction and the tensor an address lies in, and the instruction a unit executes.

Program facts the functional simulator, the timing model and their outputs share.
"""

from __future__ import annotations

import bisect

from . import isa
from .encoding import Instruction
from .program import Program

_OUT = isa.MEM_TYPES["out"]


def executable(insn: Instruction) -> Instruction:
    """The instruction its opcode's unit executes: stray bits outside the fields are ignored."""
    if insn.kind == "raw" and insn.opcode in isa.KIND_BY_OPCODE:
        return Instruction(isa.KIND_BY_OPCODE[insn.opcode].name, insn.fields)
    return insn


def dram_rows(program: Program, insn: Instruction) -> tuple[int, int, int, int] | None:
    """(first byte, rows, bytes per row, stride in bytes) a LOAD or STORE touches in DRAM, or None."""
    if insn.kind not in ("load", "store") or not insn["x_size"] or not insn["y_size"]:
        return None
    eb = isa.elem_bytes(program.config, _OUT if insn.kind == "store" else insn["memory_type"])
    if eb is None:
        return None
    return insn["dram_base"] * eb, insn["y_size"], insn["x_size"] * eb, insn["x_stride"] * eb


class Locator:
    """Source lines of instructions and names of DRAM addresses, for one program."""

    def __init__(self, program: Program):
        self.program = program
        self.regions = sorted([(s.addr, s.end, s.name) for s in program.segments if s.data]
                              + [(program.uop_addr, program.uop_end, "uops")]
                              + [(program.insn_addr, program.insn_end, "insns")])
        self.starts = [r[0] for r in self.regions]

    def source(self, index: int) -> str | None:
        """'file:line' of instruction ``index``, or None when the program has no location for it."""
        loc = (self.program.source_map or {}).get(index)
        return f"{loc.file}:{loc.line}" if loc is not None else None

    def address(self, byte: int) -> str:
        """'name+0xOFFSET' for a byte inside a segment (or 'uops', 'insns'), else '0xADDRESS'."""
        i = bisect.bisect_right(self.starts, byte) - 1
        while i >= 0:
            start, end, name = self.regions[i]
            if byte < end:
                return f"{name}+0x{byte - start:x}"
            i -= 1
        return f"0x{byte:x}"

    def dram(self, insn: Instruction) -> str | None:
        """Where a LOAD or STORE's first DRAM byte lies, or None for other instructions."""
        rows = dram_rows(self.program, insn)
        return None if rows is None else self.address(rows[0])

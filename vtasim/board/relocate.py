"""A program's DRAM image placed at a physical address: every address the hardware uses made absolute.

The whole DRAM of a program (its segments, micro-op table and instruction stream, as the simulator lays
them out) goes into one physically contiguous buffer. Each LOAD and STORE names its DRAM data in element
units of its memory type, so the buffer's physical address divided by that element's size is added to its
``dram_base``; the instruction stream's address is the buffer's plus the stream's offset. The buffer must be
aligned to every element size and lie below 4 GiB (the designs' 32-bit DMA addresses).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vtasim.core.memory import check_dma
from vtasim.core.state import new_state
from vtasm import isa
from vtasm.columns import stream_bytes
from vtasm.encoding import Instruction
from vtasm.errors import FormatError
from vtasm.program import Program

ADDRESS_LIMIT = 1 << 32
DRAM_BASE_LIMIT = 1 << 32  # the dram_base field's 32 bits


@dataclass(frozen=True)
class Placed:
    """A program's DRAM image ready for a buffer at ``base``: the bytes, and the stream's address and count."""

    image: np.ndarray  # uint8, the buffer's contents
    insn_addr: int  # physical address of the first instruction
    insn_count: int


def element_bytes(program: Program, insn: Instruction) -> int | None:
    """The DRAM element size a LOAD or STORE's dram_base counts in (None for other instructions)."""
    if insn.kind == "store":
        return program.config.out_elem_bytes
    if insn.kind == "load":
        return isa.elem_bytes(program.config, insn["memory_type"])
    return None


def alignment(program: Program) -> int:
    """The alignment the buffer needs: every element size that dram_base counts in, and the 16-byte
    instructions (the config's DRAM alignment, at least a page, covers them all)."""
    return program.config.dram_align


def check_placeable(program: Program, origin: str) -> int:
    """The program's DRAM size, after refusing (before anything reaches a device) a program whose LOAD or
    STORE reaches outside its own DRAM (it would read or write the board's memory) or whose DRAM the
    32-bit addresses cannot hold."""
    check_dma(program)  # a SimFault naming the instruction, field and limit
    size = program.dram_size()
    if size >= ADDRESS_LIMIT:
        raise FormatError(f"{origin}: the program needs {size:#x} bytes of DRAM; the board's 32-bit DMA "
                          f"addresses reach 4 GiB at most")
    return size


def place(program: Program, base: int, origin: str) -> Placed:
    """The DRAM image of ``program`` relocated for a buffer at physical address ``base``."""
    size = check_placeable(program, origin)
    if base % alignment(program):
        raise FormatError(f"{origin}: the buffer at physical address {base:#x} is not aligned to "
                          f"{alignment(program):#x} bytes (the program's element sizes)")
    if base + size > ADDRESS_LIMIT:
        raise FormatError(f"{origin}: the buffer at {base:#x} ({size:#x} bytes) ends above 4 GiB, beyond the "
                          "designs' 32-bit DMA addresses")
    image = np.array(new_state(program).dram[:size], dtype=np.uint8)
    moved = relocate(program, base)
    stream = np.frombuffer(stream_bytes(moved, program.config), dtype=np.uint8)
    image[program.insn_addr:program.insn_addr + len(stream)] = stream
    return Placed(image, base + program.insn_addr, len(moved))


def relocate(program: Program, base: int) -> list[Instruction]:
    """The instructions with each LOAD and STORE's dram_base moved by ``base`` bytes (``base`` aligned)."""
    moved = []
    for index, insn in enumerate(program.instructions):
        elem = None if insn.raw is not None else element_bytes(program, insn)
        if elem is None:
            moved.append(insn)
            continue
        dram_base = insn["dram_base"] + base // elem
        if dram_base >= DRAM_BASE_LIMIT:
            raise FormatError(f"instruction {index}: dram_base {dram_base:#x} after relocation to {base:#x} "
                              "exceeds its 32-bit field")
        moved.append(Instruction(insn.kind, {**insn.fields, "dram_base": dram_base}))
    return moved

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
from vtasm.columns import StreamColumns, stream_bytes, stream_columns
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


def place(program: Program, base: int, origin: str, size: int | None = None) -> Placed:
    """The DRAM image of ``program`` relocated for a buffer at physical address ``base`` (``size``: its DRAM
    size when check_placeable already gave it)."""
    size = check_placeable(program, origin) if size is None else size
    if base % alignment(program):
        raise FormatError(f"{origin}: the buffer at physical address {base:#x} is not aligned to "
                          f"{alignment(program):#x} bytes (the program's element sizes)")
    if base + size > ADDRESS_LIMIT:
        raise FormatError(f"{origin}: the buffer at {base:#x} ({size:#x} bytes) ends above 4 GiB, beyond the "
                          "designs' 32-bit DMA addresses")
    image = np.array(new_state(program).dram[:size], dtype=np.uint8)
    stream = np.frombuffer(relocated_stream(program, base), dtype=np.uint8)
    image[program.insn_addr:program.insn_addr + len(stream)] = stream
    return Placed(image, base + program.insn_addr, len(program.instructions))


def element_sizes(columns: StreamColumns) -> np.ndarray:
    """Each instruction's DRAM element size in bytes where it is a LOAD or STORE whose dram_base counts
    elements (0 elsewhere: other instructions, unknown memory types, instructions with no valid decoding)."""
    cfg = columns.cfg
    memory_type = columns.column("memory_type")
    elem = np.zeros(len(columns), dtype=np.int64)
    loads = columns.canonical & (columns.opcode == isa.OPCODES["load"])
    for value in np.unique(memory_type[loads]):
        elem[loads & (memory_type == value)] = isa.elem_bytes(cfg, int(value)) or 0
    elem[columns.canonical & (columns.opcode == isa.OPCODES["store"])] = cfg.out_elem_bytes
    return elem


def add_to_dram_base(words: np.ndarray, columns: StreamColumns, rows: np.ndarray, delta: np.ndarray) -> None:
    """``delta`` added to the dram_base field of the instructions ``rows`` selects, in ``words`` (the
    stream as [n, 2] little-endian 64-bit words); a value leaving the field is refused naming the first."""
    for kind in ("load", "store"):
        field = next(f for f in isa.layout(kind, columns.cfg) if f.name == "dram_base")
        mine = rows & (columns.opcode == isa.OPCODES[kind])
        if not mine.any():
            continue
        new = columns.column("dram_base")[mine] + delta[mine]
        bad = (new < 0) | (new > field.max_value)
        if bad.any():
            k = int(np.flatnonzero(mine)[np.argmax(bad)])
            raise FormatError(f"instruction {k}: dram_base {int(new[np.argmax(bad)]):#x} after relocation does "
                              f"not fit its {field.width}-bit field")
        word, offset = divmod(field.offset, isa.WORD_BITS)
        mask = np.uint64(((1 << field.width) - 1) << offset)
        words[mine, word] = (words[mine, word] & ~mask) | (new.astype(np.uint64) << np.uint64(offset))


def relocated_stream(program: Program, base: int) -> bytes:
    """The instruction stream with each LOAD and STORE's dram_base moved by ``base`` bytes (``base``
    aligned to every element size)."""
    columns = stream_columns(program.instructions, program.config)
    words = np.frombuffer(stream_bytes(program.instructions, program.config), dtype="<u8").reshape(-1, 2).copy()
    elem = element_sizes(columns)
    rows = elem > 0
    add_to_dram_base(words, columns, rows, np.where(rows, base // np.maximum(elem, 1), 0))
    return words.tobytes()

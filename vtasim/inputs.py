"""Which tensors a program reads as inputs: bytes a LOAD reads before any STORE wrote them.

The tensor table says how a segment is laid out, not who fills it; the
instruction stream does. Walking it in program order (the order the
simulator keeps as far as the tokens allow), a tensor is an input when some
LOAD reads one of its bytes that no earlier STORE wrote. Tensors that are
only stored (outputs) or stored before being read back (intermediates) are
not. Loads and stores outside the tensors, or outside DRAM, are ignored here
(the run reports those).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from vtasm import isa
from vtasm.encoding import Instruction
from vtasm.program import Program

from .executable import executable

_OUT = isa.MEM_TYPES["out"]


def dram_rows(program: Program, insn: Instruction) -> tuple[int, int, int, int] | None:
    """(first byte, rows, bytes per row, stride in bytes) a LOAD or STORE touches in DRAM, or None."""
    if insn.kind not in ("load", "store") or not insn["x_size"] or not insn["y_size"]:
        return None
    eb = isa.elem_bytes(program.config, _OUT if insn.kind == "store" else insn["memory_type"])
    if eb is None:
        return None
    return insn["dram_base"] * eb, insn["y_size"], insn["x_size"] * eb, insn["x_stride"] * eb


def _rows_view(array: np.ndarray, rows: tuple[int, int, int, int]) -> np.ndarray | None:
    """A (rows, bytes) strided view of ``array``, or None when the rows leave it."""
    base, n, width, stride = rows
    if base + (n - 1) * stride + width > array.size:
        return None
    return as_strided(array[base:], shape=(n, width), strides=(stride * array.itemsize, array.itemsize))


def read_tensors(program: Program) -> list[str]:
    """Names of the tensors the program reads before writing them, in tensor-table order."""
    owned = [(program.segment(t.name), i) for i, t in enumerate(program.tensors)]
    top = max((seg.end for seg, _ in owned), default=0)
    owner = np.full(top, -1, dtype=np.int32)
    for seg, i in owned:
        owner[seg.addr : seg.end] = i
    written = np.zeros(top, dtype=bool)
    found = np.zeros(len(program.tensors) + 1, dtype=bool)  # the last slot collects bytes of no tensor
    for insn in map(executable, program.instructions):
        rows = dram_rows(program, insn)
        if rows is None or rows[0] >= top:
            continue
        done, who = _rows_view(written, rows), _rows_view(owner, rows)
        if done is None or who is None:
            continue
        if insn.kind == "store":
            done[...] = True
        else:
            found[who[~done]] = True
    return [t.name for i, t in enumerate(program.tensors) if found[i]]


def missing_inputs(program: Program, given: set[str]) -> list[str]:
    """Input tensors not given and without data of their own (their segment is all zero bytes)."""
    return [name for name in read_tensors(program)
            if name not in given and not any(program.segment(name).data)]

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

from vtasim.core.views import rows
from vtasm import isa
from vtasm.columns import stream_columns
from vtasm.fileio import pieces
from vtasm.program import Program

_OUT = isa.MEM_TYPES["out"]


def read_tensors(program: Program) -> list[str]:
    """Names of the tensors the program reads before writing them, in tensor-table order.

    A byte is read before it is written when the first LOAD that reads it
    comes before the first STORE that writes it (or no STORE does). Tensor by
    tensor, over the LOADs and STOREs whose extent meets it, each instruction
    (walking backwards) stamps its index on the bytes it touches, so each byte
    ends with the first index of each kind.
    """
    top = max((program.segment(t.name).end for t in program.tensors), default=0)
    cols = stream_columns(program.instructions, program.config)
    load, store = isa.OPCODES["load"], isa.OPCODES["store"]
    moves = (np.isin(cols.opcode, [load, store]) & (cols.column("x_size") > 0)
             & (cols.column("y_size") > 0)).nonzero()[0]
    is_store = cols.opcode[moves] == store
    eb = np.zeros(moves.size, dtype=np.int64)  # DRAM element bytes (0: a memory type with none)
    mem = cols.column("memory_type")[moves]
    for t in isa.MEM_TYPES.values():
        eb[~is_store & (mem == t)] = isa.elem_bytes(program.config, t)
    eb[is_store] = isa.elem_bytes(program.config, _OUT)
    base = cols.column("dram_base")[moves] * eb
    ys = cols.column("y_size")[moves]
    width, stride = cols.column("x_size")[moves] * eb, cols.column("x_stride")[moves] * eb
    end = base + (ys - 1) * stride + width
    keep = (eb > 0) & (base < top) & (end <= top)  # rows that leave the tensors' area are the run's to report
    found = []
    for tensor in program.tensors:
        seg = program.segment(tensor.name)
        meets = (keep & (base < seg.end) & (end > seg.addr)).nonzero()[0]
        if meets.size == 0:
            continue
        lo, hi = min(seg.addr, int(base[meets].min())), max(seg.end, int(end[meets].max()))
        never = np.iinfo(np.int32).max
        first = {False: np.full(hi - lo, never, dtype=np.int32), True: None}
        if is_store[meets].any():
            first[True] = np.full(hi - lo, never, dtype=np.int32)
        for k in meets[::-1].tolist():
            rows(first[bool(is_store[k])], int(base[k]) - lo, int(ys[k]), int(width[k]), int(stride[k]))[...] = k
        loads = first[False][seg.addr - lo : seg.end - lo]
        stores = first[True][seg.addr - lo : seg.end - lo] if first[True] is not None else never
        if (loads < stores).any():
            found.append(tensor.name)
    return found


def missing_inputs(program: Program, given: set[str]) -> list[str]:
    """Input tensors not given and without data of their own (their segment is all zero bytes)."""
    return [name for name in read_tensors(program) if name not in given and _all_zero(program.segment(name).data)]


def _all_zero(data: bytes | memoryview) -> bool:
    return not any(np.frombuffer(piece, dtype=np.uint8).any() for _, piece in pieces(data))

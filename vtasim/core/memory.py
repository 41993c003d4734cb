"""The DMA units: LOAD into the on-chip buffers and STORE from the accumulator.

Semantics of isa.md section 4 and the reference simulator: a LOAD writes a
(y_pad_0 + y_size + y_pad_1) x (x_pad_0 + x_size + x_pad_1) tile of elements at
sram_base with zero padding, reading row r from DRAM element
``dram_base + r * x_stride``; ACC_8BIT sign-extends int8 values; a STORE
writes the low OUT_WIDTH bits of ``y_size x x_size`` accumulator elements.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from vtasim.core.faults import fault
from vtasim.core.state import MachineState, check_dram, int_dtype
from vtasm import isa
from vtasm.encoding import Instruction

UOP, WGT, INP, ACC, OUT, ACC8 = (isa.MEM_TYPES[n] for n in ("uop", "wgt", "inp", "acc", "out", "acc8"))


# The two rules of a transfer's reach, written once for one instruction (ints) and for many at once (numpy
# arrays: the in-order path checks every LOAD and STORE of a program in one pass before it copies slices).

def sram_fits(base, elements, depth):
    """Whether ``elements`` buffer elements from ``base`` stay inside a buffer of ``depth`` elements."""
    return base + elements <= depth


def dram_fits(base_byte, row_bytes, stride_bytes, rows, dram_bytes):
    """Whether ``rows`` rows of ``row_bytes`` every ``stride_bytes`` from ``base_byte`` lie inside DRAM."""
    return (rows <= 0) | (base_byte + (rows - 1) * stride_bytes + row_bytes <= dram_bytes)


def _dram_fault(base_byte: int, row_bytes: int, stride_bytes: int, rows: int, dram_bytes: int) -> str | None:
    """Why ``rows`` rows of ``row_bytes`` every ``stride_bytes`` from ``base_byte`` leave DRAM (None: they don't)."""
    if not dram_fits(base_byte, row_bytes, stride_bytes, rows, dram_bytes):
        last = base_byte + (rows - 1) * stride_bytes + row_bytes
        return (f"DRAM bytes 0x{base_byte:x}..0x{last - 1:x} lie outside the program's memory "
                f"(0x0..0x{dram_bytes - 1:x})")
    return None


def _dram_rows(state: MachineState, index: int, insn: Instruction, base_byte: int,
               row_bytes: int, stride_bytes: int, rows: int, writable: bool = False) -> np.ndarray:
    """A (rows, row_bytes) view of DRAM, faulting if any byte lies outside it."""
    problem = _dram_fault(base_byte, row_bytes, stride_bytes, rows, state.dram.size)
    if problem:
        raise fault(index, insn, problem)
    view = as_strided(
        state.dram[base_byte:], shape=(rows, row_bytes), strides=(stride_bytes, 1), writeable=writable
    )
    return view


def loaded_elements(insn: Instruction) -> int:
    """SRAM elements a LOAD writes from its sram_base on: rows and columns with their padding."""
    return (insn["x_pad_0"] + insn["x_size"] + insn["x_pad_1"]) * (insn["y_pad_0"] + insn["y_size"] + insn["y_pad_1"])


def load_fault(cfg, dram_bytes: int, insn: Instruction) -> str | None:
    """Why a LOAD faults, from its fields and the DRAM size alone (None: it does not), checked in the
    order a run checks them."""
    mtype = insn["memory_type"]
    x_size, y_size = insn["x_size"], insn["y_size"]
    if mtype not in isa.LOAD_BUFFER:
        return f"LOAD of unknown memory type {mtype}"
    if x_size == 0:
        return None
    if mtype == ACC8 and (cfg.acc_width != 32 or cfg.inp_width != 8):
        return "ACC_8BIT loads need 32-bit accumulators and 8-bit inputs"
    total = loaded_elements(insn)
    depth = isa.load_depth(cfg, mtype)
    base = insn["sram_base"]
    if not sram_fits(base, total, depth):
        return f"{isa.LOAD_BUFFER[mtype]} SRAM elements {base}..{base + total - 1} overflow the buffer (0..{depth - 1})"
    if not y_size:
        return None
    elem = isa.elem_bytes(cfg, mtype)
    return _dram_fault(insn["dram_base"] * elem, x_size * elem, insn["x_stride"] * elem, y_size, dram_bytes)


def store_fault(cfg, dram_bytes: int, insn: Instruction) -> str | None:
    """Why a STORE faults, from its fields and the DRAM size alone (None: it does not)."""
    x_size, y_size = insn["x_size"], insn["y_size"]
    if x_size == 0:
        return None
    if insn["memory_type"] != OUT:
        return f"STORE supports only memory type OUT, got {insn['memory_type']}"
    pads = [insn[n] for n in ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1")]
    if any(pads):
        return f"STORE cannot pad (y_pad={pads[:2]}, x_pad={pads[2:]})"
    base = insn["sram_base"]
    end = base + x_size * y_size
    if not sram_fits(base, x_size * y_size, cfg.acc_depth):
        return f"acc SRAM elements {base}..{end - 1} overflow the buffer (0..{cfg.acc_depth - 1})"
    if y_size == 0:
        return None
    out = cfg.out_elem_bytes
    return _dram_fault(insn["dram_base"] * out, x_size * out, insn["x_stride"] * out, y_size, dram_bytes)


def check_dma(program) -> None:
    """Raise the fault a run would raise for the first LOAD or STORE (in program order) whose fields alone
    make it fault: what a timing run that computes no data (--timing-only) can still tell."""
    cfg = program.config
    dram_bytes = check_dram(program)
    for index, insn in enumerate(program.instructions):
        check = load_fault if insn.kind == "load" else store_fault if insn.kind == "store" else None
        problem = check(cfg, dram_bytes, insn) if check else None
        if problem:
            raise fault(index, insn, problem)


def run_load(state: MachineState, index: int, insn: Instruction) -> int:
    """Execute a LOAD; returns the bytes it counts for the profiler (0 for a NOP)."""
    cfg = state.cfg
    problem = load_fault(cfg, state.dram.size, insn)
    if problem:
        raise fault(index, insn, problem)
    mtype = insn["memory_type"]
    x_size, y_size = insn["x_size"], insn["y_size"]
    if x_size == 0:
        return 0
    xp0, xp1, yp0, yp1 = insn["x_pad_0"], insn["x_pad_1"], insn["y_pad_0"], insn["y_pad_1"]
    xtotal, ytotal = xp0 + x_size + xp1, yp0 + y_size + yp1
    buf = state.buffer_bytes(ACC if mtype == ACC8 else mtype)
    sram_elem = buf.shape[1]
    base = insn["sram_base"]
    end = base + xtotal * ytotal
    tile = buf[base:end].reshape(ytotal, xtotal, sram_elem)
    if xp0 or xp1 or yp0 or yp1:
        tile[...] = 0
    if y_size:
        tile[yp0 : yp0 + y_size, xp0 : xp0 + x_size] = _load_rows(state, index, insn, sram_elem)
    if mtype == UOP:
        state.refresh_uops(base, end)
    elif mtype == WGT:
        state.wgt_generation += 1
    elif mtype == INP:
        state.inp_generation += 1
    counted = cfg.acc_elem_bytes if mtype == ACC8 else sram_elem
    return x_size * y_size * counted


def _load_rows(state: MachineState, index: int, insn: Instruction, sram_elem: int) -> np.ndarray:
    """The (y_size, x_size, element bytes) block a LOAD copies from DRAM."""
    cfg = state.cfg
    x_size, y_size = insn["x_size"], insn["y_size"]
    if insn["memory_type"] == ACC8:
        dram_elem = cfg.acc8_elem_bytes
        src = _dram_rows(state, index, insn, insn["dram_base"] * dram_elem, x_size * dram_elem,
                         insn["x_stride"] * dram_elem, y_size)
        values = np.ascontiguousarray(src.view(np.int8).astype(int_dtype(cfg.acc_width)))
        return values.view(np.uint8).reshape(y_size, x_size, sram_elem)
    src = _dram_rows(state, index, insn, insn["dram_base"] * sram_elem, x_size * sram_elem,
                     insn["x_stride"] * sram_elem, y_size)
    return src.reshape(y_size, x_size, sram_elem)


def run_store(state: MachineState, index: int, insn: Instruction) -> int:
    """Execute a STORE; returns the bytes it counts for the profiler (0 for a NOP)."""
    cfg = state.cfg
    problem = store_fault(cfg, state.dram.size, insn)
    if problem:
        raise fault(index, insn, problem)
    x_size, y_size = insn["x_size"], insn["y_size"]
    if x_size == 0 or y_size == 0:
        return 0
    base = insn["sram_base"]
    end = base + x_size * y_size
    out_elem = cfg.out_elem_bytes
    values = state.acc[base:end].astype(int_dtype(cfg.out_width))  # keeps the low OUT_WIDTH bits
    data = values.view(np.uint8).reshape(y_size, x_size * out_elem)
    stride = insn["x_stride"]
    dst = _dram_rows(state, index, insn, insn["dram_base"] * out_elem, x_size * out_elem,
                     stride * out_elem, y_size, writable=True)
    if stride >= x_size or y_size == 1:
        dst[...] = data
    else:  # overlapping rows: later rows win, as in the reference's row-by-row loop
        for r in range(y_size):
            dst[r] = data[r]
    return x_size * y_size * out_elem

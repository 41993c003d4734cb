"""Which on-chip and DRAM elements an instruction reads and writes.

Used by the race checker; derived from the same semantics as the units (the
loop plans for GEMM/ALU, the 2-D tile shapes for loads and stores).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vtasim.core.loops import PlanCache
from vtasim.core.memory import loaded_elements
from vtasim.core.state import MachineState
from vtasm import isa
from vtasm.encoding import Instruction


@dataclass
class Access:
    """One instruction's accesses: buffer name -> (read indices, written indices)."""

    reads: dict[str, np.ndarray]
    writes: dict[str, np.ndarray]


def _dram_bytes(base: int, rows: int, row_bytes: int, stride: int) -> np.ndarray:
    if rows <= 0 or row_bytes <= 0:
        return np.empty(0, dtype=np.int64)
    starts = base + np.arange(rows, dtype=np.int64) * stride
    return (starts[:, None] + np.arange(row_bytes, dtype=np.int64)[None, :]).reshape(-1)


def accesses(state: MachineState, insn: Instruction, plans: PlanCache) -> Access:
    """The elements (SRAM indices per buffer, DRAM byte addresses) an executed instruction touched."""
    cfg = state.cfg
    reads: dict[str, np.ndarray] = {}
    writes: dict[str, np.ndarray] = {}
    kind = insn.kind
    if kind == "load" and insn["x_size"] and insn["memory_type"] in isa.LOAD_BUFFER:
        mtype = insn["memory_type"]
        x, y = insn["x_size"], insn["y_size"]
        total = loaded_elements(insn)
        writes[isa.LOAD_BUFFER[mtype]] = np.arange(insn["sram_base"], insn["sram_base"] + total, dtype=np.int64)
        eb = isa.elem_bytes(cfg, mtype)
        reads["dram"] = _dram_bytes(insn["dram_base"] * eb, y, x * eb, insn["x_stride"] * eb)
    elif kind == "store" and insn["x_size"]:
        x, y = insn["x_size"], insn["y_size"]
        reads["acc"] = np.arange(insn["sram_base"], insn["sram_base"] + x * y, dtype=np.int64)
        eb = isa.elem_bytes(cfg, isa.MEM_TYPES["out"])
        writes["dram"] = _dram_bytes(insn["dram_base"] * eb, y, x * eb, insn["x_stride"] * eb)
    elif kind in ("gemm", "alu") and plans.count(insn) > 0:
        reads["uop"] = np.arange(insn["uop_bgn"], insn["uop_end"], dtype=np.int64)
        gemm_reads = kind == "gemm" and not insn["reset"]
        alu_reads = kind == "alu" and not insn["use_imm"]
        parts: dict[str, list[np.ndarray]] = {"dst": [], "src": [], "wgt": []}
        for plan in plans.chunks(state, insn):  # each chunk's distinct indices: at most a buffer's depth
            parts["dst"].append(np.unique(plan.dst))
            if gemm_reads or alu_reads:
                parts["src"].append(np.unique(plan.src))
            if gemm_reads:
                parts["wgt"].append(np.unique(plan.wgt))
        touched = {f: np.unique(np.concatenate(p)) if len(p) > 1 else p[0] for f, p in parts.items() if p}
        writes["acc"] = touched["dst"]
        if gemm_reads:
            reads["inp"], reads["wgt"] = touched["src"], touched["wgt"]
        elif kind == "alu":
            reads["acc"] = np.union1d(touched["dst"], touched["src"]) if alu_reads else touched["dst"]
    return Access(reads, writes)

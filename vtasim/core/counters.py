"""The reference profiler's counters: bytes each memory type loaded and stored, GEMM and ALU executions.

They depend only on the instruction fields, so one function computes them for a whole run from the
stream's columns, whichever way the machine ran it.
"""

from __future__ import annotations

import numpy as np

from vtasm import isa
from vtasm.columns import StreamColumns

COUNTERS = (
    "inp_load_nbytes",
    "wgt_load_nbytes",
    "acc_load_nbytes",
    "uop_load_nbytes",
    "out_store_nbytes",
    "gemm_counter",
    "alu_counter",
)

LOAD, STORE, GEMM, ALU = (isa.OPCODES[k] for k in ("load", "store", "gemm", "alu"))
UOP, WGT, INP, ACC, ACC8 = (isa.MEM_TYPES[n] for n in ("uop", "wgt", "inp", "acc", "acc8"))
_U64 = (1 << 64) - 1


def _wrap32(values: np.ndarray) -> np.ndarray:
    return ((values + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def counters(cols: StreamColumns) -> dict[str, int]:
    """The reference profiler's counters of a run of the whole stream to its FINISH (64-bit, wrapping)."""
    cfg = cols.cfg
    x, y, mem = cols.column("x_size"), cols.column("y_size"), cols.column("memory_type")
    loads = cols.opcode == LOAD
    size = {UOP: cfg.uop_elem_bytes, WGT: cfg.wgt_elem_bytes, INP: cfg.inp_elem_bytes, ACC: cfg.acc_elem_bytes,
            ACC8: cfg.acc_elem_bytes}
    out = {}
    for key, types in (("inp_load_nbytes", (INP,)), ("wgt_load_nbytes", (WGT,)), ("acc_load_nbytes", (ACC, ACC8)),
                       ("uop_load_nbytes", (UOP,))):
        total = 0
        for t in types:
            rows = loads & (mem == t)
            total += int((x[rows] * y[rows]).sum()) * size[t]
        out[key] = total & _U64
    stores = cols.opcode == STORE
    out["out_store_nbytes"] = int((x[stores] * y[stores]).sum()) * cfg.out_elem_bytes & _U64
    n = isa.counted_executions(cols)  # as the units count them: negative for a reversed range
    counted = (cols.opcode == GEMM) & (cols.column("reset") == 0)
    out["gemm_counter"] = int(_wrap32(n[counted]).sum()) & _U64
    out["alu_counter"] = int(_wrap32(n[cols.opcode == ALU]).sum()) & _U64
    return out

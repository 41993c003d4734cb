"""The execution order of a well-formed program, found from its token flags at once.

The pipeline (pipeline.py) runs, at every step, the earliest instruction in
program order whose tokens are available. When the next instruction in program
order is always runnable, that rule simply runs the program in order; this
module checks, with a few array operations over the whole stream, that it is
so: every opcode is known, every flag names a queue of the instruction's
stage, no queue is popped before a token was pushed into it (counting in
program order), the first FINISH is the last instruction and the operation
budget holds. Then the run needs no scheduling at all; the counters the
pipeline keeps (instructions per stage, operations, deepest queue) come from
the same sums. Any other program (a fault to report, or tokens that reorder
the stages) goes through the pipeline itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vtasm import isa
from vtasm.columns import StreamColumns

_STAGE_CODE = {stage: k for k, stage in enumerate(isa.STAGES)}


@dataclass
class InOrder:
    """A program that runs in program order, with the counters of that run."""

    stage_counts: dict[str, int]
    ops_used: int
    max_depth: dict[str, int]


def stages(cols: StreamColumns) -> np.ndarray:
    """Each instruction's stage as an index into isa.STAGES (isa.stage_of on every instruction)."""
    code = np.full(len(cols), _STAGE_CODE[isa.COMPUTE_STAGE], dtype=np.int64)
    code[cols.opcode == isa.OPCODES["store"]] = _STAGE_CODE[isa.STORE_STAGE]
    load_mem = np.isin(cols.column("memory_type"), sorted(isa.LOAD_STAGE_MEM_TYPES))
    code[(cols.opcode == isa.OPCODES["load"]) & load_mem] = _STAGE_CODE[isa.LOAD_STAGE]
    return code


def executions(cols: StreamColumns) -> np.ndarray:
    """Micro-op executions of every GEMM and ALU instruction (0 for the others)."""
    loops = np.isin(cols.opcode, [isa.OPCODES["gemm"], isa.OPCODES["alu"]])
    return np.where(loops, isa.executions(cols), 0)


def in_order(cols: StreamColumns, max_ops: int) -> InOrder | None:
    """The counters of running the program in program order, or None when the pipeline must decide."""
    n = len(cols)
    if n == 0 or not cols.known.all():
        return None
    finish = np.flatnonzero(cols.opcode == isa.OPCODES["finish"])
    if finish.size == 0 or finish[0] != n - 1:
        return None
    stage = stages(cols)
    balance = {q: np.zeros(n, dtype=np.int64) for q in isa.QUEUES}
    for code, name in enumerate(isa.STAGES):
        rows = stage == code
        for flag in isa.FLAGS:
            set_here = rows & (cols.column(flag) != 0)
            queue = isa.STAGE_QUEUES[name][flag]
            if queue is None:
                if set_here.any():
                    return None
                continue
            balance[queue] += np.where(set_here, -1 if flag.startswith("pop") else 1, 0)
    depth = {}
    for queue, steps in balance.items():
        tokens = np.cumsum(steps)
        if tokens.size and tokens.min() < 0:
            return None
        depth[queue] = int(max(0, tokens.max()))
    ops = int(n + executions(cols).sum())
    if ops > max_ops:
        return None
    counts = np.bincount(stage, minlength=len(isa.STAGES))
    return InOrder({s: int(counts[k]) for k, s in enumerate(isa.STAGES)}, ops, depth)

"""The decoupled load / compute / store pipeline and its dependency tokens.

Instructions are dispatched in program order to their stage (isa.md section 5);
each stage runs its own instructions in order, popping tokens before and
pushing after. The interleaving is deterministic: at every step the simulator
runs, among the three stages' next instructions, the one whose tokens are
available and that comes first in program order. A correctly synchronised
program gives the same results under any interleaving; this one stays as close
to program order as the tokens allow.

The run ends at FINISH. Faults: a stage reaching a flag it cannot have, a
deadlock (no stage can proceed), no FINISH, instructions left when FINISH runs,
and an exhausted operation budget.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from vtasim.core.faults import fault, insn_title
from vtasm import isa
from vtasm.encoding import Instruction
from vtasm.errors import SimFault
from vtasm.program import Program

DEFAULT_MAX_OPS = 2_000_000_000


@dataclass
class StepEvent:
    """What one executed instruction did, as seen by observers (trace, checks)."""

    index: int
    insn: Instruction
    stage: str
    queues: dict[str, int]
    popped: list[tuple[str, int]] = field(default_factory=list)  # (queue, index of pushing insn)
    ops: int = 0


Observer = Callable[[StepEvent], None]


def _flag_queues(insn: Instruction, index: int) -> tuple[list[str], list[str]]:
    """The queues an instruction pops and pushes; faults on flags its stage cannot have."""
    stage = insn.stage
    table = isa.STAGE_QUEUES[stage]
    pops, pushes = [], []
    for flag in isa.FLAGS:
        if not insn[flag]:
            continue
        queue = table[flag]
        if queue is None:
            raise fault(index, insn, f"{flag} is set but the {stage} stage has no such queue")
        (pops if flag.startswith("pop") else pushes).append(queue)
    return pops, pushes


class Pipeline:
    """Runs a program's instructions through the three stages."""

    def __init__(self, program: Program, execute: Callable[[int, Instruction], int],
                 max_ops: int = DEFAULT_MAX_OPS):
        self.program = program
        self.execute = execute
        self.max_ops = max_ops
        self.ops_used = 0
        self.observers: list[Observer] = []
        self.pre_observers: list[Callable[[int, Instruction], None]] = []
        self.queues: dict[str, deque[int]] = {q: deque() for q in isa.QUEUES}
        self.max_depth: dict[str, int] = {q: 0 for q in isa.QUEUES}
        self.stage_counts = {s: 0 for s in isa.STAGES}
        self.finished = False

    def _stage_lists(self) -> dict[str, list[int]]:
        lists: dict[str, list[int]] = {s: [] for s in isa.STAGES}
        for i, insn in enumerate(self.program.instructions):
            if insn.kind == "raw":
                lists[isa.COMPUTE_STAGE].append(i)
            else:
                lists[insn.stage].append(i)
        return lists

    def run(self) -> None:
        insns = self.program.instructions
        lists = self._stage_lists()
        pos = {s: 0 for s in isa.STAGES}
        flags: dict[int, tuple[list[str], list[str]]] = {}
        while True:
            chosen = None
            for stage in isa.STAGES:
                if pos[stage] >= len(lists[stage]):
                    continue
                i = lists[stage][pos[stage]]
                if chosen is not None and i > chosen[1]:
                    continue
                insn = insns[i]
                if insn.kind == "raw":
                    raise fault(i, insn, f"unknown opcode {insn.opcode}")
                if i not in flags:
                    flags[i] = _flag_queues(insn, i)
                if all(self.queues[q] for q in flags[i][0]):
                    chosen = (stage, i)
            if chosen is None:
                if not insns:
                    raise SimFault("the program has no instructions (it needs at least a FINISH)")
                if all(pos[s] >= len(lists[s]) for s in isa.STAGES):
                    raise SimFault(f"the program ended without a FINISH instruction (all {len(insns)} instructions "
                                   f"ran; the last was instruction {len(insns) - 1})", len(insns) - 1)
                raise self._deadlock(lists, pos, flags)
            stage, i = chosen
            insn = insns[i]
            pops, pushes = flags.pop(i)
            popped = [(q, self.queues[q].popleft()) for q in pops]
            need = isa.executions(insn) if insn.kind in ("gemm", "alu") else 0
            self.ops_used += 1 + need
            if self.ops_used > self.max_ops:
                raise fault(i, insn, f"the operation budget (--max-ops {self.max_ops}) is exhausted")
            for pre in self.pre_observers:
                pre(i, insn)
            ops = self.execute(i, insn) if insn.kind != "finish" else 0
            for q in pushes:
                self.queues[q].append(i)
                self.max_depth[q] = max(self.max_depth[q], len(self.queues[q]))
            pos[stage] += 1
            self.stage_counts[stage] += 1
            if self.observers:
                event = StepEvent(i, insn, stage, {q: len(v) for q, v in self.queues.items()}, popped, ops)
                for observer in self.observers:
                    observer(event)
            if insn.kind == "finish":
                left = [lists[s][pos[s]] for s in isa.STAGES if pos[s] < len(lists[s])]
                if left:
                    raise fault(
                        i, insn,
                        f"instructions left after FINISH (next unexecuted: {', '.join(map(str, sorted(left)))})",
                    )
                self.finished = True
                return

    def _deadlock(self, lists: dict, pos: dict, flags: dict) -> SimFault:
        parts = []
        for stage in isa.STAGES:
            if pos[stage] >= len(lists[stage]):
                parts.append(f"{stage} stage done")
                continue
            i = lists[stage][pos[stage]]
            waiting = [q for q in flags[i][0] if not self.queues[q]]
            parts.append(
                f"{stage} stage waits at instruction {i} ({insn_title(self.program.instructions[i])}) "
                f"on {', '.join(waiting)}"
            )
        counts = ", ".join(f"{q}={len(self.queues[q])}" for q in isa.QUEUES)
        return SimFault(f"deadlock: {'; '.join(parts)} (tokens: {counts})")

"""Running a program: state + units + pipeline, with the reference's counters."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property

from vtasim.core.alu import run_alu
from vtasim.core.faults import fault
from vtasim.core.gemm import run_gemm
from vtasim.core.inorder import InOrderRun, counters
from vtasim.core.loops import PlanCache
from vtasim.core.memory import run_load, run_store
from vtasim.core.order import in_order
from vtasim.core.pipeline import DEFAULT_MAX_OPS, Observer, Pipeline
from vtasim.core.state import MachineState, new_state
from vtasm import isa
from vtasm.columns import stream_columns
from vtasm.encoding import Instruction
from vtasm.locate import executable
from vtasm.program import Program

COUNTERS = (
    "inp_load_nbytes",
    "wgt_load_nbytes",
    "acc_load_nbytes",
    "uop_load_nbytes",
    "out_store_nbytes",
    "gemm_counter",
    "alu_counter",
)
_LOAD_COUNTER = {
    isa.MEM_TYPES["inp"]: "inp_load_nbytes",
    isa.MEM_TYPES["wgt"]: "wgt_load_nbytes",
    isa.MEM_TYPES["acc"]: "acc_load_nbytes",
    isa.MEM_TYPES["acc8"]: "acc_load_nbytes",
    isa.MEM_TYPES["uop"]: "uop_load_nbytes",
}
_U64 = (1 << 64) - 1


def _wrap_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


@dataclass
class RunResult:
    """The state after a run and the reference profiler's counters plus extras."""

    state: MachineState
    counters: dict[str, int]
    extras: dict = field(default_factory=dict)

    def profile(self) -> dict:
        """The seven reference counters in order, then this simulator's extra figures."""
        out = {k: self.counters[k] for k in COUNTERS}
        out.update(self.extras)
        return out


class Machine:
    """A VTA machine loaded with one program."""

    def __init__(self, program: Program, max_ops: int = DEFAULT_MAX_OPS):
        self.program = program
        self.state = new_state(program)
        self.counters = {k: 0 for k in COUNTERS}
        self.plans = PlanCache()
        self.max_ops = max_ops

    @cached_property
    def pipeline(self) -> Pipeline:
        """The three stages with their token queues (built when a run needs them, or an observer)."""
        runnable = dataclasses.replace(self.program, instructions=[executable(i) for i in self.program.instructions])
        return Pipeline(runnable, self._execute, self.max_ops)

    def observe(self, observer: Observer) -> None:
        self.pipeline.observers.append(observer)

    def _count(self, key: str, value: int) -> None:
        self.counters[key] = (self.counters[key] + value) & _U64

    def _execute(self, index: int, insn: Instruction) -> int:
        kind = insn.kind
        state = self.state
        if kind == "load":
            nbytes = run_load(state, index, insn)
            if nbytes:
                self._count(_LOAD_COUNTER[insn["memory_type"]], nbytes)
            return 0
        if kind == "store":
            self._count("out_store_nbytes", run_store(state, index, insn))
            return 0
        if kind == "gemm":
            n = run_gemm(state, index, insn, self.plans)
            if not insn["reset"]:
                self._count("gemm_counter", _wrap_int32(n))
            return max(n, 0)
        if kind == "alu":
            n = run_alu(state, index, insn, self.plans)
            self._count("alu_counter", _wrap_int32(n))
            return max(n, 0)
        raise fault(index, insn, f"unknown opcode {insn.opcode}")

    def run(self) -> RunResult:
        """Run to FINISH; raises SimFault on any fault.

        A program that the pipeline would run in program order, watched by no
        observer, runs without it (schedule.py, inorder.py): same results,
        same counters, same faults.
        """
        if "pipeline" not in self.__dict__:
            cols = stream_columns(self.program.instructions, self.program.config)
            order = in_order(cols, self.max_ops)
            if order is not None:
                InOrderRun(self, cols).run()
                self.counters = counters(cols)
                return RunResult(self.state, dict(self.counters), _extras(order.stage_counts, order.ops_used,
                                                                          order.max_depth))
        self.pipeline.run()
        p = self.pipeline
        return RunResult(self.state, dict(self.counters), _extras(p.stage_counts, p.ops_used, p.max_depth))


def _extras(stage_counts: dict[str, int], ops_used: int, max_depth: dict[str, int]) -> dict:
    """This simulator's figures beyond the reference counters."""
    return {
        "instructions": sum(stage_counts.values()),
        "load_stage_instructions": stage_counts[isa.LOAD_STAGE],
        "compute_stage_instructions": stage_counts[isa.COMPUTE_STAGE],
        "store_stage_instructions": stage_counts[isa.STORE_STAGE],
        "uop_executions": ops_used - sum(stage_counts.values()),
        "max_queue_tokens": dict(max_depth),
    }


def run_program(program: Program, max_ops: int = DEFAULT_MAX_OPS) -> RunResult:
    """Simulate a program to its FINISH and return its final state and counters."""
    return Machine(program, max_ops).run()

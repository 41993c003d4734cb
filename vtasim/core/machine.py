"""Running a program: state + units + pipeline, with the reference's counters."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from vtasim.core.alu import run_alu
from vtasim.core.counters import COUNTERS, counters
from vtasim.core.faults import fault
from vtasim.core.gemm import run_gemm
from vtasim.core.inorder import InOrderRun
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
        self.plans = PlanCache()
        self.max_ops = max_ops
        self._pipeline: Pipeline | None = None

    @property
    def pipeline(self) -> Pipeline:
        """The three stages with their token queues (built when a run needs them, or an observer)."""
        if self._pipeline is None:
            runnable = dataclasses.replace(self.program,
                                           instructions=[executable(i) for i in self.program.instructions])
            self._pipeline = Pipeline(runnable, self._execute, self.max_ops)
        return self._pipeline

    def observe(self, observer: Observer) -> None:
        """Watch every step (traces, checks): the run goes through the pipeline, which reports them."""
        self.pipeline.observers.append(observer)

    def _execute(self, index: int, insn: Instruction) -> int:
        kind = insn.kind
        state = self.state
        if kind == "load":
            run_load(state, index, insn)
            return 0
        if kind == "store":
            run_store(state, index, insn)
            return 0
        if kind == "gemm":
            return max(run_gemm(state, index, insn, self.plans), 0)
        if kind == "alu":
            return max(run_alu(state, index, insn, self.plans), 0)
        raise fault(index, insn, f"unknown opcode {insn.opcode}")

    def run(self, *, through_pipeline: bool = False) -> RunResult:
        """Run to FINISH; raises SimFault on any fault.

        A program that the pipeline would run in program order runs without it
        (order.py, inorder.py: same results, same counters, same faults) unless
        an observer watches the steps or ``through_pipeline`` asks for the
        pipeline. The counters come from the stream either way (counters.py).
        """
        cols = stream_columns(self.program.instructions, self.program.config)
        if self._pipeline is None and not through_pipeline:
            order = in_order(cols, self.max_ops)
            if order is not None:
                InOrderRun(self.program, self.state, self.plans, cols).run()
                return RunResult(self.state, counters(cols), _extras(order.stage_counts, order.ops_used,
                                                                     order.max_depth))
        p = self.pipeline
        p.run()
        return RunResult(self.state, counters(cols), _extras(p.stage_counts, p.ops_used, p.max_depth))


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

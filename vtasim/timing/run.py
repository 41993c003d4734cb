"""The timing model as one call: program and profile in, timeline and report out."""

from __future__ import annotations

from dataclasses import dataclass

from vtasm import isa
from vtasm.config import VTAConfig
from vtasm.encoding import Instruction, make_instruction
from vtasm.program import Program

from .engine import Timeline, simulate
from .plan import Work, plan
from .profile import Profile
from .report import TimingReport, summarise


@dataclass
class TimingResult:
    """The planned instructions, their timeline and its summary."""

    works: list[Work]
    timeline: Timeline
    report: TimingReport


def time_program(program: Program, profile: Profile, record: bool = True) -> TimingResult:
    """Run the timing model over a program's instruction stream (its data is never read)."""
    works = plan(program.instructions, program.config, profile)
    timeline = simulate(works, profile, record=record)
    return TimingResult(works, timeline, summarise(timeline, works, program.config, profile))


def instruction_cycles(insn: Instruction, cfg: VTAConfig, profile: Profile) -> int:
    """Cycles one instruction occupies its module on an otherwise idle machine (tokens ignored).

    The compiler's cost model asks this of representative loads and stores;
    the answer comes from the same plan and engine as a whole program's timing.
    """
    fields = {k: (0 if k in isa.FLAGS else v) for k, v in insn.fields.items()}
    alone = Instruction(insn.kind, fields) if fields != insn.fields else insn
    works = plan([alone, make_instruction("finish")], cfg, profile)
    timeline = simulate(works, profile, record=False)
    first = timeline.insns[0]
    return first.end - first.start

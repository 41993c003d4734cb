"""The timing model as one call: program and profile in, timeline and report out."""

from __future__ import annotations

from dataclasses import dataclass

from vtasm import isa
from vtasm.config import VTAConfig
from vtasm.designs import CHISEL_2021
from vtasm.encoding import Instruction, make_instruction
from vtasm.portability import rowless_load
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
    report = summarise(timeline, works, program.config, profile)
    if profile.name == CHISEL_2021:
        report.notes = _hangs_2021(program)
    return TimingResult(works, timeline, report)


def _hangs_2021(program: Program) -> tuple[str, ...]:
    """The note for a program the 2021 Chisel design never finishes (a LOAD of no rows; isa.md section 7)."""
    at = next((k for k, insn in enumerate(program.instructions) if insn.kind == "load"
               and rowless_load(insn["y_size"], insn["x_size"])), None)
    if at is None:
        return ()
    return (f"instruction {at} is a LOAD of no rows (y_size 0, x_size > 0): the 2021 Chisel design never "
            "completes it and hangs there; these cycles are what it would take if it did (vtasim run --lint)",)


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

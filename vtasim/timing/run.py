"""The timing model as one call: program and profile in, timeline and report out."""

from __future__ import annotations

from dataclasses import dataclass

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

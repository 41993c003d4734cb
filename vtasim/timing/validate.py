"""Checking the model against measured cycle counts (directories of raw programs with cycles.json).

Each case is a raw program directory holding a ``cycles.json`` (the 2019
core; ``cycles-2021.json`` and ``cycles-hls.json`` for the other designs,
names.MEASURED) with the measured cycles at one or more memory latencies
(``mem_latency_N`` keys), as in the project's RTL measurement set. The model runs each program at each
measured latency and reports the error.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from vtasm.errors import FormatError
from vtasm.formats.raw import load_program
from vtasm.program import Program

from .profile import Profile, with_overrides
from .run import time_program

_PREFIX = "mem_latency_"

# The accuracy a model must reach on every measurement: within 3 % of it or 2 cycles, whichever is larger
# (the micro cases of a few dozen cycles cannot be held to a percentage).
BAR_FRACTION = 0.03
BAR_CYCLES = 2


@dataclass
class Case:
    """One measured program."""

    name: str
    program: Program
    measured: dict[int, int]  # memory latency -> cycles


@dataclass
class Row:
    """The model against one measurement."""

    name: str
    latency: int
    measured: int
    model: int

    @property
    def error(self) -> float:
        return (self.model - self.measured) / self.measured

    @property
    def miss(self) -> float:
        """|error|, or 0 within BAR_CYCLES cycles (what the fit lowers: a cycle on a program of ten is no miss)."""
        return 0.0 if abs(self.model - self.measured) <= BAR_CYCLES else abs(self.error)

    @property
    def within(self) -> bool:
        """Whether the model meets the bar (BAR_FRACTION of the measurement or BAR_CYCLES, the larger)."""
        return abs(self.model - self.measured) <= max(BAR_CYCLES, BAR_FRACTION * self.measured)


def load_cases(directory: str | Path, file: str = "cycles.json") -> list[Case]:
    """Every case below a directory (one sub-directory per program), sorted by name; ``file`` is the
    measurement file of the design to compare with (names.MEASURED)."""
    root = Path(directory)
    if not root.is_dir():
        raise FormatError(f"{root}: not a directory of measured programs")
    cases = []
    for sub in sorted(p for p in root.iterdir() if (p / file).is_file()):
        where = sub / file
        try:
            data = json.loads(where.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise FormatError(f"{where}: cannot read measured cycles: {exc}") from None
        measured = {}
        for key, value in data.items():
            if key.startswith(_PREFIX):
                latency = key[len(_PREFIX):]
                if not latency.isdigit() or isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                    raise FormatError(f"{where}: {key} must be a positive integer number of cycles")
                measured[int(latency)] = value
        if not measured:
            raise FormatError(f"{where}: no {_PREFIX}N keys")
        cases.append(Case(sub.name, load_program(sub), measured))
    if not cases:
        raise FormatError(f"{root}: no sub-directory holds a {file}")
    return cases


def load_sets(directories, file: str = "cycles.json") -> list[Case]:
    """The cases of several measurement sets (e.g. ../shared/timing and ../shared/timing-micro), in order."""
    return [case for directory in directories for case in load_cases(directory, file)]


def compare(cases: list[Case], profile: Profile) -> list[Row]:
    """Run the model on every case at every measured latency."""
    rows = []
    for case in cases:
        for latency, cycles in sorted(case.measured.items()):
            p = with_overrides(profile, {"latency": latency})
            model = time_program(case.program, p, record=False).report.cycles
            rows.append(Row(case.name, latency, cycles, model))
    return rows


def format_table(rows: list[Row], markdown: bool = False) -> str:
    """The comparison as a table with a summary line (``markdown``: one row per program)."""
    errors = [abs(r.error) for r in rows]
    summary = (f"{len(rows)} measurements: median |error| {100 * statistics.median(errors):.2f}%, "
               f"mean {100 * statistics.fmean(errors):.2f}%, max {100 * max(errors):.2f}%, "
               f"{sum(not r.within for r in rows)} outside 3 % or 2 cycles")
    if markdown:
        latencies = sorted({r.latency for r in rows})
        head = " | ".join(f"N={n}: measured, model, error" for n in latencies)
        lines = [f"| program | {head} |", "|---|" + "---|" * len(latencies)]
        by_name: dict[str, dict[int, Row]] = {}
        for r in rows:
            by_name.setdefault(r.name, {})[r.latency] = r
        for name, cells in by_name.items():
            text = " | ".join(f"{c.measured:,}, {c.model:,}, {100 * c.error:+.2f}%" if (c := cells.get(n)) else ""
                              for n in latencies)
            lines.append(f"| {name} | {text} |")
        return "\n".join(lines + ["", summary])
    width = max(len(r.name) for r in rows)
    lines = [f"{'program':{width}s} latency measured    model   error"]
    for r in rows:
        lines.append(f"{r.name:{width}s} {r.latency:7d} {r.measured:8d} {r.model:8d} {100 * r.error:+6.2f}%")
    return "\n".join(lines + [summary])

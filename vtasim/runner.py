"""One simulation run as the CLI performs it: inputs, checks, trace, outputs.

Outputs are computed in memory and written (atomically, each file) only after
the whole run succeeded, so a fault never leaves partial results behind.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from vtasm.errors import FormatError, SimFault
from vtasm.fileio import write_atomic
from vtasm.program import Program

from .faults import source_of
from .io import PendingFile, apply_inputs, collect_dumps, collect_outputs, dram_slice
from .lint import Linter
from .machine import Machine, RunResult
from .pipeline import DEFAULT_MAX_OPS
from .races import RaceChecker
from .trace import jsonl_tracer, text_tracer, trace_header


@dataclass
class RunOptions:
    """What `vtasim run` was asked to do besides running."""

    inputs: list[tuple[str, str]] = field(default_factory=list)
    outputs: list[tuple[str, str]] = field(default_factory=list)
    dram_dumps: list[tuple[int, int, str]] = field(default_factory=list)
    out_dir: Path | None = None
    max_ops: int = DEFAULT_MAX_OPS
    trace: str | None = None  # None, "text" or "jsonl"
    trace_uops: bool = False
    check_races: bool = False
    lint: bool = False


@dataclass
class RunReport:
    """The run's result, the race and lint reports, and the files written."""

    result: RunResult
    races: list[str]
    warnings: list[str]
    written: list[Path]


def simulate(program: Program, opts: RunOptions, trace_out: TextIO | None = None) -> RunReport:
    """Run a program with the given options; raise SimFault/FormatError on failure."""
    machine = Machine(program, opts.max_ops)
    apply_inputs(program, machine.state.dram, opts.inputs)
    out = trace_out or sys.stdout
    if opts.trace == "text":
        out.write(trace_header(program))
        machine.observe(text_tracer(out, machine.state, opts.trace_uops))
    elif opts.trace == "jsonl":
        machine.observe(jsonl_tracer(out, machine.state, opts.trace_uops))
    checker = RaceChecker(machine) if opts.check_races else None
    linter = Linter(machine) if opts.lint else None
    try:
        result = machine.run()
    except SimFault as exc:
        where = source_of(program, exc.index)
        if not where:
            raise
        raise SimFault(exc.message + where, exc.index) from None
    dram = result.state.dram
    pending: list[PendingFile] = collect_outputs(program, dram, opts.outputs)
    for addr, nbytes, path in opts.dram_dumps:
        pending.append(PendingFile(Path(path), dram_slice(dram, addr, nbytes, f"--dump-dram {path}")))
    if opts.out_dir is not None and program.dumps:
        pending += collect_dumps(program, dram, opts.out_dir)
    if opts.out_dir is not None and program.dumps:
        try:
            opts.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise FormatError(f"{opts.out_dir}: cannot create the output directory: {exc.strerror or exc}") from None
    for f in pending:
        write_atomic(f.path, f.data)
    races = [r.describe(program) for r in checker.report()] if checker else []
    warnings = [w.describe(program) for w in linter.report()] if linter else []
    return RunReport(result, races, warnings, [f.path for f in pending])

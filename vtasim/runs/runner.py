"""One simulation run as the CLI performs it: inputs, checks, trace, outputs.

Everything that can be checked before the run is (every input a program reads
is given, output names and ranges exist, output places are writable). Outputs
are computed in memory and written (atomically, each file) only after the
whole run succeeded, so a fault never leaves partial results behind.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from vtasim.core.faults import located
from vtasim.core.machine import Machine, RunResult
from vtasim.core.pipeline import DEFAULT_MAX_OPS
from vtasim.outputs.inputs import missing_inputs
from vtasim.outputs.io import (
    PendingFile,
    apply_inputs,
    check_out_dir,
    check_writable,
    collect_dumps,
    collect_outputs,
    dram_slice,
    write_files,
)
from vtasm.errors import FormatError, SimFault
from vtasm.program import Program


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
    trace_source: bool = False  # text traces: source lines and DRAM tensor names (JSON lines always have them)
    zero_inputs: bool = False  # input tensors not given stay zero instead of being an error
    origin: str = "program"  # the program's file, for messages
    check_races: bool = False
    lint: bool = False


@dataclass
class RunReport:
    """The run's result, the race and lint reports, and the files written."""

    result: RunResult
    races: list[str]
    warnings: list[str]
    written: list[Path]
    lint_summary: str = ""  # with --lint: how many warnings, on which designs, and how many notes


def simulate(program: Program, opts: RunOptions, trace_out: TextIO | None = None) -> RunReport:
    """Run a program with the given options; raise SimFault/FormatError on failure."""
    machine = Machine(program, opts.max_ops)
    prepare(program, opts, machine.state.dram)
    out = trace_out
    if opts.trace or opts.check_races or opts.lint:  # loaded only when asked for: start-up stays short
        from vtasim.checks.lint import Linter
        from vtasim.checks.lint import summary as lint_summary
        from vtasim.checks.races import RaceChecker
        from vtasim.outputs.trace import Locator, TraceStream, jsonl_tracer, text_tracer, trace_header

        out = out or TraceStream(sys.stdout)  # a reader that goes away stops the trace, not the run
    if opts.trace == "text":
        out.write(trace_header(program))
        locator = Locator(program) if opts.trace_source else None
        machine.observe(text_tracer(out, machine.state, opts.trace_uops, locator))
    elif opts.trace == "jsonl":
        machine.observe(jsonl_tracer(out, machine.state, opts.trace_uops, Locator(program)))
    checker = RaceChecker(machine) if opts.check_races else None
    linter = Linter(machine) if opts.lint else None
    try:
        result = machine.run()
    except SimFault as exc:
        raise located(program, exc) from None
    written = write_results(program, opts, result.state.dram)
    races = [r.describe(program) for r in checker.report()] if checker else []
    found = linter.report() if linter else []
    warnings = [w.describe(program) for w in found]
    summary = lint_summary(found) if linter else ""
    return RunReport(result, races, warnings, written, summary)


def prepare(program: Program, opts: RunOptions, dram) -> None:
    """Before a run: the --input tensors written into ``dram`` (the program's DRAM image), every input the
    program reads given (unless zero_inputs), every output place checked."""
    apply_inputs(program, dram, opts.inputs)
    if not opts.zero_inputs:
        _check_inputs(program, opts)
    _check_outputs(program, opts, dram)


def write_results(program: Program, opts: RunOptions, dram) -> list[Path]:
    """After a run: every output file computed from ``dram`` and written; the paths written."""
    pending = _collect(program, opts, dram)
    write_files(pending)
    return [f.path for f in pending]


def _check_inputs(program: Program, opts: RunOptions) -> None:
    """A FormatError naming every input tensor the program reads that no --input gives."""
    missing = missing_inputs(program, {name for name, _ in opts.inputs})
    if missing:
        given = " ".join(f"--input {name}=FILE.npy" for name in missing)
        raise FormatError(f"{opts.origin}: the program reads tensor{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(missing)} but no --input gives {'them' if len(missing) > 1 else 'it'}; "
                          f"pass {given} (or --zero-inputs to run on zeros)")


def _collect(program: Program, opts: RunOptions, dram) -> list[PendingFile]:
    """Every output file of the run, computed from ``dram`` (nothing is written here)."""
    pending: list[PendingFile] = collect_outputs(program, dram, opts.outputs)
    for addr, nbytes, path in opts.dram_dumps:
        pending.append(PendingFile(Path(path), dram_slice(dram, addr, nbytes, f"--dump-dram {path}")))
    if opts.out_dir is not None and program.dumps:
        pending += collect_dumps(program, dram, opts.out_dir)
    return pending


def _check_outputs(program: Program, opts: RunOptions, dram) -> None:
    """Before the run: every output names a tensor, lies inside DRAM and can be written."""
    for f in _collect(program, opts, dram):
        if f.in_dir:
            check_out_dir(f.path.parent)
            if f.path.is_dir():
                raise FormatError(f"{f.path}: cannot write the result: it is a directory")
        else:
            check_writable(f.path, "the output")

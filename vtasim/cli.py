"""`vtasim`: run VTA programs (.vbin or raw directories) on the functional simulator."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from vtasim.core.faults import located
from vtasim.core.memory import check_dma
from vtasim.core.pipeline import DEFAULT_MAX_OPS
from vtasim.outputs.io import check_names, check_writable, default_out_dir, parse_assignment, parse_dram_range
from vtasim.runs.runner import RunOptions, simulate
from vtasim.timing_cli import run_timing, timing_options, timing_request
from vtasm.cli_support import FILE, config_option, open_program, reports_errors, traceback_option
from vtasm.errors import FormatError, SimFault, UsageError
from vtasm.fileio import same_file
from vtasm.formats.magic import network_file

EXIT_RACES = 4


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="vta-toolchain")
def main() -> None:
    """Functional simulator of VTA programs, bit-exact with the reference behavioral simulator.

    Exit codes: 0 success, 1 bad input, 2 usage error, 3 simulation fault,
    4 races found by --check-races, 5 a board's device did not finish in time,
    6 a board refused an operation, 70 internal error.
    """


@dataclass(frozen=True)
class RunArgs:
    """vtasim run's options, as click gives them."""

    config_path: str | None
    inputs: tuple[str, ...]
    zero_inputs: bool
    outputs: tuple[str, ...]
    dram_dumps: tuple[str, ...]
    out_dir: str | None
    max_ops: int
    profile: bool
    trace: bool
    trace_format: str | None
    trace_file: str | None
    trace_uops: bool
    trace_source: bool
    check_races: bool
    lint: bool
    int8_outputs: bool
    timing: str | None
    timing_only: bool
    mem_latency: int | None
    timing_sets: tuple[str, ...]
    timeline: str | None
    board: str | None
    bitstream: str | None
    platform: str | None
    board_timeout: float | None


@main.command()
@click.argument("program", type=click.Path(), required=False, metavar="PROGRAM")
@config_option
@click.option("--input", "inputs", multiple=True, metavar="NAME=FILE.npy",
              help="Tensor input (logical layout); every input tensor the program reads must be given.")
@click.option("--zero-inputs", is_flag=True, help="Run input tensors that no --input gives on zeros.")
@click.option("--output", "outputs", multiple=True, metavar="NAME=FILE.npy", help="A tensor to write (logical "
              "layout); for a network file, a model output by name (float32 at its scale, or int8 with --int8).")
@click.option("--dump-dram", "dram_dumps", multiple=True, metavar="ADDR:NBYTES:FILE", help="Write a DRAM range.")
@click.option("--out-dir", type=click.Path(file_okay=False), help="Where the results go: a program's own "
              "result ranges, or every output of a network file as NAME.npy (default: next to the file, named "
              "after it: k.vbin -> k.out/; not written when --output takes the results and no --out-dir asks "
              "for them).")
@click.option("--max-ops", type=click.IntRange(min=1), default=DEFAULT_MAX_OPS, show_default=True,
              help="Budget of instructions plus micro-op executions.")
@click.option("--profile", is_flag=True, help="Print the profiler counters as JSON.")
@click.option("--trace", is_flag=True, help="Print each instruction as it executes (runtime format).")
@click.option("--trace-format", type=click.Choice(["text", "jsonl"]), default=None,
              help="Trace format: the runtime's text blocks (default) or JSON lines; implies --trace.")
@click.option("--trace-file", type=FILE, help="Write the trace to this file instead of stdout.")
@click.option("--trace-uops", is_flag=True, help="With --trace, list the micro-ops GEMM/ALU instructions ran.")
@click.option("--trace-source", is_flag=True, help="With the text trace, add each instruction's source line "
              "and the tensor its DRAM address lies in (JSON lines always have them).")
@click.option("--check-races", is_flag=True, help="Report accesses by different stages that no token orders.")
@click.option("--lint", is_flag=True, help="Warn about behaviour that differs on real VTA hardware.")
@click.option("--int8", "int8_outputs", is_flag=True, help="Network files: write outputs as the int8 values "
              "computed (default: float32 at each output's scale).")
@timing_options
@click.option("--board", type=click.Choice(["hls", "chisel-2021"]), default=None,
              help="Run on a VTA FPGA board of this design instead of the simulator (docs/board.md); --timing then "
              "holds each launch's measurements against this design's timing model.")
@click.option("--bitstream", metavar="FILE.bit", default=None, help="With --board: the bitstream to load (its "
              ".hwh and vta_config.json beside it; default vta-DESIGN.bit).")
@click.option("--platform", metavar="MODULE", default=None, help="With --board: the module providing the pynq "
              "API (default pynq; 'emulated' is this toolchain's emulated board).")
@click.option("--board-timeout", type=float, default=None, metavar="SECONDS",
              help="With --board: how long a run may take before the device counts as hung (default 10).")
@traceback_option
@reports_errors
def run(program: str | None, **given) -> None:
    """Run PROGRAM (a .vbin file or a raw directory) to its FINISH, or a network file (vtacc MODEL.onnx -o
    NET.vbin) through its VTA launches and host steps.

    A program's results are the tensors --output names and its own result
    ranges, which go to --out-dir (default PROGRAM.out/); a network file's are
    its model outputs, each to the file --output names or, without --output,
    all of them to --out-dir (default NET.out/) as NAME.npy.

    With --timing the timing model also computes the cycles the program takes
    on a VTA core (docs/timing.md); --timing-only computes them without data.
    """
    a = RunArgs(**given)
    if program is None:  # checked here, to say when --timing took the program as its profile's name
        if a.timing is not None and Path(a.timing).exists():
            raise UsageError(f"missing PROGRAM: --timing read {a.timing} as its profile; put the program first "
                             f"(vtasim run {a.timing} --timing) or write --timing=PROFILE")
        raise UsageError("missing argument PROGRAM (a .vbin file or a raw directory)")
    if a.board or a.bitstream or a.platform or a.board_timeout is not None:
        from vtasim.board_cli import refuse_off_board, run_on_board

        refuse_off_board(a)
        run_on_board(program, a, network_file(program))
        return
    request = timing_request(a.timing, a.timing_only, a.mem_latency, a.timing_sets, a.timeline)
    if network_file(program):
        _run_network_file(program, a, request)
        return
    if a.int8_outputs:
        raise UsageError("--int8 is for network files (an imported model); a program's outputs are its tensors")
    traced = a.trace or a.trace_uops or a.trace_source or bool(a.trace_format) or bool(a.trace_file)
    if request.only:
        _refuse_with_timing_only(a.outputs, a.dram_dumps, a.out_dir, traced, a.check_races, a.lint)
    prog = open_program(program, a.config_path, lazy_source_map=True)
    if a.timeline and same_file(a.timeline, program):
        raise UsageError(f"output file {a.timeline} is the program itself")
    if request.only:
        _time_only(prog, request, a.profile)
        return
    check_names(a.inputs, a.outputs, a.dram_dumps, program)
    opts = RunOptions(
        inputs=[parse_assignment(t, "--input") for t in a.inputs],
        outputs=[parse_assignment(t, "--output") for t in a.outputs],
        dram_dumps=[parse_dram_range(t) for t in a.dram_dumps],
        # the program's own result ranges go to a directory when asked, or when no --output takes the results
        out_dir=Path(a.out_dir) if a.out_dir else None if a.outputs else default_out_dir(program),
        max_ops=a.max_ops,
        trace=(a.trace_format or "text") if traced else None,
        trace_uops=a.trace_uops,
        trace_source=a.trace_source,
        zero_inputs=a.zero_inputs,
        origin=program,
        check_races=a.check_races,
        lint=a.lint,
    )
    report = _simulate_to_file(prog, opts, Path(a.trace_file)) if a.trace_file else simulate(prog, opts)
    timed = run_timing(prog, request) if request.profile is not None else None
    _tell(report, timed, a)


def _run_network_file(program: str, a: RunArgs, request) -> None:
    """A network file's run: its launches and host steps (network_cli)."""
    from vtasim.network_cli import NetworkOptions

    _refuse_for_network(a.dram_dumps, a.trace_format, a.trace_source, a.timeline)
    if request.only and a.out_dir:
        raise UsageError("--timing-only computes no data, so --out-dir cannot be used with it (use --timing "
                         "to run both)")
    check_names(a.inputs, a.outputs, (), program)
    _run_network(program, request, a.profile, NetworkOptions(
        inputs=[parse_assignment(t, "--input") for t in a.inputs],
        outputs=[parse_assignment(t, "--output") for t in a.outputs],
        out_dir=Path(a.out_dir) if a.out_dir else None if a.outputs or request.only else default_out_dir(program),
        int8=a.int8_outputs, zero_inputs=a.zero_inputs,
        max_ops=a.max_ops, trace=a.trace or a.trace_uops or bool(a.trace_file), trace_uops=a.trace_uops,
        lint=a.lint, check_races=a.check_races, origin=program), a.trace_file)


def _time_only(prog, request, profile: bool) -> None:
    """--timing-only: the timing model's report, no data computed."""
    try:  # no data is computed, but a LOAD or STORE whose fields leave its buffer still faults
        check_dma(prog)
    except SimFault as exc:
        raise located(prog, exc) from None
    result = run_timing(prog, request)
    if profile:
        click.echo(json.dumps({"cycles": result.report.cycles, "timing": result.report.as_dict()}, indent=1,
                              separators=(",", ":")))
    else:
        click.echo(result.report.text())


def _tell(report, timed, a: RunArgs) -> None:
    """What a program's run prints: the counters or the timing report, the summary line, warnings, lint and
    races (exit EXIT_RACES when --check-races found some)."""
    if a.profile:
        counters = report.result.profile()
        if timed is not None:
            counters = {**counters, "cycles": timed.report.cycles, "timing": timed.report.as_dict()}
        click.echo(json.dumps(counters, indent=1, separators=(",", ":")))
    elif timed is not None:
        click.echo(timed.report.text())
    extras = report.result.extras
    wrote = f"; wrote {', '.join(str(p) for p in report.written)}" if report.written else ""
    click.echo(f"vtasim: FINISH after {extras['instructions']} instructions "
               f"({extras['uop_executions']:,} micro-op executions){wrote}", err=True)
    for line in report.warnings:
        click.echo(line, err=True)
    if a.lint:
        click.echo(report.lint_summary, err=True)
    for line in report.races:
        click.echo(line, err=True)
    if a.check_races:
        click.echo(f"{len(report.races)} race(s) found", err=True)
        if report.races:
            sys.exit(EXIT_RACES)


def _refuse_for_network(dram_dumps, trace_format, trace_source, timeline) -> None:
    asked = [name for name, given in (("--dump-dram", dram_dumps),
                                      ("--trace-format", trace_format), ("--trace-source", trace_source),
                                      ("--timeline FILE.json", timeline and not timeline.lower().endswith(".png")))
             if given]
    if asked:
        raise UsageError(f"{', '.join(asked)}: not available for a network file (VTA launches with host steps); "
                         "--output, --out-dir, --trace, --timing, --timeline FILE.png, --profile, --lint and "
                         "--check-races are")


def _run_network(path: str, request, profile: bool, opts, trace_file: str | None) -> None:
    """`vtasim run` of a network file: every launch and host step, the timing table, the outputs."""
    from vtasim.network_cli import check_runnable, run_network_file
    from vtasim.timing.network_timing import time_network
    from vtasm.formats.network import load_network

    net = load_network(path)
    check_runnable(net, path)
    if request.only:
        if opts.outputs or opts.trace or opts.lint or opts.check_races:
            raise UsageError("--timing-only computes no data, so --output, --trace, --lint and --check-races "
                             "cannot be used with it (use --timing to run both)")
        click.echo(time_network(net, request.profile).text(), nl=False)
        return
    if trace_file:
        check_writable(Path(trace_file), "the trace")
        report = _traced_to_file(Path(trace_file), lambda out: run_network_file(net, opts, out))
    else:
        report = run_network_file(net, opts)
    if profile:
        click.echo(json.dumps({"steps": [
            {"step": r.step.name, "kind": r.step.kind, "seconds": round(r.seconds, 6),
             **({"counters": r.profile} if r.profile is not None else {})}
            for r in report.runs[0].records]}, indent=1, separators=(",", ":")))
    timed = time_network(net, request.profile, report.runs) if request.profile is not None else None
    if timed is not None:
        click.echo(timed.text(), nl=False)
    if request.timeline is not None:
        from vtasim.timing.steps_chart import draw_steps

        draw_steps(timed, request.timeline, f"{Path(path).name} on {request.profile.name}")
    launches = sum(r.profile is not None for r in report.runs[0].records)
    hosts = len(report.runs[0].records) - launches
    wrote = f"; wrote {', '.join(str(p) for p in report.written)}" if report.written else ""
    runs = f"{len(report.runs)} runs of " if len(report.runs) > 1 else ""
    click.echo(f"vtasim: {runs}{launches} VTA launch{'es' if launches != 1 else ''} and {hosts} host "
               f"step{'s' if hosts != 1 else ''} finished{wrote}", err=True)
    for line in report.warnings:
        click.echo(line, err=True)
    if opts.lint:
        click.echo(report.lint_summary, err=True)
    for line in report.races:
        click.echo(line, err=True)
    if opts.check_races:
        click.echo(f"{len(report.races)} race(s) found", err=True)
        if report.races:
            sys.exit(EXIT_RACES)


def _refuse_with_timing_only(outputs, dram_dumps, out_dir, trace: bool, check_races: bool, lint: bool) -> None:
    """--timing-only computes no data, so options that need data are usage errors."""
    asked = [name for name, given in (("--output", outputs), ("--dump-dram", dram_dumps), ("--out-dir", out_dir),
                                      ("--trace", trace), ("--check-races", check_races), ("--lint", lint)) if given]
    if asked:
        raise UsageError(f"--timing-only computes no data, so {', '.join(asked)} cannot be used with it "
                         "(use --timing to run both)")


def _simulate_to_file(prog, opts: RunOptions, path: Path):
    """Run with the trace going to a file (kept as _traced_to_file says)."""
    return _traced_to_file(path, lambda out: simulate(prog, opts, trace_out=out))


def _traced_to_file(path: Path, run):
    """``run(out)`` with the trace going to a file.

    The trace is kept, whole, when the run succeeds or faults (it shows what
    ran); any other failure (bad input, an output that cannot be written)
    leaves no trace file.
    """
    if path.is_dir() or not path.parent.resolve().is_dir():
        raise FormatError(f"{path}: cannot write the trace: "
                          f"{'it is a directory' if path.is_dir() else 'its directory does not exist'}")
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w") as out:
            try:
                report = run(out)
            except SimFault:
                out.close()
                os.replace(tmp, path)
                raise
        os.replace(tmp, path)
        return report
    finally:
        if tmp.exists():
            tmp.unlink()


if __name__ == "__main__":  # pragma: no cover
    main()

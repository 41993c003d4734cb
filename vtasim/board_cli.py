"""`vtasim run PROG --board DESIGN`: a program or a network file on a VTA board (vtasim.board), with the
options of `vtasim run` that make sense on hardware."""

from __future__ import annotations

from pathlib import Path

import click

from vtasm.errors import UsageError

BOARD_OPTIONS = ("--input, --zero-inputs, --output, --dump-dram, --out-dir, --int8, --timing, --mem-latency "
                 "and --set")


def refuse_off_board(a) -> None:
    """Options the hardware cannot serve (they watch the simulator's steps, bound its work or compute no
    data), and the board's options without --board."""
    from vtasim.core.pipeline import DEFAULT_MAX_OPS

    asked = [name for name, given in (("--trace", a.trace), ("--trace-uops", a.trace_uops),
                                      ("--trace-source", a.trace_source), ("--trace-format", a.trace_format),
                                      ("--trace-file", a.trace_file), ("--check-races", a.check_races),
                                      ("--lint", a.lint), ("--profile", a.profile), ("--max-ops",
                                      a.max_ops != DEFAULT_MAX_OPS), ("--timing-only", a.timing_only),
                                      ("--timeline", a.timeline)) if given]
    if not a.board and (a.bitstream is not None or a.platform is not None or a.board_timeout is not None):
        raise UsageError("--bitstream, --platform and --board-timeout go with --board hls|chisel-2021")
    if asked:
        raise UsageError(f"{', '.join(asked)}: not available with --board (the simulator's options); on a board, "
                         f"{BOARD_OPTIONS} apply")


def run_on_board(program: str, a, network: bool) -> None:
    """Run PROGRAM on the board ``a.board`` names; print what ran and, with --timing, the measurements."""
    from vtasim.board.launch import BoardSpec
    from vtasim.board.platform import DEFAULT_PLATFORM

    refuse_off_board(a)
    profile = None
    if a.timing is not None or a.mem_latency is not None or a.timing_sets:
        from vtasim.timing.names import DEFAULT
        from vtasim.timing.profile import resolve_profile

        # the board's own design, unless --timing names another profile to hold the board against
        named = a.board if a.timing in (None, DEFAULT) else a.timing
        profile = resolve_profile(named, a.mem_latency, a.timing_sets)
    spec = BoardSpec(a.board, a.platform if a.platform is not None else DEFAULT_PLATFORM, a.bitstream,
                     a.board_timeout if a.board_timeout is not None else 10.0, read_cycles=profile is not None)
    where = f"the {a.board} board ({spec.platform})"
    if network:
        launches, runs, written = _network(program, a, spec)
    else:
        launches, written = _program(program, a, spec)
        runs = 1
    if profile is not None:
        from vtasim.board.report import rows, table

        per_run = f", the median of {runs} runs" if runs > 1 else ""
        click.echo(table(rows(launches, profile), profile, where + per_run), nl=False)
    wrote = f"; wrote {', '.join(str(p) for p in written)}" if written else ""
    seconds = sum(s for _, _, s, _ in launches)
    each = f"{runs} runs of " if runs > 1 else ""
    total = f"{seconds * 1e3:.3f} ms{' each (median)' if runs > 1 else ''}"
    click.echo(f"vtasim: {each}{len(launches)} launch{'es' if len(launches) != 1 else ''} finished on {where} in "
               f"{total}{wrote}", err=True)


def _program(program: str, a, spec):
    from vtasim.board.launch import run_program
    from vtasim.outputs.io import check_names, default_out_dir, parse_assignment, parse_dram_range
    from vtasim.runs.runner import RunOptions
    from vtasm.cli_support import open_program

    if a.int8_outputs:
        raise UsageError("--int8 is for network files (an imported model); a program's outputs are its tensors")
    prog = open_program(program, a.config_path)
    check_names(a.inputs, a.outputs, a.dram_dumps, program)
    opts = RunOptions(inputs=[parse_assignment(t, "--input") for t in a.inputs],
                      outputs=[parse_assignment(t, "--output") for t in a.outputs],
                      dram_dumps=[parse_dram_range(t) for t in a.dram_dumps],
                      out_dir=Path(a.out_dir) if a.out_dir else None if a.outputs else default_out_dir(program),
                      zero_inputs=a.zero_inputs, origin=program)
    run = run_program(prog, opts, spec)
    return [(m.name, m.program, m.launch.seconds, m.launch.cycles) for m in run.measured], run.written


def _network(program: str, a, spec):
    from vtasim.board.launch import BoardLauncher
    from vtasim.network_cli import NetworkOptions, check_runnable, run_network_file
    from vtasim.outputs.io import check_names, default_out_dir, parse_assignment
    from vtasm.formats.network import load_network

    if a.dram_dumps:
        raise UsageError("--dump-dram: not available for a network file (VTA launches with host steps)")
    check_names(a.inputs, a.outputs, (), program)
    net = load_network(program)
    check_runnable(net, program)
    opts = NetworkOptions(inputs=[parse_assignment(t, "--input") for t in a.inputs],
                          outputs=[parse_assignment(t, "--output") for t in a.outputs],
                          out_dir=Path(a.out_dir) if a.out_dir else None if a.outputs else default_out_dir(program),
                          int8=a.int8_outputs, zero_inputs=a.zero_inputs, origin=program)
    with spec.open() as board:
        for step in net.steps:  # every launch's configuration, before the device runs any
            if step.kind == "vta":
                board.check_config(step.program, f"{program}: launch '{step.name}'")
        report = run_network_file(net, opts, launch=BoardLauncher(board, program))
    import statistics

    launches = []
    for k, record in enumerate(report.runs[0].records):
        if record.profile is None:
            continue  # a host step
        measured = [run.records[k].profile for run in report.runs]  # every run's, on the board
        launches.append((record.step.name, record.step.program,
                         statistics.median(m["device_seconds"] for m in measured), record.profile["device_cycles"]))
    return launches, len(report.runs), report.written

"""`vtasim run PROG --board DESIGN`: a program or a network file on a VTA board (vtasim.board), with the
options of `vtasim run` that make sense on hardware."""

from __future__ import annotations

from pathlib import Path

import click

from vtasm.errors import UsageError

BOARD_OPTIONS = "--input, --zero-inputs, --output, --dump-dram, --out-dir, --int8 and --timing"


def refuse_off_board(a) -> None:
    """Options the hardware cannot serve (they watch the simulator's steps or compute no data)."""
    asked = [name for name, given in (("--trace", a.trace or a.trace_uops or a.trace_source or a.trace_format
                                       or a.trace_file), ("--check-races", a.check_races), ("--lint", a.lint),
                                      ("--profile", a.profile), ("--timing-only", a.timing_only),
                                      ("--timeline", a.timeline)) if given]
    if asked:
        raise UsageError(f"{', '.join(asked)}: not available with --board (they watch the simulator); on a board "
                         f"{BOARD_OPTIONS} are")
    if not a.board and (a.bitstream or a.platform or a.board_timeout is not None):
        raise UsageError("--bitstream, --platform and --board-timeout go with --board hls|chisel-2021")


def run_on_board(program: str, a, network: bool) -> None:
    """Run PROGRAM on the board ``a.board`` names; print what ran and, with --timing, the measurements."""
    from vtasim.board.launch import BoardSpec
    from vtasim.board.platform import DEFAULT_PLATFORM

    refuse_off_board(a)
    spec = BoardSpec(a.board, a.platform or DEFAULT_PLATFORM, a.bitstream,
                     a.board_timeout if a.board_timeout is not None else 10.0)
    profile = None
    if a.timing is not None or a.mem_latency is not None or a.timing_sets:
        from vtasim.timing.profile import resolve_profile

        profile = resolve_profile(a.board, a.mem_latency, a.timing_sets)  # the board's own design
    where = f"the {a.board} board ({spec.platform})"
    if network:
        launches, written = _network(program, a, spec)
    else:
        launches, written = _program(program, a, spec)
    if profile is not None:
        from vtasim.board.report import rows, table

        click.echo(table(rows(launches, profile), profile, where), nl=False)
    wrote = f"; wrote {', '.join(str(p) for p in written)}" if written else ""
    seconds = sum(s for _, _, s, _ in launches)
    click.echo(f"vtasim: {len(launches)} launch{'es' if len(launches) != 1 else ''} finished on {where} in "
               f"{seconds * 1e3:.3f} ms{wrote}", err=True)


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
    first = report.runs[0].records
    launches = [(r.step.name, r.step.program, r.profile["device_seconds"], r.profile["device_cycles"])
                for r in first if r.profile is not None]
    return launches, report.written

"""The timing options of ``vtasim run``: which profile, what-if overrides, and where the results go."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from vtasim.timing.names import BUILTIN, DEFAULT
from vtasm.cli_support import FILE
from vtasm.errors import UsageError
from vtasm.program import Program

if TYPE_CHECKING:
    from vtasim.timing.profile import Profile
    from vtasim.timing.run import TimingResult

TIMELINE_SUFFIXES = (".json", ".png")


@dataclass
class TimingRequest:
    """What the user asked of the timing model (None profile: no timing)."""

    profile: Profile | None
    only: bool
    timeline: Path | None


def timing_options(f: Callable) -> Callable:
    """The click options of the timing model, in the order --help shows them."""
    options = [
        click.option("--timing", "timing", is_flag=False, flag_value=DEFAULT, default=None, metavar="[PROFILE]",
                     help=f"Also compute cycles with the timing model under a hardware profile "
                          f"({', '.join(BUILTIN)}, or a .toml file; default {DEFAULT})."),
        click.option("--timing-only", is_flag=True,
                     help="Only the timing model: no data is computed (inputs are not needed)."),
        click.option("--mem-latency", type=click.IntRange(min=0), default=None, metavar="N",
                     help="Memory latency in cycles (a what-if override of the profile)."),
        click.option("--set", "timing_sets", multiple=True, metavar="KEY=VALUE",
                     help="Override one profile value, e.g. memory.bus_bytes=16 or clock_mhz=200."),
        click.option("--timeline", type=FILE, default=None, metavar="FILE.json|FILE.png",
                     help="Write the timeline: Chrome trace events (.json, opens in Perfetto) or a picture (.png)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def timing_request(timing: str | None, timing_only: bool, mem_latency: int | None, timing_sets: tuple[str, ...],
                   timeline: str | None) -> TimingRequest:
    """Resolve the options into a profile (with overrides) and outputs; usage errors in one line."""
    wants = timing is not None or timing_only or mem_latency is not None or timing_sets or timeline
    if not wants:
        return TimingRequest(None, False, None)
    from vtasim.timing.profile import resolve_profile  # loaded only when timing is asked for

    profile = resolve_profile(timing, mem_latency, timing_sets)
    path = Path(timeline) if timeline else None
    if path is not None and path.suffix.lower() not in TIMELINE_SUFFIXES:
        raise UsageError(f"--timeline {timeline}: the name must end in .json (trace events) or .png (picture)")
    return TimingRequest(profile, timing_only, path)


def run_timing(program: Program, request: TimingRequest) -> TimingResult:
    """Time the program and write the timeline file if one was asked for."""
    from vtasim.timing.run import time_program  # the timing model loads only when asked for

    assert request.profile is not None
    result = time_program(program, request.profile, record=request.timeline is not None)
    if request.timeline is not None:
        if request.timeline.suffix.lower() == ".png":
            from vtasim.timing.gantt import draw_gantt

            draw_gantt(result, program, request.timeline)
        else:
            from vtasim.timing.chrome_trace import write_chrome_trace

            write_chrome_trace(result, program, request.timeline)
    return result

"""Where a network file's time goes: each VTA launch's cycles from the timing model, each host step's time as
measured on this machine, and the totals, as numbers (for notebooks) that print as `vtasim run --timing`'s
table."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from vtasim.host.step import node_macs
from vtasim.timing.profile import Profile
from vtasm.formats.network import NetworkFile, Side, VtaStep


@dataclass(frozen=True)
class StepTiming:
    """One step: a VTA launch (``cycles`` from the timing model, ``seconds`` at the profile's clock) or a host
    step (``seconds`` measured here, the median over the runs; None when it was not run)."""

    step: int  # 1-based, as the table numbers them
    kind: Side
    name: str
    what: str  # a launch's cycles as text, a host step's operators
    cycles: int | None
    seconds: float | None
    macs: int | None = None  # multiply-accumulates, when known (a launch's come from the compiled model)
    ops: str = ""  # a launch's ONNX operators, when known


@dataclass(frozen=True)
class NetworkTiming:
    """A network's steps and totals under one profile; ``str()`` is the table `vtasim run --timing` prints."""

    profile: str
    clock_mhz: float
    steps: tuple[StepTiming, ...]

    @property
    def vta_cycles(self) -> int:
        """The VTA launches' cycles, added up."""
        return sum(s.cycles or 0 for s in self.steps if s.kind == Side.VTA)

    @property
    def vta_seconds(self) -> float:
        return sum(s.seconds or 0.0 for s in self.steps if s.kind == Side.VTA)

    @property
    def host_seconds(self) -> float:
        """The host steps' measured seconds (0 for steps not run)."""
        return sum(s.seconds or 0.0 for s in self.steps if s.kind == Side.HOST)

    @property
    def seconds(self) -> float:
        """One run: VTA's modelled time plus the host's measured time."""
        return self.vta_seconds + self.host_seconds

    def rows(self) -> list[dict]:
        """The steps as dictionaries (a table for pandas or a CSV writer)."""
        return [asdict(s) for s in self.steps]

    def text(self, title: str | None = None) -> str:
        """The table: ``title`` (default: the profile and the steps), one line a step, a line of totals and,
        when every step's MACs are known, each side's share of the MACs and of the time."""
        vta = sum(s.kind == Side.VTA for s in self.steps)
        host = len(self.steps) - vta
        lines = [title or f"timing ({self.profile}): {vta} VTA launch{'es' if vta != 1 else ''}, {host} host "
                          f"step{'s' if host != 1 else ''}"]
        for s in self.steps:
            seconds = s.seconds or 0.0
            macs = f"  {s.macs:,} MACs" if s.macs is not None else ""
            if s.kind == Side.VTA:
                ops = f"  {s.ops[:60]}" if s.ops else ""
                lines.append(f"  step {s.step:<3} VTA  {s.name:<12} {s.what:>22} = {seconds * 1e3:10.3f} ms "
                             f"at {self.clock_mhz:g} MHz (timing model){macs}{ops}")
            else:
                shown = (f"{seconds * 1e3:10.3f} ms measured on this CPU" if s.seconds is not None
                         else "not run (--timing-only)")
                lines.append(f"  step {s.step:<3} host {s.name:<12} {s.what[:40]:<40} {shown}{macs}")
        lines.append(f"  total: VTA {self.vta_seconds * 1e3:.3f} ms (model) + host {self.host_seconds * 1e3:.3f} ms "
                     f"(measured) = {self.seconds * 1e3:.3f} ms per run")
        if all(s.macs is not None for s in self.steps):
            lines += self._shares()
        return "\n".join(lines) + "\n"

    def _shares(self) -> list[str]:
        """Each side's steps, MACs and time, with its share of the whole."""
        total_macs = sum(s.macs or 0 for s in self.steps) or 1
        total_s = self.seconds or 1.0
        lines = []
        for side in Side:
            steps = [s for s in self.steps if s.kind == side]
            macs, secs = sum(s.macs or 0 for s in steps), sum(s.seconds or 0.0 for s in steps)
            lines.append(f"  {side.label}: {len(steps)} step{'s' if len(steps) != 1 else ''}, {macs:,} MACs "
                         f"({100 * macs / total_macs:.1f}%), {secs * 1e3:.3f} ms ({100 * secs / total_s:.1f}% of "
                         "the time)")
        return lines

    def __str__(self) -> str:
        return self.text().rstrip("\n")


def time_network(net: NetworkFile, profile: Profile, runs: list | None = None) -> NetworkTiming:
    """The timing of every step: VTA launches by the timing model, host steps from ``runs`` (each a
    NetworkRun whose records hold the step's measured seconds; None or empty: not run)."""
    from vtasim.timing.run import time_program

    steps = []
    for k, step in enumerate(net.steps):
        if isinstance(step, VtaStep):
            cycles = time_program(step.program, profile, record=False).report.cycles
            steps.append(StepTiming(k + 1, Side.VTA, step.name, f"{cycles:,} cycles", cycles,
                                    cycles / (profile.clock_mhz * 1e6)))
        else:
            measured = [r.records[k].seconds for r in runs] if runs else []
            steps.append(StepTiming(k + 1, Side.HOST, step.name, ", ".join(n.op for n in step.nodes), None,
                                    float(np.median(measured)) if measured else None,
                                    sum(node_macs(n) for n in step.nodes)))
    return NetworkTiming(profile.name, profile.clock_mhz, tuple(steps))

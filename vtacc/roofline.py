"""Where each result of a compiled program stands against its roofline.

The program is timed by the full timing model (vtasim.timing) under the
compiler's profile; each result (operator) spans the cycles from its first
instruction's start to its last one's end. Its bounds:

- compute: its GEMM MACs at the core's peak (BATCH x BLOCK_IN x BLOCK_OUT MACs
  every ``gemm.per_execution`` cycles) plus its ALU executions at the ALU's
  peak (one every ``alu.imm_per_execution`` cycles);
- memory: its compulsory bytes (every input, weight and bias byte read once,
  every output byte written once) over the bus, ``memory.bus_bytes`` per
  cycle; reads and writes have channels of their own, so the larger of the
  two binds.

The larger bound binds; the fraction reached is that bound over the cycles
the result took.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from vtacc.schedule.tiling import compulsory_traffic
from vtasm.fileio import write_atomic

from .compiler import Compiled


@dataclass
class RooflinePoint:
    """One result's place on the roofline."""

    name: str
    cycles: int
    macs: int
    alu_executions: int
    read_bytes: int  # compulsory
    write_bytes: int  # compulsory
    compute_bound: float
    memory_bound: float
    clock_mhz: float

    @property
    def binds(self) -> str:
        return "compute" if self.compute_bound >= self.memory_bound else "memory"

    @property
    def bound(self) -> float:
        return max(self.compute_bound, self.memory_bound)

    @property
    def fraction(self) -> float:
        """The share of the binding bound reached (1.0: on the roof)."""
        return self.bound / self.cycles if self.cycles else 0.0

    @property
    def seconds(self) -> float:
        return self.cycles / (self.clock_mhz * 1e6)

    @property
    def gops(self) -> float:
        return 2 * self.macs / self.seconds / 1e9 if self.cycles else 0.0

    @property
    def intensity(self) -> float:
        """Operations (2 per MAC) per compulsory DRAM byte."""
        return 2 * self.macs / max(self.read_bytes + self.write_bytes, 1)


def roofline_points(compiled: Compiled) -> list[RooflinePoint]:
    """One point per result of the program, from its timed run."""
    cfg, profile = compiled.cfg, compiled.profile
    timed = compiled.timed
    by_index = {it.index: it for it in timed.timeline.insns}
    works = timed.works
    peak_macs = cfg.batch * cfg.block_in * cfg.block_out / profile.gemm_per_execution
    owner = {g: k for k, planned in enumerate(compiled.planned) for g in planned.groups}
    members: list[list[int]] = [[] for _ in compiled.planned]
    for i, e in enumerate(compiled.generated.emitted):  # one pass: each instruction to its result
        if e.group in owner:
            members[owner[e.group]].append(i)
    points = []
    for planned, index in zip(compiled.planned, members, strict=True):
        spans = [by_index[i] for i in index if i in by_index]
        if not spans:
            continue
        cycles = max(s.end for s in spans) - min(s.start for s in spans)
        macs = sum(works[i].macs for i in index)
        alu = sum(works[i].executions for i in index if works[i].unit == "alu")
        alu_cycles = sum(works[i].executions * (profile.alu_imm_per_execution if works[i].variant else
                                                profile.alu_tensor_per_execution)
                         for i in index if works[i].unit == "alu")
        reads, writes = compulsory_traffic(planned.op, planned.needs, cfg)
        points.append(RooflinePoint(
            name=planned.op.out.name, cycles=cycles, macs=macs, alu_executions=alu, read_bytes=reads,
            write_bytes=writes, compute_bound=macs / peak_macs + alu_cycles,
            memory_bound=max(reads, writes) / profile.bus_bytes, clock_mhz=profile.clock_mhz))
    return points


def roofline_text(points: list[RooflinePoint]) -> list[str]:
    """--explain lines, one per result."""
    lines = []
    for p in points:
        lines.append(f"  {p.name}: {p.cycles:,} cycles ({p.seconds * 1e6:,.2f} us); compute bound "
                     f"{p.compute_bound:,.0f}, memory bound {p.memory_bound:,.0f}: {p.binds}-bound, "
                     f"{p.fraction:.1%} of the bound")
    return lines


def draw_roofline(series: dict[str, list[RooflinePoint]], profile, cfg, path: str | Path, title: str) -> None:
    """A log-log roofline picture: achieved GOPS against operations per compulsory byte, one marker per series."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    peak = 2 * cfg.batch * cfg.block_in * cfg.block_out / profile.gemm_per_execution * profile.clock_mhz * 1e6 / 1e9
    bandwidth = profile.bus_bytes * profile.clock_mhz * 1e6 / 1e9  # GB/s per direction
    xs = [p.intensity for points in series.values() for p in points if p.macs]
    ridge = peak / bandwidth  # the intensity where the two roofs meet
    lo = min(xs + [ridge]) / 8
    hi = max(xs + [ridge]) * 4
    fig, ax = plt.subplots(figsize=(9, 6), dpi=120)
    grid = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    slope = [x for x in grid if x <= ridge] + [ridge]
    flat = [ridge] + [x for x in grid if x > ridge]
    ax.plot(slope, [bandwidth * x for x in slope], color="tab:gray", linewidth=2,
            label=f"bandwidth roof: {bandwidth:.1f} GB/s per direction")
    ax.plot(flat, [peak] * len(flat), color="black", linewidth=2, label=f"compute roof: {peak:.1f} GOPS")
    markers = ["o", "s", "^", "D"]
    for k, (label, points) in enumerate(series.items()):
        shown = [p for p in points if p.macs]
        ax.scatter([p.intensity for p in shown], [p.gops for p in shown], marker=markers[k % 4], s=45,
                   label=label, zorder=3)
        if k == len(series) - 1:
            for j, p in enumerate(sorted(shown, key=lambda q: q.intensity)):  # alternate sides: neighbours apart
                ax.annotate(p.name, (p.intensity, p.gops), textcoords="offset points",
                            xytext=(6, 4 if j % 2 else -11), fontsize=8)
    if len(series) == 2:  # arrows from the first series to the second, result by result
        first, second = (list(v) for v in series.values())
        for a, b in zip(first, second, strict=False):
            if a.macs and b.macs and a.name == b.name:
                ax.annotate("", (b.intensity, b.gops), (a.intensity, a.gops),
                            arrowprops={"arrowstyle": "->", "color": "gray", "linewidth": 0.8})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(min([p.gops for v in series.values() for p in v if p.macs] + [peak]) / 4, peak * 2)
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.set_xlabel("arithmetic intensity (operations per compulsory DRAM byte)")
    ax.set_ylabel("achieved GOPS")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    ax.legend(loc="lower right", fontsize=9, framealpha=0.9)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    write_atomic(path, buffer.getvalue())  # a path that cannot be written is a one-line error, no partial file

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
  two binds. Where the weight client takes a beat only every
  ``memory.wgt_beat_cycles`` (the HLS weight bank), each weight byte counts
  that many times on the read side.

The larger bound binds; the fraction reached is that bound over the cycles
the result took.
"""

from __future__ import annotations

import io
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from vtacc.compiler import Compiled
from vtacc.schedule.tiling import compulsory_parts
from vtasm.fileio import write_atomic


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
    label: str = ""  # the user's name for it (the picture's key); ``name`` is the program's tensor
    alu_cycles: float = 0.0  # the ALU's share of compute_bound
    bus_read_bytes: float = 0.0  # read_bytes as the bus takes them (a weight byte wgt_beat_cycles times)

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


def user_name(op, entry: str) -> str:
    """The name the user gave a result: the kernel (layer) a call computed it in, else the entry kernel's
    result; a concatenation the entry reads as a value is 'concat', a part of one copied in place gets its
    first channel. The compiler's suffixes (``conv1_y``, ``_2``, ``main_concat_5_c128``) are left out."""
    if op.kernel != entry:
        return op.kernel
    owner = op.out.slice_of.name if op.out.slice_of is not None else op.out.name
    name = "concat" if re.fullmatch(rf"{re.escape(entry)}_concat(_\d+)?", owner) else owner
    channel = re.search(r"_c(\d+)(_\d+)?$", op.out.name) if op.out.slice_of is not None else None
    return f"{name} [c{channel.group(1)}:]" if channel else name


def _numbered(labels: list[str]) -> list[str]:
    """Labels that repeat get ' #1', ' #2', ... in program order."""
    counts, seen = Counter(labels), Counter()
    out = []
    for label in labels:
        seen[label] += 1
        out.append(f"{label} #{seen[label]}" if counts[label] > 1 else label)
    return out


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
        reads, writes, weights = compulsory_parts(planned.op, planned.needs, cfg)
        slow_reads = reads + (profile.wgt_beat_cycles - 1) * weights
        points.append(RooflinePoint(
            name=planned.op.out.name, cycles=cycles, macs=macs, alu_executions=alu, read_bytes=reads,
            write_bytes=writes, compute_bound=macs / peak_macs + alu_cycles,
            memory_bound=max(slow_reads, writes) / profile.bus_bytes, clock_mhz=profile.clock_mhz,
            label=user_name(planned.op, compiled.kernel.name), alu_cycles=alu_cycles, bus_read_bytes=slow_reads))
    for point, label in zip(points, _numbered([p.label for p in points]), strict=True):
        point.label = label
    return points


def roofline_text(points: list[RooflinePoint]) -> list[str]:
    """--explain lines, one per result."""
    lines = []
    for p in points:
        lines.append(f"  {p.name}: {p.cycles:,} cycles ({p.seconds * 1e6:,.2f} us); compute bound "
                     f"{p.compute_bound:,.0f}, memory bound {p.memory_bound:,.0f}: {p.binds}-bound, "
                     f"{p.fraction:.1%} of the bound")
    return lines


_KEY_LINES = 34  # names per column of the key beside the plot


def _key_width(points: list[RooflinePoint]) -> float:
    """Inches the key of ``points`` takes beside the plot."""
    if not points:
        return 0.0
    columns = -(-len(points) // _KEY_LINES)
    return columns * (0.35 + 0.07 * max(len(f"{len(points)} {p.label}") for p in points))


def _draw_key(ax, points: list[RooflinePoint]) -> None:
    """The points' numbers with the results' names, in columns beside the plot."""
    key = [f"{i + 1:>{len(str(len(points)))}} {p.label}" for i, p in enumerate(points)]
    columns = [key[k:k + _KEY_LINES] for k in range(0, len(key), _KEY_LINES)]
    width_pt = 72 * _key_width(points) / max(1, len(columns))
    for c, column in enumerate(columns):
        ax.annotate("\n".join(column), (1.0, 1.0), xycoords="axes fraction", textcoords="offset points",
                    xytext=(10 + c * width_pt, 0), va="top", ha="left", fontsize=8, family="monospace")


# Where a point's number may go, tried in turn: offset in points, horizontal and vertical alignment.
_PLACES = ((5, 3, "left", "bottom"), (5, -3, "left", "top"), (-5, 3, "right", "bottom"), (-5, -3, "right", "top"),
           (0, 7, "center", "bottom"), (0, -7, "center", "top"))


def _box(x: float, y: float, text: str, place: tuple, dpi: float) -> tuple[float, float, float, float]:
    """The pixel box (x0, y0, x1, y1) a label of 8-point bold digits takes at ``place`` beside point (x, y)."""
    px = dpi / 72
    width, height = 8 * 0.62 * px * len(text), 8 * 1.15 * px
    dx, dy, ha, va = place
    x0 = x + dx * px - {"left": 0, "center": width / 2, "right": width}[ha]
    y0 = y + dy * px - (0 if va == "bottom" else height)
    return x0, y0, x0 + width, y0 + height


def _overlap(a: tuple, b: tuple) -> float:
    """The area two boxes share."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _clusters(where) -> list[list[int]]:
    """The points in groups of those within 14 pixels of a group's first point."""
    groups: list[list[int]] = []
    for i in sorted(range(len(where)), key=lambda i: tuple(where[i])):
        near = next((g for g in groups if ((where[g[0]] - where[i]) ** 2).sum() < 14 ** 2), None)
        if near is None:
            groups.append([i])
        else:
            near.append(i)
    return groups


def _number_points(ax, points: list[RooflinePoint]) -> None:
    """Number the points in program order: points within 14 pixels of each other share one label ('2,4'), and
    each label goes on the side of its point where it covers the fewest labels and points already there."""
    if not points:
        return
    where = ax.transData.transform([(p.intensity, p.gops) for p in points])
    dpi = ax.figure.dpi
    taken = [(x - 6, y - 6, x + 6, y + 6) for x, y in where]  # the markers
    for group in _clusters(where):
        text = ",".join(str(i + 1) for i in sorted(group))
        x, y = where[group[0]]
        place = min(_PLACES, key=lambda q: sum(_overlap(_box(x, y, text, q, dpi), t) for t in taken))
        taken.append(_box(x, y, text, place, dpi))
        p = points[group[0]]
        ax.annotate(text, (p.intensity, p.gops), textcoords="offset points", xytext=place[:2], ha=place[2],
                    va=place[3], fontsize=8, fontweight="bold")


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
    last = [p for p in list(series.values())[-1] if p.macs]
    fig, ax = plt.subplots(figsize=(9 + _key_width(last), 6), dpi=120)
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
    def minor(v: float, _) -> str:
        """Over more than a decade and a half, minor ticks labelled at 2 and 5 only (all crowd a decade's label)."""
        low, high = ax.get_ylim()
        wide = high / low > 30
        return f"{v:g}" if v > 0 and (not wide or round(v / 10 ** math.floor(math.log10(v))) in (2, 5)) else ""

    ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(minor))
    _draw_key(ax, last)
    ax.set_xlabel("arithmetic intensity (operations per compulsory DRAM byte)")
    ax.set_ylabel("achieved GOPS")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    ax.legend(loc="lower right", fontsize=9, framealpha=0.9)
    fig.tight_layout()
    _number_points(ax, last)  # where the points lie in pixels is known once the layout is done
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    write_atomic(path, buffer.getvalue())  # a path that cannot be written is a one-line error, no partial file

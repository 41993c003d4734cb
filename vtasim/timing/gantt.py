"""A timing run as a Gantt chart (PNG), with each module's utilisation under it.

Rows: fetch, load, compute, store and the memory engine's read and write
channels. Instructions are bars coloured by kind, the cycles an instruction
waited for tokens a thin grey bar before it, memory bursts bars coloured by
the client that asked for them. Bars closer than a pixel that are of one kind
are merged and every bar is at least a pixel wide, so nothing short
disappears; a row with more bars than it has room for is drawn a pixel at a
time instead, each kind as tall as its share of the pixel's cycles, so a
module that mostly waits for tokens looks it. Programs of thousands of
instructions draw quickly. Under
the chart, each module's cycles split into busy, token wait, memory wait and
idle. matplotlib is imported only here, and only when drawing.
"""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

import numpy as np

from vtasm.errors import UsageError
from vtasm.fileio import write_atomic
from vtasm.locate import Locator, dram_rows, executable
from vtasm.program import Program

from .chrome_trace import category, insn_name
from .plan import MODULES
from .run import TimingResult

ROWS = ("fetch", *MODULES, "memory read", "memory write")
# Colour of each kind of bar, in legend order.
COLOURS = {
    "load inp": "#1f77b4", "load wgt": "#17becf", "uop": "#9467bd", "acc": "#8c564b",
    "gemm": "#d62728", "alu": "#ff7f0e", "store": "#2ca02c", "sync": "#7f7f7f", "finish": "#000000",
    "fetch": "#bcbd22", "token wait": "#c8c8c8",
}
_CLIENT_KIND = {"fetch": "fetch", "uop": "uop", "inp": "load inp", "wgt": "load wgt", "acc": "acc", "out": "store"}
# Utilisation segments and their colours.
SHARES = {"busy": "#4c72b0", "token": "#dd8452", "memory": "#c44e52", "idle": "#e5e5e5"}
_SHARE_LABELS = {"busy": "busy", "token": "token wait", "memory": "memory wait", "idle": "idle"}
WIDTH_IN, HEIGHT_IN, DPI = 15.0, 7.5, 110
_PLOT_PX = 0.8 * WIDTH_IN * DPI  # roughly the pixels across the time axis
_MAX_LABELS = 150
_CHAR_PX = 0.6 * 7 * DPI / 72  # rough width of a character of the 7-point bar labels
_MARK_LEVELS = 3  # layer names are staggered over this many lines above the rows, then left out
_MARK_BAND = 0.38  # height of one line of layer names, in rows


def _bars(result: TimingResult) -> dict[int, list[tuple[int, int, str, int]]]:
    """Per row: (start, end, kind, instruction index or -1), sorted by start."""
    rows: dict[int, list[tuple[int, int, str, int]]] = defaultdict(list)
    tl = result.timeline
    for _, accept, last, stalled in tl.fetches:
        # a chunk's dispatching, then the cycles it stalled on a full command queue, shown as a wait (the
        # report counts them under "token"; where in the chunk they fell is not kept, so they are drawn last)
        busy_end = max(last - stalled, accept + 1)
        rows[0].append((accept, busy_end, "fetch", -1))
        if last > busy_end:
            rows[0].append((busy_end, last, "token wait", -1))
    for it in tl.insns:
        row = 1 + it.module
        if it.start > it.ready:
            rows[row].append((it.ready, it.start, "token wait", -1))
        rows[row].append((it.start, max(it.end, it.start + 1), category(result.works[it.index]), it.index))
    for tr in tl.transfers:
        row = len(ROWS) - 1 if tr.client == "out" else len(ROWS) - 2
        rows[row].append((tr.first, tr.last + 1, _CLIENT_KIND.get(tr.client, "fetch"), -1))
    for bars in rows.values():
        bars.sort()
    return rows


def _merge(bars: list[tuple[int, int, str, int]], pixel: float) -> dict[str, list[tuple[float, float]]]:
    """Bars of one row as (start, width) per kind.

    A bar under three pixels wide joins the previous bar of its kind when at
    most a pixel lies between them (so do bars after such a narrow one), and
    every bar is at least a pixel wide.
    """
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    last: dict[str, list[float]] = {}
    narrow = 3 * pixel
    for start, end, kind, _ in bars:
        run = last.get(kind)
        if run is not None and start - run[1] <= pixel and (end - start < narrow or run[1] - run[0] < narrow):
            run[1] = max(run[1], end)
            continue
        if run is not None:
            out[kind].append((run[0], max(run[1] - run[0], pixel)))
        last[kind] = [start, end]
    for kind, run in last.items():
        out[kind].append((run[0], max(run[1] - run[0], pixel)))
    return out


def _coverage(bars: list[tuple[int, int, str, int]], pixel: float):
    """For a crowded row: the pixel edges, and per kind the fraction of each pixel's cycles its bars cover."""
    end = max(e for _, e, _, _ in bars)
    edges = np.arange(0.0, end + pixel, pixel)
    shares = {}
    for kind in sorted({k for _, _, k, _ in bars}):
        starts = np.sort(np.array([s for s, _, k, _ in bars if k == kind], dtype=float))
        ends = np.sort(np.array([e for _, e, k, _ in bars if k == kind], dtype=float))
        # cycles covered before x: the sum over bars of (min(x, end) - start) for the bars begun by x
        before = []
        for a in (starts, ends):
            n = np.searchsorted(a, edges)
            before.append(n * edges - np.r_[0.0, np.cumsum(a)][n])
        shares[kind] = np.clip(np.diff(before[0] - before[1]) / pixel, 0.0, 1.0)
    return edges, shares


def _draw_crowded(ax, bars: list[tuple[int, int, str, int]], pixel: float, y: float, used: set[str]) -> None:
    """A row with more bars than it has room for, a pixel at a time: in each pixel the kinds' shares of its
    cycles as stacked heights (instructions from the bottom, token waits above them), so a module that mostly
    waits looks it. Drawn bar by bar, every bar a pixel wide at least, the short busy bars would cover the long
    waits between them."""
    edges, shares = _coverage(bars, pixel)
    band = 0.7
    bottom = np.full(edges.size - 1, y - band / 2)
    for kind in sorted(shares, key=lambda k: k == "token wait"):
        height = np.minimum(shares[kind] * band, y + band / 2 - bottom)
        if (height > 0).any():
            used.add(kind)
            top = bottom + height  # one filled outline per kind, stepping pixel by pixel
            ax.fill_between(edges, np.r_[bottom, bottom[-1]], np.r_[top, top[-1]], step="post",
                            color=COLOURS[kind], linewidth=0, zorder=2)
        bottom = bottom + height


def _stored_tensor(program: Program, locator: Locator, index: int) -> str | None:
    """The tensor (segment) a STORE writes, else None."""
    insn = executable(program.instructions[index])
    rows = dram_rows(program, insn) if insn.kind == "store" else None
    return None if rows is None else locator.address(rows[0]).split("+")[0]


def layer_starts(result: TimingResult, program: Program) -> list[tuple[int, str]]:
    """(first cycle, name) of each layer, in program order.

    A layer is a run of instructions from one source line (an instruction without one belongs to the line
    before it) that store into one tensor (the next STORE's); it is named by that tensor and the line.
    """
    locator = Locator(program)
    lines = program.source_map or {}
    n = len(program.instructions)
    stored: list[str | None] = [None] * n
    for i in range(n - 1, -1, -1):  # each instruction's next STORE
        stored[i] = _stored_tensor(program, locator, i) or (stored[i + 1] if i + 1 < n else None)
    starts = {it.index: it.start for it in result.timeline.insns}
    marks: list[tuple[int, str]] = []
    key, loc = None, None
    for i in range(n):
        loc = lines.get(i, loc)
        if stored[i] is not None and (loc, stored[i]) != key and i in starts:
            key = (loc, stored[i])
            marks.append((starts[i], stored[i] + (f" (line {loc.line})" if loc is not None else "")))
    return marks


def _stagger(marks: list[tuple[int, str]], pixel: float) -> list[tuple[int, str, int, bool]]:
    """(cycle, name, line, name left of the mark) of the names that fit: each on the first of the lines
    where it keeps 6 pixels from the name before it; a name that fits on none is left out."""
    ends = [-1e9] * _MARK_LEVELS
    placed = []
    for cycle, name in marks:
        x = cycle / pixel
        width = len(name) * _CHAR_PX + 4
        left = x + width > _PLOT_PX  # near the right end: the name goes left of its mark
        first, last = (x - width, x) if left else (x, x + width)
        level = next((k for k in range(_MARK_LEVELS) if ends[k] + 6 <= first), None)
        if level is not None:
            ends[level] = last
            placed.append((cycle, name, level, left))
    return placed


def _draw_layers(ax, result: TimingResult, program: Program, pixel: float, top: float) -> float:
    """A thin line at each layer's first cycle and its name above the rows; the new top of the axes."""
    marks = layer_starts(result, program)
    if len(marks) < 2 and not program.source_map:
        return top  # one unnamed piece of work: nothing to tell apart
    for cycle, _ in marks:
        ax.axvline(cycle, color="#333333", linewidth=0.7, linestyle=(0, (4, 2)), alpha=0.8, zorder=4)
    placed = _stagger(marks, pixel)
    for cycle, name, level, left in placed:
        ax.text(cycle + (-2 if left else 2) * pixel, top + (level + 0.5) * _MARK_BAND, name, fontsize=7,
                ha="right" if left else "left", va="center", color="#333333", zorder=5,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.6, "alpha": 0.9})  # over other marks
    return top + _MARK_BAND * (1 + max((p[2] for p in placed), default=-1))


def _title(result: TimingResult, program: Program, title: str | None) -> str:
    r = result.report
    text = (f"profile {r.profile}: {r.cycles:,} cycles = {r.seconds * 1e6:,.2f} \u00b5s at {r.clock_mhz:g} MHz, "
            f"{len(program.instructions):,} instructions")
    return f"{title} \u2014 {text}" if title else text


def _draw_timeline(ax, result: TimingResult, program: Program) -> None:
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    cycles = max(result.timeline.cycles, 1)
    pixel = cycles / _PLOT_PX
    n = len(ROWS)
    used: set[str] = set()
    labels: list[tuple[float, float, int, str]] = []
    for row, bars in _bars(result).items():
        y = n - 1 - row
        if 3 * len(bars) > _PLOT_PX:  # more bars than the row has room for
            _draw_crowded(ax, bars, pixel, y, used)
            continue
        for kind, spans in _merge(bars, pixel).items():
            used.add(kind)
            wait = kind == "token wait"
            height = 0.3 if wait else 0.7
            wide = [b for b in spans if b[1] >= 6 * pixel]  # wide bars get an edge, so neighbours stay apart
            thin = [b for b in spans if b[1] < 6 * pixel]
            for group, edge in ((wide, 0 if wait else 0.6), (thin, 0)):
                if group:
                    ax.broken_barh(group, (y - height / 2, height), facecolors=COLOURS[kind], edgecolors="white",
                                   linewidth=edge, zorder=1 if wait else 2)
        for s, e, _, i in bars:
            if i >= 0:
                name = insn_name(program, i)
                if e - s > (len(name) * _CHAR_PX + 8) * pixel:
                    labels.append((s, e, y, name))
    if len(labels) <= _MAX_LABELS:  # names inside the bars they fit in, when they are few
        for s, e, y, name in labels:
            ax.text((s + e) / 2, y, name, ha="center", va="center", fontsize=7, color="white", zorder=3)
    ax.set_xlim(-0.005 * cycles, 1.005 * cycles)  # a margin, so bars at either end stay clear of the frame
    ax.set_ylim(-0.6, _draw_layers(ax, result, program, pixel, n - 0.4))
    ax.set_yticks(range(n), list(reversed(ROWS)))
    ax.set_xlabel("cycles")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    mhz = result.report.clock_mhz
    top = ax.secondary_xaxis("top", functions=(lambda c: c / mhz, lambda us: us * mhz))
    top.set_xlabel("\u00b5s")
    top.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.6g}"))
    ax.grid(axis="x", color="#dddddd", linewidth=0.5)
    ax.set_axisbelow(True)
    handles = [Patch(facecolor=COLOURS[k], label=k) for k in COLOURS if k in used]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)


def _draw_shares(ax, result: TimingResult) -> None:
    modules = result.report.modules
    names = [m for m in ("fetch", *MODULES) if m in modules]
    cycles = max(result.report.cycles, 1)
    for y, name in enumerate(reversed(names)):
        left = 0.0
        for share, colour in SHARES.items():
            pct = 100 * modules[name].get(share, 0) / cycles
            ax.barh(y, pct, left=left, color=colour, height=0.7, label=_SHARE_LABELS[share] if y == 0 else None)
            if pct >= 6:
                ax.text(left + pct / 2, y, f"{pct:.0f}%", ha="center", va="center", fontsize=7,
                        color="black" if share == "idle" else "white")
            left += pct
    ax.set_xlim(0, 100)
    ax.set_yticks(range(len(names)), list(reversed(names)))
    ax.set_xlabel("share of the run's cycles (%)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)


def draw_gantt(result: TimingResult, program: Program, path: str | Path, title: str | None = None) -> None:
    """Write a PNG Gantt chart of a timing run of ``program`` (run with ``record=True``)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("drawing a timeline needs matplotlib: pip install 'vta-toolchain[plot]'") from None
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    timeline_ax, shares_ax = fig.subplots(2, 1, gridspec_kw={"height_ratios": (3, 1)})
    _draw_timeline(timeline_ax, result, program)
    _draw_shares(shares_ax, result)
    fig.suptitle(_title(result, program, title), fontsize=11)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    write_atomic(path, buf.getvalue())

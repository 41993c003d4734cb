"""Pareto fronts of a sweep and their pictures: latency against on-chip memory and against peak MACs."""

from __future__ import annotations

import io
import math
from collections import defaultdict
from pathlib import Path

from vtasm.fileio import write_atomic

ALL = "all workloads"
# (x column, axis label, file name)
AXES = (("onchip_bytes", "on-chip buffers (KiB: micro-op + input + weight + accumulator)", "pareto-memory.png"),
        ("peak_macs_per_cycle", "peak MACs per cycle (batch x block x block / cycles per GEMM step)",
         "pareto-macs.png"))


def front(rows: list[dict], x: str, y: str = "time_us") -> list[dict]:
    """The rows no other row beats on both x and y (both minimised), in increasing x."""
    best: list[dict] = []
    for row in sorted(rows, key=lambda r: (r[x], r[y])):
        if not best or row[y] < best[-1][y]:
            best.append(row)
    return best


def _variant(row: dict) -> tuple:
    return row["config"], row["hardware"], row["threads"]


def by_workload(rows: list[dict]) -> dict[str, list[dict]]:
    """The finished rows of each workload; with several workloads also their sum, per configuration
    variant that every workload finished on (one network: the layers run one after another)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        if row["status"] == "ok":
            groups[row["workload"]].append(row)
    names = list(dict.fromkeys(r["workload"] for r in rows))  # in the order the rows come (the spec's)
    if len(names) > 1:
        sums: dict[tuple, dict] = {}
        counts: dict[tuple, int] = defaultdict(int)
        for row in (r for name in names for r in groups.get(name, [])):
            v = _variant(row)
            counts[v] += 1
            total = sums.setdefault(v, {**row, "workload": ALL, "time_us": 0.0, "cycles": 0})
            total["time_us"] += row["time_us"]
            total["cycles"] += row["cycles"]
        whole = [total for v, total in sums.items() if counts[v] == len(names)]
        return {ALL: whole, **{name: groups.get(name, []) for name in names}}
    return {name: groups.get(name, []) for name in names}


def front_text(rows: list[dict]) -> str:
    """Each workload's front against on-chip memory, one line per point on it."""
    lines = []
    for name, mine in by_workload(rows).items():
        if not mine:
            lines.append(f"{name}: no finished point")
            continue
        lines.append(f"{name}: {len(mine)} points, {len(front(mine, 'onchip_bytes'))} on the latency/memory front")
        for r in front(mine, "onchip_bytes"):
            threads = f", {r['threads']} thread{'s' if int(r['threads']) != 1 else ''}" if r["threads"] else ""
            lines.append(f"  {r['time_us'] / 1e3:10.3f} ms  {r['onchip_bytes'] / 1024:8.0f} KiB  {r['config']}  "
                         f"[{r['hardware']}{threads}]")
    return "\n".join(lines) + "\n"


# Tick mantissas tried on a log axis, sparsest first: base 10 (1-2-5 and denser) and base 2 (octaves, halves).
_SUBS = {10: ((1.0,), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)), 2: ((1.0,), (1.0, 1.5))}
_LINEAR_STEPS = (1.0, 2.0, 2.5, 5.0)


def _log_candidates(lo: float, hi: float, base: int, subs: tuple[float, ...]) -> list[float]:
    """The ticks ``sub * base**k`` inside [lo, hi]."""
    first = math.floor(math.log(lo, base)) - 1
    last = math.ceil(math.log(hi, base)) + 1
    ticks = (s * float(base) ** k for k in range(first, last + 1) for s in subs)
    return sorted(t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9))


def _linear_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """Evenly spaced round ticks inside [lo, hi] (a narrow log range reads best with these)."""
    raw = (hi - lo) / target
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next((s * magnitude for s in _LINEAR_STEPS if s * magnitude >= raw), 10 * magnitude)
    first = math.ceil(lo / step)
    return [round(k * step, 12) for k in range(first, math.floor(hi / step) + 1)]


def log_ticks(lo: float, hi: float, base: int = 10) -> list[float]:
    """Labelled ticks for a log axis over [lo, hi]: the sparsest round set with 4 to 9 ticks, else one with
    3, else evenly spaced round values (a range too narrow for round log ticks)."""
    sets = [_log_candidates(lo, hi, base, subs) for subs in _SUBS[base]]
    for ticks in sets:
        if 4 <= len(ticks) <= 9:
            return ticks
    fitting = [t for t in sets if 3 <= len(t) <= 9]
    if fitting:
        return fitting[0]
    if len(sets[0]) > 9:  # many decades: every k-th power
        return sets[0][::-(-len(sets[0]) // 9)]
    return _linear_ticks(lo, hi)


def _label_ticks(ax, base_x: int) -> None:
    """Readable labelled ticks on both log axes of ``ax`` (at the limits the points gave it)."""
    import matplotlib.ticker

    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    for axis, limits, base in ((ax.xaxis, ax.get_xlim(), base_x), (ax.yaxis, ax.get_ylim(), 10)):
        axis.set_major_locator(matplotlib.ticker.FixedLocator(log_ticks(*limits, base=base)))
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlim(*ax.get_xlim())  # the fixed ticks belong to these limits
    ax.set_ylim(*ax.get_ylim())


def _shapes(groups: dict[str, list[dict]]) -> dict[tuple[int, int], tuple[str, str]]:
    """A marker and a legend label per (LOG_BATCH, LOG_BLOCK) of the points: the GEMM core's shape."""
    keys = sorted({(r.get("LOG_BATCH", 0), r["LOG_BLOCK"]) for v in groups.values() for r in v})
    batches = {b for b, _ in keys}
    return {(b, k): ("o^sDvP*Xph<>"[i % 12],
                     f"batch {1 << b}, block {1 << k}" if len(batches) > 1 else f"block {1 << k}")
            for i, (b, k) in enumerate(keys)}


def _draw_panel(ax, name: str, mine: list[dict], x: str, colours: dict, shapes: dict) -> None:
    """One workload's points (hollow, so points on top of each other stay visible) and its front."""
    scale = 1024 if x == "onchip_bytes" else 1
    for r in mine:
        ax.scatter(r[x] / scale, r["time_us"] / 1e3, facecolors="none", edgecolors=[colours[r["hardware"]]],
                   marker=shapes[(r.get("LOG_BATCH", 0), r["LOG_BLOCK"])][0], s=34, alpha=0.85, linewidths=1.1)
    best = front(mine, x)
    xs = [r[x] / scale for r in best]
    ys = [r["time_us"] / 1e3 for r in best]
    ax.step(xs, ys, where="post", color="black", linewidth=1.1, zorder=3)
    ax.scatter(xs, ys, facecolors="none", edgecolors="black", s=90, linewidths=1.0, zorder=4)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.margins(0.08)
    _label_ticks(ax, 2 if x == "peak_macs_per_cycle" else 10)
    ax.tick_params(axis="both", labelsize=7, which="both")
    ax.set_title(f"{name} ({len(best)} of {len(mine)} on the front)", fontsize=9,
                 fontweight="bold" if name == ALL else "normal")
    ax.grid(True, which="both", linewidth=0.3, alpha=0.5)


def draw_fronts(rows: list[dict], directory: str | Path, title: str) -> list[Path]:
    """Draw ``pareto-memory.png`` and ``pareto-macs.png``: a panel per workload, a mark per point (colour: the
    hardware; shape: the GEMM core's batch and block)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    groups = {k: v for k, v in by_workload(rows).items() if v}
    if not groups:
        return []
    hardware = sorted({r["hardware"] for v in groups.values() for r in v})
    colours = {h: plt.get_cmap("tab10")(i % 10) for i, h in enumerate(hardware)}
    shapes = _shapes(groups)
    columns = min(4, len(groups))
    lines = -(-len(groups) // columns)
    handles = [Line2D([], [], color=colours[h], marker="o", linestyle="", label=h) for h in hardware]
    handles += [Line2D([], [], color="gray", marker=m, markerfacecolor="none", linestyle="", label=text)
                for m, text in shapes.values()]
    handles.append(Line2D([], [], color="black", marker="o", markerfacecolor="none", label="Pareto front"))
    width = 4.2 * columns
    entry_in = 0.45 + 0.075 * max(len(h.get_label()) for h in handles)  # marker, gap and 8-point text
    ncol = max(1, min(len(handles), 6, int(0.95 * width / entry_in)))
    legend_in = 0.18 * -(-len(handles) // ncol) + 0.2
    written = []
    for x, label, filename in AXES:
        height = 3.4 * lines + 0.9 + legend_in
        fig, axes = plt.subplots(lines, columns, figsize=(width, height), dpi=110, squeeze=False)
        for ax in axes.flat[len(groups):]:
            ax.set_visible(False)
        for ax, (name, mine) in zip(axes.flat, groups.items(), strict=False):
            _draw_panel(ax, name, mine, x, colours, shapes)
        for ax in axes[:, 0]:
            ax.set_ylabel("latency (ms)", fontsize=8)
        for ax in axes[-1, :]:
            ax.set_xlabel(label if columns > 1 else label.replace(" (", "\n("), fontsize=8)
        fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
        fig.suptitle(f"{title}: latency against {'on-chip memory' if x == 'onchip_bytes' else 'peak MACs'}",
                     fontsize=11)
        fig.tight_layout(rect=(0, legend_in / height, 1, 0.97))
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        plt.close(fig)
        path = Path(directory) / filename
        write_atomic(path, buffer.getvalue())
        written.append(path)
    return written

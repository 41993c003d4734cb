"""Pareto fronts of a sweep and their pictures: latency against on-chip memory and against peak MACs."""

from __future__ import annotations

import io
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


def draw_fronts(rows: list[dict], directory: str | Path, title: str) -> list[Path]:
    """Draw ``pareto-memory.png`` and ``pareto-macs.png``: a panel per workload, a mark per point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    from matplotlib.lines import Line2D

    groups = {k: v for k, v in by_workload(rows).items() if v}
    if not groups:
        return []
    hardware = sorted({r["hardware"] for v in groups.values() for r in v})
    blocks = sorted({r["LOG_BLOCK"] for v in groups.values() for r in v})
    colours = {h: plt.get_cmap("tab10")(i % 10) for i, h in enumerate(hardware)}
    markers = {b: "o^sDvP*"[i % 7] for i, b in enumerate(blocks)}
    columns = min(4, len(groups))
    lines = -(-len(groups) // columns)
    written = []
    for x, label, filename in AXES:
        fig, axes = plt.subplots(lines, columns, figsize=(4.2 * columns, 3.4 * lines + 1.2), dpi=110, squeeze=False)
        for ax in axes.flat[len(groups):]:
            ax.set_visible(False)
        for ax, (name, mine) in zip(axes.flat, groups.items(), strict=False):
            scale = 1024 if x == "onchip_bytes" else 1
            for r in mine:
                ax.scatter(r[x] / scale, r["time_us"] / 1e3, color=colours[r["hardware"]],
                           marker=markers[r["LOG_BLOCK"]], s=22, alpha=0.75, linewidths=0)
            best = front(mine, x)
            xs = [r[x] / scale for r in best]
            ys = [r["time_us"] / 1e3 for r in best]
            ax.step(xs, ys, where="post", color="black", linewidth=1.1, zorder=3)
            ax.scatter(xs, ys, facecolors="none", edgecolors="black", s=60, linewidths=1.0, zorder=4)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=2, subs=(1.0, 1.5)))
            ax.xaxis.set_minor_locator(matplotlib.ticker.LogLocator(base=2, subs=(1.25, 1.75)))
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.tick_params(axis="both", labelsize=7, which="both")
            ax.set_title(f"{name} ({len(best)} of {len(mine)} on the front)", fontsize=9,
                         fontweight="bold" if name == ALL else "normal")
            ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
        for ax in axes[:, 0]:
            ax.set_ylabel("latency (ms)", fontsize=8)
        for ax in axes[-1, :]:
            ax.set_xlabel(label, fontsize=8)
        handles = [Line2D([], [], color=colours[h], marker="o", linestyle="", label=h) for h in hardware]
        handles += [Line2D([], [], color="gray", marker=markers[b], linestyle="", label=f"block {1 << b}")
                    for b in blocks]
        handles.append(Line2D([], [], color="black", marker="o", markerfacecolor="none", label="Pareto front"))
        fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=8, frameon=False)
        fig.suptitle(f"{title}: latency against {'on-chip memory' if x == 'onchip_bytes' else 'peak MACs'}",
                     fontsize=11)
        fig.tight_layout(rect=(0, 0.5 / (3.4 * lines + 1.2) + 0.04, 1, 0.97))
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        plt.close(fig)
        path = Path(directory) / filename
        write_atomic(path, buffer.getvalue())
        written.append(path)
    return written

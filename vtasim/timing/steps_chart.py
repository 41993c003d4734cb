"""A network's run as a picture: VTA launches and host steps end to end on one time axis (PNG).

Two rows, VTA and host; each step a bar as long as its time (VTA's from the
timing model, the host's as measured on this machine), labelled with its
name when there is room, so where the time of a whole network goes shows at
a glance. Under it, the share of the run each side takes. matplotlib is
imported only here, and only when drawing.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

from vtasim.timing.network_timing import NetworkTiming
from vtasm.errors import UsageError
from vtasm.fileio import write_atomic
from vtasm.formats.network import Side

COLOURS = {Side.VTA: "#d62728", Side.HOST: "#1f77b4"}


def draw_steps(timing: NetworkTiming, path: str | Path, title: str) -> None:
    """Write the PNG of a network's steps (a host step not run takes no time)."""
    steps = [dataclasses.replace(s, seconds=s.seconds or 0.0) for s in timing.steps]
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("drawing a timeline needs matplotlib: pip install 'vta-toolchain[plot]'") from None
    fig = Figure(figsize=(12, 3.6), dpi=110, layout="constrained")
    ax, shares = fig.subplots(2, 1, gridspec_kw={"height_ratios": (3, 1)})
    total = sum(s.seconds for s in steps) or 1.0
    start = 0.0
    rows = {Side.VTA: 1, Side.HOST: 0}
    for s in steps:
        ms = s.seconds * 1e3
        ax.broken_barh([(start, max(ms, total * 1e3 / 2000))], (rows[s.kind] - 0.35, 0.7),
                       facecolors=COLOURS[s.kind], edgecolors="white", linewidth=0.5)
        if ms > total * 1e3 * 0.06:
            ax.text(start + ms / 2, rows[s.kind], s.name if ms < total * 1e3 * 0.15 else f"{s.name}: {s.what}"[:40],
                    ha="center", va="center", color="white", fontsize=8, clip_on=True)
        start += ms
    ax.set_yticks([0, 1], ["host CPU\n(measured)", "VTA\n(timing model)"])
    ax.set_xlim(0, total * 1e3)
    ax.set_ylim(-0.6, 1.6)
    ax.set_xlabel("time (ms)")
    ax.grid(axis="x", alpha=0.3)
    vta = sum(s.seconds for s in steps if s.kind == Side.VTA)
    host = total - vta if steps else 0.0
    shares.barh([0], [vta / total * 100], color=COLOURS[Side.VTA], label=f"VTA {vta * 1e3:,.2f} ms")
    shares.barh([0], [host / total * 100], left=[vta / total * 100], color=COLOURS[Side.HOST],
                label=f"host {host * 1e3:,.2f} ms")
    shares.set_xlim(0, 100)
    shares.set_yticks([])
    shares.set_xlabel("share of the run (%)")
    shares.legend(loc="upper center", bbox_to_anchor=(0.5, -0.9), ncol=2, frameon=False, fontsize=9)
    launches = sum(s.kind == Side.VTA for s in steps)
    fig.suptitle(f"{title}: {launches} VTA launch{'es' if launches != 1 else ''} and {len(steps) - launches} "
                 f"host step{'s' if len(steps) - launches != 1 else ''}, {total * 1e3:,.2f} ms per run", fontsize=11)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    write_atomic(path, buf.getvalue())

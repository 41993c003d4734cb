"""ResNet-18 from ONNX to vtasim: import, compile, run, check against numpy, chart each layer's time.

    python examples/resnet18/run.py OUT_DIR [--chart FILE.png] [--timing chisel-2019]

OUT_DIR holds what build_resnet18.py wrote. The model is imported and
quantised on calibration.npy and compiled as one program (the weights packed
in); input.npy runs on vtasim and the logits are compared bit for bit with the
numpy execution of the quantised network. The timing model (the default
profile, hls, or the one --timing names; the tiles are chosen for it) gives
each layer's time: the cycles from the end of the previous layer's last
instruction to the end of its own (layers overlap a little in the pipeline).
Exit 1 if the logits differ.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from vtacc.model import CompiledModel, compile_model
from vtacc.onnx.reference import run_int8
from vtacc.reports.bound import network_bound
from vtasim.runs.session import run_arrays
from vtasim.timing.profile import load_profile
from vtasm.config import default_config


def layer_bounds(model: CompiledModel) -> dict[str, float]:
    """Each layer's bound (vtacc/reports/bound.py: the work its arithmetic needs, against its compulsory bytes)."""
    compiled = model.compiled
    by_result = {need.name: need.bound for need in network_bound(compiled).needs}
    bounds: dict[str, float] = {}
    for planned in compiled.planned:
        bounds[planned.op.kernel] = bounds.get(planned.op.kernel, 0.0) + by_result.get(planned.op.out.name, 0.0)
    return bounds


def layer_cycles(model: CompiledModel) -> list[tuple[str, int]]:
    """(layer, cycles) in program order, each layer ending where its last instruction ends."""
    compiled = model.compiled
    timeline = compiled.timed.timeline
    group_of = [e.group for e in compiled.generated.emitted]
    ends: dict[str, int] = {}
    order: list[str] = []
    for planned in compiled.planned:
        name = planned.op.kernel
        if name not in ends:
            order.append(name)
            ends[name] = 0
        for t in timeline.insns:
            if group_of[t.index] is not None and group_of[t.index] in planned.groups:
                ends[name] = max(ends[name], t.end)
    out, previous = [], 0
    for name in order:
        out.append((name, max(0, ends[name] - previous)))
        previous = max(previous, ends[name])
    return out


# The chart's colours: what each kind of layer is, tried in this order on the layer's name.
KINDS = (("add", "#dd8452", "convolution with the residual add (and ReLU) in its epilogue"),
         ("_maxpool", "#8172b3", "convolution with the max pool after it folded into its tiles"),
         ("conv", "#4c72b0", "convolution (its batch norm, and a ReLU after it, folded in)"),
         ("", "#55a868", "other: pooling, fully connected (logits)"))


def colour_of(name: str) -> str:
    """The chart colour of a layer: the first of KINDS whose key is in its name."""
    return next(colour for key, colour, _ in KINDS if key in name)


def draw(layers: list[tuple[str, int]], bounds: dict[str, float], mhz: float, path: Path, title: str) -> None:
    """A bar per layer (its time in ms), coloured by kind, with a legend of the kinds drawn; the part of a bar
    above the layer's bound, what it loses to it, hatched."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(12, 4.5))
    names = [n for n, _ in layers]
    ms = [c / mhz / 1000 for _, c in layers]
    colours = [colour_of(n) for n in names]
    bound_ms = [min(m, bounds.get(n, c) / mhz / 1000) for n, m, (_, c) in zip(names, ms, layers, strict=True)]
    lost = [m - b for m, b in zip(ms, bound_ms, strict=True)]
    ax.bar(range(len(names)), bound_ms, color=colours)
    ax.bar(range(len(names)), lost, bottom=bound_ms, color="white", edgecolor=colours, hatch="////", linewidth=0)
    ax.set_xticks(range(len(names)), names, rotation=75, ha="right", fontsize=7)
    ax.set_ylim(0, 1.6 * max(ms))  # room above the bars for the legend
    ax.set_ylabel("time on VTA (ms)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(handles=[Patch(facecolor=c, label=text) for _, c, text in KINDS if c in colours]
              + [Patch(facecolor="white", edgecolor="grey", hatch="////", label="lost to the layer's bound "
                       "(its arithmetic's own work; vtacc --explain)")], loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--chart", type=Path, default=None)
    parser.add_argument("--timing", default=None, metavar="PROFILE", help="hardware profile (default: hls)")
    args = parser.parse_args()
    started = time.perf_counter()
    model = compile_model(args.out / "resnet18.onnx", default_config(), args.out / "calibration.npy",
                          load_profile(args.timing))
    compile_s = time.perf_counter() - started
    qnet = model.imported.qnet
    x = qnet.quantise_input(np.load(args.out / "input.npy"))
    started = time.perf_counter()
    got, result = run_arrays(model.compiled.program, {model.input_name: x}, [model.output_name])
    run_s = time.perf_counter() - started
    logits = got[model.output_name]
    exact = np.array_equal(logits, run_int8(qnet, x)[qnet.network.output])
    profile = model.compiled.profile
    layers = layer_cycles(model)
    cycles = model.compiled.timed.report.cycles
    print(f"resnet18: import + compile {compile_s:.1f} s, {len(model.compiled.program.instructions):,} "
          f"instructions; vtasim run {run_s:.1f} s; logits {'bit-exact' if exact else 'DIFFER'} with numpy")
    print(f"resnet18: {cycles:,} cycles on {profile.name} = {cycles / profile.clock_mhz / 1000:.1f} ms at "
          f"{profile.clock_mhz:g} MHz")
    for name, c in sorted(layers, key=lambda item: -item[1])[:5]:
        print(f"  {name:<26} {c:>11,} cycles  {100 * c / cycles:5.1f} %")
    if args.chart is not None:
        draw(layers, layer_bounds(model), profile.clock_mhz, args.chart,
             f"ResNet-18 (random weights, int8) per layer on {profile.name}, {cycles / profile.clock_mhz / 1000:.1f}"
             f" ms in all (vtacc + timing model)")
        print(f"resnet18: per-layer chart {args.chart}")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())

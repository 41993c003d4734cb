"""What runs where in a compiled network: per step its operators, MACs and time, and each side's share.

VTA launches are timed by the timing model under the compiler's profile;
host steps are run here, on zero inputs, and timed (the median of three
runs): the same float32 code `vtasim run` executes. MACs of host nodes are
counted for the operators that multiply and accumulate (Conv,
ConvTranspose, Gemm, MatMul); element-wise and data-movement operators
count none.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from vtacc.onnx.kinds import layer_macs
from vtasim.host.step import node_macs, run_host_step
from vtasm.formats.network import HostStep, NetworkFile, Side


@dataclass
class StepFigures:
    """One step: where it runs, what it computes, its MACs and seconds."""

    where: Side
    name: str
    ops: str
    macs: int
    seconds: float


def _host_seconds(step: HostStep, net: NetworkFile) -> float:
    zeros = {t: np.zeros(net.tensors[t].shape, np.int8) for t in step.inputs}
    times = []
    for _ in range(3):
        started = time.perf_counter()
        run_host_step(step, zeros, net.tensors, net.constants, net.opset)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def step_figures(model) -> list[StepFigures]:
    """The figures of every step of a compiled model (vtacc.model.CompiledModel; its steps are the
    imported model's parts, in order)."""
    launches = iter(model.launches)
    ops_of = model.imported.qnet.network.ops
    figures = []
    for step, part in zip(model.network.steps, model.imported.parts, strict=True):
        if step.kind == Side.VTA:
            compiled = next(launches)
            report = compiled.timed.report
            ops = dict.fromkeys(ops_of.get(src, "?") for q in part.layers for src in q.layer.sources)
            macs = sum(layer_macs(q.layer) for q in part.layers)
            figures.append(StepFigures(Side.VTA, step.name, ", ".join(ops), macs,
                                       report.cycles / (compiled.profile.clock_mhz * 1e6)))
        else:
            figures.append(StepFigures(Side.HOST, step.name, ", ".join(n.op for n in step.nodes),
                                       sum(node_macs(n) for n in step.nodes), _host_seconds(step, model.network)))
    return figures


def summary(figures: list[StepFigures], profile_name: str) -> str:
    """A table of the steps and each side's share of the MACs and of the time."""
    total_macs = sum(f.macs for f in figures) or 1
    total_s = sum(f.seconds for f in figures) or 1.0
    lines = [f"where it runs (VTA: timing model, {profile_name}; host: measured here on zero inputs)"]
    for k, f in enumerate(figures):
        lines.append(f"  step {k + 1:<3} {f.where.label:<4} {f.name:<8} {f.macs:>15,} MACs {f.seconds * 1e3:10.3f} ms  "
                     f"{f.ops[:60]}")
    for side in Side:
        macs = sum(f.macs for f in figures if f.where == side)
        secs = sum(f.seconds for f in figures if f.where == side)
        count = sum(f.where == side for f in figures)
        lines.append(f"  {side.label}: {count} step{'s' if count != 1 else ''}, {macs:,} MACs "
                     f"({100 * macs / total_macs:.1f}%), {secs * 1e3:.3f} ms ({100 * secs / total_s:.1f}% of the time)")
    return "\n".join(lines) + "\n"

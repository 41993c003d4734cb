"""What runs where in a compiled network: per step its operators, MACs and time, and each side's share.

VTA launches are timed by the timing model under the compiler's profile;
host steps are run here, on zero inputs, and timed (the median of three
runs): the same float32 code `vtasim run` executes. The report is
vtasim's network timing (vtasim.timing.network_timing), with the MACs the
compiled model knows: a launch's layers', and a host node's for the
operators that multiply and accumulate (Conv, ConvTranspose, Gemm,
MatMul); element-wise and data-movement operators count none.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from vtacc.onnx.kinds import layer_macs
from vtasim.host.step import node_macs, run_host_step
from vtasim.timing.network_timing import NetworkTiming, StepTiming
from vtasm.formats.network import HostStep, NetworkFile, Side


def _host_seconds(step: HostStep, net: NetworkFile) -> float:
    zeros = {t: np.zeros(net.tensors[t].shape, np.int8) for t in step.inputs}
    times = []
    for _ in range(3):
        started = time.perf_counter()
        run_host_step(step, zeros, net.tensors, net.constants, net.opset)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def placement(model) -> NetworkTiming:
    """The timing of every step of a compiled model (vtacc.model.CompiledModel; its steps are the
    imported model's parts, in order), with each step's MACs."""
    launches = iter(model.launches)
    ops_of = model.imported.qnet.network.ops
    profile = model.launches[0].profile if model.launches else None
    steps = []
    for k, (step, part) in enumerate(zip(model.network.steps, model.imported.parts, strict=True)):
        if step.kind == Side.VTA:
            compiled = next(launches)
            cycles = compiled.timed.report.cycles
            ops = dict.fromkeys(ops_of.get(src, "?") for q in part.layers for src in q.layer.sources)
            steps.append(StepTiming(k + 1, Side.VTA, step.name, f"{cycles:,} cycles", cycles,
                                    cycles / (compiled.profile.clock_mhz * 1e6),
                                    sum(layer_macs(q.layer) for q in part.layers), ", ".join(ops)))
        else:
            steps.append(StepTiming(k + 1, Side.HOST, step.name, ", ".join(n.op for n in step.nodes), None,
                                    _host_seconds(step, model.network), sum(node_macs(n) for n in step.nodes)))
    return NetworkTiming(profile.name if profile else "-", profile.clock_mhz if profile else 0.0, tuple(steps))


def summary(timing: NetworkTiming) -> str:
    """The placement table: the steps, the totals and each side's share of the MACs and of the time."""
    return timing.text(f"where it runs (VTA: timing model, {timing.profile}; host: measured here on zero inputs)")

"""The quantised network executed in numpy, integer for integer: what VTA must compute bit for bit.

Each layer is computed by its kind's int8 rule (kinds/), written from the quantiser's definitions and the
kernel language's, on integer arithmetic of its own (exact.py), not the compiler's: accumulators are
int32 (wrapping), shifts are arithmetic (rounding toward minus infinity), stores keep the low 8 bits.
"""

from __future__ import annotations

import numpy as np

from vtasim.host.step import run_host_step
from vtasm.formats.network import Side

from .exact import low_byte
from .kinds import rules
from .partition import host_step, net_tensors, partition, step_names
from .quantised import QuantisedNetwork


def run_int8(qnet: QuantisedNetwork, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every int8 tensor of the quantised network on the int8 input ``x`` (host steps computed as the
    simulator computes them: the same float32 numerics, vtasim.host)."""
    net = qnet.network
    values = {net.input: np.asarray(x, dtype=np.int8)}
    parts = partition(qnet)
    tensors = net_tensors(qnet, parts)
    for part, name in zip(parts, step_names(parts), strict=True):
        if part.kind == Side.HOST:
            values.update(run_host_step(host_step(part, qnet, name), values, tensors, net.constants, net.opset))
            continue
        for q in part.layers:
            values[q.layer.output] = low_byte(rules(q.kind).int8(q, [values[t] for t in q.layer.inputs]))
    return values

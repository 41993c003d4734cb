"""Where precision goes: per tensor, the int8 network's values against the float network's (SQNR in dB).

Both networks run on the same calibration inputs (a few of them, a model
batch at a time); the int8 values are dequantised at their scales, so each
figure measures everything lost up to that tensor: the input's rounding,
every layer's weights, shifts and clipping, and the host steps' requantising.
"""

from __future__ import annotations

import math

import numpy as np

from vtasim.host.quant import dequantise

from .float_run import batches, run_float
from .quantised import QuantisedNetwork
from .reference import run_int8

SAMPLES = 2  # enough to rank the layers; each costs a float and an int8 run of the network


def sqnr_db(signal: float, noise: float) -> float:
    """10 log10(signal / noise); infinite for an exact result."""
    if noise <= 0:
        return math.inf
    return 10 * math.log10(signal / noise) if signal > 0 else -math.inf


def measure(qnet: QuantisedNetwork, data: np.ndarray, samples: int = SAMPLES,
            computed: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] | None = None) -> dict[str, float]:
    """SQNR in dB of every int8 tensor the network computes, over the first ``samples`` inputs of ``data``;
    on the way, each output's values beyond its int8 range (``qnet.clipped``) and, for an output of class
    scores ([N, classes], classes > 1), on how many inputs its top class is the float network's
    (``qnet.top1``). ``computed``: the float and int8 values of those inputs' pieces, if a pass already
    made them (correct.correct_biases)."""
    net = qnet.network
    signal: dict[str, float] = {}
    noise: dict[str, float] = {}
    qnet.clipped, qnet.top1 = {t: 0 for t in net.outputs}, {}
    kept, qnet.float_sample = qnet.float_sample, None  # what calibration computed of these inputs, if it did
    pieces = computed if computed is not None else (
        (kept if kept is not None and len(piece) == samples else run_float(net, piece),
         run_int8(qnet, qnet.quantise_input(piece))) for piece in batches(net, data[:samples]))
    for want, got in pieces:
        for t, q in got.items():
            if t == net.input or t not in want or t not in qnet.exps:
                continue
            f = np.asarray(want[t], dtype=np.float64).reshape(-1)  # squares of float32 values can overflow it
            err = dequantise(q, qnet.exps[t], np.float64).reshape(-1)  # one temporary: a VGG's are 50 MB
            err *= -qnet.mantissas.get(t, 1.0)
            err += f
            signal[t] = signal.get(t, 0.0) + float(np.dot(f, f))
            noise[t] = noise.get(t, 0.0) + float(np.dot(err, err))
            f = f.reshape(q.shape)
            if t in qnet.clipped:
                _output_checks(qnet, t, f, q)
    return {t: sqnr_db(signal[t], noise[t]) for t in signal}


def _output_checks(qnet: QuantisedNetwork, t: str, f: np.ndarray, q: np.ndarray) -> None:
    """Count an output's values beyond its int8 range and, for class scores, the inputs whose top class
    the int8 network keeps."""
    qnet.clipped[t] += int(np.sum(np.abs(f) > 127.5 * qnet.scale(t)))
    rows = f.reshape(f.shape[0], -1) if f.ndim >= 2 else None
    if rows is not None and rows.shape[1] > 1 and f.shape[1] == rows.shape[1]:
        agree = int(np.sum(np.argmax(rows, axis=1) == np.argmax(q.reshape(rows.shape), axis=1)))
        done, total = qnet.top1.get(t, (0, 0))
        qnet.top1[t] = (done + agree, total + rows.shape[0])

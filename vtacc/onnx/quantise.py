"""Float layers -> int8 layers whose every rescaling is a shift.

Every activation tensor gets a power-of-two scale 2**e, chosen so that the
largest magnitude seen on the calibration inputs fits int8 (or taken from
the model's QuantizeLinear scale, rounded to a power of two). Weights get one
power-of-two scale per output channel; a convolution's accumulator then has
scale 2**(e_x + e_w[c]) and its requantisation to the output is a right shift
by e_y - e_x - e_w[c] (per channel when they differ). The rounding constant
2**(shift-1) rides along in the int32 bias. Pooling, averages, ReLUs and
concatenations keep their input's scale, so the tensors they join share one.
"""

from __future__ import annotations

import math

import numpy as np

from vtasm.errors import ModelError
from vtasm.formats.network import EXP_LIMIT

from .calibrate import Statistics, calibrate
from .convert import Layer, LayerKind, Network
from .kinds import rules
from .quantised import CoarserOutput, QLayer, QuantisedNetwork, exponent_for


class _Ties:
    """Tensors that must share one scale (pooling keeps it, a concatenation joins its parts')."""

    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, t: str) -> str:
        while self.parent.get(t, t) != t:
            t = self.parent[t]
        return t

    def join(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def quantise(net: Network, calibration: np.ndarray | None, method: str = "mse", keep: int = 0) -> QuantisedNetwork:
    """Choose every scale (from the calibration inputs and the model's hints) and quantise every layer.

    ``method``: "max" gives each tensor the finest scale that holds its largest calibration magnitude;
    "mse" the power-of-two scale with the least squared error over the calibration values (it may clip
    rare large values for finer steps). ``keep``: hold the float activations of the first ``keep``
    calibration inputs when calibration computed them in one piece (QuantisedNetwork.float_sample).
    """
    notes: list[str] = []
    tensors = [net.input] + [t for layer in net.layers for t in layer.outputs if t]
    stats: dict[str, Statistics] = {}
    sample = None
    if calibration is not None:
        stats, sample = calibrate(net, calibration, keep)
    ranges = {t: s.largest for t, s in stats.items()}
    raw: dict[str, int] = {}
    for t in tensors:
        if t in net.hints:
            exact = math.log2(net.hints[t])
            raw[t] = round(exact)
            if abs(exact - raw[t]) > 1e-9:
                error = abs(2.0 ** raw[t] / net.hints[t] - 1)
                notes.append(f"tensor '{t}': scale {net.hints[t]:.6g} is not a power of two; using 2^{raw[t]} "
                             f"({error:.1%} off)")
        elif t in stats:  # the input and the outputs hold their whole calibration range: nothing clips
            raw[t] = exponent_for(ranges[t]) if t == net.input or t in net.outputs else stats[t].exponent(method)
        else:
            raise ModelError(f"{net.name}: tensor '{t}' has no scale: the model is not fully quantised "
                             "(QuantizeLinear/DequantizeLinear), so give calibration inputs (--calibrate data.npy)")
    ties = _Ties()
    for layer in net.layers:
        if layer.kind != LayerKind.HOST and rules(layer.kind).keeps_scale:
            for t in layer.inputs:
                ties.join(t, layer.output)
    shared: dict[str, int] = {}
    for t in tensors:
        root = ties.find(t)
        shared[root] = max(shared.get(root, raw[t]), raw[t])
    exps = {t: shared[ties.find(t)] for t in tensors}
    for t, e in exps.items():
        if abs(e) > EXP_LIMIT:
            producer = next((layer for layer in net.layers if t in layer.outputs), None)
            where = f"layer {producer.name} ({', '.join(producer.sources)})" if producer else f"tensor '{t}'"
            raise ModelError(f"{net.name}: {where}: its values (calibration range +-{ranges.get(t, 0):.3g}) need a "
                             f"scale 2^{e}, outside the 2^-{EXP_LIMIT}..2^{EXP_LIMIT} a network file holds",
                             node=producer.sources[0] if producer and producer.sources else None)
    layers: list[QLayer] = []
    used: set[str] = set()  # tensors the layers quantised so far read or write: their scales are final
    for layer in net.layers:
        try:
            q = _quantise_layer(layer, exps, net.shapes, notes)
        except CoarserOutput as need:
            _coarser_output(net, layer, exps, ties, used, need.exponent, notes)
            q = _quantise_layer(layer, exps, net.shapes, notes)
        layers.append(q)
        used.update(layer.inputs + layer.outputs)
    return QuantisedNetwork(net, layers, exps, ranges, notes, float_sample=sample)


def _coarser_output(net: Network, layer: Layer, exps: dict[str, int], ties: _Ties, used: set[str], exponent: int,
                    notes: list[str]) -> None:
    """Give ``layer``'s output (and the tensors that share its scale) the accumulator's scale 2^exponent: a
    finer one would only add zero bits below the accumulator's, by a left shift the requantisation does not
    make. Refused when a layer already quantised uses one of those tensors at the finer scale."""
    old = exps[layer.output]
    group = [t for t in exps if ties.find(t) == ties.find(layer.output)]
    if any(t in used for t in group) or exponent > EXP_LIMIT:
        raise ModelError(f"layer {layer.name}: its output scale 2^{old} is finer than its accumulator's (2^{exponent}"
                         "); the requantisation would be a left shift", node=layer.sources[0])
    for t in group:
        exps[t] = exponent
    notes.append(f"layer {layer.name}: output scale 2^{exponent}, its accumulator's, not 2^{old} (the finer one "
                 "would only add zero bits)")


def _bounds(layer: Layer, e: int) -> tuple[int, int]:
    scale = 2.0 ** e
    low = -128 if layer.low == -math.inf else max(-128, min(127, math.ceil(layer.low / scale - 1e-9)))
    high = 127 if layer.high == math.inf else max(-128, min(127, math.floor(layer.high / scale + 1e-9)))
    return low, high


def _quantise_layer(layer: Layer, exps: dict[str, int], shapes: dict[str, tuple[int, ...]],
                    notes: list[str]) -> QLayer:
    e_y = exps[layer.output]
    low, high = _bounds(layer, e_y)
    q = QLayer(layer, [exps[t] for t in layer.inputs], e_y, low=low, high=high)
    if layer.kind != LayerKind.HOST:  # a host node computes in float32 between its input and output scales
        rules(layer.kind).quantise(q, shapes, notes)
    return q

"""Float layers -> int8 layers whose every rescaling is a shift.

Every activation tensor gets a scale m * 2**e. Pooling, averages, ReLUs and
concatenations keep their input's scale, so the tensors they join share one;
an addition aligns its inputs by shifts, so its inputs and output share the
mantissa m. Each such group's mantissa (one of 16 steps of an octave) and
exponents are those with the least squared error on the calibration inputs
(each tensor's relative to its own energy): a tensor whose range falls just
past a power of two no longer gives up nearly a bit. The model's input and
outputs (what users quantise and read) keep m = 1; the tensors host nodes read
and write take mantissas too (the network file holds them). A QuantizeLinear
scale is rounded to a power of two. Weights get one scale per output channel,
m_y / m_x times a power of two, so that a convolution's accumulator has scale
m_y * 2**(e_x + e_w[c]) and its requantisation to the output is a right
shift by e_y - e_x - e_w[c] (per channel when they differ). The rounding
constant 2**(shift-1) rides along in the int32 bias. The weights' rounding
errs by a little on each; over a layer's mean input (from the calibration)
those errors add up to a constant per output, which the bias takes off
(what no formula predicts: correct.py).
"""

from __future__ import annotations

import math

import numpy as np

from vtasim.host.quant import scale_of
from vtasm.errors import ModelError
from vtasm.formats.network import EXP_LIMIT

from .calibrate import Statistics, calibrate
from .convert import Layer, LayerKind, Network
from .kinds import rules
from .quantised import CoarserOutput, QLayer, QuantisedNetwork, exponent_for
from .read.wire import release


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
    ties, groups = _Ties(), _Ties()  # tensors that share a scale; tensors that share a mantissa
    for layer in net.layers:
        if layer.kind != LayerKind.HOST and (rules(layer.kind).keeps_scale or layer.kind == LayerKind.ADD):
            for t in layer.inputs:
                groups.join(t, layer.output)
                if rules(layer.kind).keeps_scale:
                    ties.join(t, layer.output)
        elif layer.kind == LayerKind.HOST and layer.node.op in MOVES:  # values moved, none computed: one scale
            for t in (t for t in layer.node.inputs if t in stats or t == net.input):
                for out in (o for o in layer.outputs if o):
                    groups.join(t, out)
                    ties.join(t, out)
    fixed = {groups.find(t) for t in (net.input, *net.outputs)}  # what users quantise and read: powers of two
    for t in tensors:
        if t in net.hints or t not in stats:
            fixed.add(groups.find(t))
    members: dict[str, list[str]] = {}
    for t in tensors:
        members.setdefault(groups.find(t), []).append(t)
    exps: dict[str, int] = {}
    mantissas: dict[str, float] = {}
    for root, group in members.items():
        if root in fixed:
            raw = {t: _hinted_exponent(net, t, notes) if t in net.hints else _exponent(net, t, stats, method)
                   for t in group}
            exps.update(_shared(group, raw, ties))
            continue
        mantissa, chosen = min((_cost(group, m, stats, method, ties, net) for m in MANTISSAS), key=lambda c: c[0])[1:]
        exps.update(chosen)
        if mantissa != 1.0:
            mantissas.update(dict.fromkeys(group, mantissa))
    for t, e in exps.items():
        if abs(e) > EXP_LIMIT:
            producer = next((layer for layer in net.layers if t in layer.outputs), None)
            where = f"layer {producer.name} ({', '.join(producer.sources)})" if producer else f"tensor '{t}'"
            raise ModelError(f"{net.name}: {where}: its values (calibration range +-{ranges.get(t, 0):.3g}) need a "
                             f"scale 2^{e}, outside the 2^-{EXP_LIMIT}..2^{EXP_LIMIT} a network file holds",
                             node=producer.sources[0] if producer and producer.sources else None)
    means = {t: st.mean for t, st in stats.items() if st.mean is not None}
    layers: list[QLayer] = []
    used: set[str] = set()  # tensors the layers quantised so far read or write: their scales are final
    for layer in net.layers:
        try:
            q = _quantise_layer(layer, exps, mantissas, means, net.shapes, notes)
        except CoarserOutput as need:
            _coarser_output(net, layer, exps, ties, used, need.exponent, notes)
            q = _quantise_layer(layer, exps, mantissas, means, net.shapes, notes)
        layers.append(q)
        used.update(layer.inputs + layer.outputs)
    return QuantisedNetwork(net, layers, exps, ranges, notes, float_sample=sample, mantissas=mantissas)


MOVES = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Slice", "Split",
                   "Gather", "Concat", "DepthToSpace", "SpaceToDepth", "Expand", "Tile"})
"""Host operators whose outputs hold their inputs' values, moved: their tensors share one scale, so the
host step copies int8 values instead of rounding them again."""
MANTISSAS = tuple(scale_of(0, k) for k in range(16))  # a group's mantissa: k sixteenths, as the host reads them


def _hinted_exponent(net: Network, t: str, notes: list[str]) -> int:
    """The power of two nearest a QuantizeLinear scale, noted when it is not one."""
    exact = math.log2(net.hints[t])
    e = round(exact)
    if abs(exact - e) > 1e-9:
        error = abs(2.0**e / net.hints[t] - 1)
        notes.append(f"tensor '{t}': scale {net.hints[t]:.6g} is not a power of two; using 2^{e} ({error:.1%} off)")
    return e


def _exponent(net: Network, t: str, stats: dict[str, Statistics], method: str, mantissa: float = 1.0) -> int:
    """A tensor's exponent at ``mantissa`` from its calibration statistics: the input and the outputs hold
    their whole calibration range (nothing clips), the others as ``method`` says."""
    if t not in stats:
        raise ModelError(f"{net.name}: tensor '{t}' has no scale: the model is not fully quantised "
                         "(QuantizeLinear/DequantizeLinear), so give calibration inputs (--calibrate data.npy)")
    if t == net.input or t in net.outputs:
        return exponent_for(stats[t].largest / mantissa)
    return stats[t].exponent(method, mantissa)


def _shared(group: list[str], raw: dict[str, int], ties: _Ties) -> dict[str, int]:
    """Each tensor's exponent, the coarsest of the tensors it shares its scale with (nothing they hold clips)."""
    top: dict[str, int] = {}
    for t in group:
        root = ties.find(t)
        top[root] = max(top.get(root, raw[t]), raw[t])
    return {t: top[ties.find(t)] for t in group}


def _cost(group: list[str], mantissa: float, stats: dict[str, Statistics], method: str, ties: _Ties,
          net: Network) -> tuple[float, float, dict[str, int]]:
    """The group's error at ``mantissa`` (each tensor's squared error relative to its own energy, summed),
    the mantissa and the exponents it gives."""
    chosen = _shared(group, {t: _exponent(net, t, stats, method, mantissa) for t in group}, ties)
    cost = sum(stats[t].error(e, mantissa) / stats[t].energy for t, e in chosen.items() if stats[t].energy > 0)
    return cost, mantissa, chosen


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


def _bounds(layer: Layer, scale: float) -> tuple[int, int]:
    low = -128 if layer.low == -math.inf else max(-128, min(127, math.ceil(layer.low / scale - 1e-9)))
    high = 127 if layer.high == math.inf else max(-128, min(127, math.floor(layer.high / scale + 1e-9)))
    return low, high


def _quantise_layer(layer: Layer, exps: dict[str, int], mantissas: dict[str, float], means: dict[str, np.ndarray],
                    shapes: dict[str, tuple[int, ...]], notes: list[str]) -> QLayer:
    e_y, m_y = exps[layer.output], mantissas.get(layer.output, 1.0)
    low, high = _bounds(layer, m_y * 2.0**e_y)
    q = QLayer(layer, [exps[t] for t in layer.inputs], e_y, [mantissas.get(t, 1.0) for t in layer.inputs], m_y,
               low=low, high=high, in_mean=means.get(layer.inputs[0]) if layer.inputs else None)
    if layer.kind != LayerKind.HOST:  # a host node computes in float32 between its input and output scales
        rules(layer.kind).quantise(q, shapes, notes)
        if layer.weight is not None:
            release(layer.weight)  # mapped from the model file: its pages go once its int8 weights are made
    return q

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
from dataclasses import dataclass, field

import numpy as np

from vtacc.frontend.check_builtins import average_multiplier
from vtasim.host import quant
from vtasm.errors import ModelError
from vtasm.formats.network import EXP_LIMIT
from vtasm.portability import SHIFT_MAX

from .calibrate import Statistics, calibrate, exponent_for
from .convert import Layer, LayerKind, Network
from .read.wire import release


@dataclass
class QLayer:
    """One layer in int8: the integer arithmetic a kernel computes (see reference.run_int8)."""

    layer: Layer
    in_exps: list[int]
    out_exp: int
    weight: np.ndarray | None = None  # int8
    bias: np.ndarray | None = None  # int32, the rounding constant included
    shift: np.ndarray | int = 0  # conv/dense: right shift, one per output channel or one for all
    w_exps: np.ndarray | None = None
    left: list[int] = field(default_factory=list)  # add: left shift of each input
    low: int = -128
    high: int = 127

    @property
    def name(self) -> str:
        return self.layer.name

    @property
    def kind(self) -> str:
        return self.layer.kind


@dataclass
class QuantisedNetwork:
    """The int8 layers, the input's and output's scales (as exponents), and what the quantiser noticed."""

    network: Network
    layers: list[QLayer]
    exps: dict[str, int]
    ranges: dict[str, float]  # calibration: largest magnitude seen per tensor
    notes: list[str]
    sqnr: dict[str, float] = field(default_factory=dict)  # tensor -> int8 against float on calibration data, dB
    float_sample: dict[str, np.ndarray] | None = None  # the float activations of the first inputs, if kept

    @property
    def input_exp(self) -> int:
        return self.exps[self.network.input]

    @property
    def output_exp(self) -> int:
        return self.exps[self.network.output]

    def quantise_input(self, x: np.ndarray) -> np.ndarray:
        """Float input -> int8 at the input's scale (round to nearest, saturate)."""
        return quant.quantise(x, self.input_exp)

    def dequantise_output(self, y: np.ndarray) -> np.ndarray:
        return quant.dequantise(y, self.output_exp, np.float64)


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
        elif t in stats:
            raw[t] = stats[t].exponent(method) if t != net.input else exponent_for(ranges[t])
        else:
            raise ModelError(f"{net.name}: tensor '{t}' has no scale: the model is not fully quantised "
                             "(QuantizeLinear/DequantizeLinear), so give calibration inputs (--calibrate data.npy)")
    ties = _Ties()
    for layer in net.layers:
        if layer.kind in (LayerKind.MAXPOOL, LayerKind.AVGPOOL, LayerKind.GAP, LayerKind.CLIP, LayerKind.CONCAT):
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
    layers = [_quantise_layer(layer, exps, net.shapes, notes) for layer in net.layers]
    return QuantisedNetwork(net, layers, exps, ranges, notes, float_sample=sample)


def _bounds(layer: Layer, e: int) -> tuple[int, int]:
    scale = 2.0 ** e
    low = -128 if layer.low == -math.inf else max(-128, min(127, math.ceil(layer.low / scale - 1e-9)))
    high = 127 if layer.high == math.inf else max(-128, min(127, math.floor(layer.high / scale + 1e-9)))
    return low, high


def _quantise_layer(layer: Layer, exps: dict[str, int], shapes: dict[str, tuple[int, ...]],
                    notes: list[str]) -> QLayer:
    in_exps = [exps[t] for t in layer.inputs]
    e_y = exps[layer.output]
    low, high = _bounds(layer, e_y)
    q = QLayer(layer, in_exps, e_y, low=low, high=high)
    if layer.kind in (LayerKind.CONV, LayerKind.DENSE):
        _quantise_weights(q, notes)
        if layer.leaky:
            approx = sum(2.0**-k for k in layer.leaky)
            if abs(approx - layer.alpha) > 1e-12 * layer.alpha:
                terms = " + ".join(f"2^-{k}" for k in layer.leaky)
                notes.append(f"layer {layer.name}: leaky slope {layer.alpha:g} as {terms} = {approx:.6g} "
                             f"({abs(approx / layer.alpha - 1):.2%} off)")
    elif layer.kind == LayerKind.ADD:
        base = min(in_exps)
        q.left = [e - base for e in in_exps]
        q.shift = max(0, e_y - base)
        if e_y < base:
            notes.append(f"layer {layer.name}: output scale 2^{e_y} is finer than its inputs'; kept at 2^{base}")
            q.out_exp = base
    elif layer.kind == LayerKind.GAP:
        h, w = shapes[layer.inputs[0]][2:]
        multiplier, shift = average_multiplier(h * w)
        if multiplier != 1:
            off = multiplier / 2.0**shift * (h * w) - 1
            notes.append(f"layer {layer.name}: averages {h}x{w} values as * {multiplier} >> {shift} "
                         f"({abs(off):.2%} off 1/{h * w})")
    return q


ROW_BLOCK_ELEMENTS = 1 << 20  # weights handled at once by the per-channel passes (bounded temporaries)


def weight_exponents(rows: np.ndarray) -> np.ndarray:
    """Per output channel (row), the power-of-two scale with the least squared error of its int8 weights:
    the finest that holds the largest weight, or the next finer one when clipping that weight costs less
    than the rounding it saves."""
    top = np.array([exponent_for(max(-lo, hi)) for lo, hi in zip(_by_rows(rows, np.min).tolist(),
                                                                    _by_rows(rows, np.max).tolist(), strict=True)],
                   dtype=np.int64)

    def error(exps: np.ndarray) -> np.ndarray:
        def squared(part: np.ndarray, lo: int) -> np.ndarray:
            step = 2.0 ** exps[lo : lo + len(part), None]
            t = part / step
            np.rint(t, out=t)
            np.clip(t, -128, 127, out=t)
            t *= step
            t -= part
            t *= t
            return t.sum(axis=1)

        return _by_rows(rows, squared, with_start=True)

    finer = top - 1
    return np.where(error(finer) < error(top), finer, top)


def _by_rows(rows: np.ndarray, reduce, with_start: bool = False) -> np.ndarray:
    """A per-row reduction of a matrix, a block of rows at a time (a VGG's 100-million-weight layer makes no
    full-size temporaries); ``reduce(block)`` (or ``reduce(block, first row)``) gives each row's value."""
    step = max(1, ROW_BLOCK_ELEMENTS // max(rows.shape[1], 1))
    parts = [reduce(rows[lo : lo + step], lo) if with_start else reduce(rows[lo : lo + step], axis=1)
             for lo in range(0, len(rows), step)]
    return np.concatenate(parts) if parts else np.zeros(0)


def _quantise_weights(q: QLayer, notes: list[str]) -> None:
    layer = q.layer
    e_x, e_y = q.in_exps[0], q.out_exp
    w = layer.weight
    w_exps = weight_exponents(w.reshape(w.shape[0], -1))
    shifts = e_y - e_x - w_exps
    if np.any(shifts < 0):
        raise ModelError(f"layer {layer.name}: its output scale 2^{e_y} is finer than its accumulator's "
                         f"(2^{e_x + int(w_exps.max())}); the requantisation would be a left shift")
    coarse = shifts > SHIFT_MAX
    if np.any(coarse):
        notes.append(f"layer {layer.name}: {int(coarse.sum())} channel(s) need a shift over {SHIFT_MAX}; their "
                     "weights are kept coarser")
        w_exps = np.where(coarse, e_y - e_x - SHIFT_MAX, w_exps)
        shifts = e_y - e_x - w_exps
    shape = (-1,) + (1,) * (w.ndim - 1)
    q.weight = np.empty(w.shape, dtype=np.int8)
    step = max(1, ROW_BLOCK_ELEMENTS // max(w[0].size, 1))
    for lo in range(0, len(w), step):  # a block of output channels at a time
        q.weight[lo : lo + step] = np.clip(np.rint(w[lo : lo + step] * 2.0 ** -w_exps[lo : lo + step].reshape(shape)),
                                           -128, 127)
    release(w)  # a weight mapped from the model file: its pages go until a float run uses it again
    acc_scale = 2.0 ** (e_x + w_exps)
    rounding = np.where(shifts > 0, np.left_shift(1, np.maximum(shifts - 1, 0)), 0)
    bias = np.rint(layer.bias / acc_scale) + rounding
    if np.any(np.abs(bias) >= 2**31):
        raise ModelError(f"layer {layer.name}: a bias does not fit int32 at the accumulator's scale")
    q.bias = bias.astype(np.int32)
    q.w_exps = w_exps
    q.shift = int(shifts[0]) if np.all(shifts == shifts[0]) else shifts.astype(np.int32)

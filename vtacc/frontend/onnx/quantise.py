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
from vtasim.host.ops import run_op
from vtasm.errors import ModelError

from .arrays import conv2d, windows
from .network import Layer, Network

MAX_SHIFT = 15  # VTA's portable shift amounts (a tensor shift must stay in 0..15)


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


def run_float(net: Network, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every activation tensor of the float network on input ``x`` (calibration and float reference).

    Host nodes take the model's static shapes, so ``x`` holds one model batch when the network has any.
    """
    values = {net.input: np.asarray(x, dtype=np.float64)}
    for layer in net.layers:
        if layer.kind == "host":
            values.update(_host_layer(net, layer, values))
            continue
        ins = [values[t] for t in layer.inputs]
        values[layer.output] = np.clip(_float_layer(layer, ins), layer.low, layer.high)
    return values


def _host_layer(net: Network, layer: Layer, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    node = layer.node
    xs = []
    for t, shape in zip(node.inputs, layer.in_shapes, strict=True):
        x = None if not t else values[t] if t in values else net.constants[t]
        xs.append(x.reshape(shape) if x is not None and shape is not None else x)
    try:
        outs = run_op(node.op, xs, node.attrs, net.opset, [net.shapes[t] for t in node.outputs])
    except (ValueError, KeyError, IndexError) as exc:
        raise ModelError(f"{net.name}: node '{node.name}' ({node.op}): the host cannot compute it: {exc}") from None
    return {t: np.asarray(y, dtype=np.float64) for t, y in zip(node.outputs, outs, strict=False) if t}


def _float_layer(layer: Layer, ins: list[np.ndarray]) -> np.ndarray:
    x = ins[0]
    if layer.kind == "conv":
        return conv2d(x, layer.weight, layer.stride, layer.pad, layer.groups) + layer.bias[None, :, None, None]
    if layer.kind == "dense":
        return x.reshape(x.shape[0], -1) @ layer.weight.T + layer.bias
    if layer.kind == "maxpool":
        return windows(x, layer.size, layer.stride, layer.pad, -np.inf).max(axis=-1)
    if layer.kind == "avgpool":
        return windows(x, layer.size, layer.stride, layer.pad, 0.0).mean(axis=-1)
    if layer.kind == "gap":
        return x.mean(axis=(2, 3), keepdims=True)
    if layer.kind == "add":
        return ins[0] + ins[1]
    if layer.kind == "concat":
        return np.concatenate(ins, axis=1)
    return x  # clip: the bounds are applied by the caller


def _exponent(magnitude: float) -> int:
    """The smallest e with magnitude / 2**e <= 127."""
    if magnitude <= 0 or not math.isfinite(magnitude):
        return 0
    return math.ceil(math.log2(magnitude / 127.0) - 1e-12)


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


def quantise(net: Network, calibration: np.ndarray | None) -> QuantisedNetwork:
    """Choose every scale (from the calibration inputs and the model's hints) and quantise every layer."""
    notes: list[str] = []
    tensors = [net.input] + [t for layer in net.layers for t in layer.outputs if t]
    ranges: dict[str, float] = {}
    if calibration is not None:
        ranges = calibrate(net, calibration)
    raw: dict[str, int] = {}
    for t in tensors:
        if t in net.hints:
            exact = math.log2(net.hints[t])
            raw[t] = round(exact)
            if abs(exact - raw[t]) > 1e-9:
                error = abs(2.0 ** raw[t] / net.hints[t] - 1)
                notes.append(f"tensor '{t}': scale {net.hints[t]:.6g} is not a power of two; using 2^{raw[t]} "
                             f"({error:.1%} off)")
        elif t in ranges:
            raw[t] = _exponent(ranges[t])
        else:
            raise ModelError(f"{net.name}: tensor '{t}' has no scale: the model is not fully quantised "
                             "(QuantizeLinear/DequantizeLinear), so give calibration inputs (--calibrate data.npy)")
    ties = _Ties()
    for layer in net.layers:
        if layer.kind in ("maxpool", "avgpool", "gap", "clip", "concat"):
            for t in layer.inputs:
                ties.join(t, layer.output)
    shared: dict[str, int] = {}
    for t in tensors:
        root = ties.find(t)
        shared[root] = max(shared.get(root, raw[t]), raw[t])
    exps = {t: shared[ties.find(t)] for t in tensors}
    layers = [_quantise_layer(layer, exps, net.shapes, notes) for layer in net.layers]
    return QuantisedNetwork(net, layers, exps, ranges, notes)


def batches(net: Network, data: np.ndarray, samples: int = 16):
    """``data`` in pieces the float network runs on: one model batch when host nodes need its static shapes,
    else up to ``samples`` inputs, so memory stays bounded however many calibration inputs there are."""
    step = net.shapes[net.input][0]
    if not net.on_host:
        step *= max(1, samples // step)
    for start in range(0, len(data) - len(data) % net.shapes[net.input][0], step):
        yield data[start:start + step]


def calibrate(net: Network, data: np.ndarray) -> dict[str, float]:
    """The largest magnitude of every tensor over the calibration inputs, a bounded piece at a time."""
    ranges: dict[str, float] = {}
    for piece in batches(net, data):
        for t, v in run_float(net, piece).items():
            ranges[t] = max(ranges.get(t, 0.0), float(np.max(np.abs(v))) if v.size else 0.0)
    return ranges


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
    if layer.kind in ("conv", "dense"):
        _quantise_weights(q, notes)
    elif layer.kind == "add":
        base = min(in_exps)
        q.left = [e - base for e in in_exps]
        q.shift = max(0, e_y - base)
        if e_y < base:
            notes.append(f"layer {layer.name}: output scale 2^{e_y} is finer than its inputs'; kept at 2^{base}")
            q.out_exp = base
    elif layer.kind == "gap":
        h, w = shapes[layer.inputs[0]][2:]
        multiplier, shift = average_multiplier(h * w)
        if multiplier != 1:
            off = multiplier / 2.0**shift * (h * w) - 1
            notes.append(f"layer {layer.name}: averages {h}x{w} values as * {multiplier} >> {shift} "
                         f"({abs(off):.2%} off 1/{h * w})")
    return q


def _quantise_weights(q: QLayer, notes: list[str]) -> None:
    layer = q.layer
    e_x, e_y = q.in_exps[0], q.out_exp
    w = layer.weight
    per_channel = np.max(np.abs(w.reshape(w.shape[0], -1)), axis=1)
    w_exps = np.array([_exponent(m) for m in per_channel], dtype=np.int64)
    shifts = e_y - e_x - w_exps
    if np.any(shifts < 0):
        raise ModelError(f"layer {layer.name}: its output scale 2^{e_y} is finer than its accumulator's "
                         f"(2^{e_x + int(w_exps.max())}); the requantisation would be a left shift")
    coarse = shifts > MAX_SHIFT
    if np.any(coarse):
        notes.append(f"layer {layer.name}: {int(coarse.sum())} channel(s) need a shift over {MAX_SHIFT}; their "
                     "weights are kept coarser")
        w_exps = np.where(coarse, e_y - e_x - MAX_SHIFT, w_exps)
        shifts = e_y - e_x - w_exps
    shape = (-1,) + (1,) * (w.ndim - 1)
    q.weight = np.clip(np.rint(w * 2.0 ** -w_exps.reshape(shape)), -128, 127).astype(np.int8)
    acc_scale = 2.0 ** (e_x + w_exps)
    rounding = np.where(shifts > 0, np.left_shift(1, np.maximum(shifts - 1, 0)), 0)
    bias = np.rint(layer.bias / acc_scale) + rounding
    if np.any(np.abs(bias) >= 2**31):
        raise ModelError(f"layer {layer.name}: a bias does not fit int32 at the accumulator's scale")
    q.bias = bias.astype(np.int32)
    q.w_exps = w_exps
    q.shift = int(shifts[0]) if np.all(shifts == shifts[0]) else shifts.astype(np.int32)

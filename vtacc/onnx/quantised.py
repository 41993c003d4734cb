"""The quantised network: int8 layers (what quantise.py makes from float layers).

A tensor's scale is m * 2**e: the exponent e, and a mantissa m = 2**(k / 16) shared by every tensor its
layers tie it to (1 for the model's input and outputs, which users quantise and read). Every rescaling VTA
makes is a shift: the mantissas only change which int8 weights and biases a layer holds, and how the host
converts the tensors it reads and writes (the network file holds k)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from vtasim.host import quant

from .convert.layers import Layer, LayerKind, Network


@dataclass
class QLayer:
    """One layer in int8: the integer arithmetic a kernel computes (its kind's rules, vtacc.onnx.kinds)."""

    layer: Layer
    in_exps: list[int]
    out_exp: int
    in_mants: list[float] = field(default_factory=list)  # each input scale's mantissa (none given: 1)
    out_mant: float = 1.0
    in_mean: np.ndarray | None = None  # conv/dense: its float input's mean (per channel / element), if known
    weight: np.ndarray | None = None  # int8
    bias: np.ndarray | None = None  # int32, the rounding constant included
    shift: np.ndarray | int = 0  # conv/dense: right shift, one per output channel or one for all; gap: k
    multiplier: int = 1  # gap: the sum's multiplier m (out = (sum * m + 2^(k-1)) >> k)
    w_exps: np.ndarray | None = None
    left: list[int] = field(default_factory=list)  # add: left shift of each input
    low: int = -128
    high: int = 127

    @property
    def name(self) -> str:
        return self.layer.name

    @property
    def out_scale(self) -> float:
        return self.out_mant * 2.0**self.out_exp

    def in_mant(self, k: int) -> float:
        return self.in_mants[k] if self.in_mants else 1.0

    def weight_scales(self) -> str:
        """The weights' scales as the reports print them ("" for a layer without weights)."""
        if self.w_exps is None:
            return ""
        ratio = self.out_mant / self.in_mant(0)
        lo, hi = int(self.w_exps.min()), int(self.w_exps.max())
        return shown_scale(ratio, lo) + (f"..{shown_scale(ratio, hi)}" if lo != hi else "")

    @property
    def kind(self) -> LayerKind:
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
    top1: dict[str, tuple[int, int]] = field(default_factory=dict)  # class-score output -> (agree, inputs)
    clipped: dict[str, int] = field(default_factory=dict)  # output -> float values beyond its int8 range
    mantissas: dict[str, float] = field(default_factory=dict)  # tensor -> its scale's mantissa (absent: 1)

    def scale(self, t: str) -> float:
        """Tensor ``t``'s scale: its mantissa times 2 to its exponent."""
        return self.mantissas.get(t, 1.0) * 2.0 ** self.exps[t]

    def sixteenths(self, t: str) -> int:
        """Tensor ``t``'s mantissa as the network file holds it: 2**(k / 16), k in 0..15."""
        return round(16 * math.log2(self.mantissas.get(t, 1.0)))

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


class CoarserOutput(Exception):
    """A layer whose output scale is finer than its accumulator's: the requantisation would be a left shift,
    which adds only zero bits. ``exponent`` is the output scale it asks for instead (its accumulator's)."""

    def __init__(self, exponent: int):
        super().__init__(exponent)
        self.exponent = exponent


def shown_scale(mantissa: float, exp: int) -> str:
    """A scale as the reports print it: 2^e, or m*2^e with m to three decimals."""
    return f"2^{exp}" if mantissa == 1.0 else f"{mantissa:.3f}*2^{exp}"


def exponent_for(magnitude: float) -> int:
    """The smallest e with magnitude / 2**e <= 127: the finest power-of-two scale that holds ``magnitude``."""
    if magnitude <= 0 or not math.isfinite(magnitude):
        return 0
    return math.ceil(math.log2(magnitude / 127.0) - 1e-12)

"""The quantised network: int8 layers with power-of-two scales (what quantise.py makes from float layers)."""

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


def exponent_for(magnitude: float) -> int:
    """The smallest e with magnitude / 2**e <= 127: the finest power-of-two scale that holds ``magnitude``."""
    if magnitude <= 0 or not math.isfinite(magnitude):
        return 0
    return math.ceil(math.log2(magnitude / 127.0) - 1e-12)

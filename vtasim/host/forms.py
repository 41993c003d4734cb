"""What an ONNX node's attributes and constant inputs say, read once per operator across its opsets.

The host operators (ops.py) and the importer's VTA converters (vtacc.onnx.convert) both read a node
through these functions, so an operator's defaults and the opset that moved an attribute to an input
are written once. Each takes the node's input values (``xs``: an array for each input whose value is
known, None for an omitted one or, on the importer's side, for an activation), its attributes as plain
Python values and, where the forms differ, the model's opset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Inputs = list[np.ndarray | None]


def given(xs: Inputs, k: int) -> np.ndarray | None:
    """Input ``k`` when the node has it and its value is known, else None."""
    return xs[k] if len(xs) > k and xs[k] is not None else None


def clip_bounds(xs: Inputs, a: dict) -> tuple[float | np.ndarray, float | np.ndarray]:
    """Clip's (low, high): attributes min and max before opset 11, optional inputs 1 and 2 from it on."""
    low, high = given(xs, 1), given(xs, 2)
    return (a.get("min", -math.inf) if low is None else low, a.get("max", math.inf) if high is None else high)


@dataclass(frozen=True)
class PadForm:
    """A Pad node's amounts on every axis ([begin..., end...], negative crops), its value and mode."""

    pads: list[int]
    value: float
    mode: str


def pad_form(xs: Inputs, a: dict, opset: int, rank: int) -> PadForm:
    """Pad: attributes pads and value before opset 11, inputs 1 (pads) and 2 (value) from it on, and from
    opset 18 an optional input 3 naming the axes the pads apply to (the others unpadded)."""
    if opset < 11:
        pads, value = [int(v) for v in a.get("pads", [])], float(a.get("value", 0.0))
    else:
        pads = [int(v) for v in np.ravel(xs[1])]
        value = float(np.ravel(xs[2])[0]) if given(xs, 2) is not None else 0.0
    axes = given(xs, 3)
    if axes is not None:
        chosen, full = [int(v) % rank for v in np.ravel(axes)], [0] * 2 * rank
        for k, axis in enumerate(chosen):
            full[axis], full[axis + rank] = pads[k], pads[k + len(chosen)]
        pads = full
    mode = a.get("mode", "constant")
    return PadForm(pads, value, mode.decode() if isinstance(mode, bytes) else mode)


def reduce_axes(xs: Inputs, a: dict, rank: int) -> tuple[int, ...]:
    """The axes a Reduce* node reduces, each in 0..rank-1: attribute axes, or input 1 (opset 18; 13 for
    ReduceSum); none given means every axis, or none at all with noop_with_empty_axes."""
    axes = a.get("axes")
    if given(xs, 1) is not None:
        axes = [int(v) for v in np.ravel(xs[1])]
    if not axes:
        return () if a.get("noop_with_empty_axes", 0) else tuple(range(rank))
    return tuple(int(v) % rank for v in axes)


@dataclass(frozen=True)
class Window:
    """A window operator's (Conv, MaxPool, AveragePool) strides, pads ([begin..., end...]) and dilations."""

    strides: list[int]
    pads: list[int]
    dilations: list[int]
    auto_pad: str


def window(a: dict, spatial: int) -> Window:
    """The window of a node over ``spatial`` dimensions, defaults filled in (explicit pads; auto_pad as
    given, for the caller to take or refuse)."""
    auto = a.get("auto_pad", "NOTSET")
    return Window([int(v) for v in a.get("strides", [1] * spatial)],
                  [int(v) for v in a.get("pads", [0] * 2 * spatial)],
                  [int(v) for v in a.get("dilations", [1] * spatial)],
                  auto.decode() if isinstance(auto, bytes) else auto)


@dataclass(frozen=True)
class GemmForm:
    """Gemm's y = alpha * A' @ B' + beta * C, A' and B' transposed as the flags say."""

    trans_a: bool
    trans_b: bool
    alpha: float
    beta: float


def gemm_form(a: dict) -> GemmForm:
    return GemmForm(bool(a.get("transA", 0)), bool(a.get("transB", 0)), float(a.get("alpha", 1.0)),
                    float(a.get("beta", 1.0)))


def leaky_slope(a: dict) -> float:
    """LeakyRelu's slope below zero."""
    return float(a.get("alpha", 0.01))


def hard_sigmoid(a: dict) -> tuple[float, float]:
    """HardSigmoid's (alpha, beta): max(0, min(1, alpha * x + beta))."""
    return float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))


def epsilon(a: dict) -> float:
    """BatchNormalization's epsilon, added to the variance."""
    return float(a.get("epsilon", 1e-5))


def flatten_axis(a: dict, rank: int) -> int:
    """Flatten's axis in 0..rank (the dimensions before it make the first output dimension)."""
    return int(a.get("axis", 1)) % max(rank, 1)

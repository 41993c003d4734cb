"""Activations: Relu and Clip (bounds, fused into the layer before when it alone reads it), LeakyRelu
(fused into the Conv or Gemm before it as shifts of its accumulator) and HardSigmoid (an affine step with
bounds)."""

from __future__ import annotations

import math

import numpy as np

from vtasim.host import forms
from vtasm.portability import SHIFT_MAX

from ..read.nodes import Node
from .affine import affine
from .layers import Layer, LayerKind
from .lowering import Lowering
from .registry import converts


def bounded(lw: Lowering, node: Node, low: float, high: float) -> None:
    """clip(x, low, high): the bounds of the conv, dense or add layer before when the node alone reads it,
    else a copy with bounds."""
    x = lw.canon(node.inputs[0])
    layer = lw.by_output.get(x)
    if layer is not None and layer.kind in (LayerKind.CONV, LayerKind.DENSE, LayerKind.ADD) \
            and lw.sole_consumer(node.inputs[0], node):
        layer.low, layer.high = max(layer.low, low), min(layer.high, high)
        lw.fold_into(layer, node)
        return
    x = lw.activation(node, node.inputs[0])
    out = node.outputs[0]
    lw.add(Layer(LayerKind.CLIP, lw.fresh(node.name), [node.name], [x], out, lw.g.shapes[out], low=low, high=high))


@converts("Relu")
def relu(lw: Lowering, node: Node) -> None:
    bounded(lw, node, 0.0, math.inf)


@converts("Clip")
def clip(lw: Lowering, node: Node) -> None:
    low, high = forms.clip_bounds(lw.operands(node, "min", "max"), node.attrs)
    bounded(lw, node, float(low), float(high))


@converts("LeakyRelu")
def leaky_relu(lw: Lowering, node: Node) -> None:
    """Fused into the convolution or dense layer before it: max(a, sum of a >> k) on its accumulator,
    the slope a sum of at most four powers of two (exact for a power of two, else within 1%)."""
    alpha = forms.leaky_slope(node.attrs)
    shifts = power_sum(alpha)
    if shifts is None:
        raise lw.fail(node, f"slope {alpha:g} is no sum of four powers of two 2^-1..2^-15 within 1%")
    layer = lw.by_output.get(lw.canon(node.inputs[0]))
    if layer is None or layer.kind not in (LayerKind.CONV, LayerKind.DENSE) or layer.low != -math.inf \
            or layer.high != math.inf or layer.leaky or not lw.sole_consumer(node.inputs[0], node):
        raise lw.fail(node, "a leaky ReLU runs on VTA fused into the Conv or Gemm before it, its only consumer")
    layer.alpha, layer.leaky = alpha, shifts
    lw.fold_into(layer, node)


@converts("HardSigmoid")
def hard_sigmoid(lw: Lowering, node: Node) -> None:
    """clip(alpha * x + beta, 0, 1): a per-channel affine step with its bounds fused."""
    x = lw.activation(node, node.inputs[0], flat_ok=True)
    channels = lw.g.shapes[x][1]
    alpha, beta = forms.hard_sigmoid(node.attrs)
    affine(lw, node, node.inputs[0], np.full(channels, alpha), np.full(channels, beta))
    layer = lw.by_output[node.outputs[0]]
    layer.low, layer.high = max(layer.low, 0.0), min(layer.high, 1.0)


def power_sum(alpha: float, terms: int = 4, tolerance: float = 0.01) -> tuple[int, ...] | None:
    """Right shifts k (1..15) whose 2^-k sum to ``alpha`` within ``tolerance`` (greedy: the largest power of
    two not above what is left, at most ``terms`` of them), or None."""
    if not 0 < alpha < 1:
        return None
    shifts, left = [], alpha
    for _ in range(terms):
        k = math.ceil(-math.log2(left) - 1e-12)
        if k > SHIFT_MAX:  # a right shift VTA's portable ALU takes
            break
        shifts.append(k)
        left -= 2.0**-k
        if abs(left) <= 1e-12 * alpha:
            break
    return tuple(shifts) if shifts and abs(left) <= tolerance * alpha else None

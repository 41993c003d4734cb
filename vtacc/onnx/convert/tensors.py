"""Operators that only rename, reshape or annotate tensors: Identity, Dropout, Flatten, Reshape, and the
QuantizeLinear/DequantizeLinear pairs (a scale hint on the tensor they quantise; dequantised constants
folded into float weights)."""

from __future__ import annotations

import math

import numpy as np

from vtasim.host import forms

from ..read.nodes import Node
from .lowering import Lowering
from .registry import converts


@converts("Identity")
def identity(lw: Lowering, node: Node) -> None:
    if node.inputs[0] in lw.consts:
        lw.consts[node.outputs[0]] = lw.consts[node.inputs[0]]
    lw.alias[node.outputs[0]] = node.inputs[0]


@converts("Dropout")
def dropout(lw: Lowering, node: Node) -> None:
    """Identity at inference (its mask output, if any, is never read by a layer)."""
    identity(lw, node)


@converts("Flatten")
def flatten(lw: Lowering, node: Node) -> None:
    t = lw.activation(node, node.inputs[0])
    shape = lw.g.shapes[t]
    if forms.flatten_axis(node.attrs, len(shape)) != 1:
        raise lw.fail(node, f"Flatten with axis={node.attrs.get('axis')} is not supported (axis 1 only)")
    _flatten(lw, node, t, shape)


def _flatten(lw: Lowering, node: Node, t: str, shape: tuple[int, ...]) -> None:
    lw.alias[node.outputs[0]] = t
    if len(shape) == 4:
        lw.flat.add(t)
    elif len(shape) != 2:
        raise lw.fail(node, f"flattening a rank-{len(shape)} tensor is not supported (rank 2 or 4)")


@converts("Reshape")
def reshape(lw: Lowering, node: Node) -> None:
    t = lw.activation(node, node.inputs[0])
    shape, out = lw.g.shapes[t], lw.g.shapes[node.outputs[0]]
    if out == shape:
        lw.alias[node.outputs[0]] = t
    elif len(out) == 2 and out[0] == shape[0] and out[1] == math.prod(shape[1:]):
        _flatten(lw, node, t, shape)
    else:
        raise lw.fail(node, f"Reshape from {list(shape)} to {list(out)} is not supported; only flattening "
                            "to [N, C*H*W] (or no change)")


@converts("QuantizeLinear")
def quantize_linear(lw: Lowering, node: Node) -> None:
    scale, zero = _qparams(lw, node)
    if node.inputs[0] in lw.consts:
        lw.consts[node.outputs[0]] = lw.consts[node.inputs[0]]  # a constant stays float until its DQ
        lw.alias[node.outputs[0]] = node.inputs[0]
        return
    t = lw.activation(node, node.inputs[0], flat_ok=True)
    if np.size(scale) != 1:
        raise lw.fail(node, "activations need one scale per tensor (per-tensor quantisation)")
    lw.hints[t] = float(np.ravel(scale)[0])
    lw.alias[node.outputs[0]] = t


@converts("DequantizeLinear")
def dequantize_linear(lw: Lowering, node: Node) -> None:
    scale, zero = _qparams(lw, node)
    src = node.inputs[0]
    if src in lw.consts:
        values = np.asarray(lw.consts[src], dtype=np.float64)
        if lw.canon(src) == src and src in lw.g.constants:  # stored integers: dequantise them
            axis = node.attrs.get("axis", 1)
            s = np.asarray(scale, dtype=np.float64)
            if s.size > 1:
                shape = [1] * values.ndim
                shape[axis] = s.size
                s = s.reshape(shape)
            values = (values - np.asarray(zero, dtype=np.float64).reshape(np.shape(s))) * s
        lw.consts[node.outputs[0]] = values
        return
    lw.alias[node.outputs[0]] = lw.activation(node, src, flat_ok=True)


def _qparams(lw: Lowering, node: Node) -> tuple[np.ndarray, np.ndarray]:
    scale = lw.const(node, node.inputs[1], "scale")
    zero = np.asarray(lw.consts[node.inputs[2]]) if len(node.inputs) > 2 and node.inputs[2] else np.zeros(1)
    if np.any(zero != 0):
        raise lw.fail(node, "only symmetric quantisation (zero point 0) maps onto VTA's int8 arithmetic")
    if np.any(scale <= 0):
        raise lw.fail(node, "scales must be positive")
    return scale, zero

"""Per-channel scales and offsets, and sums: BatchNormalization, Neg, Mul, Div, Sub and Add with a constant (a
per-channel affine step, folded into the Conv or Gemm before it when exact), Add and Sum of tensors."""

from __future__ import annotations

import math

import numpy as np

from vtasim.host import forms

from ..read.nodes import Node
from ..read.wire import release
from .layers import Layer, LayerKind
from .lowering import Lowering
from .registry import converts
from .tensors import identity


def affine(lw: Lowering, node: Node, x_name: str, scale: np.ndarray, bias: np.ndarray) -> None:
    """y = x * scale[c] + bias[c]: folded into the Conv or Gemm before it when that is exact (it feeds
    only this node, with no activation between), else a depthwise 1x1 convolution on VTA's GEMM core."""
    x = lw.activation(node, x_name, flat_ok=True)
    layer = lw.by_output.get(x)
    if layer is not None and layer.kind in (LayerKind.CONV, LayerKind.DENSE) and layer.low == -math.inf \
            and layer.high == math.inf and lw.sole_consumer(x_name, node):
        shape = (-1,) + (1,) * (layer.weight.ndim - 1)
        folded = layer.weight * scale.reshape(shape)
        release(layer.weight)  # the model file's weight, mapped (wire.py): replaced by the folded one
        layer.weight = folded
        layer.bias = layer.bias * scale + bias
        lw.fold_into(layer, node)
        return
    shape = lw.g.shapes[x]
    if len(shape) != 4 or x in lw.flat:
        raise lw.fail(node, f"a per-channel scale of a {len(shape)}-D tensor (VTA scales NCHW tensors "
                            "with a depthwise convolution)")
    channels = shape[1]
    out = node.outputs[0]
    lw.add(Layer(LayerKind.CONV, lw.fresh(node.name), [node.name], [x], out, lw.g.shapes[out],
                 scale.reshape(channels, 1, 1, 1).astype(np.float64), bias.astype(np.float64), 1, 0, channels))


@converts("BatchNormalization")
def batch_normalization(lw: Lowering, node: Node) -> None:
    """Folded into the convolution or dense layer before it, else a per-channel affine layer."""
    gamma, beta, mean, var = (lw.const(node, t, "parameter") for t in node.inputs[1:5])
    factor = gamma / np.sqrt(var + forms.epsilon(node.attrs))
    affine(lw, node, node.inputs[0], factor, beta - mean * factor)


def _with_constant(lw: Lowering, node: Node, first, second) -> bool:
    """A binary node with one constant operand as a per-channel affine layer: ``first(v)`` gives
    (scale, bias) when the constant comes first, ``second(v)`` when second. False without a constant."""
    a, b = (lw.canon(t) for t in node.inputs)
    if (a in lw.consts) == (b in lw.consts):
        return False
    at_first = a in lw.consts
    if (first if at_first else second) is None:
        return False
    x_name = node.inputs[1] if at_first else node.inputs[0]
    x = lw.activation(node, x_name, flat_ok=True)
    vector = _channel_vector(lw, node, lw.consts[a if at_first else b], lw.shape(x))
    scale, bias = (first if at_first else second)(vector)
    affine(lw, node, x_name, scale, bias)
    return True


def _channel_vector(lw: Lowering, node: Node, const: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The constant as one value per channel of a tensor of ``shape`` (NCHW or [N, C]; [N, T, C] as its rows)."""
    c = np.asarray(const, dtype=np.float64)
    extra = c.ndim - len(shape)
    if extra > 0 and all(d == 1 for d in c.shape[:extra]):  # [1, 1, C] against a rank-3 tensor's rows
        c = c.reshape(c.shape[extra:])
    try:
        full = np.broadcast_to(c, shape)
    except ValueError:
        raise lw.fail(node, f"the constant {list(c.shape)} does not broadcast to {list(shape)}") from None
    if full.shape != tuple(shape):
        raise lw.fail(node, f"the constant {list(c.shape)} would grow the tensor {list(shape)}")
    rows = full.reshape(shape[0], shape[1], -1)
    if not np.all(rows == rows[:1, :, :1]):
        raise lw.fail(node, "the constant is not one value per channel")
    return rows[0, :, 0].copy()


@converts("Neg")
def neg(lw: Lowering, node: Node) -> None:
    """-x: a per-channel scale of -1, folded into the Conv or Gemm before it when exact."""
    channels = lw.shape(lw.activation(node, node.inputs[0], flat_ok=True))[1]
    affine(lw, node, node.inputs[0], np.full(channels, -1.0), np.zeros(channels))


@converts("Mul")
def mul(lw: Lowering, node: Node) -> None:
    if not _with_constant(lw, node, lambda v: (v, np.zeros_like(v)), lambda v: (v, np.zeros_like(v))):
        raise lw.fail(node, "multiplying two tensors (VTA's portable ALU has no multiplier)")


@converts("Div")
def div(lw: Lowering, node: Node) -> None:
    if node.inputs[1] not in lw.consts and lw.canon(node.inputs[1]) not in lw.consts:
        raise lw.fail(node, "dividing by a tensor (VTA has no divider)")
    if not _with_constant(lw, node, None, lambda v: (1.0 / v, np.zeros_like(v))):
        raise lw.fail(node, "dividing a constant by a tensor")


@converts("Sub")
def sub(lw: Lowering, node: Node) -> None:
    if not _with_constant(lw, node, lambda v: (-np.ones_like(v), v), lambda v: (np.ones_like(v), -v)):
        raise lw.fail(node, "subtracting a tensor (VTA's ALU adds, it cannot negate without a multiplier)")


@converts("Add")
def add(lw: Lowering, node: Node) -> None:
    if _with_constant(lw, node, lambda v: (np.ones_like(v), v), lambda v: (np.ones_like(v), v)):
        return
    xa, xb = lw.activation(node, node.inputs[0]), lw.activation(node, node.inputs[1])
    if lw.g.shapes[xa] != lw.g.shapes[xb]:
        raise lw.fail(node, f"adding {list(lw.g.shapes[xa])} and {list(lw.g.shapes[xb])}: only tensors "
                            "of the same shape (no broadcasting)")
    out = node.outputs[0]
    lw.add(Layer(LayerKind.ADD, lw.fresh(node.name), [node.name], [xa, xb], out, lw.g.shapes[out]))


@converts("Sum")
def sum_(lw: Lowering, node: Node) -> None:
    """Sum of any arity: the identity for one input, else additions of two, chained."""
    if len(node.inputs) == 1:
        identity(lw, node)
        return
    xs = [lw.activation(node, t) for t in node.inputs]
    if len({lw.g.shapes[x] for x in xs}) != 1:
        raise lw.fail(node, "summing tensors of different shapes (no broadcasting)")
    total = xs[0]
    for k, x in enumerate(xs[1:], 1):
        out = node.outputs[0] if k == len(xs) - 1 else f"{node.outputs[0]}__partial{k}"
        lw.g.shapes[out] = lw.g.shapes[x]
        lw.add(Layer(LayerKind.ADD, lw.fresh(node.name), [node.name], [total, x], out, lw.g.shapes[x]))
        total = out

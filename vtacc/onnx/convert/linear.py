"""Layers with weights: Conv (with the zero padding of a Pad before it), Gemm and MatMul."""

from __future__ import annotations

import math

import numpy as np

from vtasim.host import forms

from ..read.nodes import Node
from .layers import Layer, LayerKind
from .lowering import Lowering
from .registry import converts


@converts("Pad")
def pad(lw: Lowering, node: Node) -> None:
    """Zero padding of height and width read only by convolutions: it joins their padding (done when
    the Conv is lowered; a Conv that goes to the host gets the Pad as a host node before it)."""
    x = lw.activation(node, node.inputs[0])
    form = forms.pad_form(lw.operands(node, "pads", "value", "axes"), node.attrs, lw.g.opset, len(lw.g.shapes[x]))
    pads = form.pads
    consumers = lw.g.consumers(node.outputs[0])
    if form.mode != "constant" or form.value != 0 or len(pads) != 8 or any(pads[i] for i in (0, 1, 4, 5)) \
            or min(pads) < 0 or not consumers or any(c.op != "Conv" for c in consumers) \
            or node.outputs[0] in lw.g.outputs:
        raise lw.fail(node, "only zero padding of height and width that convolutions read joins their padding")
    lw.pending[node.outputs[0]] = (node, x, [pads[2], pads[3], pads[6], pads[7]])


@converts("Conv")
def conv(lw: Lowering, node: Node) -> None:
    extra = [0, 0, 0, 0]
    if node.inputs[0] in lw.pending:  # a Pad before it: one padding
        _, x, extra = lw.pending[node.inputs[0]]
    else:
        x = lw.activation(node, node.inputs[0])
    w = lw.weight(node, node.inputs[1])
    if w.ndim != 4:
        raise lw.fail(node, f"a {w.ndim - 2}-D convolution (VTA convolves NCHW images)")
    b = lw.const(node, node.inputs[2], "bias") if len(node.inputs) > 2 and node.inputs[2] else None
    window = forms.window(node.attrs, w.ndim - 2)
    if any(d != 1 for d in window.dilations):
        raise lw.fail(node, f"dilations {window.dilations} are not supported (dilation 1 only)")
    if len(set(window.strides)) != 1:
        raise lw.fail(node, f"strides {window.strides} differ between height and width")
    out = node.outputs[0]
    own = _auto_pads(window.auto_pad, lw.g.shapes[x][2:], lw.g.shapes[out][2:], w.shape[2:], window.strides[0])
    # ONNX orders pads [top, left, bottom, right], as the kernel language's sides
    pads = tuple(int(p + e) for p, e in zip(own if own is not None else window.pads, extra, strict=True))
    lw.add(Layer(LayerKind.CONV, lw.fresh(node.name), [node.name], [x], out, lw.g.shapes[out], w,
                 b if b is not None else np.zeros(w.shape[0]), window.strides[0], pads[0],
                 int(node.attrs.get("group", 1)), pads=pads if len(set(pads)) > 1 else None))


def _auto_pads(auto: str, image: tuple[int, ...], out: tuple[int, ...], kernel: tuple[int, ...],
               stride: int) -> tuple[int, ...] | None:
    """The explicit pads [top, left, bottom, right] auto_pad stands for (None: NOTSET, the node's own pads):
    SAME pads each axis to reach its output's size, the odd one after (SAME_UPPER) or before (SAME_LOWER)."""
    if auto == "NOTSET":
        return None
    totals = [max(0, (o - 1) * stride + k - i) if auto != "VALID" else 0
              for i, o, k in zip(image, out, kernel, strict=True)]
    before = [t - t // 2 if auto == "SAME_LOWER" else t // 2 for t in totals]
    return tuple(before) + tuple(t - b for t, b in zip(totals, before, strict=True))


def _dense(lw: Lowering, node: Node, x_name: str, w: np.ndarray, b: np.ndarray | None) -> None:
    x = lw.activation(node, x_name, flat_ok=True)
    flat = x in lw.flat
    shape, out = lw.g.shapes[x], node.outputs[0]
    rows = len(shape) == 3  # [N, T, C] by [O, C]: each of its N * T rows (lw.shape) a row of the product
    k = shape[-1] if rows else math.prod(shape[1:])
    if w.shape[1] != k:
        raise lw.fail(node, f"weight has {w.shape[1]} inputs, the input has {k}")
    if lw.g.shapes[out] != ((*shape[:2], w.shape[0]) if rows else (shape[0], w.shape[0])):
        raise lw.fail(node, f"output {list(lw.g.shapes[out])} is not a matrix or the rows of one")
    lw.add(Layer(LayerKind.DENSE, lw.fresh(node.name), [node.name], [x], out, lw.g.shapes[out], w,
                 b if b is not None else np.zeros(w.shape[0]), flatten=flat))


@converts("Gemm")
def gemm(lw: Lowering, node: Node) -> None:
    form = forms.gemm_form(node.attrs)
    if form.trans_a:
        raise lw.fail(node, "transA=1 is not supported")
    w = lw.weight(node, node.inputs[1])
    w = w if form.trans_b else w.T
    if form.alpha != 1.0:
        w = w.astype(np.float64) * form.alpha
    b = None
    if len(node.inputs) > 2 and node.inputs[2]:
        b = np.broadcast_to(lw.const(node, node.inputs[2], "bias"), (1, w.shape[0]))[0] * form.beta
    _dense(lw, node, node.inputs[0], w, b)


@converts("MatMul")
def matmul(lw: Lowering, node: Node) -> None:
    _dense(lw, node, node.inputs[0], lw.weight(node, node.inputs[1]).T, None)

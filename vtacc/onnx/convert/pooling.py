"""Pooling: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, and ReduceMean over height and width."""

from __future__ import annotations

from vtacc.frontend.check_builtins import exact_average
from vtasim.host import forms

from ..read.nodes import Node
from .layers import Layer, LayerKind
from .lowering import Lowering
from .registry import converts


def _pool(lw: Lowering, node: Node, kind: LayerKind) -> None:
    """A square window with one stride and the same padding before the first row and column; what
    follows the last (more padding, or ceil_mode's partial windows) only sets the output's size, and a
    maximum ignores it (padding never wins). An average must be padded alike on every side."""
    x = lw.activation(node, node.inputs[0])
    if len(lw.g.shapes[x]) != 4:
        raise lw.fail(node, f"a pooling of a rank-{len(lw.g.shapes[x])} tensor (VTA pools NCHW images)")
    a = node.attrs
    kernel = list(a["kernel_shape"])
    window = forms.window(a, len(kernel))
    if kernel == list(lw.g.shapes[x][2:]) and not any(window.pads) and all(d == 1 for d in window.dilations) \
            and window.auto_pad in ("NOTSET", "VALID"):  # the window is the whole image, of any shape
        _global(lw, node, x, node.outputs[0], kind == LayerKind.MAXPOOL)
        return
    if len(set(kernel)) != 1:
        raise lw.fail(node, f"a {kernel} window is not square")
    if any(d != 1 for d in window.dilations):
        raise lw.fail(node, "dilated pooling is not supported")
    if window.auto_pad != "NOTSET":
        raise lw.fail(node, "auto_pad is not supported; give explicit pads")
    strides, pads = window.strides, window.pads
    if len(set(strides)) != 1:
        raise lw.fail(node, f"strides {strides} differ between height and width")
    stride, pad, size = int(strides[0]), int(pads[0]), kernel[0]
    out = node.outputs[0]
    h, w = lw.g.shapes[x][2:]
    oh, ow = lw.g.shapes[out][2:]
    # the padding after the last row the last window reaches into: none when (floor mode over an image
    # the stride does not divide) the windows stop before the last rows, which then take no part
    pad_end = max(0, (oh - 1) * stride + size - h - pad)
    if pads[1] != pad or max(0, (ow - 1) * stride + size - w - pad) != pad_end:
        raise lw.fail(node, f"pads {pads} differ between height and width")
    if kind == LayerKind.AVGPOOL:
        if not exact_average(size * size):
            raise lw.fail(node, f"a {size}x{size} average divides by {size * size}, not a power of two "
                                "(VTA has no divider); only whole-image averages take any size")
        if pad_end != pad or len(set(pads)) != 1:
            raise lw.fail(node, f"an average padded {pads}{' in ceil_mode' if a.get('ceil_mode') else ''} "
                                "(VTA divides every window by its whole area)")
        if pad and not a.get("count_include_pad", 0):
            raise lw.fail(node, "padded averages need count_include_pad=1 (VTA divides by the whole window)")
    if not (0 <= pad < size and 0 <= pad_end < size):
        raise lw.fail(node, f"padding {pad} before and {pad_end} after must be smaller than the "
                            f"{size}x{size} window")
    lw.add(Layer(kind, lw.fresh(node.name), [node.name], [x], out, lw.g.shapes[out], stride=stride, pad=pad,
                 size=size, pad_end=pad_end))


CASCADE = 4  # the window (and stride) of each max pooling in a maximum over a whole image


def _global(lw: Lowering, node: Node, x: str, out: str, maximum: bool) -> None:
    """A pooling over the whole image: an average is one GAP layer (the compiler sums an image of any size
    in parts); a maximum is a cascade of CASCADE x CASCADE max poolings, each padded after the image up to
    whole windows (padding never wins), until one pixel is left: every stage stores int8 values of the
    image, so the last holds the image's maximum exactly, and each stage's tiles fit the buffers."""
    shape = lw.g.shapes[x]
    if len(shape) != 4:
        raise lw.fail(node, f"a pooling of a rank-{len(shape)} tensor (VTA pools NCHW images)")
    if not maximum:
        lw.add(Layer(LayerKind.GAP, lw.fresh(node.name), [node.name], [x], out, lw.g.shapes[out]))
        return
    n, c, h, w = shape
    stage = 0
    while True:
        h, w = -(-h // CASCADE), -(-w // CASCADE)
        t = out if h == w == 1 else f"{out}__max{stage}"
        lw.g.shapes[t] = (n, c, h, w)
        lw.add(Layer(LayerKind.MAXPOOL, lw.fresh(node.name), [node.name], [x], t, (n, c, h, w), stride=CASCADE,
                     size=CASCADE, pad_end=CASCADE - 1))
        if t == out:
            return
        x, stage = t, stage + 1


@converts("GlobalMaxPool")
def global_max_pool(lw: Lowering, node: Node) -> None:
    _global(lw, node, lw.activation(node, node.inputs[0]), node.outputs[0], True)


@converts("MaxPool")
def max_pool(lw: Lowering, node: Node) -> None:
    if len(node.outputs) > 1 and node.outputs[1]:
        raise lw.fail(node, "MaxPool's indices output is not supported")
    _pool(lw, node, LayerKind.MAXPOOL)


@converts("AveragePool")
def average_pool(lw: Lowering, node: Node) -> None:
    _pool(lw, node, LayerKind.AVGPOOL)


@converts("GlobalAveragePool")
def global_average_pool(lw: Lowering, node: Node) -> None:
    _global(lw, node, lw.activation(node, node.inputs[0]), node.outputs[0], False)


@converts("ReduceMean")
def reduce_mean(lw: Lowering, node: Node) -> None:
    """The mean over height and width (torch's global pooling): a whole-image average; without
    keepdims its [N, C] result is the flattened view of the [N, C, 1, 1] one."""
    x = lw.activation(node, node.inputs[0])
    shape = lw.g.shapes[x]
    axes = forms.reduce_axes(lw.operands(node, "axes"), node.attrs, len(shape))
    if len(shape) != 4 or sorted(axes) != [2, 3]:
        raise lw.fail(node, f"a mean over axes {list(axes)} of {list(shape)} (VTA averages whole NCHW images)")
    out = node.outputs[0]
    if node.attrs.get("keepdims", 1):
        lw.add(Layer(LayerKind.GAP, lw.fresh(node.name), [node.name], [x], out, lw.g.shapes[out]))
        return
    pooled = f"{out}__pooled"
    lw.g.shapes[pooled] = shape[:2] + (1, 1)
    lw.add(Layer(LayerKind.GAP, lw.fresh(node.name), [node.name], [x], pooled, lw.g.shapes[pooled]))
    lw.alias[out] = pooled
    lw.flat.add(pooled)

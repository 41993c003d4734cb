"""ONNX operators the host CPU computes, in numpy, written from the ONNX operator specification.

One function per operator type, registered in ``OPS``: it takes the node's
input arrays (None for an omitted optional input), its attributes as plain
Python values, the model's opset and the static shapes of its outputs, and
returns the outputs. Shapes are known when a network is imported, so shape
operators (Reshape, Flatten, Squeeze, ...) simply take their output's shape.
Inputs arrive in float32 (activations dequantised, weights as stored); the
arithmetic stays in float32 where the operator allows it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from vtasm import budget
from vtasm.formats.network import ONNX_DTYPES

from . import forms
from .resize import resize
from .windows import patches

Arrays = list[np.ndarray | None]
Op = Callable[[Arrays, dict, int, list[tuple[int, ...]]], list[np.ndarray]]
OPS: dict[str, Op] = {}
ONE_INPUT: set[str] = set()  # operators of exactly one input: a network file giving them more is refused


def op(*names: str, one_input: bool = False) -> Callable[[Op], Op]:
    """Register the function as the host form of the operators ``names`` (``one_input``: each takes exactly
    one input, and a node that gives it more is refused, not run with the extras ignored)."""
    def register(fn: Op) -> Op:
        for name in names:
            OPS[name] = fn
            if one_input:
                ONE_INPUT.add(name)
        return fn

    return register


def run_op(kind: str, xs: Arrays, attrs: dict, opset: int, out_shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """The outputs of one ONNX node (KeyError for an operator with no host form: check ``OPS`` first)."""
    return OPS[kind](xs, attrs, opset, out_shapes)


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32) if np.asarray(x).dtype != np.float64 else np.asarray(x)


# -- element-wise ------------------------------------------------------------------------------------------------
def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> Op:
    return lambda xs, a, opset, shapes: [fn(_f32(xs[0]))]


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to within 1.2e-7 (Numerical Recipes' erfc, Chebyshev fit), vectorised."""
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    r = 1.0 - t * np.exp(poly)
    return (np.sign(x) * r).astype(x.dtype)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


for _name, _fn in {
    "Sigmoid": _sigmoid,
    "Tanh": np.tanh,
    "Exp": np.exp,
    "Log": np.log,
    "Sqrt": np.sqrt,
    "Abs": np.abs,
    "Neg": np.negative,
    "Reciprocal": lambda x: 1 / x,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Erf": _erf,
    "Relu": lambda x: np.maximum(x, 0),
    "Softplus": lambda x: np.logaddexp(x, 0).astype(x.dtype),
    "Softsign": lambda x: x / (1 + np.abs(x)),
    "Identity": lambda x: x,
    "Dropout": lambda x: x,
}.items():
    op(_name, one_input=_name != "Dropout")(_unary(_fn))  # Dropout: an optional ratio and training mode


@op("LeakyRelu", one_input=True)
def _leaky_relu(xs, a, opset, shapes):
    x = _f32(xs[0])
    return [np.where(x >= 0, x, x * x.dtype.type(forms.leaky_slope(a)))]


@op("Elu", one_input=True)
def _elu(xs, a, opset, shapes):
    x = _f32(xs[0])
    return [np.where(x >= 0, x, x.dtype.type(a.get("alpha", 1.0)) * np.expm1(np.minimum(x, 0)))]


@op("HardSigmoid", one_input=True)
def _hard_sigmoid(xs, a, opset, shapes):
    x = _f32(xs[0])
    t = x.dtype.type
    alpha, beta = forms.hard_sigmoid(a)
    return [np.clip(t(alpha) * x + t(beta), 0, 1).astype(x.dtype)]


@op("HardSwish", one_input=True)
def _hard_swish(xs, a, opset, shapes):
    x = _f32(xs[0])
    t = x.dtype.type
    return [x * np.clip(x * t(1 / 6) + t(0.5), 0, 1).astype(x.dtype)]


@op("Clip")
def _clip(xs, a, opset, shapes):
    x = _f32(xs[0])
    low, high = forms.clip_bounds(xs, a)
    return [np.clip(x, np.asarray(low, x.dtype), np.asarray(high, x.dtype))]


def _nary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Op:
    def apply(xs, a, opset, shapes):
        out = _f32(xs[0])
        for x in xs[1:]:
            out = fn(out, _f32(x))
        return [out]

    return apply


for _name, _fn in {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Pow": np.power,
                   "Max": np.maximum, "Min": np.minimum, "Sum": np.add}.items():
    OPS[_name] = _nary(_fn)


@op("Mean")
def _mean(xs, a, opset, shapes):
    return [_nary(np.add)(xs, a, opset, shapes)[0] / len(xs)]


# -- normalisation -------------------------------------------------------------------------------------------------
def _softmax_axes(x: np.ndarray, a: dict, opset: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """The array as the operator sees it and the axis it normalises (opsets < 13 flatten from ``axis`` on)."""
    axis = a.get("axis", -1 if opset >= 13 else 1)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} of a rank-{x.ndim} tensor")
    if opset >= 13:
        return x, (a.get("axis", -1) % x.ndim,)
    axis = a.get("axis", 1) % x.ndim
    return x, tuple(range(axis, x.ndim))


@op("Softmax", one_input=True)
def _softmax(xs, a, opset, shapes):
    x, axes = _softmax_axes(_f32(xs[0]), a, opset)
    e = np.exp(x - x.max(axis=axes, keepdims=True))
    return [e / e.sum(axis=axes, keepdims=True)]


@op("LogSoftmax", one_input=True)
def _log_softmax(xs, a, opset, shapes):
    x, axes = _softmax_axes(_f32(xs[0]), a, opset)
    shifted = x - x.max(axis=axes, keepdims=True)
    return [shifted - np.log(np.exp(shifted).sum(axis=axes, keepdims=True))]


@op("LRN", one_input=True)
def _lrn(xs, a, opset, shapes):
    """Local response normalisation across channels: x / (bias + alpha / size * sum of squares)^beta."""
    x = _f32(xs[0])
    size = int(a["size"])
    t = x.dtype.type
    squares = x * x
    c = x.shape[1]
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    padded = np.pad(squares, [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2))
    window = np.zeros_like(x)
    for k in range(size):
        window += padded[:, k:k + c]
    scale = t(a.get("bias", 1.0)) + t(a.get("alpha", 1e-4)) / t(size) * window
    return [x / scale ** t(a.get("beta", 0.75))]


@op("BatchNormalization")
def _batch_norm(xs, a, opset, shapes):
    x, gamma, beta, mean, var = (_f32(v) for v in xs[:5])
    shape = (1, -1) + (1,) * (x.ndim - 2)
    factor = gamma / np.sqrt(var + x.dtype.type(forms.epsilon(a)))
    return [(x - mean.reshape(shape)) * factor.reshape(shape) + beta.reshape(shape)]


# -- linear algebra ------------------------------------------------------------------------------------------------
@op("MatMul")
def _matmul(xs, a, opset, shapes):
    return [np.matmul(_f32(xs[0]), _f32(xs[1]))]


@op("Gemm")
def _gemm(xs, a, opset, shapes):
    x, w = _f32(xs[0]), _f32(xs[1])
    form = forms.gemm_form(a)
    x = x.T if form.trans_a else x
    w = w.T if form.trans_b else w
    y = x.dtype.type(form.alpha) * (x @ w)
    if len(xs) > 2 and xs[2] is not None:
        y = y + x.dtype.type(form.beta) * _f32(xs[2])
    return [y]


def _spatial(a: dict, kernel: tuple[int, ...]) -> tuple[list[int], list[int], list[int]]:
    """strides, pads as [begin..., end...] and dilations of a window operator (explicit pads only)."""
    w = forms.window(a, len(kernel))
    return w.strides, w.pads, w.dilations


def _patches(x: np.ndarray, kernel: tuple[int, ...], strides, dilations, out_hw, fill: float) -> np.ndarray:
    """[N, C, OH, OW, KH*KW]: the window of every output of a 2-D operator on a padded input."""
    n, c = x.shape[:2]
    kh, kw = kernel
    oh, ow = out_hw
    need_h = (oh - 1) * strides[0] + (kh - 1) * dilations[0] + 1
    need_w = (ow - 1) * strides[1] + (kw - 1) * dilations[1] + 1
    if x.shape[2] < need_h or x.shape[3] < need_w:  # ceil_mode windows that run past the end
        x = np.pad(x, ((0, 0), (0, 0), (0, max(0, need_h - x.shape[2])), (0, max(0, need_w - x.shape[3]))),
                   constant_values=fill)
    _room((n, c, oh, ow, kh * kw), "its windows")
    return patches(x, kernel, strides, dilations, out_hw)


def _room(shape, what: str) -> None:
    """A ValueError (the step names the node) when a float32 array of ``shape`` would leave the memory
    budget: sizes that come from attributes are checked before they are allocated."""
    elements = math.prod(int(d) for d in shape)
    if 4 * elements > budget.limit():
        raise ValueError(f"{what} {list(shape)} would take {4 * elements:,} bytes, more than the memory budget of "
                         f"{budget.limit():,} (--max-memory raises it)")


def _pad2d(x: np.ndarray, pads: list[int], fill: float) -> np.ndarray:
    _room((*x.shape[:2], x.shape[2] + max(pads[0], 0) + max(pads[2], 0), x.shape[3] + max(pads[1], 0)
           + max(pads[3], 0)), "its padded input")
    return np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=fill)


def _lifted(a: dict) -> dict:
    """A 1-D window operator's attributes as the 2-D operator's over a height of 1."""
    b = dict(a)
    for key in ("kernel_shape", "strides", "dilations"):
        if key in a:
            b[key] = [1, *a[key]]
    if "pads" in a:
        b["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
    return b


def _one_d(fn: Op) -> Op:
    """The 2-D window operator ``fn`` also taking 1-D inputs ([N, C, L], weights [M, C/g, K]) as images of
    height 1 (torch's Conv1d, MaxPool1d, AvgPool1d)."""
    def apply(xs, a, opset, shapes):
        if np.ndim(xs[0]) != 3:
            return fn(xs, a, opset, shapes)
        lifted = [None if x is None else np.asarray(x)[:, :, None, :] if k < 2 and np.ndim(x) == 3 else x
                  for k, x in enumerate(xs)]
        out = fn(lifted, _lifted(a), opset, [(s[0], s[1], 1, s[2]) if len(s) == 3 else s for s in shapes])
        return [y[:, :, 0, :] for y in out]

    return apply


def _conv(xs, a, opset, shapes):
    x, w = _f32(xs[0]), _f32(xs[1])
    kernel = tuple(w.shape[2:])
    if len(kernel) != 2:
        raise ValueError(f"a {len(kernel)}-D convolution (the host computes 2-D ones)")
    strides, pads, dilations = _spatial(a, kernel)
    groups = int(a.get("group", 1))
    out_hw = shapes[0][2:]
    cols = _patches(_pad2d(x, pads, 0.0), kernel, strides, dilations, out_hw, 0.0)
    n = x.shape[0]
    oc, icg = w.shape[:2]
    ocg = oc // groups
    part = cols.reshape((n, groups, icg) + tuple(out_hw) + (-1,))  # every group in one product
    weights = w.reshape(groups, ocg, icg, -1)
    y = np.einsum("goik,ngihwk->ngohw", weights, part, optimize=True).reshape((n, oc) + tuple(out_hw))
    if len(xs) > 2 and xs[2] is not None:
        y += _f32(xs[2]).reshape(1, -1, 1, 1)
    return [y]


op("Conv")(_one_d(_conv))


@op("PRelu")
def _prelu(xs, a, opset, shapes):
    """x where x >= 0, else slope * x (the slope broadcast to x: one per channel, or one for all)."""
    x, slope = _f32(xs[0]), _f32(xs[1])
    try:
        np.broadcast_shapes(slope.shape, x.shape)
    except ValueError:  # torch's one slope per channel, which opset 6 took where broadcasting does not
        if slope.ndim != 1 or x.ndim < 2 or slope.size != x.shape[1]:
            raise
        slope = slope.reshape((-1,) + (1,) * (x.ndim - 2))
    return [np.where(x >= 0, x, x * slope).astype(x.dtype)]


@op("ConvTranspose")
def _conv_transpose(xs, a, opset, shapes):
    """Every input pixel times the kernel, added into the output at stride spacing, cropped by the pads."""
    x, w = _f32(xs[0]), _f32(xs[1])
    if w.ndim != 4:
        raise ValueError(f"a {w.ndim - 2}-D transposed convolution (the host computes 2-D ones)")
    n, c, h, wd = x.shape
    groups = int(a.get("group", 1))
    cg, mg, kh, kw = c // groups, w.shape[1], w.shape[2], w.shape[3]
    sh, sw = a.get("strides", [1, 1])
    dh, dw = a.get("dilations", [1, 1])
    oh, ow = shapes[0][2:]
    full_h, full_w = sh * (h - 1) + (kh - 1) * dh + 1, sw * (wd - 1) + (kw - 1) * dw + 1
    pads = a.get("pads")
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER") or pads is None:
        extra_h, extra_w = max(0, full_h - oh), max(0, full_w - ow)
        lower = auto == "SAME_LOWER"
        top = extra_h - extra_h // 2 if lower else extra_h // 2
        left = extra_w - extra_w // 2 if lower else extra_w // 2
        if auto not in ("SAME_UPPER", "SAME_LOWER"):
            top = left = 0
    else:
        top, left = pads[0], pads[1]
    _room((n, mg * groups, max(full_h, top + oh), max(full_w, left + ow)), "its uncropped output")
    full = np.zeros((n, mg * groups, max(full_h, top + oh), max(full_w, left + ow)), dtype=x.dtype)
    for g in range(groups):
        xg = x[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                part = np.einsum("nchw,cm->nmhw", xg, w[g * cg:(g + 1) * cg, :, i, j], optimize=True)
                full[:, g * mg:(g + 1) * mg, i * dh:i * dh + sh * (h - 1) + 1:sh,
                     j * dw:j * dw + sw * (wd - 1) + 1:sw] += part
    y = full[:, :, top:top + oh, left:left + ow]
    if len(xs) > 2 and xs[2] is not None:
        y = y + _f32(xs[2]).reshape(1, -1, 1, 1)
    return [np.ascontiguousarray(y)]


def _max_pool(xs, a, opset, shapes):
    x = _f32(xs[0])
    kernel = tuple(a["kernel_shape"])
    strides, pads, dilations = _spatial(a, kernel)
    cols = _patches(_pad2d(x, pads, -np.inf), kernel, strides, dilations, shapes[0][2:], -np.inf)
    return [cols.max(axis=-1)]


def _average_pool(xs, a, opset, shapes):
    x = _f32(xs[0])
    kernel = tuple(a["kernel_shape"])
    strides, pads, dilations = _spatial(a, kernel)
    out_hw = shapes[0][2:]
    total = _patches(_pad2d(x, pads, 0.0), kernel, strides, dilations, out_hw, 0.0).sum(axis=-1)
    ones = np.ones((1, 1) + x.shape[2:], dtype=x.dtype)
    if a.get("count_include_pad", 0):  # the padding counts, the part of a ceil_mode window past it does not
        ones = _pad2d(ones, pads, 1.0)
        pads = [0, 0, 0, 0]
    count = _patches(_pad2d(ones, pads, 0.0), kernel, strides, dilations, out_hw, 0.0).sum(axis=-1)
    return [total / np.maximum(count, 1)]


op("MaxPool", one_input=True)(_one_d(_max_pool))
op("AveragePool", one_input=True)(_one_d(_average_pool))


@op("GlobalAveragePool", one_input=True)
def _global_average_pool(xs, a, opset, shapes):
    x = _f32(xs[0])
    return [x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)]


@op("GlobalMaxPool", one_input=True)
def _global_max_pool(xs, a, opset, shapes):
    x = _f32(xs[0])
    return [x.max(axis=tuple(range(2, x.ndim)), keepdims=True)]


# -- reductions ----------------------------------------------------------------------------------------------------
def _reduce(fn: Callable[..., np.ndarray]) -> Op:
    def apply(xs, a, opset, shapes):
        x = _f32(xs[0])
        axes = forms.reduce_axes(xs, a, x.ndim)
        if not axes:  # noop_with_empty_axes
            return [x]
        y = fn(x, axis=axes, keepdims=True)
        return [y.reshape(shapes[0])]

    return apply


OPS.update({"ReduceMean": _reduce(np.mean), "ReduceMax": _reduce(np.max), "ReduceMin": _reduce(np.min),
            "ReduceSum": _reduce(np.sum), "ReduceL2": _reduce(lambda x, **k: np.sqrt(np.sum(x * x, **k)))})


# -- data movement -------------------------------------------------------------------------------------------------
def _reshape(xs, a, opset, shapes):
    return [np.asarray(xs[0]).reshape(shapes[0])]


for _name in ("Reshape", "Flatten", "Squeeze", "Unsqueeze"):
    op(_name, one_input=_name == "Flatten")(_reshape)
OPS["Expand"] = lambda xs, a, opset, shapes: [np.broadcast_to(np.asarray(xs[0]), shapes[0]).copy()]


@op("Transpose", one_input=True)
def _transpose(xs, a, opset, shapes):
    x = np.asarray(xs[0])
    return [np.transpose(x, a.get("perm", list(range(x.ndim))[::-1]))]


@op("Concat")
def _concat(xs, a, opset, shapes):
    return [np.concatenate([np.asarray(x) for x in xs], axis=a["axis"])]


@op("Split")
def _split(xs, a, opset, shapes):
    x = np.asarray(xs[0])
    axis = a.get("axis", 0) % x.ndim
    bounds = np.cumsum([s[axis] for s in shapes])[:-1]
    return list(np.split(x, bounds, axis=axis))


@op("Slice")
def _slice(xs, a, opset, shapes):
    x = np.asarray(xs[0])
    if opset < 10:
        starts, ends, axes, steps = a["starts"], a["ends"], a.get("axes"), None
    else:
        starts, ends = np.ravel(xs[1]), np.ravel(xs[2])
        axes = np.ravel(xs[3]) if len(xs) > 3 and xs[3] is not None else None
        steps = np.ravel(xs[4]) if len(xs) > 4 and xs[4] is not None else None
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        dim = x.shape[int(axis)]
        start, end, step = int(start), int(end), int(step)
        start = max(-1 if step < 0 else 0, min(dim - (step < 0), start + dim if start < 0 else start))
        end = max(-1, min(dim, end + dim if end < 0 else end))
        index[int(axis) % x.ndim] = slice(start, end if end >= 0 else None, step)
    return [x[tuple(index)]]


@op("Gather")
def _gather(xs, a, opset, shapes):
    x, indices = np.asarray(xs[0]), np.asarray(xs[1]).astype(np.int64)
    axis = a.get("axis", 0) % x.ndim
    _room((*x.shape[:axis], *indices.shape, *x.shape[axis + 1:]), "its output")
    return [np.take(x, np.where(indices < 0, indices + x.shape[axis], indices), axis=axis)]


@op("Pad")
def _pad(xs, a, opset, shapes):
    x = _f32(xs[0])
    form = forms.pad_form(xs, a, opset, x.ndim)
    pads, value, mode = form.pads, form.value, form.mode
    n = x.ndim
    width = [(max(pads[i], 0), max(pads[i + n], 0)) for i in range(n)]
    _room([d + lo + hi for d, (lo, hi) in zip(x.shape, width, strict=True)], "its padded input")
    y = np.pad(x, width, mode="constant", constant_values=value) if mode == "constant" else \
        np.pad(x, width, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode])
    crop = tuple(slice(-min(pads[i], 0), y.shape[i] + min(pads[i + n], 0)) for i in range(n))
    return [y[crop]]


@op("Upsample")
def _upsample(xs, a, opset, shapes):
    """Upsample (opsets 7-9): Resize with opset 10's coordinates (asymmetric, nearest rounding down)."""
    return [resize(_f32(xs[0]) if a.get("mode", "nearest") != "nearest" else np.asarray(xs[0]), shapes[0],
                   None, a, 10)]


@op("Resize")
def _resize(xs, a, opset, shapes):
    """Resize with every mode (nearest, linear, cubic) and coordinate transformation (vtasim.host.resize);
    opset 10 maps output to input coordinates as Upsample does. The scales input, when given, sets each
    axis's scale; the output's static shape sets its size."""
    scales = xs[2] if opset >= 11 and len(xs) > 2 and xs[2] is not None and np.size(xs[2]) else \
        xs[1] if opset < 11 and len(xs) > 1 and xs[1] is not None else None
    x = np.asarray(xs[0]) if a.get("mode", "nearest") == "nearest" else _f32(xs[0])
    return [resize(x, shapes[0], None if scales is None else np.ravel(scales), a, opset)]


# -- normalisation and activations of transformers -----------------------------------------------------------------
@op("LayerNormalization")
def _layer_norm(xs, a, opset, shapes):
    """(x - mean) / sqrt(variance + epsilon) * scale + bias over the axes from ``axis`` on; the optional
    outputs are the mean and the inverse standard deviation."""
    x = _f32(xs[0])
    axes = tuple(range(int(a.get("axis", -1)) % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + x.dtype.type(forms.epsilon(a)))
    y = (x - mean) * inv * _f32(xs[1])
    if len(xs) > 2 and xs[2] is not None:
        y = y + _f32(xs[2])
    return [y, mean, inv][:len(shapes)]


@op("Gelu", one_input=True)
def _gelu(xs, a, opset, shapes):
    """x * Phi(x): with the error function, or its tanh approximation (approximate='tanh')."""
    x = _f32(xs[0])
    t = x.dtype.type
    if a.get("approximate", "none") == "tanh":
        return [t(0.5) * x * (1 + np.tanh(t(np.sqrt(2 / np.pi)) * (x + t(0.044715) * x ** 3)))]
    return [t(0.5) * x * (1 + _erf(x / t(np.sqrt(2))))]


@op("Mish", one_input=True)
def _mish(xs, a, opset, shapes):
    x = _f32(xs[0])
    return [x * np.tanh(np.logaddexp(x, 0).astype(x.dtype))]


@op("Einsum")
def _einsum(xs, a, opset, shapes):
    """Einstein summation of one or two operands (a transformer's attention products)."""
    if len(xs) > 2:
        raise ValueError(f"an Einsum of {len(xs)} operands (the host takes one or two)")
    return [np.einsum(str(a["equation"]), *(_f32(x) for x in xs)).astype(np.float32)]


_INTEGERS = {code: np.dtype(kind).type for code, kind in ONNX_DTYPES.items() if np.dtype(kind).kind in "iu"}


@op("Cast")
def _cast(xs, a, opset, shapes):
    """To ONNX's type ``to``: integers truncate toward zero and saturate at the type's bounds, booleans are 0
    or 1, float16 rounds; the values stay in a float array."""
    x, to = _f32(xs[0]), int(a.get("to", 1))
    if to in _INTEGERS:
        kind = np.iinfo(_INTEGERS[to])
        return [np.clip(np.trunc(x), kind.min, kind.max).astype(x.dtype)]
    if to == 9:
        return [(x != 0).astype(x.dtype)]
    if to == 10:
        return [x.astype(np.float16).astype(x.dtype)]
    if to in (1, 11, 16):
        return [x]
    raise ValueError(f"casting to ONNX type {to} (the host casts to numbers and booleans)")

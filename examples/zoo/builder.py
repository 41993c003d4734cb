"""A small ONNX graph builder that names tensors and parameters the way real exporters do.

Each operator method appends one node (or a few), records the static shape of
its output (batch 1) and returns the output name, so networks read like the
framework code they mimic. A shape that would drop below 1 raises ValueError:
that is how the smallest accepted input size of each network is found.

Naming styles:
    torch   old torch.onnx: nodes "Conv_12", tensors "123", parameters "layer1.0.conv1.weight"
    torch2  torch >= 1.13: nodes "/features/features.0/features.0.0/Conv", tensors "..._output_0",
            folded Conv parameters "onnx::Conv_123"
    caffe2  caffe2 model zoo: unnamed nodes, tensors "conv1_1" (in-place ops bump the version:
            "conv1_2"), parameters "conv1_w_0", "conv1_bn_riv_0", optional prefix "gpu_0/"
    darknet yolo_to_onnx converters: nodes and tensors "001_convolutional", "001_convolutional_bn",
            parameters "001_convolutional_conv_weights", "001_convolutional_bn_scale"
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Shape = tuple[int, ...]

_PARAM_SUFFIX = {
    "torch": {"weight": ".weight", "bias": ".bias", "gamma": ".weight", "beta": ".bias", "mean": ".running_mean",
              "var": ".running_var"},
    "caffe2": {"weight": "_w_0", "bias": "_b_0", "gamma": "_s_0", "beta": "_b_0", "mean": "_rm_0", "var": "_riv_0"},
    "darknet": {"weight": "_conv_weights", "bias": "_conv_bias", "gamma": "_scale", "beta": "_bias", "mean": "_mean",
                "var": "_var"},
}
_PARAM_SUFFIX["torch2"] = _PARAM_SUFFIX["torch"]


def torch_scope(path: str) -> str:
    """Module path "features.1.conv.0.0" as torch 2 scopes it: "/features/features.1/conv/conv.0/conv.0.0"."""
    parts: list[str] = []
    for item in path.split("."):
        parts.append(f"{parts[-1]}.{item}" if item.isdigit() and parts else item)
    return "".join(f"/{p}" for p in parts)


def _window_out(n: int, k: int, s: int, pb: int, pe: int, dilation: int = 1, ceil: bool = False) -> int:
    """Output length of a convolution or pooling window along one axis (torch's ceil-mode rule)."""
    span = n + pb + pe - dilation * (k - 1) - 1
    if span < 0:
        return 0
    out = (math.ceil(span / s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= n + pb:
        out -= 1
    return out


class GraphBuilder:
    """Nodes, initialisers and static shapes of one graph under construction."""

    def __init__(self, name: str, *, style: str, opset: int, seed: int, prefix: str = ""):
        if style not in ("torch", "torch2", "caffe2", "darknet"):
            raise ValueError(f"unknown naming style {style!r}")
        self.name, self.style, self.opset, self.prefix = name, style, opset, prefix
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[tuple[str, np.ndarray]] = []  # initialisers, written into the model at the end
        self.inputs: list[onnx.ValueInfoProto] = []
        self.shapes: dict[str, Shape] = {}
        self.batch_param: str | None = None
        self._taken: set[str] = set()
        self._versions: dict[str, int] = defaultdict(int)
        self._ids = itertools.count(1)
        self._dummies = itertools.count(1)

    # -- names -------------------------------------------------------------------------------------------------

    def _unique(self, base: str) -> str:
        name, k = base, 0
        while name in self._taken:
            k += 1
            name = f"{base}_{k}"
        self._taken.add(name)
        return name

    def _names(self, op: str, scope: str | None, n_out: int) -> tuple[str, list[str]]:
        """Node name and output tensor names for one new node, in the builder's style."""
        if self.style == "torch":
            return f"{op}_{len(self.nodes)}", [self._unique(str(next(self._ids))) for _ in range(n_out)]
        if self.style == "torch2":
            node = self._unique(f"{torch_scope(scope) if scope else ''}/{op}")
            return node, [f"{node}_output_{i}" for i in range(n_out)]
        if self.style == "caffe2":
            base = self.prefix + (scope or op.lower())
            self._versions[base] += 1
            v = self._versions[base]
            return "", [self._unique(f"{base}_{v}")] + [self._unique(f"{base}_{v}_{i}") for i in range(1, n_out)]
        node = self._unique(scope or op.lower())
        return node, [node] + [self._unique(f"{node}_{i}") for i in range(1, n_out)]

    def _param_name(self, op: str, scope: str, kind: str) -> str:
        if self.style == "torch2" and op == "Conv":
            return self._unique(f"onnx::Conv_{next(self._ids)}")
        return self._unique(self.prefix + scope + _PARAM_SUFFIX[self.style][kind])

    def param(self, op: str, scope: str, kind: str, value: np.ndarray) -> str:
        """Add a float32 initialiser for parameter ``kind`` (weight, bias, gamma, beta, mean, var) of ``scope``."""
        name = self._param_name(op, scope, kind)
        self.weights.append((name, np.asarray(value, np.float32)))
        self.shapes[name] = tuple(value.shape)
        return name

    def const(self, value: np.ndarray | Sequence[int] | float, scope: str | None = None, *, node: bool = False,
              user: str = "Constant") -> str:
        """A constant tensor (int lists become int64): an initialiser, or a Constant node when ``node``."""
        if isinstance(value, float):
            array = np.array(value, np.float32)
        else:
            array = np.asarray(value)
            array = array.astype(np.int64) if array.dtype.kind in "iu" else array.astype(np.float32)
        if node:
            name, (out,) = self._names("Constant", scope, 1)
            self.nodes.append(helper.make_node("Constant", [], [out], name=name, value=numpy_helper.from_array(array)))
        else:
            if self.style == "torch":
                out = self._unique(str(next(self._ids)))
            elif self.style == "torch2":
                out = self._unique(f"onnx::{user}_{next(self._ids)}")
            elif self.style == "caffe2":
                out = self._unique(f"{self.prefix}OC2_DUMMY_{next(self._dummies)}")
            else:
                out = self._unique(f"{scope or 'const'}_{user.lower()}")
            self.weights.append((out, array))
        self.shapes[out] = array.shape
        return out

    # -- graph ---------------------------------------------------------------------------------------------------

    def input(self, name: str, shape: Shape, batch_param: str | None = None) -> str:
        """Declare the image input; ``batch_param`` makes dimension 0 symbolic (``shape`` keeps batch 1)."""
        dims: list[int | str] = [batch_param or shape[0], *shape[1:]]
        self.batch_param = batch_param
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, dims))
        self._taken.add(name)
        self.shapes[name] = shape
        return name

    def node(self, op: str, inputs: Sequence[str], shapes: Sequence[Shape], scope: str | None = None,
             out: str | None = None, **attrs) -> list[str]:
        """Append a node with len(shapes) outputs whose static shapes are ``shapes``; ``out`` names output 0."""
        for shape in shapes:
            if any(d < 1 for d in shape):
                raise ValueError(f"{self.name}: input too small, {op} at {scope or len(self.nodes)} gives {shape}")
        name, outs = self._names(op, scope, len(shapes))
        if out is not None and out != outs[0]:
            if out in self._taken:
                raise ValueError(f"{self.name}: tensor name {out!r} is taken")
            self._taken.add(out)
            outs[0] = out
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name, **attrs))
        self.shapes.update(zip(outs, (tuple(s) for s in shapes), strict=True))
        return outs

    def op(self, op: str, inputs: Sequence[str], scope: str | None = None, out: str | None = None, **attrs) -> str:
        """A one-output node whose output has the shape of its first input (activations, LRN, Softmax, Dropout)."""
        return self.node(op, inputs, [self.shapes[inputs[0]]], scope, out, **attrs)[0]

    def model(self, outputs: Sequence[str], *, doc: str = "", ir_version: int = 8,
              initializers_as_inputs: bool = False) -> onnx.ModelProto:
        """The finished ModelProto; ``initializers_as_inputs`` lists the weights as graph inputs too (old exporters)."""
        value_infos = []
        for name in outputs:
            shape: list[int | str] = list(self.shapes[name])
            if self.batch_param:
                shape[0] = self.batch_param
            value_infos.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        inputs = list(self.inputs)
        if initializers_as_inputs:
            inputs += [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                       for name, a in self.weights]
        graph = helper.make_graph(self.nodes, self.name, inputs, value_infos)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)], doc_string=doc,
                                  producer_name="vta-zoo", producer_version="1")
        model.ir_version = ir_version
        for name, array in self.weights:  # filled in place: copying a 500 MB graph around costs seconds
            tensor = model.graph.initializer.add()
            tensor.name, tensor.data_type = name, helper.np_dtype_to_tensor_dtype(array.dtype)
            tensor.dims.extend(array.shape)
            tensor.raw_data = array.tobytes()
        return model

    # -- weights -------------------------------------------------------------------------------------------------

    def normal(self, shape: Shape, std: float) -> np.ndarray:
        values = self.rng.standard_normal(shape, dtype=np.float32)
        values *= np.float32(std)
        return values

    def uniform(self, n: int, low: float, high: float) -> np.ndarray:
        return self.rng.uniform(low, high, n).astype(np.float32)

    # -- layers --------------------------------------------------------------------------------------------------

    def conv(self, x: str, oc: int, k: int, stride: int = 1, pads: int | Sequence[int] = 0, group: int = 1,
             dilation: int = 1, bias: bool = True, scope: str | None = None, gain: float = 2.0,
             bias_std: float = 0.01, out: str | None = None) -> str:
        """Conv with a He-normal weight, std sqrt(gain / fan_in); ``pads`` is one int or [top, left, bottom, right]."""
        n, c, h, w = self.shapes[x]
        p = [pads] * 4 if isinstance(pads, int) else list(pads)
        if c % group or oc % group:
            raise ValueError(f"{self.name}: {c} -> {oc} channels do not split into {group} groups")
        fan_in = c // group * k * k
        scope = scope or f"conv{len(self.nodes)}"
        inputs = [x, self.param("Conv", scope, "weight", self.normal((oc, c // group, k, k), math.sqrt(gain / fan_in)))]
        if bias:
            inputs.append(self.param("Conv", scope, "bias", self.normal((oc,), bias_std)))
        shape = (n, oc, _window_out(h, k, stride, p[0], p[2], dilation),
                 _window_out(w, k, stride, p[1], p[3], dilation))
        attrs: dict = {"kernel_shape": [k, k], "strides": [stride, stride], "pads": p}
        if self.style.startswith("torch") or dilation > 1:  # caffe2 and darknet leave the defaults out
            attrs["dilations"] = [dilation, dilation]
        if self.style.startswith("torch") or group > 1:
            attrs["group"] = group
        return self.node("Conv", inputs, [shape], scope, out, **attrs)[0]

    def _bn_params(self, c: int, gamma: tuple[float, float]) -> dict[str, np.ndarray]:
        return {"gamma": self.uniform(c, *gamma), "beta": self.normal((c,), 0.1), "mean": self.normal((c,), 0.1),
                "var": self.uniform(c, 0.5, 1.5)}

    def bn(self, x: str, scope: str | None = None, gamma: tuple[float, float] = (0.5, 1.5), eps: float = 1e-5,
           out: str | None = None) -> str:
        """BatchNormalization with random statistics (gamma ~ U(gamma), beta, mean ~ N(0, 0.1), var ~ U(.5, 1.5))."""
        scope = scope or f"bn{len(self.nodes)}"
        params = [self.param("BatchNormalization", scope, k, v) for k, v in self._bn_params(self.shapes[x][1],
                                                                                             gamma).items()]
        attrs = {"epsilon": eps}
        if self.style in ("torch", "torch2"):
            attrs["momentum"] = 0.9
        return self.op("BatchNormalization", [x, *params], scope, out, **attrs)

    def bn_as_mul_add(self, x: str, scope: str, gamma: tuple[float, float] = (0.5, 1.5), eps: float = 1e-5) -> str:
        """A batch norm folded to per-channel Mul and Add of Unsqueeze'd [C] vectors (caffe BatchNorm + Scale)."""
        p = self._bn_params(self.shapes[x][1], gamma)
        scale = p["gamma"] / np.sqrt(p["var"] + eps)
        vectors = []
        for kind, value in (("gamma", scale), ("beta", p["beta"] - p["mean"] * scale)):
            vec = self.param("Mul", scope, kind, value)
            vectors.append(self.unsqueeze(vec, [1, 2], scope))
        y = self.op("Mul", [x, vectors[0]], scope)
        return self.op("Add", [y, vectors[1]], scope)

    def unsqueeze(self, x: str, axes: Sequence[int], scope: str | None = None, node_const: bool = False) -> str:
        shape = list(self.shapes[x])
        for a in sorted(axes):
            shape.insert(a, 1)
        if self.opset >= 13:
            return self.node("Unsqueeze", [x, self.const(list(axes), scope, node=node_const, user="Unsqueeze")],
                             [tuple(shape)], scope)[0]
        return self.node("Unsqueeze", [x], [tuple(shape)], scope, axes=list(axes))[0]

    def relu(self, x: str, scope: str | None = None, out: str | None = None) -> str:
        return self.op("Relu", [x], scope, out)

    def leaky_relu(self, x: str, alpha: float = 0.1, scope: str | None = None) -> str:
        return self.op("LeakyRelu", [x], scope, alpha=alpha)

    def clip(self, x: str, lo: float = 0.0, hi: float = 6.0, scope: str | None = None, node_const: bool = True) -> str:
        """Clip (ReLU6); from opset 11 the bounds are scalar inputs, Constant nodes when ``node_const``."""
        if self.opset < 11:
            return self.op("Clip", [x], scope, min=lo, max=hi)
        bounds = [self.const(v, scope, node=node_const, user="Clip") for v in (float(lo), float(hi))]
        return self.op("Clip", [x, *bounds], scope)

    def _pool(self, op: str, x: str, k: int, stride: int, pads: int | Sequence[int], ceil: str | None,
              scope: str | None, **attrs) -> str:
        """Pooling; ``ceil`` is None, "attr" (ceil_mode=1) or "pads" (caffe: ceil written as extra end padding)."""
        n, c, h, w = self.shapes[x]
        p = [pads] * 4 if isinstance(pads, int) else list(pads)
        if ceil == "pads":
            for axis, size in ((0, h), (1, w)):
                need = (_window_out(size, k, stride, p[axis], p[axis + 2], ceil=True) - 1) * stride + k
                p[axis + 2] = max(p[axis + 2], need - size - p[axis])
        use_ceil = ceil == "attr"
        if use_ceil:
            attrs["ceil_mode"] = 1
        shape = (n, c, _window_out(h, k, stride, p[0], p[2], ceil=use_ceil),
                 _window_out(w, k, stride, p[1], p[3], ceil=use_ceil))
        return self.node(op, [x], [shape], scope, kernel_shape=[k, k], strides=[stride, stride], pads=p, **attrs)[0]

    def maxpool(self, x: str, k: int, stride: int, pads: int | Sequence[int] = 0, ceil: str | None = None,
                scope: str | None = None) -> str:
        return self._pool("MaxPool", x, k, stride, pads, ceil, scope)

    def avgpool(self, x: str, k: int, stride: int, pads: int | Sequence[int] = 0, ceil: str | None = None,
                scope: str | None = None) -> str:
        return self._pool("AveragePool", x, k, stride, pads, ceil, scope)

    def gap(self, x: str, scope: str | None = None) -> str:
        n, c = self.shapes[x][:2]
        return self.node("GlobalAveragePool", [x], [(n, c, 1, 1)], scope)[0]

    def reduce_mean(self, x: str, axes: Sequence[int], keepdims: int = 0, scope: str | None = None) -> str:
        shape = [1 if i in axes else d for i, d in enumerate(self.shapes[x])]
        if not keepdims:
            shape = [d for i, d in enumerate(shape) if i not in axes]
        return self.node("ReduceMean", [x], [tuple(shape)], scope, axes=list(axes), keepdims=keepdims)[0]

    def flatten(self, x: str, scope: str | None = None) -> str:
        shape = self.shapes[x]
        return self.node("Flatten", [x], [(shape[0], math.prod(shape[1:]))], scope, axis=1)[0]

    def reshape(self, x: str, target: Sequence[int], scope: str | None = None, node_const: bool = False) -> str:
        """Reshape to a constant shape (0 copies a dimension, one -1 is inferred)."""
        src = self.shapes[x]
        shape = [src[i] if d == 0 else d for i, d in enumerate(target)]
        if -1 in shape:
            shape[shape.index(-1)] = math.prod(src) // -math.prod(shape)
        if math.prod(shape) != math.prod(src):
            raise ValueError(f"{self.name}: cannot reshape {src} to {list(target)}")
        shape_in = self.const(list(target), scope, node=node_const, user="Reshape")
        return self.node("Reshape", [x, shape_in], [tuple(shape)], scope)[0]

    def torch_flatten(self, x: str) -> str:
        """x.reshape(x.shape[0], -1) as torch exports it: Shape -> Gather 0 -> Unsqueeze -> Concat [-1] -> Reshape."""
        shape = self.shapes[x]
        dims = self.node("Shape", [x], [(len(shape),)])[0]
        batch = self.node("Gather", [dims, self.const(np.int64(0), node=True)], [()], axis=0)[0]
        batch = self.unsqueeze(batch, [0], node_const=True)
        target = self.node("Concat", [batch, self.const([-1], node=True)], [(2,)], axis=0)[0]
        return self.node("Reshape", [x, target], [(shape[0], math.prod(shape[1:]))])[0]

    def gemm(self, x: str, n_out: int, scope: str | None = None, std: float | None = None, gain: float = 2.0,
             out: str | None = None) -> str:
        """Gemm with a [n_out, K] weight (transB=1); std defaults to sqrt(gain / K)."""
        n, k = self.shapes[x]
        scope = scope or f"fc{len(self.nodes)}"
        weight = self.normal((n_out, k), math.sqrt(gain / k) if std is None else std)
        inputs = [x, self.param("Gemm", scope, "weight", weight), self.param("Gemm", scope, "bias",
                                                                              self.normal((n_out,), 0.01))]
        return self.node("Gemm", inputs, [(n, n_out)], scope, out, alpha=1.0, beta=1.0, transB=1)[0]

    def concat(self, xs: Sequence[str], axis: int = 1, scope: str | None = None) -> str:
        shapes = [self.shapes[x] for x in xs]
        rest = {s[:axis] + s[axis + 1:] for s in shapes}
        if len(rest) != 1:
            raise ValueError(f"{self.name}: Concat of mismatched shapes {shapes}")
        shape = list(shapes[0])
        shape[axis] = sum(s[axis] for s in shapes)
        return self.node("Concat", xs, [tuple(shape)], scope, axis=axis)[0]

    def split(self, x: str, parts: Sequence[int], axis: int = 1, scope: str | None = None) -> list[str]:
        shape = self.shapes[x]
        shapes = [shape[:axis] + (p,) + shape[axis + 1:] for p in parts]
        if self.opset >= 13:
            return self.node("Split", [x, self.const(list(parts), scope, user="Split")], shapes, scope, axis=axis)
        return self.node("Split", [x], shapes, scope, axis=axis, split=list(parts))

    def transpose(self, x: str, perm: Sequence[int], scope: str | None = None) -> str:
        shape = tuple(self.shapes[x][p] for p in perm)
        return self.node("Transpose", [x], [shape], scope, perm=list(perm))[0]

    def add(self, a: str, b: str, scope: str | None = None, op: str = "Add") -> str:
        """Elementwise residual addition (``op="Sum"`` as caffe2 writes it)."""
        if self.shapes[a] != self.shapes[b]:
            raise ValueError(f"{self.name}: {op} of {self.shapes[a]} and {self.shapes[b]}")
        return self.op(op, [a, b], scope)

    def dropout(self, x: str, ratio: float, scope: str | None = None, mask: bool = False) -> str:
        """Dropout (identity at inference); ratio an attribute before opset 12, a scalar input after."""
        if self.opset >= 12:
            return self.op("Dropout", [x, self.const(float(ratio), scope, user="Dropout")], scope)
        shape = self.shapes[x]
        return self.node("Dropout", [x], [shape, shape] if mask else [shape], scope, ratio=ratio)[0]

    def lrn(self, x: str, size: int = 5, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0,
            scope: str | None = None) -> str:
        return self.op("LRN", [x], scope, size=size, alpha=alpha, beta=beta, bias=bias)

    def softmax(self, x: str, scope: str | None = None, out: str | None = None) -> str:
        return self.op("Softmax", [x], scope, out, axis=1)

    def resize_nearest(self, x: str, factor: int, scope: str | None = None) -> str:
        """Resize-11 nearest upsampling with an empty roi and scales [1, 1, f, f] as inputs."""
        n, c, h, w = self.shapes[x]
        roi = self.const(np.zeros(0, np.float32), scope, user="roi")
        scales = self.const(np.array([1, 1, factor, factor], np.float32), scope, user="scales")
        return self.node("Resize", [x, roi, scales], [(n, c, h * factor, w * factor)], scope, mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor")[0]

"""An ONNX graph as a list of float layers: VTA-sized kernels, and host nodes for what VTA cannot compute.

Each VTA layer is what one kernel will compute: a convolution or dense layer
(its batch normalisation folded into the weights, its ReLU or Clip fused), a
pooling, an addition or a channel concatenation. Identity, Flatten and
flattening Reshapes only rename tensors; QuantizeLinear/DequantizeLinear pairs
leave a scale hint on the tensor they quantise, and dequantised constants are
folded into float weights. A node VTA cannot compute (a converter raises
NotOnVta, or there is none) becomes a ``host`` layer when the host CPU can
compute it (vtasim.host.ops), its reason kept for the report; anything else
is refused with one line naming the node.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from vtacc.onnx.read.graph import Graph, Node
from vtacc.onnx.read.wire import release
from vtasim.host.ops import OPS as HOST_OPS
from vtasim.host.step import node_macs
from vtasm.errors import ModelError
from vtasm.formats.network import HostNode
from vtasm.portability import SHIFT_MAX

_RESERVED = {"kernel", "schedule", "main", "matmul", "dense", "conv2d", "max_pool", "sum_pool", "avg_pool",
             "global_avg_pool", "flatten", "concat", "min", "max", "clip", "relu", "int8", "int32"}


class LayerKind(str, Enum):
    """What a layer computes. Every switch over kinds handles the ones it takes and refuses the rest
    (unhandled), so a kind one of them forgets is an error there, never another kind's arithmetic."""

    CONV = "conv"
    DENSE = "dense"
    MAXPOOL = "maxpool"
    AVGPOOL = "avgpool"
    GAP = "gap"  # global average pooling
    ADD = "add"
    CONCAT = "concat"
    CLIP = "clip"  # a copy with bounds (ReLU, Clip; a concatenation's copied part)
    HOST = "host"  # an ONNX node run on the host CPU

    def __str__(self) -> str:
        return self.value


def unhandled(layer: Layer, where: str) -> TypeError:
    """The error a switch over layer kinds raises for a kind it has no rule for."""
    return TypeError(f"{where}: no rule for layer kind {layer.kind!r} (layer {layer.name})")


@dataclass
class Layer:
    """One kernel's worth of float computation."""

    kind: LayerKind
    name: str  # a kernel-language identifier
    sources: list[str]  # the ONNX nodes folded into it
    inputs: list[str]  # activation tensors read
    output: str  # activation tensor written
    shape: tuple[int, ...]  # of the output
    weight: np.ndarray | None = None  # conv [OC, IC/g, KH, KW]; dense [O, K] (K in NCHW order when flattened)
    bias: np.ndarray | None = None
    stride: int = 1
    pad: int = 0
    groups: int = 1
    size: int = 1  # pooling window
    pad_end: int = 0  # pooling: padding after the last row and column (ceil_mode, darknet's [0, 0, 1, 1])
    flatten: bool = False  # dense: reads its 4-D input flattened
    low: float = -math.inf  # fused activation bounds (ReLU: 0)
    high: float = math.inf
    node: Node | None = None  # host: the ONNX node, its inputs renamed to the tensors they alias
    reason: str = ""  # host: why VTA does not compute it
    in_shapes: list[tuple[int, ...] | None] | None = None  # host: the model's shape of each input
    out_shapes: list[tuple[int, ...]] | None = None  # host: the shape of each output ("" outputs: ())
    alpha: float = 0.0  # a fused leaky ReLU's slope (0: none) ...
    leaky: tuple[int, ...] = ()  # ... and the right shifts whose sum VTA multiplies by instead

    def __post_init__(self) -> None:
        self.kind = LayerKind(self.kind)  # a name no kind has is a ValueError here, where the layer is made

    @property
    def host_node(self) -> HostNode:
        """A host layer's node as the host computes it and the network file holds it (its tensors as renamed
        so far, static shapes): the one place a host layer becomes a HostNode."""
        n = self.node
        assert n is not None and self.in_shapes is not None and self.out_shapes is not None, self.name
        return HostNode(n.op, n.name, list(n.inputs), list(n.outputs), dict(n.attrs), list(self.in_shapes),
                        list(self.out_shapes))

    @property
    def outputs(self) -> list[str]:
        """Every tensor the layer writes (a host node may write several)."""
        return list(self.node.outputs) if self.node is not None else [self.output]


@dataclass
class Network:
    """The layers in order, the model's input and output tensors, their shapes and the scale hints."""

    name: str
    layers: list[Layer]
    input: str
    outputs: list[str]
    shapes: dict[str, tuple[int, ...]]
    hints: dict[str, float] = field(default_factory=dict)  # tensor -> scale given by a QDQ pair
    constants: dict[str, np.ndarray] = field(default_factory=dict)  # the constants host nodes read
    opset: int = 13
    names: dict[str, str] = field(default_factory=dict)  # model output -> the tensor that holds it
    aliases: dict[str, str] = field(default_factory=dict)  # a renamed ONNX tensor -> the tensor holding it
    ops: dict[str, str] = field(default_factory=dict)  # ONNX node name -> its operator type

    @property
    def output(self) -> str:
        return self.outputs[0]

    @property
    def on_host(self) -> list[Layer]:
        return [layer for layer in self.layers if layer.kind == LayerKind.HOST]


class NotOnVta(ModelError):
    """A node VTA cannot compute as written; the host CPU may (the message says why not VTA)."""


class _Lowering:
    def __init__(self, graph: Graph, block: int):
        self.g = graph
        self.block = block
        self.alias: dict[str, str] = {}
        self.flat: set[str] = set()  # tensors that are flattened views of 4-D ones
        self.layers: list[Layer] = []
        self.by_output: dict[str, Layer] = {}
        self.hints: dict[str, float] = {}
        self.names: set[str] = set()
        self.consts = dict(graph.constants)
        self.pending: dict[str, tuple[Node, str, list[int]]] = {}  # a Pad's output -> (Pad, input, pads)

    def fail(self, node: Node, message: str) -> NotOnVta:
        return NotOnVta(f"{node.where(self.g.name)}: {message}", node=node.name)

    def canon(self, tensor: str) -> str:
        """The tensor a name stands for, following renames (each name on the way then points there
        directly: a chain of 20,000 Identity nodes costs linear time, not quadratic)."""
        passed = []
        while tensor in self.alias:
            passed.append(tensor)
            tensor = self.alias[tensor]
        for name in passed[:-1]:
            self.alias[name] = tensor
        return tensor

    def const(self, node: Node, tensor: str, what: str) -> np.ndarray:
        return np.asarray(self.const_value(node, tensor, what), dtype=np.float64)

    def weight(self, node: Node, tensor: str) -> np.ndarray:
        """A weight constant: float32 and float64 ones as the model stores them (the float network computes
        in float64 and converts a layer's weights when it uses them: a VGG's 550 MB of float32 weights
        would take 1.1 GB held as float64), others as float64."""
        w = self.const_value(node, tensor, "weight")
        if w.dtype in (np.float32, np.float64):
            return w
        converted = np.asarray(w, dtype=np.float64)
        release(w)
        return converted

    def const_value(self, node: Node, tensor: str, what: str) -> np.ndarray:
        if tensor not in self.consts:
            raise self.fail(node, f"{what} '{tensor}' must be a constant (an initialiser)")
        return np.asarray(self.consts[tensor])

    def activation(self, node: Node, tensor: str, flat_ok: bool = False) -> str:
        t = self.canon(tensor)
        if t in self.consts:
            raise self.fail(node, f"input '{tensor}' is a constant; VTA layers read activations here")
        if t in self.flat and not flat_ok:
            raise self.fail(node, f"input '{tensor}' is a flattened tensor; only a Gemm or MatMul can read it")
        return t

    def fresh(self, base: str) -> str:
        name = re.sub(r"[^A-Za-z0-9_]", "_", base).strip("_") or "layer"
        if name[0].isdigit():
            name = "l" + name
        if name in _RESERVED:
            name += "_layer"
        name, n = name.lstrip("_") or "layer", 2
        unique = name
        while unique in self.names:
            unique, n = f"{name}_{n}", n + 1
        self.names.add(unique)
        return unique

    def add(self, layer: Layer) -> None:
        self.layers.append(layer)
        self.by_output[layer.output] = layer

    def sole_consumer(self, tensor: str, node: Node) -> bool:
        return [n.name for n in self.g.consumers(tensor)] == [node.name] and tensor not in self.g.outputs

    def run(self) -> Network:
        if len(self.g.inputs) != 1:
            raise ModelError(f"{self.g.name}: the model has {len(self.g.inputs)} inputs "
                             f"({', '.join(self.g.inputs)}); the importer takes one")
        for node in self.g.nodes:
            convert = getattr(self, f"op_{node.op}", None)
            try:
                if convert is None:
                    raise self.fail(node, "VTA has no form of this operator")
                convert(node)
            except NotOnVta as exc:
                if node.op not in HOST_OPS:
                    raise
                self.host(node, exc.message.split(": ", 2)[-1])
        outs = []
        for name in self.g.outputs:
            out = self.canon(name)
            if out not in self.by_output:
                what = "the model's input itself" if out in self.g.inputs else \
                    "a constant" if out in self.consts else "computed by no layer"
                raise ModelError(f"{self.g.name}: the output '{name}' is {what}: there is nothing for VTA or the "
                                 "host to compute")
            if out != name and out not in self.g.outputs:  # an Identity or Dropout before the output
                self.rename_tensor(out, name)
                out = name
            outs.append(out)
        shapes = {k: v for k, v in self.g.shapes.items()}
        for layer in self.layers:
            shapes[layer.output] = layer.shape
        used = {t for layer in self.on_host() for t in layer.node.inputs if t in self.consts}
        return Network(self.g.name, self.layers, self.g.inputs[0], outs, shapes, self.hints,
                       {t: self.consts[t] for t in sorted(used)}, self.g.opset,
                       dict(zip(self.g.outputs, outs, strict=True)),
                       {t: self.canon(t) for t in self.alias if t not in self.consts},
                       {n.name: n.op for n in self.g.nodes})

    def rename_tensor(self, old: str, new: str) -> None:
        """Call the tensor ``old`` by the model's name ``new`` everywhere (model outputs keep their names)."""
        def swap(names: list[str]) -> list[str]:
            return [new if t == old else t for t in names]

        for layer in self.layers:
            layer.inputs, layer.output = swap(layer.inputs), new if layer.output == old else layer.output
            if layer.node is not None:
                layer.node.inputs, layer.node.outputs = swap(layer.node.inputs), swap(layer.node.outputs)
        self.by_output[new] = self.by_output.pop(old)
        self.g.shapes[new] = self.g.shapes[old]
        if old in self.flat:
            self.flat.add(new)
        if old in self.hints:
            self.hints[new] = self.hints.pop(old)

    def on_host(self) -> list[Layer]:
        return [layer for layer in self.layers if layer.kind == LayerKind.HOST]

    def host(self, node: Node, reason: str) -> None:
        """The node as a host layer: it reads the tensors its inputs alias, in the shapes the model gives them."""
        for t in node.inputs:
            if t in self.pending:  # a Pad left for a Conv that runs here after all
                pad = self.pending.pop(t)[0]
                self.host(pad, "its Conv runs on the host")
        inputs = [self.canon(t) if t else "" for t in node.inputs]
        for t, original in zip(inputs, node.inputs, strict=True):
            if t and t not in self.consts and original in self.g.shapes:
                self.g.shapes.setdefault(t, self.g.shapes[original])
        renamed = Node(node.op, node.name, inputs, list(node.outputs), _plain(node.attrs))
        acts = list(dict.fromkeys(t for t in inputs if t and t not in self.consts))
        layer = Layer(LayerKind.HOST, self.fresh(node.name), [node.name], acts, node.outputs[0],
                      self.g.shapes[node.outputs[0]], node=renamed, reason=reason)
        layer.in_shapes = [self.g.shapes.get(original) if t else None for t, original in
                           zip(inputs, node.inputs, strict=True)]
        layer.out_shapes = [self.g.shapes[t] if t else () for t in renamed.outputs]
        self.layers.append(layer)
        for t in node.outputs:
            if t:
                self.by_output[t] = layer

    # -- renaming operators -------------------------------------------------------------------------------------
    def op_Identity(self, node: Node) -> None:
        if node.inputs[0] in self.consts:
            self.consts[node.outputs[0]] = self.consts[node.inputs[0]]
        self.alias[node.outputs[0]] = node.inputs[0]

    def op_Dropout(self, node: Node) -> None:
        """Identity at inference (its mask output, if any, is never read by a layer)."""
        self.op_Identity(node)

    def op_Flatten(self, node: Node) -> None:
        t = self.activation(node, node.inputs[0])
        shape = self.g.shapes[t]
        axis = node.attrs.get("axis", 1) % max(len(shape), 1)
        if axis != 1:
            raise self.fail(node, f"Flatten with axis={node.attrs.get('axis')} is not supported (axis 1 only)")
        self._flatten(node, t, shape)

    def _flatten(self, node: Node, t: str, shape: tuple[int, ...]) -> None:
        self.alias[node.outputs[0]] = t
        if len(shape) == 4:
            self.flat.add(t)
        elif len(shape) != 2:
            raise self.fail(node, f"flattening a rank-{len(shape)} tensor is not supported (rank 2 or 4)")

    def op_Reshape(self, node: Node) -> None:
        t = self.activation(node, node.inputs[0])
        shape, out = self.g.shapes[t], self.g.shapes[node.outputs[0]]
        if out == shape:
            self.alias[node.outputs[0]] = t
        elif len(out) == 2 and out[0] == shape[0] and out[1] == math.prod(shape[1:]):
            self._flatten(node, t, shape)
        else:
            raise self.fail(node, f"Reshape from {list(shape)} to {list(out)} is not supported; only flattening "
                                  "to [N, C*H*W] (or no change)")

    def op_QuantizeLinear(self, node: Node) -> None:
        scale, zero = self._qparams(node)
        if node.inputs[0] in self.consts:
            self.consts[node.outputs[0]] = self.consts[node.inputs[0]]  # a constant stays float until its DQ
            self.alias[node.outputs[0]] = node.inputs[0]
            return
        t = self.activation(node, node.inputs[0], flat_ok=True)
        if np.size(scale) != 1:
            raise self.fail(node, "activations need one scale per tensor (per-tensor quantisation)")
        self.hints[t] = float(np.ravel(scale)[0])
        self.alias[node.outputs[0]] = t

    def op_DequantizeLinear(self, node: Node) -> None:
        scale, zero = self._qparams(node)
        src = node.inputs[0]
        if src in self.consts:
            values = np.asarray(self.consts[src], dtype=np.float64)
            if self.canon(src) == src and src in self.g.constants:  # stored integers: dequantise them
                axis = node.attrs.get("axis", 1)
                s = np.asarray(scale, dtype=np.float64)
                if s.size > 1:
                    shape = [1] * values.ndim
                    shape[axis] = s.size
                    s = s.reshape(shape)
                values = (values - np.asarray(zero, dtype=np.float64).reshape(np.shape(s))) * s
            self.consts[node.outputs[0]] = values
            return
        self.alias[node.outputs[0]] = self.activation(node, src, flat_ok=True)

    def _qparams(self, node: Node) -> tuple[np.ndarray, np.ndarray]:
        scale = self.const(node, node.inputs[1], "scale")
        zero = np.asarray(self.consts[node.inputs[2]]) if len(node.inputs) > 2 and node.inputs[2] else np.zeros(1)
        if np.any(zero != 0):
            raise self.fail(node, "only symmetric quantisation (zero point 0) maps onto VTA's int8 arithmetic")
        if np.any(scale <= 0):
            raise self.fail(node, "scales must be positive")
        return scale, zero

    # -- layers ---------------------------------------------------------------------------------------------------
    def op_Pad(self, node: Node) -> None:
        """Zero padding of height and width read only by convolutions: it joins their padding (done when
        the Conv is lowered; a Conv that goes to the host gets the Pad as a host node before it)."""
        x = self.activation(node, node.inputs[0])
        a = node.attrs
        if self.g.opset < 11:
            pads, value = list(a.get("pads", [])), float(a.get("value", 0.0))
        else:
            pads = [int(v) for v in np.ravel(self.const(node, node.inputs[1], "pads"))]
            value = float(np.ravel(self.const(node, node.inputs[2], "value"))[0]) \
                if len(node.inputs) > 2 and node.inputs[2] else 0.0
            if len(node.inputs) > 3 and node.inputs[3]:
                raise self.fail(node, "pads on chosen axes (opset 18's axes input)")
        consumers = self.g.consumers(node.outputs[0])
        if a.get("mode", "constant") != "constant" or value != 0 or len(pads) != 8 or any(
                pads[i] for i in (0, 1, 4, 5)) or min(pads) < 0 or not consumers or \
                any(c.op != "Conv" for c in consumers) or node.outputs[0] in self.g.outputs:
            raise self.fail(node, "only zero padding of height and width that convolutions read joins their "
                                  "padding")
        self.pending[node.outputs[0]] = (node, x, [pads[2], pads[3], pads[6], pads[7]])

    def op_Conv(self, node: Node) -> None:
        extra = [0, 0, 0, 0]
        if node.inputs[0] in self.pending:  # a Pad before it: one padding
            _, x, extra = self.pending[node.inputs[0]]
        else:
            x = self.activation(node, node.inputs[0])
        w = self.weight(node, node.inputs[1])
        b = self.const(node, node.inputs[2], "bias") if len(node.inputs) > 2 and node.inputs[2] else None
        a = node.attrs
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise self.fail(node, "auto_pad is not supported; give explicit pads")
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            raise self.fail(node, f"dilations {a['dilations']} are not supported (dilation 1 only)")
        stride, pad = self._window(node, w.shape[2:], extra)
        if w.shape[2] != w.shape[3]:
            raise self.fail(node, f"a {w.shape[2]}x{w.shape[3]} kernel is not square")
        out = node.outputs[0]
        self.add(Layer(LayerKind.CONV, self.fresh(node.name), [node.name], [x], out, self.g.shapes[out], w,
                       b if b is not None else np.zeros(w.shape[0]), stride, pad, int(a.get("group", 1))))

    def _window(self, node: Node, kernel, extra=(0, 0, 0, 0)) -> tuple[int, int]:
        a = node.attrs
        strides = list(a.get("strides", [1] * len(kernel)))
        pads = [p + e for p, e in zip(a.get("pads", [0] * 2 * len(kernel)), extra, strict=False)]
        if len(set(strides)) != 1:
            raise self.fail(node, f"strides {strides} differ between height and width")
        if len(set(pads)) != 1:
            raise self.fail(node, f"pads {pads} are not the same on every side")
        return int(strides[0]), int(pads[0])

    def op_BatchNormalization(self, node: Node) -> None:
        """Folded into the convolution or dense layer before it, else a per-channel affine layer."""
        gamma, beta, mean, var = (self.const(node, t, "parameter") for t in node.inputs[1:5])
        factor = gamma / np.sqrt(var + node.attrs.get("epsilon", 1e-5))
        self._affine(node, node.inputs[0], factor, beta - mean * factor)

    def op_Mul(self, node: Node) -> None:
        if not self._with_constant(node, lambda v: (v, np.zeros_like(v)), lambda v: (v, np.zeros_like(v))):
            raise self.fail(node, "multiplying two tensors (VTA's portable ALU has no multiplier)")

    def op_Div(self, node: Node) -> None:
        if node.inputs[1] not in self.consts and self.canon(node.inputs[1]) not in self.consts:
            raise self.fail(node, "dividing by a tensor (VTA has no divider)")
        if not self._with_constant(node, None, lambda v: (1.0 / v, np.zeros_like(v))):
            raise self.fail(node, "dividing a constant by a tensor")

    def op_Sub(self, node: Node) -> None:
        if not self._with_constant(node, lambda v: (-np.ones_like(v), v), lambda v: (np.ones_like(v), -v)):
            raise self.fail(node, "subtracting a tensor (VTA's ALU adds, it cannot negate without a multiplier)")

    def _with_constant(self, node: Node, first, second) -> bool:
        """A binary node with one constant operand as a per-channel affine layer: ``first(v)`` gives
        (scale, bias) when the constant comes first, ``second(v)`` when second. False without a constant."""
        a, b = (self.canon(t) for t in node.inputs)
        if (a in self.consts) == (b in self.consts):
            return False
        at_first = a in self.consts
        if (first if at_first else second) is None:
            return False
        x_name = node.inputs[1] if at_first else node.inputs[0]
        x = self.activation(node, x_name, flat_ok=True)
        vector = self._channel_vector(node, self.consts[a if at_first else b], self.g.shapes[x])
        scale, bias = (first if at_first else second)(vector)
        self._affine(node, x_name, scale, bias)
        return True

    def _channel_vector(self, node: Node, const: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """The constant as one value per channel of a tensor of ``shape`` (NCHW or [N, C])."""
        c = np.asarray(const, dtype=np.float64)
        try:
            full = np.broadcast_to(c, shape)
        except ValueError:
            raise self.fail(node, f"the constant {list(c.shape)} does not broadcast to {list(shape)}") from None
        if full.shape != tuple(shape):
            raise self.fail(node, f"the constant {list(c.shape)} would grow the tensor {list(shape)}")
        rows = full.reshape(shape[0], shape[1], -1)
        if not np.all(rows == rows[:1, :, :1]):
            raise self.fail(node, "the constant is not one value per channel")
        return rows[0, :, 0].copy()

    def _affine(self, node: Node, x_name: str, scale: np.ndarray, bias: np.ndarray) -> None:
        """y = x * scale[c] + bias[c]: folded into the Conv or Gemm before it when that is exact (it feeds
        only this node, with no activation between), else a depthwise 1x1 convolution on VTA's GEMM core."""
        x = self.activation(node, x_name, flat_ok=True)
        layer = self.by_output.get(x)
        if layer is not None and layer.kind in (LayerKind.CONV, LayerKind.DENSE) and layer.low == -math.inf \
                and layer.high == math.inf and self.sole_consumer(x_name, node):
            shape = (-1,) + (1,) * (layer.weight.ndim - 1)
            folded = layer.weight * scale.reshape(shape)
            release(layer.weight)  # the model file's weight, mapped (wire.py): replaced by the folded one
            layer.weight = folded
            layer.bias = layer.bias * scale + bias
            self._rename(layer, node)
            return
        shape = self.g.shapes[x]
        if len(shape) != 4 or x in self.flat:
            raise self.fail(node, f"a per-channel scale of a {len(shape)}-D tensor (VTA scales NCHW tensors "
                                  "with a depthwise convolution)")
        channels = shape[1]
        out = node.outputs[0]
        self.add(Layer(LayerKind.CONV, self.fresh(node.name), [node.name], [x], out, self.g.shapes[out],
                       scale.reshape(channels, 1, 1, 1).astype(np.float64), bias.astype(np.float64), 1, 0,
                       channels))

    def _rename(self, layer: Layer, node: Node) -> None:
        del self.by_output[layer.output]
        layer.output = node.outputs[0]
        layer.shape = self.g.shapes[layer.output]
        layer.sources.append(node.name)
        self.by_output[layer.output] = layer

    def _activation(self, node: Node, low: float, high: float) -> None:
        x = self.canon(node.inputs[0])
        layer = self.by_output.get(x)
        if layer is not None and layer.kind in (LayerKind.CONV, LayerKind.DENSE, LayerKind.ADD) \
                and self.sole_consumer(node.inputs[0], node):
            layer.low, layer.high = max(layer.low, low), min(layer.high, high)
            self._rename(layer, node)
            return
        x = self.activation(node, node.inputs[0])
        out = node.outputs[0]
        self.add(Layer(LayerKind.CLIP, self.fresh(node.name), [node.name], [x], out, self.g.shapes[out], low=low,
                       high=high))

    def op_LeakyRelu(self, node: Node) -> None:
        """Fused into the convolution or dense layer before it: max(a, sum of a >> k) on its accumulator,
        the slope a sum of at most four powers of two (exact for a power of two, else within 1%)."""
        alpha = float(node.attrs.get("alpha", 0.01))
        shifts = power_sum(alpha)
        if shifts is None:
            raise self.fail(node, f"slope {alpha:g} is no sum of four powers of two 2^-1..2^-15 within 1%")
        layer = self.by_output.get(self.canon(node.inputs[0]))
        if layer is None or layer.kind not in (LayerKind.CONV, LayerKind.DENSE) or layer.low != -math.inf \
                or layer.high != math.inf or layer.leaky or not self.sole_consumer(node.inputs[0], node):
            raise self.fail(node, "a leaky ReLU runs on VTA fused into the Conv or Gemm before it, its only "
                                  "consumer")
        layer.alpha, layer.leaky = alpha, shifts
        self._rename(layer, node)

    def op_HardSigmoid(self, node: Node) -> None:
        """clip(alpha * x + beta, 0, 1): a per-channel affine step with its bounds fused."""
        x = self.activation(node, node.inputs[0], flat_ok=True)
        channels = self.g.shapes[x][1]
        alpha, beta = float(node.attrs.get("alpha", 0.2)), float(node.attrs.get("beta", 0.5))
        self._affine(node, node.inputs[0], np.full(channels, alpha), np.full(channels, beta))
        layer = self.by_output[node.outputs[0]]
        layer.low, layer.high = max(layer.low, 0.0), min(layer.high, 1.0)

    def op_Relu(self, node: Node) -> None:
        self._activation(node, 0.0, math.inf)

    def op_Clip(self, node: Node) -> None:
        low, high = node.attrs.get("min", -math.inf), node.attrs.get("max", math.inf)
        if len(node.inputs) > 1 and node.inputs[1]:
            low = float(self.const(node, node.inputs[1], "min"))
        if len(node.inputs) > 2 and node.inputs[2]:
            high = float(self.const(node, node.inputs[2], "max"))
        self._activation(node, low, high)

    def _pool(self, node: Node, kind: str) -> None:
        """A square window with one stride and the same padding before the first row and column; what
        follows the last (more padding, or ceil_mode's partial windows) only sets the output's size, and a
        maximum ignores it (padding never wins). An average must be padded alike on every side."""
        x = self.activation(node, node.inputs[0])
        a = node.attrs
        kernel = list(a["kernel_shape"])
        if len(set(kernel)) != 1:
            raise self.fail(node, f"a {kernel} window is not square")
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            raise self.fail(node, "dilated pooling is not supported")
        if a.get("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
            raise self.fail(node, "auto_pad is not supported; give explicit pads")
        strides = list(a.get("strides", [1, 1]))
        pads = list(a.get("pads", [0, 0, 0, 0]))
        if len(set(strides)) != 1:
            raise self.fail(node, f"strides {strides} differ between height and width")
        stride, pad, size = int(strides[0]), int(pads[0]), kernel[0]
        out = node.outputs[0]
        h, w = self.g.shapes[x][2:]
        oh, ow = self.g.shapes[out][2:]
        # the padding after the last row the last window reaches into: none when (floor mode over an image
        # the stride does not divide) the windows stop before the last rows, which then take no part
        pad_end = max(0, (oh - 1) * stride + size - h - pad)
        if pads[1] != pad or max(0, (ow - 1) * stride + size - w - pad) != pad_end:
            raise self.fail(node, f"pads {pads} differ between height and width")
        if kind == LayerKind.AVGPOOL:
            if size == h == w and pad == 0 and pad_end == 0:
                self.add(Layer(LayerKind.GAP, self.fresh(node.name), [node.name], [x], out, self.g.shapes[out]))
                return
            if size * size & (size * size - 1):
                raise self.fail(node, f"a {size}x{size} average divides by {size * size}, not a power of two "
                                      "(VTA has no divider); only whole-image averages take any size")
            if pad_end != pad or len(set(pads)) != 1:
                raise self.fail(node, f"an average padded {pads}{' in ceil_mode' if a.get('ceil_mode') else ''} "
                                      "(VTA divides every window by its whole area)")
            if pad and not a.get("count_include_pad", 0):
                raise self.fail(node, "padded averages need count_include_pad=1 (VTA divides by the whole window)")
        if not (0 <= pad < size and 0 <= pad_end < size):
            raise self.fail(node, f"padding {pad} before and {pad_end} after must be smaller than the "
                                  f"{size}x{size} window")
        self.add(Layer(kind, self.fresh(node.name), [node.name], [x], out, self.g.shapes[out], stride=stride,
                       pad=pad, size=size, pad_end=pad_end))

    def op_MaxPool(self, node: Node) -> None:
        if len(node.outputs) > 1 and node.outputs[1]:
            raise self.fail(node, "MaxPool's indices output is not supported")
        self._pool(node, "maxpool")

    def op_AveragePool(self, node: Node) -> None:
        self._pool(node, "avgpool")

    def op_GlobalAveragePool(self, node: Node) -> None:
        x = self.activation(node, node.inputs[0])
        out = node.outputs[0]
        self.add(Layer(LayerKind.GAP, self.fresh(node.name), [node.name], [x], out, self.g.shapes[out]))

    def op_ReduceMean(self, node: Node) -> None:
        """The mean over height and width (torch's global pooling): a whole-image average; without
        keepdims its [N, C] result is the flattened view of the [N, C, 1, 1] one."""
        x = self.activation(node, node.inputs[0])
        shape = self.g.shapes[x]
        axes = node.attrs.get("axes")
        if len(node.inputs) > 1 and node.inputs[1]:
            axes = [int(v) for v in np.ravel(self.const(node, node.inputs[1], "axes"))]
        if len(shape) != 4 or sorted(a % 4 for a in (axes or [])) != [2, 3]:
            raise self.fail(node, f"a mean over axes {axes} of {list(shape)} (VTA averages whole NCHW images)")
        out = node.outputs[0]
        if node.attrs.get("keepdims", 1):
            self.add(Layer(LayerKind.GAP, self.fresh(node.name), [node.name], [x], out, self.g.shapes[out]))
            return
        pooled = f"{out}__pooled"
        self.g.shapes[pooled] = shape[:2] + (1, 1)
        self.add(Layer(LayerKind.GAP, self.fresh(node.name), [node.name], [x], pooled, self.g.shapes[pooled]))
        self.alias[out] = pooled
        self.flat.add(pooled)

    def _dense(self, node: Node, x_name: str, w: np.ndarray, b: np.ndarray | None) -> None:
        x = self.activation(node, x_name, flat_ok=True)
        flat = x in self.flat
        k = math.prod(self.g.shapes[x][1:])
        if w.shape[1] != k:
            raise self.fail(node, f"weight has {w.shape[1]} inputs, the input has {k}")
        out = node.outputs[0]
        if len(self.g.shapes[out]) != 2:
            raise self.fail(node, f"output {list(self.g.shapes[out])} is not a matrix")
        self.add(Layer(LayerKind.DENSE, self.fresh(node.name), [node.name], [x], out, self.g.shapes[out], w,
                       b if b is not None else np.zeros(w.shape[0]), flatten=flat))

    def op_Gemm(self, node: Node) -> None:
        a = node.attrs
        if a.get("transA", 0):
            raise self.fail(node, "transA=1 is not supported")
        w = self.weight(node, node.inputs[1])
        w = w if a.get("transB", 0) else w.T
        if a.get("alpha", 1.0) != 1.0:
            w = w.astype(np.float64) * a["alpha"]
        b = None
        if len(node.inputs) > 2 and node.inputs[2]:
            b = np.broadcast_to(self.const(node, node.inputs[2], "bias"), (1, w.shape[0]))[0] * a.get("beta", 1.0)
        self._dense(node, node.inputs[0], w, b)

    def op_MatMul(self, node: Node) -> None:
        self._dense(node, node.inputs[0], self.weight(node, node.inputs[1]).T, None)

    def op_Add(self, node: Node) -> None:
        if self._with_constant(node, lambda v: (np.ones_like(v), v), lambda v: (np.ones_like(v), v)):
            return
        xa, xb = self.activation(node, node.inputs[0]), self.activation(node, node.inputs[1])
        if self.g.shapes[xa] != self.g.shapes[xb]:
            raise self.fail(node, f"adding {list(self.g.shapes[xa])} and {list(self.g.shapes[xb])}: only tensors "
                                  "of the same shape (no broadcasting)")
        out = node.outputs[0]
        self.add(Layer(LayerKind.ADD, self.fresh(node.name), [node.name], [xa, xb], out, self.g.shapes[out]))

    def op_Sum(self, node: Node) -> None:
        """Sum of any arity: the identity for one input, else additions of two, chained."""
        if len(node.inputs) == 1:
            self.op_Identity(node)
            return
        xs = [self.activation(node, t) for t in node.inputs]
        if len({self.g.shapes[x] for x in xs}) != 1:
            raise self.fail(node, "summing tensors of different shapes (no broadcasting)")
        total = xs[0]
        for k, x in enumerate(xs[1:], 1):
            out = node.outputs[0] if k == len(xs) - 1 else f"{node.outputs[0]}__partial{k}"
            self.g.shapes[out] = self.g.shapes[x]
            self.add(Layer(LayerKind.ADD, self.fresh(node.name), [node.name], [total, x], out, self.g.shapes[x]))
            total = out

    def op_Concat(self, node: Node) -> None:
        parts = [self.activation(node, t) for t in node.inputs]
        rank = len(self.g.shapes[parts[0]])
        if node.attrs.get("axis", 1) % rank != 1:
            raise self.fail(node, f"Concat along axis {node.attrs.get('axis')} is not supported (channels, axis 1)")
        channels = [self.g.shapes[p][1] for p in parts]
        for k, p in enumerate(parts):  # a concatenation is written in place: copy one that is a part again
            made = self.by_output.get(p)
            if made is not None and made.kind == LayerKind.CONCAT:
                copy = f"{p}__copy"
                self.g.shapes[copy] = self.g.shapes[p]
                self.add(Layer(LayerKind.CLIP, self.fresh(f"{node.name}_copy"), [node.name], [p], copy,
                               self.g.shapes[p]))
                parts[k] = copy
        if any(c % self.block for c in channels[:-1]):
            raise self.fail(node, f"parts of {', '.join(map(str, channels))} channels: VTA writes each part in "
                                  f"place, in whole blocks of {self.block} channels")
        out = node.outputs[0]
        self.add(Layer(LayerKind.CONCAT, self.fresh(node.name), [node.name], parts, out, self.g.shapes[out]))


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


def _plain(value):
    """An ONNX attribute value as plain JSON-able Python (bytes as text, arrays as lists)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (int, float, str)) or value is None:
        return value
    try:
        from onnx import numpy_helper

        return numpy_helper.to_array(value).tolist()
    except Exception:  # a graph attribute: no host operator takes one
        return None


def layer_macs(layer: Layer) -> int:
    """Multiply-accumulates of a layer: convolutions and dense layers on VTA, the same operators on the host."""
    if layer.kind == LayerKind.CONV:
        return math.prod(layer.shape) * math.prod(layer.weight.shape[1:])
    if layer.kind == LayerKind.DENSE:
        return math.prod(layer.shape) * layer.weight.shape[1]
    if layer.kind == LayerKind.HOST and layer.node.op in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
        return node_macs(layer.host_node)
    return 0


def lower(graph: Graph, block: int = 16) -> Network:
    """The graph's layers, or ModelError naming the first node neither VTA nor the host can compute.

    ``block`` is the configuration's BLOCK_OUT (channel concatenations write whole blocks)."""
    return _Lowering(graph, block).run()

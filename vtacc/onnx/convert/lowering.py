"""The state of a conversion: the layers made so far, the constants, renamed and flattened tensors.

``Lowering.run`` hands each node to its operator's converter (registry.py); a node no converter maps
onto VTA becomes a host layer when the host CPU computes its operator (vtasim.host.ops), its reason kept
for the report; anything else is refused with one line naming the node.
"""

from __future__ import annotations

import math

import numpy as np

from vtacc.frontend.names import kernel_name
from vtasim.host.ops import OPS as HOST_OPS
from vtasm.errors import ModelError

from ..read.nodes import Graph, Node
from ..read.wire import release
from .layers import Layer, LayerKind, Network, NotOnVta
from .registry import converter_for

ROW_KINDS = (LayerKind.ADD, LayerKind.CLIP, LayerKind.DENSE)  # kinds exact on a rank-3 tensor's rows


class Lowering:
    """What converters read and change: the graph, the layers so far (by the tensor each writes), renamed
    tensors (``alias``), flattened views, scale hints, constants and Pads waiting for their Conv."""

    def __init__(self, graph: Graph, block: int, to_host: dict[str, str] | None = None):
        self.g = graph
        self.block = block  # BLOCK_OUT: a concatenation writes whole blocks of channels
        self.to_host = to_host or {}  # node name -> why it runs on the host (VTA's compiler refused it)
        self.alias: dict[str, str] = {}
        self.flat: set[str] = set()  # tensors that are flattened views of 4-D ones
        self.layers: list[Layer] = []
        self.by_output: dict[str, Layer] = {}
        self.hints: dict[str, float] = {}
        self.names: set[str] = set()
        self.consts = dict(graph.constants)
        self.pending: dict[str, tuple[Node, str, list[int]]] = {}  # a Pad's output -> (Pad, input, pads)
        self.rows: set[str] = set()  # rank-3 tensors [N, T, C] VTA layers read or write, as [N * T, C]

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

    def operands(self, node: Node, *what: str) -> list[np.ndarray | None]:
        """The node's inputs as vtasim.host.forms reads them: None for the activation (input 0) and omitted
        inputs; the value of input k, which must be a constant, its role ``what[k - 1]`` naming it if not."""
        return [None if k == 0 or not t else self.const(node, t, what[k - 1] if k <= len(what) else "input")
                for k, t in enumerate(node.inputs)]

    def activation(self, node: Node, tensor: str, flat_ok: bool = False) -> str:
        t = self.canon(tensor)
        if t in self.consts:
            raise self.fail(node, f"input '{tensor}' is a constant; VTA layers read activations here")
        if t in self.flat and not flat_ok:
            raise self.fail(node, f"input '{tensor}' is a flattened tensor; only a Gemm or MatMul can read it")
        return t

    def shape(self, tensor: str) -> tuple[int, ...]:
        """A tensor's shape as VTA lays it out: a rank-3 [N, T, C] as the matrix of its N * T rows [N * T, C]
        (the same values in the same order), any other as the model gives it."""
        shape = self.g.shapes[tensor]
        return (math.prod(shape[:-1]), shape[-1]) if len(shape) == 3 else shape

    def fresh(self, base: str) -> str:
        """A layer's kernel name made from ``base`` that no other layer has."""
        return kernel_name(base, self.names)

    def add(self, layer: Layer) -> None:
        """A VTA layer made from the node its sources name; NotOnVta for tensors VTA does not lay out (a rank
        other than 4, NCHW images, or 2, [N, K] matrices), before calibration: the node goes to the host.
        Element-wise layers and dense layers over the last axis see a rank-3 tensor as its rows (shape)."""
        tensors = [*layer.inputs, layer.output]
        ranks = {len(self.g.shapes.get(t, layer.shape)) for t in layer.inputs} | {len(layer.shape)}
        if 3 in ranks and layer.kind in ROW_KINDS and self.g.inputs[0] not in layer.inputs:
            if len(layer.shape) == 3:
                self.g.shapes.setdefault(layer.output, layer.shape)
                layer.shape = self.shape(layer.output)
            self.rows.update(t for t in tensors if len(self.g.shapes[t]) == 3)
            ranks = {len(layer.shape), *(len(self.shape(t)) for t in layer.inputs)}
        if not ranks <= {2, 4}:
            node = next(n for n in self.g.nodes if n.name == layer.sources[0])
            raise self.fail(node, f"a rank-{max(ranks - {2, 4})} tensor (VTA computes on NCHW images and [N, K] "
                                  "matrices)")
        self.layers.append(layer)
        self.by_output[layer.output] = layer

    def fold_into(self, layer: Layer, node: Node) -> None:
        """``node`` joins ``layer``, which now writes the node's output."""
        del self.by_output[layer.output]
        layer.output = node.outputs[0]
        layer.shape = self.shape(layer.output)
        if len(self.g.shapes[layer.output]) == 3:
            self.rows.add(layer.output)
        layer.sources.append(node.name)
        self.by_output[layer.output] = layer

    def sole_consumer(self, tensor: str, node: Node) -> bool:
        return [n.name for n in self.g.consumers(tensor)] == [node.name] and tensor not in self.g.outputs

    def run(self) -> Network:
        if len(self.g.inputs) != 1:
            raise ModelError(f"{self.g.name}: the model has {len(self.g.inputs)} inputs "
                             f"({', '.join(self.g.inputs)}); the importer takes one")
        for node in self.g.nodes:
            convert = converter_for(node.op, self.g.opset)
            if node.name in self.to_host and node.op in HOST_OPS:
                self.host(node, self.to_host[node.name])
                continue
            try:
                if convert is None:
                    raise self.fail(node, "VTA has no form of this operator")
                convert(self, node)
            except NotOnVta as exc:
                if node.op not in HOST_OPS:
                    raise
                self.host(node, exc.message.split(": ", 2)[-1])
        outs = [self._output(name) for name in self.g.outputs]
        shapes = {k: v for k, v in self.g.shapes.items()}
        for layer in self.layers:
            shapes[layer.output] = layer.shape
        for t in self.rows:  # crossing to or from the host, as VTA lays them out (host nodes reshape)
            shapes[t] = self.shape(t)
        used = {t for layer in self.layers if layer.kind == LayerKind.HOST for t in layer.node.inputs
                if t in self.consts}
        return Network(self.g.name, self.layers, self.g.inputs[0], outs, shapes, self.hints,
                       {t: self.consts[t] for t in sorted(used)}, self.g.opset,
                       dict(zip(self.g.outputs, outs, strict=True)),
                       {t: self.canon(t) for t in self.alias if t not in self.consts},
                       {n.name: n.op for n in self.g.nodes})

    def _output(self, name: str) -> str:
        """The tensor holding the model output ``name``, named so (an Identity or Dropout before the output
        renames it)."""
        out = self.canon(name)
        if out not in self.by_output:
            what = "the model's input itself" if out in self.g.inputs else \
                "a constant" if out in self.consts else "computed by no layer"
            raise ModelError(f"{self.g.name}: the output '{name}' is {what}: there is nothing for VTA or the "
                             "host to compute")
        if out == name and out in self.rows:  # a rank-3 output VTA writes as rows: the model's shape kept
            out = f"{name}__rows"
            self.rename_tensor(name, out)
            self.rows.add(out)
            self.rows.discard(name)
        elif out == name or out in self.g.outputs:
            return out
        declared, made = self.g.shapes.get(name), self.by_output[out]
        if declared is not None and made.kind != LayerKind.HOST and tuple(made.shape) != tuple(declared):
            self._reshape_output(out, name, declared)  # a final Flatten or Reshape: the model's shape kept
        else:
            self.rename_tensor(out, name)
        return name

    def _reshape_output(self, tensor: str, name: str, shape: tuple[int, ...]) -> None:
        """The model output ``name`` as ``tensor`` reshaped to the shape the model declares, on the host (the
        output comes back to the host anyway): a flattening that VTA's layers only read in place."""
        target = f"{name}__shape"
        self.consts[target] = np.asarray(shape, dtype=np.int64)
        self.g.shapes.setdefault(tensor, self.by_output[tensor].shape)
        node = Node("Reshape", f"{name}__reshape", [tensor, target], [name])
        self.host(node, "the model declares its output in this shape")

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
        renamed = Node(node.op, node.name, inputs, list(node.outputs), plain(node.attrs))
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


def plain(value):
    """An ONNX attribute value as plain JSON-able Python (bytes as text, arrays as lists)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (int, float, str)) or value is None:
        return value
    try:
        from onnx import numpy_helper

        return numpy_helper.to_array(value).tolist()
    except Exception:  # a graph attribute: no host operator takes one
        return None

"""The converted network: float layers (one kernel's worth of computation each) and host nodes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from vtasm.errors import ModelError
from vtasm.formats.network import HostNode

from ..read.nodes import Node


class LayerKind(str, Enum):
    """What a layer computes. Each kind but HOST has its rules in vtacc.onnx.kinds (float and int8
    evaluation, scale, kernel text, MACs); a host layer is an ONNX node the host CPU computes."""

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
    pads: tuple[int, int, int, int] | None = None  # conv: (top, left, bottom, right) when sides differ
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
    def sides(self) -> tuple[int, int, int, int]:
        """A convolution's zero padding (top, left, bottom, right): ``pads``, or ``pad`` on every side."""
        return self.pads if self.pads is not None else (self.pad,) * 4

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


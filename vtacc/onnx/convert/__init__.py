"""ONNX nodes into float layers: one converter per operator, registered by operator and opset range.

Each VTA layer is what one kernel will compute: a convolution or dense layer (its batch normalisation
folded into the weights, its ReLU or Clip fused), a pooling, an addition or a channel concatenation.
Identity, Flatten and flattening Reshapes only rename tensors; QuantizeLinear/DequantizeLinear pairs
leave a scale hint on the tensor they quantise, and dequantised constants are folded into float weights.
A node VTA cannot compute (its converter raises NotOnVta, or there is none) becomes a host layer when the
host CPU can compute it (vtasim.host.ops). The converters read a node's attributes and constant inputs
through vtasim.host.forms, as the host operators do.

    tensors.py      Identity, Dropout, Flatten, Reshape, QuantizeLinear, DequantizeLinear
    linear.py       Conv (and the Pad before it), Gemm, MatMul
    affine.py       BatchNormalization, Neg, Mul, Div, Sub, Add, Sum
    activations.py  Relu, Clip, LeakyRelu, HardSigmoid
    pooling.py      MaxPool, AveragePool, GlobalAveragePool, ReduceMean
    concat.py       Concat
"""

from __future__ import annotations

from ..read.nodes import Graph
from . import activations, affine, concat, linear, pooling, tensors  # noqa: F401  (each registers its converters)
from .layers import Layer, LayerKind, Network, NotOnVta
from .lowering import Lowering
from .registry import converter_for, vta_operators

__all__ = ["Layer", "LayerKind", "Network", "NotOnVta", "converter_for", "lower", "vta_operators"]


def lower(graph: Graph, block: int = 16, to_host: dict[str, str] | None = None) -> Network:
    """The graph's layers, or ModelError naming the first node neither VTA nor the host can compute.

    ``block`` is the configuration's BLOCK_OUT (channel concatenations write whole blocks); ``to_host``
    names nodes that run on the host whatever VTA could take, with the reason (VTA's compiler refused them)."""
    return Lowering(graph, block, to_host).run()

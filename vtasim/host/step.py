"""One host step: dequantise its int8 inputs, run its ONNX nodes in float32, requantise its outputs."""

from __future__ import annotations

import math

import numpy as np

from vtasm.errors import FormatError
from vtasm.formats.network import HostNode, HostStep, NetTensor

from .ops import ONE_INPUT, OPS, run_op
from .quant import dequantise, quantise


def unknown_ops(step: HostStep) -> list[str]:
    """'node (Op)' for each node whose operator this host cannot compute."""
    return [f"'{n.name}' ({n.op})" for n in step.nodes if n.op not in OPS]


def run_host_step(step: HostStep, values: dict[str, np.ndarray], tensors: dict[str, NetTensor],
                  constants: dict[str, np.ndarray], opset: int) -> dict[str, np.ndarray]:
    """The int8 outputs of ``step`` from the int8 tensors in ``values``.

    Raises FormatError naming the node when an operator cannot be computed
    (one this host lacks, or a mode of it the host does not compute).
    """
    env: dict[str, np.ndarray] = {t: dequantise(values[t], tensors[t].exp, sixteenths=tensors[t].sixteenths)
                                  for t in step.inputs}
    for node in step.nodes:
        env.update(run_node(node, env, constants, opset))
    out = {}
    for t in step.outputs:
        if env[t].size != tensors[t].size:
            raise FormatError(f"host step '{step.name}': output '{t}' holds {env[t].size} values, its tensor "
                              f"{list(tensors[t].shape)}")
        out[t] = quantise(env[t].reshape(tensors[t].shape), tensors[t].exp, tensors[t].sixteenths)
    return out


def run_node(node: HostNode, env: dict[str, np.ndarray], constants: dict[str, np.ndarray],
             opset: int) -> dict[str, np.ndarray]:
    """One host node's float32 outputs, its inputs read from ``env`` or ``constants`` in the node's shapes.

    Raises FormatError naming the node for an operator this host lacks, a mode of it the host does not
    compute, or an output of another shape than the node declares (a NaN or an overflow is a result).
    """
    if node.op not in OPS:
        raise FormatError(f"host node '{node.name}': operator {node.op} is not one the host computes")
    if node.op in ONE_INPUT and len(node.inputs) != 1:
        raise FormatError(f"host node '{node.name}' ({node.op}): {len(node.inputs)} inputs; the operator takes one")
    try:
        xs = []
        for t, shape in zip(node.inputs, node.in_shapes, strict=True):
            x = None if not t else env[t] if t in env else constants[t]
            xs.append(x.reshape(shape) if x is not None and shape is not None and x.shape != tuple(shape) else x)
        with np.errstate(all="ignore"):
            outs = run_op(node.op, xs, node.attrs, opset, [tuple(s) for s in node.out_shapes])
    except (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError, OverflowError) as exc:
        raise FormatError(f"host node '{node.name}' ({node.op}): cannot compute it: {exc}") from None
    result = {}
    for t, y, shape in zip(node.outputs, outs, node.out_shapes, strict=False):
        if not t:
            continue
        y = np.asarray(y, dtype=np.float32)
        if y.shape != tuple(shape):
            raise FormatError(f"host node '{node.name}' ({node.op}): output '{t}' came out {list(y.shape)}, not "
                              f"{list(shape)}")
        result[t] = y
    return result


def node_macs(node: HostNode) -> int:
    """Multiply-accumulates of one host node (0 for operators that do not multiply and accumulate)."""
    out = node.out_shapes[0] if node.out_shapes else ()
    x, w = (node.in_shapes + [None, None])[:2]
    if node.op == "Conv" and w is not None:  # every output: IC/groups x KH x KW products
        return math.prod(out) * math.prod(w[1:])
    if node.op == "ConvTranspose" and x is not None and w is not None:  # every input: M/groups x KH x KW
        return math.prod(x) * math.prod(w[1:])
    if node.op in ("Gemm", "MatMul") and x is not None:
        return math.prod(out) * (x[0] if node.attrs.get("transA") else x[-1])
    return 0

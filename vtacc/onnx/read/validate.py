"""A model's nodes checked before the importer trusts them: one ModelError line naming the node.

A model is data from anywhere. Every node is held to its operator's ONNX
schema first (onnx.checker: input and output counts, required attributes,
attribute types, no attribute twice or unknown), then to what the schema
cannot say and the importer's arithmetic relies on: a convolution's groups,
kernel and weights agree with its input, windows and strides are positive
and bounded, padding modes are known, float attributes and weights are
finite, and the model has outputs.
"""

from __future__ import annotations

import math

import numpy as np

from vtasm.errors import ModelError

MAX_WINDOW = 1 << 16  # strides, dilations, pads and kernels beyond this are no model's
AUTO_PADS = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"}
WINDOWED = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool"}


def check_nodes(model, name: str, opset: int) -> None:
    """Every node of the model's graph against its schema and the rules above (before anything evaluates
    or converts it)."""
    from onnx import checker

    if not len(model.graph.output):
        raise ModelError(f"{name}: the graph has no outputs")
    ctx = checker.C.CheckerContext()
    ctx.ir_version = max(int(model.ir_version), 3)
    ctx.opset_imports = {(o.domain or ""): int(o.version) for o in model.opset_import} or {"": opset}
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue  # refused by the importer, naming its domain
        where = f"{name}: node '{node.name}' ({node.op_type})"
        try:
            checker.check_node(node, ctx)
        except Exception as exc:  # onnx's ValidationError (or its schema lookup failing for an unknown op)
            message = " ".join(str(exc).split())
            if "No Op registered" in message or "is not a registered" in message:
                continue  # an operator onnx does not know: the importer refuses it by name
            raise ModelError(f"{where}: {message[:200]}", node=node.name) from None
        _attributes(node, where)


def _attributes(node, where: str) -> None:
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    for key, value in attrs.items():
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, float) and math.isnan(v) for v in values):
            raise ModelError(f"{where}: attribute {key} is NaN", node=node.name)
        if key in ("alpha", "beta", "epsilon", "bias", "gamma", "lambd") and any(
                isinstance(v, float) and math.isinf(v) for v in values):
            raise ModelError(f"{where}: attribute {key} is infinite", node=node.name)
    if node.op_type not in WINDOWED:
        return
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode("utf-8", "replace") if isinstance(auto, bytes) else str(auto)
    if auto not in AUTO_PADS:
        raise ModelError(f"{where}: auto_pad '{auto[:40]}' is not one of {', '.join(sorted(AUTO_PADS))}",
                         node=node.name)
    for key, low in (("strides", 1), ("dilations", 1), ("kernel_shape", 1), ("pads", 0),
                     ("output_padding", 0)):
        for v in attrs.get(key, []):
            if not low <= v <= MAX_WINDOW:
                raise ModelError(f"{where}: {key} {list(attrs[key])[:8]} must lie within {low}..{MAX_WINDOW}",
                                 node=node.name)
    if "group" in attrs and not 1 <= attrs["group"] <= MAX_WINDOW:
        raise ModelError(f"{where}: group {attrs['group']} must be at least 1", node=node.name)


def check_weights(graph, values: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]], name: str) -> None:
    """The convolutions' and dense layers' constant operands against their inputs, and every float
    constant finite, once the constants and shapes are known."""
    for node in graph.node:
        where = f"{name}: node '{node.name}' ({node.op_type})"
        if node.op_type in ("Conv", "ConvTranspose") and len(node.input) > 1 and node.input[1] in values:
            _conv(node, where, values, shapes)
        for t in node.input:
            v = values.get(t)
            if v is not None and v.dtype.kind == "f" and v.size and not _finite(v):
                raise ModelError(f"{where}: constant '{t}' holds NaN or infinite values", node=node.name)


def _finite(values: np.ndarray) -> bool:
    flat = values.reshape(-1)
    step = 1 << 22  # a few MB at a time: a VGG's weights need no second copy to be checked
    return all(np.isfinite(flat[k:k + step]).all() for k in range(0, flat.size, step))


def _conv(node, where: str, values, shapes) -> None:
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    w = values[node.input[1]]
    x = shapes.get(node.input[0])
    group = int(attrs.get("group", 1))
    transposed = node.op_type == "ConvTranspose"
    if x is not None and w.ndim != len(x):
        raise ModelError(f"{where}: weights of rank {w.ndim} for an input of rank {len(x)}", node=node.name)
    if w.ndim < 3:
        raise ModelError(f"{where}: weights of rank {w.ndim}; a convolution's are [M, C/group, kernel...]",
                         node=node.name)
    channels = w.shape[0] if transposed else w.shape[1] * group
    if x is not None and x[1] != channels:
        raise ModelError(f"{where}: weights {list(w.shape)} with group {group} read {channels} channels; the input "
                         f"has {x[1]}", node=node.name)
    if (w.shape[0] if not transposed else w.shape[0]) % group:
        raise ModelError(f"{where}: group {group} does not divide the {w.shape[0]} channels of weights "
                         f"{list(w.shape)}", node=node.name)
    kernel = attrs.get("kernel_shape")
    if kernel is not None and list(kernel) != list(w.shape[2:]):
        raise ModelError(f"{where}: kernel_shape {list(kernel)} but weights {list(w.shape)}", node=node.name)
    if len(node.input) > 2 and node.input[2] in values:
        bias = values[node.input[2]]
        outs = w.shape[1] * group if transposed else w.shape[0]
        if bias.shape != (outs,):
            raise ModelError(f"{where}: bias {list(bias.shape)} for {outs} output channels", node=node.name)

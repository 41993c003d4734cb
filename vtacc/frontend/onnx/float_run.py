"""The float network executed in numpy, in float32 as the model's own arithmetic: calibration data and the
float reference of every tensor."""

from __future__ import annotations

import numpy as np

from vtasim.host.ops import run_op
from vtasm.errors import ModelError

from .arrays import conv2d, windows
from .network import Layer, Network


def run_float(net: Network, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every activation tensor of the float network on input ``x`` (calibration and float reference).

    Host nodes take the model's static shapes, so ``x`` holds one model batch when the network has any.
    """
    values = {net.input: np.asarray(x, dtype=np.float32)}
    for layer in net.layers:
        if layer.kind == "host":
            values.update(_host_layer(net, layer, values))
            continue
        ins = [values[t] for t in layer.inputs]
        y = _float_layer(layer, ins)
        if layer.alpha:
            y = np.where(y >= 0, y, y * np.float32(layer.alpha))
        values[layer.output] = np.clip(y, layer.low, layer.high).astype(np.float32, copy=False)
    return values


def _host_layer(net: Network, layer: Layer, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A host node on the float network's values, in float32 as the host computes it; values that are not
    finite (an overflow, a logarithm of a negative number) are refused, naming the node."""
    node = layer.node
    xs = []
    for t, shape in zip(node.inputs, layer.in_shapes, strict=True):
        x = None if not t else values[t].astype(np.float32) if t in values else net.constants[t]
        xs.append(x.reshape(shape) if x is not None and shape is not None else x)
    try:
        with np.errstate(all="ignore"):
            outs = run_op(node.op, xs, node.attrs, net.opset, [net.shapes[t] for t in node.outputs])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ModelError(f"{net.name}: node '{node.name}' ({node.op}): the host cannot compute it: {exc}") from None
    result = {}
    for t, y in zip(node.outputs, outs, strict=False):
        if not t:
            continue
        y = np.asarray(y, dtype=np.float32)
        if not np.isfinite(y).all():
            raise ModelError(f"{net.name}: node '{node.name}' ({node.op}) gives {int((~np.isfinite(y)).sum())} NaN "
                             f"or infinite values on the calibration inputs (float32); int8 cannot hold them")
        result[t] = y
    return result


def _float_layer(layer: Layer, ins: list[np.ndarray]) -> np.ndarray:
    x = ins[0]
    if layer.kind == "conv":
        w, b = layer.weight.astype(np.float32), layer.bias.astype(np.float32)
        return conv2d(x, w, layer.stride, layer.pad, layer.groups) + b[None, :, None, None]
    if layer.kind == "dense":
        w, b = layer.weight.astype(np.float32), layer.bias.astype(np.float32)
        return x.reshape(x.shape[0], -1) @ w.T + b
    if layer.kind == "maxpool":
        return windows(x, layer.size, layer.stride, layer.pad, -np.inf, layer.pad_end).max(axis=-1)
    if layer.kind == "avgpool":
        return windows(x, layer.size, layer.stride, layer.pad, 0.0, layer.pad_end).mean(axis=-1)
    if layer.kind == "gap":
        return x.mean(axis=(2, 3), keepdims=True)
    if layer.kind == "add":
        return ins[0] + ins[1]
    if layer.kind == "concat":
        return np.concatenate(ins, axis=1)
    return x  # clip: the bounds are applied by the caller


def batches(net: Network, data: np.ndarray, budget: int = 256 << 20):
    """``data`` in pieces the float network runs on: one model batch when host nodes need its static shapes,
    else as many inputs as keep every float32 tensor of a piece within ``budget`` bytes (at most 16), so
    memory stays bounded however many calibration inputs there are."""
    batch = net.shapes[net.input][0]
    step = batch
    if not net.on_host:
        per_input = 4 * sum(int(np.prod(net.shapes[t])) for layer in net.layers for t in layer.outputs if t) / batch
        step = batch * max(1, min(16 // batch, int(budget // max(per_input * batch, 1))))
    for start in range(0, len(data) - len(data) % batch, step):
        yield np.asarray(data[start:start + step], dtype=np.float32)

"""The float network executed in numpy: calibration data and the float reference of every tensor.

VTA's layers run in float64 (a model with extreme ranges, as random weights give, stays finite), host
nodes in float32 as the host computes them."""

from __future__ import annotations

import numpy as np

from vtasim.host.step import run_node
from vtasm.errors import FormatError, ModelError

from .arrays import conv2d, windows
from .convert.layers import Layer, LayerKind, Network, unhandled
from .read.wire import release

DENSE_BLOCK_ELEMENTS = 1 << 22  # about this many weights of a large dense layer converted to float64 at a time


def run_float(net: Network, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every activation tensor of the float network on input ``x`` (calibration and float reference).

    Host nodes take the model's static shapes, so ``x`` holds one model batch when the network has any.
    """
    values = {net.input: np.asarray(x, dtype=np.float64)}
    for layer in net.layers:
        if layer.kind == LayerKind.HOST:
            values.update(_host_layer(net, layer, values))
            continue
        ins = [values[t] for t in layer.inputs]
        with np.errstate(all="ignore"):  # an overflow is refused below, naming the node
            y = _float_layer(layer, ins)
        if not np.isfinite(y).all():
            raise ModelError(f"{net.name}: node '{layer.sources[0]}' gives NaN or infinite values on the calibration "
                             "inputs (its weights or inputs are too large for float arithmetic)",
                             node=layer.sources[0])
        if layer.alpha:
            y = np.where(y >= 0, y, y * layer.alpha)
        values[layer.output] = np.clip(y, layer.low, layer.high)
    return values


def _host_layer(net: Network, layer: Layer, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A host node on the float network's values, computed as the host computes it (float32); values that
    are not finite (an overflow, a logarithm of a negative number) are refused, naming the node."""
    node = layer.node
    host = layer.host_node
    with np.errstate(over="ignore", invalid="ignore"):  # a value float32 cannot hold: refused below, by node
        inputs = {t: values[t].astype(np.float32) for t in node.inputs if t in values}
    try:
        outs = run_node(host, inputs, net.constants, net.opset)
    except FormatError as exc:
        raise ModelError(f"{net.name}: {exc.message.replace('host node', 'node', 1)}") from None
    for y in outs.values():
        if not np.isfinite(y).all():
            raise ModelError(f"{net.name}: node '{node.name}' ({node.op}) gives {int((~np.isfinite(y)).sum())} NaN "
                             f"or infinite values on the calibration inputs (float32); int8 cannot hold them",
                             node=node.name)
    return {t: y.astype(np.float64) for t, y in outs.items()}


def _float_layer(layer: Layer, ins: list[np.ndarray]) -> np.ndarray:
    x = ins[0]
    if layer.kind == LayerKind.CONV:
        w = layer.weight.astype(np.float64, copy=False)  # held as the model stores it (network.weight)
        release(layer.weight)  # a weight mapped from the model file: its pages go until it is used again
        return conv2d(x, w, layer.stride, layer.pad, layer.groups) + layer.bias[None, :, None, None]
    if layer.kind == LayerKind.DENSE:
        y = _dense(x.reshape(x.shape[0], -1), layer.weight) + layer.bias
        release(layer.weight)
        return y
    if layer.kind == LayerKind.MAXPOOL:
        return windows(x, layer.size, layer.stride, layer.pad, -np.inf, layer.pad_end).max(axis=-1)
    if layer.kind == LayerKind.AVGPOOL:
        return windows(x, layer.size, layer.stride, layer.pad, 0.0, layer.pad_end).mean(axis=-1)
    if layer.kind == LayerKind.GAP:
        return x.mean(axis=(2, 3), keepdims=True)
    if layer.kind == LayerKind.ADD:
        return ins[0] + ins[1]
    if layer.kind == LayerKind.CONCAT:
        return np.concatenate(ins, axis=1)
    if layer.kind == LayerKind.CLIP:
        return x  # the bounds are applied by the caller
    raise unhandled(layer, "the float network")


def _dense(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x @ w.T in float64, ``w`` (as the model stores it) converted a block of output rows at a time when
    it is large: a VGG's first classifier layer (100 M float32 weights) would take 820 MB as one float64
    copy. The blocks split the outputs, never a sum, and stay large enough (DENSE_BLOCK_ELEMENTS) for BLAS
    to take the path it takes for the whole product (small products take another, rounding otherwise)."""
    if w.dtype == np.float64 or w.size <= 2 * DENSE_BLOCK_ELEMENTS:
        return x @ w.astype(np.float64, copy=False).T
    rows = -(-DENSE_BLOCK_ELEMENTS // w.shape[1] // 64) * 64
    out = np.empty((x.shape[0], w.shape[0]))
    for lo in range(0, w.shape[0], rows):
        out[:, lo : lo + rows] = x @ w[lo : lo + rows].astype(np.float64).T
    return out


def batches(net: Network, data: np.ndarray, budget: int = 256 << 20):
    """``data`` in pieces the float network runs on: one model batch when host nodes need its static shapes,
    else as many inputs as keep every float64 tensor of a piece within ``budget`` bytes (at most 16), so
    memory stays bounded however many calibration inputs there are."""
    batch = net.shapes[net.input][0]
    step = batch
    if not net.on_host:
        per_input = 8 * sum(int(np.prod(net.shapes[t])) for layer in net.layers for t in layer.outputs if t) / batch
        step = batch * max(1, min(16 // batch, int(budget // max(per_input * batch, 1))))
    for start in range(0, len(data) - len(data) % batch, step):
        yield np.asarray(data[start:start + step], dtype=np.float64)

"""The float network executed in numpy: calibration data and the float reference of every tensor.

VTA's layers run in float64 (a model with extreme ranges, as random weights give, stays finite), host
nodes in float32 as the host computes them."""

from __future__ import annotations

import numpy as np

from vtasim.host.step import run_node
from vtasm.errors import FormatError, ModelError

from .convert.layers import Layer, LayerKind, Network
from .kinds import rules


def run_float(net: Network, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every activation tensor of the float network on input ``x`` (calibration and float reference).

    Host nodes take the model's static shapes, so ``x`` holds one model batch when the network has any.
    """
    values = {net.input: np.asarray(x, dtype=np.float64)}
    for layer in net.layers:
        if layer.kind == LayerKind.HOST:
            values.update(_host_layer(net, layer, values))
            continue
        ins = [values[t].reshape((-1,) + net.shapes[t][1:]) for t in layer.inputs]  # a rank-3 tensor as rows
        with np.errstate(all="ignore"):  # an overflow is refused below, naming the node
            y = rules(layer.kind).float(layer, ins)
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

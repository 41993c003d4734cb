"""The quantised network executed in numpy, integer for integer: what VTA must compute bit for bit.

Written from the quantiser's definitions (quantise.QLayer), not from the
compiler: accumulators are int32 (wrapping), shifts are arithmetic (rounding
toward minus infinity), stores keep the low 8 bits.
"""

from __future__ import annotations

import numpy as np

from vtacc.frontend.check_builtins import average_multiplier
from vtasim.host.step import run_host_step
from vtasm.formats.network import Side

from .arrays import conv2d, windows
from .convert.layers import LayerKind, unhandled
from .partition import host_step, net_tensors, partition
from .quantise import QLayer, QuantisedNetwork


def _wrap32(a: np.ndarray) -> np.ndarray:
    return ((a.astype(np.int64) + 2**31) % 2**32 - 2**31).astype(np.int64)


def _int8(a: np.ndarray) -> np.ndarray:
    return ((a.astype(np.int64) + 128) % 256 - 128).astype(np.int8)


def _per_channel(v: np.ndarray | int, rank: int) -> np.ndarray | int:
    if np.ndim(v) == 0:
        return int(v)
    return np.asarray(v, dtype=np.int64).reshape((1, -1) + (1,) * (rank - 2))


def run_int8(qnet: QuantisedNetwork, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every int8 tensor of the quantised network on the int8 input ``x`` (host steps computed as the
    simulator computes them: the same float32 numerics, vtasim.host)."""
    net = qnet.network
    values = {net.input: np.asarray(x, dtype=np.int8)}
    parts = partition(qnet)
    tensors = net_tensors(qnet, parts)
    for k, part in enumerate(parts):
        if part.kind == Side.HOST:
            values.update(run_host_step(host_step(part, qnet, f"host{k}"), values, tensors, net.constants,
                                        net.opset))
            continue
        for q in part.layers:
            values[q.layer.output] = _int8(_layer(q, [values[t] for t in q.layer.inputs]))
    return values


def _layer(q: QLayer, ins: list[np.ndarray]) -> np.ndarray:
    layer = q.layer
    x = ins[0].astype(np.int64)
    if q.kind in (LayerKind.CONV, LayerKind.DENSE):
        # int8 products summed in floats: exact in any order while every partial sum stays below the float's
        # 2**24 (float32) or 2**53 (float64) whole numbers; float32 is twice as fast where it is exact
        ftype = np.float32 if q.weight[0].size * 128 * 128 <= 1 << 24 else np.float64
        if q.kind == LayerKind.CONV:
            acc = conv2d(x.astype(ftype), q.weight.astype(ftype), layer.stride, layer.pad, layer.groups)
        else:  # a block of output channels at a time
            flat = x.reshape(x.shape[0], -1).astype(ftype)
            step = max(1, (1 << 20) // max(flat.shape[1], 1))
            acc = np.concatenate([flat @ q.weight[lo : lo + step].astype(ftype).T
                                  for lo in range(0, len(q.weight), step)], axis=1)
        acc = _wrap32(_wrap32(np.rint(acc)) + _per_channel(q.bias, acc.ndim))
        if layer.leaky:  # max(a, sum of a >> k): the slope on the accumulator, rounding constant included
            acc = np.maximum(acc, _wrap32(sum(acc >> k for k in layer.leaky)))
        return np.clip(acc >> _per_channel(q.shift, acc.ndim), q.low, q.high)
    if q.kind == LayerKind.MAXPOOL:
        return windows(x, layer.size, layer.stride, layer.pad, -128, layer.pad_end).max(axis=-1)
    if q.kind == LayerKind.AVGPOOL:
        area = layer.size * layer.size
        return windows(x, layer.size, layer.stride, layer.pad, 0, layer.pad_end).sum(axis=-1) >> (area.bit_length() - 1)
    if q.kind == LayerKind.GAP:
        multiplier, shift = average_multiplier(x.shape[2] * x.shape[3])
        return _wrap32(x.sum(axis=(2, 3), keepdims=True) * multiplier) >> shift
    if q.kind == LayerKind.ADD:
        a, b = (v.astype(np.int64) << left for v, left in zip(ins, q.left, strict=True))
        rounding = (1 << (q.shift - 1)) if q.shift > 0 else 0
        return np.clip(_wrap32(a + b + rounding) >> q.shift, q.low, q.high)
    if q.kind == LayerKind.CONCAT:
        return np.concatenate(ins, axis=1)
    if q.kind == LayerKind.CLIP:
        return np.clip(x, q.low, q.high)
    raise unhandled(layer, "the int8 reference")

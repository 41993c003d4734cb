"""Bias correction from the calibration inputs: each convolution's int8 accumulator, run on the int8
network's own values, against the float network's, per output channel.

Rounding errs by a fraction of a step on every value, and where the errors
do not average out (a ReLU's output is never below zero, an average's shift
rounds down, a weight's rounding meets a mean input that is not zero), the
rest of the network sees them as a shift of each channel's mean. The
quantiser takes off what it can predict (the weights' rounding over the
mean input: kinds.product); this pass measures what is left, layer by layer
in order, each layer's correction made before the next layer is measured,
and takes it off the bias. A channel's mean needs enough values to be
measured: convolutions whose outputs hold fewer than MIN_VALUES per channel
over the inputs used (a dense layer's one per input) keep their bias.
"""

from __future__ import annotations

import numpy as np

from vtasim.host.step import run_host_step
from vtasm.formats.network import Side

from .convert.layers import Layer, LayerKind
from .exact import low_byte
from .float_run import batches, run_float
from .kinds import rules
from .kinds.product import products, requantised, rounding
from .partition import host_step, net_tensors, partition, step_names
from .quantised import QLayer, QuantisedNetwork
from .read.wire import release

MIN_VALUES = 32  # per channel: fewer would measure its mean with more noise than the correction removes
BIAS_LIMIT = 2**31 - 1


def correct_biases(qnet: QuantisedNetwork, data: np.ndarray, floats: dict[str, np.ndarray] | None = None
                   ) -> list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """Correct the biases of ``qnet``'s convolutions by their mean error on the float inputs ``data``
    (``floats``: their float activations, if calibration kept them). Returns, per piece of ``data`` the
    network runs on (float_run.batches), its float and its (corrected) int8 values: the report's SQNR
    measures them (accuracy.measure)."""
    net = qnet.network
    pieces = list(batches(net, data))  # host steps take one model batch at a time
    if floats is None or len(pieces) != 1:
        floats_of = [run_float(net, piece) for piece in pieces]
    else:
        floats_of = [floats]
    values_of = [{net.input: qnet.quantise_input(piece)} for piece in pieces]
    parts = partition(qnet)
    tensors = net_tensors(qnet, parts)
    for part, name in zip(parts, step_names(parts), strict=True):
        if part.kind == Side.HOST:
            step = host_step(part, qnet, name)
            for values in values_of:
                values.update(run_host_step(step, values, tensors, net.constants, net.opset))
            continue
        for q in part.layers:
            ins_of = [[values[t] for t in q.layer.inputs] for values in values_of]
            if q.kind != LayerKind.CONV:
                for values, ins in zip(values_of, ins_of, strict=True):
                    values[q.layer.output] = low_byte(rules(q.kind).int8(q, ins))
                continue
            accs = [products(q, ins) for ins in ins_of]  # once: the correction and the result read them
            _correct(q, accs, [[f[t] for t in q.layer.inputs] for f in floats_of])
            for values, acc in zip(values_of, accs, strict=True):
                values[q.layer.output] = low_byte(requantised(q, acc))
    return list(zip(floats_of, values_of, strict=True))


def _correct(q: QLayer, accs: list[np.ndarray], float_ins_of: list[list[np.ndarray]]) -> None:
    """Move one convolution's bias by its channels' mean error over the pieces (in accumulator steps,
    rounded)."""
    count = sum(acc.size for acc in accs) // accs[0].shape[1]
    if count < MIN_VALUES:
        return
    got = sum(acc.sum(axis=(0, 2, 3), dtype=np.int64) for acc in accs) / count
    steps = q.out_mant * 2.0 ** (q.in_exps[0] + np.asarray(q.w_exps, dtype=np.float64))
    want = sum(_float_sums(q.layer, ins[0]) for ins in float_ins_of) / count / steps + q.layer.bias / steps
    offset = q.bias.astype(np.float64) - np.broadcast_to(rounding(q.shift), q.bias.shape)
    delta = np.rint(got + offset - want)
    bias = q.bias.astype(np.float64) - delta
    if np.isfinite(delta).all() and np.abs(bias).max() <= BIAS_LIMIT:
        q.bias = bias.astype(np.int32)


def _float_sums(layer: Layer, x: np.ndarray) -> np.ndarray:
    """Per output channel, the float convolution's products (no bias) summed over every output position:
    the sum of each tap's weight times the sum of the input values that tap reads (a sum is linear), so no
    convolution is computed: KH x KW strided sums of the padded input."""
    top, left, bottom, right = layer.sides
    x = np.pad(np.asarray(x, dtype=np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    w = layer.weight.astype(np.float64, copy=False)
    oc, cpg, kh, kw = w.shape
    oh, ow, s = layer.shape[2], layer.shape[3], layer.stride
    taps = np.empty((x.shape[1], kh, kw))
    for i in range(kh):
        for j in range(kw):
            taps[:, i, j] = x[:, :, i : i + (oh - 1) * s + 1 : s, j : j + (ow - 1) * s + 1 : s].sum(axis=(0, 2, 3))
    groups = layer.groups
    sums = np.einsum("gocij,gcij->go", w.reshape(groups, oc // groups, cpg, kh, kw),
                     taps.reshape(groups, cpg, kh, kw)).reshape(oc)
    release(layer.weight)  # a weight mapped from the model file: resident one layer at a time
    return sums


"""Scales with a mantissa and biases corrected from the calibration (issue 38's SQNR gap to onnxruntime's
int8): each checked against onnxruntime's float result and the mean of the errors, computed here from
the quantised values, never against the quantiser's own figures."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import helper

from vtacc.model import compile_model
from vtacc.onnx import import_model
from vtacc.onnx.reference import run_int8
from vtasim import api
from vtasim.host.quant import dequantise
from vtasm.config import default_config
from vtasm.formats.network import read_network, write_network

from .models import save_model, sqnr, tensor

n = helper.make_node


def _chain(tmp_path, rng, top: float):
    """conv -> relu -> conv -> relu -> conv: the middle tensors' ranges near ``top`` times a power of two."""
    nodes = [n("Conv", ["x", "w1", "b1"], ["h1"], name="c1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Relu", ["h1"], ["r1"], name="relu1"),
             n("Conv", ["r1", "w2", "b2"], ["h2"], name="c2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Relu", ["h2"], ["r2"], name="relu2"),
             n("Conv", ["r2", "w3"], ["y"], name="c3", kernel_shape=[1, 1])]
    consts = {"w1": rng.normal(0, 0.2, (16, 8, 3, 3)) * top, "b1": rng.normal(0.1, 0.05, 16),
              "w2": rng.normal(0, 0.1, (16, 16, 3, 3)), "b2": rng.normal(0.05, 0.02, 16),
              "w3": rng.normal(0, 0.2, (8, 16, 1, 1))}
    consts = {k: v.astype(np.float32) for k, v in consts.items()}
    return save_model(tmp_path / "chain.onnx", nodes, [tensor("x", [1, 8, 12, 12])], [tensor("y", None)], consts)


def _sqnr_of(path, imported, xs: np.ndarray) -> float:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    qnet = imported.qnet
    want = np.concatenate([session.run(None, {"x": x[None]})[0] for x in xs])
    got = np.concatenate([dequantise(run_int8(qnet, qnet.quantise_input(x[None]))["y"], qnet.output_exp, np.float64)
                          for x in xs])
    return sqnr(want, got)


def test_a_tensor_just_past_a_power_of_two_takes_a_mantissa_and_keeps_the_bit(tmp_path):
    """Ranges 1.1 times a power of two: a power-of-two scale would use 58% of int8's range there."""
    rng = np.random.default_rng(381)
    path = _chain(tmp_path, rng, 1.1)
    cal = rng.normal(0, 1, (8, 8, 12, 12)).astype(np.float32)
    imported = import_model(path, cal)
    qnet = imported.qnet
    inside = [t for t in qnet.exps if t not in (qnet.network.input, qnet.network.output)]
    assert any(qnet.mantissas.get(t, 1.0) != 1.0 for t in inside), qnet.mantissas
    for t, m in qnet.mantissas.items():  # each scale's largest int8 value covers about its calibration range
        assert 1.0 <= m < 2.0
        assert qnet.ranges[t] / (127 * qnet.scale(t)) > 0.45, (t, qnet.ranges[t], qnet.scale(t))
    test = rng.normal(0, 1, (4, 8, 12, 12)).astype(np.float32)
    assert _sqnr_of(path, imported, test) > 30


def test_host_tensors_carry_their_mantissas_in_the_network_file(tmp_path):
    """The model's input and output keep powers of two (users quantise and read them); the tensors a host
    node reads and writes take mantissas, which the network file holds (``sixteenths``) and vtasim's host
    step uses: bit for bit the numpy reference, through a written and re-read file."""
    rng = np.random.default_rng(382)
    nodes = [n("Conv", ["x", "w1"], ["h"], name="c1", kernel_shape=[1, 1]),
             n("Relu", ["h"], ["r"], name="relu"),
             n("Softsign", ["r"], ["s"], name="soft"),  # a host operator: VTA has none
             n("Conv", ["s", "w2"], ["h2"], name="c2", kernel_shape=[1, 1]),
             n("Relu", ["h2"], ["r2"], name="relu2"),
             n("Conv", ["r2", "w3"], ["y"], name="c3", kernel_shape=[1, 1])]
    consts = {"w1": rng.normal(0, 0.7, (16, 8, 1, 1)), "w2": rng.normal(0, 0.9, (16, 16, 1, 1)),
              "w3": rng.normal(0, 0.6, (8, 16, 1, 1))}
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [1, 8, 6, 6])], [tensor("y", None)],
                      {k: v.astype(np.float32) for k, v in consts.items()})
    cal = rng.normal(0, 1, (8, 8, 6, 6)).astype(np.float32)
    model = compile_model(path, default_config(), cal)
    qnet = model.imported.qnet
    assert "x" not in qnet.mantissas and "y" not in qnet.mantissas
    assert qnet.mantissas.get("r", 1.0) != 1.0 or qnet.mantissas.get("s", 1.0) != 1.0, qnet.mantissas
    network = read_network(write_network(model.network))
    for t in ("r", "s"):
        assert 2.0 ** (network.tensors[t].sixteenths / 16) * 2.0 ** network.tensors[t].exp == qnet.scale(t)
    x = rng.normal(0, 1, (1, 8, 6, 6)).astype(np.float32)
    got = api.run(network, x, int8=True)["y"]
    assert np.array_equal(got, run_int8(qnet, qnet.quantise_input(x))["y"])


def test_a_network_file_refuses_a_mantissa_outside_an_octave(tmp_path):
    """sixteenths 0..15: 16 would be the next power of two, written as exp + 1."""
    import json

    from vtasm.errors import FormatError
    from vtasm.formats import network as files

    rng = np.random.default_rng(385)
    nodes = [n("Conv", ["x", "w"], ["h"], name="c", kernel_shape=[1, 1]), n("Softsign", ["h"], ["y"], name="s")]
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [1, 8, 2, 2])], [tensor("y", None)],
                      {"w": rng.normal(0, 0.5, (8, 8, 1, 1)).astype(np.float32)})
    data = write_network(compile_model(path, default_config(), rng.normal(0, 1, (4, 8, 2, 2))).network)
    meta = json.loads(files._chunks(data, "m")[0][1])
    meta["tensors"][0]["sixteenths"] = 16
    body = files.canonical_json(meta)
    chunks = [("NETW", body)] + [(tag, payload) for tag, payload in files._chunks(data, "m")[1:]]
    with pytest.raises(FormatError, match="sixteenths: 16 lies outside 0..15"):
        read_network(files.framed(files.MAGIC, files.VERSION, chunks))


def test_bias_correction_takes_the_mean_error_off_each_channel(tmp_path):
    """Inputs around 3, never near 0: each weight's rounding error meets the same large mean, so over a
    window they add up to a constant per output channel instead of cancelling. Measured here on held-out
    inputs, each channel's mean error (int8 against onnxruntime's float) stays within half an output step,
    and the SQNR within 1 dB of what taking each channel's mean error off would give."""
    rng = np.random.default_rng(384)
    nodes = [n("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[3, 3])]
    w = rng.normal(0, 0.2, (64, 64, 3, 3)).astype(np.float32)
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [1, 64, 10, 10])], [tensor("y", None)], {"w": w})
    cal = rng.normal(3, 1, (8, 64, 10, 10)).astype(np.float32)
    qnet = import_model(path, cal).qnet
    test = rng.normal(3, 1, (6, 64, 10, 10)).astype(np.float32)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run(None, {"x": x[None]})[0] for x in test]).astype(np.float64)
    got = np.concatenate([dequantise(run_int8(qnet, qnet.quantise_input(x[None]))["y"], qnet.output_exp, np.float64)
                          for x in test])
    mean_error = (got - want).mean(axis=(0, 2, 3)) / 2.0**qnet.output_exp
    assert np.abs(mean_error).max() < 0.5, mean_error
    centred = got - (got - want).mean(axis=(0, 2, 3), keepdims=True)
    assert sqnr(want, got) > sqnr(want, centred) - 1.0

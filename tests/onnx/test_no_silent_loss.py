"""No silent loss (issue 38): an addition of inputs whose scales lie far apart keeps its SQNR, the model's
outputs never clip on the calibration data, and the import report ends with a verdict per output."""

from __future__ import annotations

import numpy as np
import onnxruntime
from onnx import helper

from vtacc.model import compile_model
from vtacc.onnx.reference import run_int8
from vtasim import api
from vtasim.host.quant import dequantise
from vtasm.config import default_config

from .models import save_model, sqnr, tensor

RNG = np.random.default_rng(380)
n = helper.make_node



def _check(path, model, x: np.ndarray) -> float:
    """The network's output on ``x``, bit for bit the reference's; its SQNR against onnxruntime in float."""
    qnet = model.imported.qnet
    got = api.run(model.network, x, int8=True)["y"]
    assert np.array_equal(got, run_int8(qnet, qnet.quantise_input(x))["y"])
    want = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    return sqnr(want, dequantise(got, model.network.tensors["y"].exp))


def test_an_add_of_scales_far_apart_keeps_its_sqnr_and_says_so(tmp_path):
    """A residual branch scaled by 1e-8 (ConvNeXt's layer scale starts at 1e-6): aligning the coarse input
    to the fine one's scale would shift int8 values 27 places left, out of int32: noise, said nowhere."""
    nodes = [n("Conv", ["x", "wa"], ["a"], name="main", kernel_shape=[1, 1]),
             n("Conv", ["x", "wb"], ["b"], name="branch", kernel_shape=[1, 1]),
             n("Add", ["a", "b"], ["y"], name="residual")]
    consts = {"wa": RNG.normal(0, 0.3, (16, 16, 1, 1)).astype(np.float32),
              "wb": (RNG.normal(0, 0.3, (16, 16, 1, 1)) * 1e-8).astype(np.float32)}
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [1, 16, 4, 4])], [tensor("y", None)], consts)
    model = compile_model(path, default_config(), RNG.normal(0, 1, (16, 16, 4, 4)).astype(np.float32))
    report = model.imported.report()
    assert "apart; the finer input is shifted right" in report
    for _ in range(3):
        assert _check(path, model, RNG.normal(0, 1, (1, 16, 4, 4)).astype(np.float32)) > 30


def test_outputs_never_clip_on_the_calibration_data_and_the_report_gives_a_verdict(tmp_path):
    """Logits with rare large values: a scale chosen for the least squared error clips them, and the largest
    logits decide the class. The output takes the scale that holds its whole calibration range."""
    w = RNG.normal(0, 0.2, (10, 64)).astype(np.float32)
    w[3] *= 12  # one class whose score is now and then much larger than the others'
    nodes = [n("Gemm", ["x", "w"], ["y"], name="classifier", transB=1)]
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [1, 64])], [tensor("y", [1, 10])], {"w": w})
    model = compile_model(path, default_config(), RNG.normal(0, 1, (64, 64)).astype(np.float32))
    qnet = model.imported.qnet
    assert qnet.clipped == {"y": 0}
    assert qnet.top1["y"][1] == 2  # the first calibration inputs, one at a time (the model's batch is 1)
    verdict = [line for line in model.imported.report().splitlines() if line.startswith("  output 'y'")]
    assert len(verdict) == 1 and "SQNR" in verdict[0] and "top-1 the float model's on" in verdict[0]
    assert _check(path, model, RNG.normal(0, 1, (1, 64)).astype(np.float32)) > 25


def test_an_output_finer_than_its_accumulator_takes_the_accumulators_scale(tmp_path):
    """Two halves of a convolution that cancel (as a 1x1 convolution after a global pool can): its outputs
    are far smaller than its weights times its inputs, so calibration gives it a scale finer than the
    accumulator's, a left shift the requantisation does not make. It was refused after calibration."""
    a = RNG.normal(0, 0.5, (16, 16, 1, 1)).astype(np.float32)
    w = np.concatenate([a, -a + RNG.normal(0, 1e-4, a.shape).astype(np.float32)], axis=1)
    nodes = [n("Concat", ["x", "x"], ["xx"], name="twice", axis=1),
             n("Conv", ["xx", "w"], ["y"], name="cancel", kernel_shape=[1, 1])]
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [1, 16, 4, 4])], [tensor("y", None)], {"w": w})
    model = compile_model(path, default_config(), RNG.normal(0, 1, (16, 16, 4, 4)).astype(np.float32))
    assert "its accumulator's, not 2^" in model.imported.report()
    qnet = model.imported.qnet
    x = RNG.normal(0, 1, (1, 16, 4, 4)).astype(np.float32)
    assert np.array_equal(api.run(model.network, x, int8=True)["y"], run_int8(qnet, qnet.quantise_input(x))["y"])

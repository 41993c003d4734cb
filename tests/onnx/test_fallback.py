"""The fallback is total (issue 38): a layer VTA's compiler refuses runs on the host, the model imported again
around it; the report says which nodes moved and why, and the network still runs bit for bit as the numpy
reference computes it."""

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

RNG = np.random.default_rng(3800)
n = helper.make_node


def test_a_global_pool_whose_tiles_fit_no_buffer_runs_on_the_host(tmp_path):
    """A squeeze-and-excite block's global pool over a 64x64 image: more pixels than the input buffer holds
    (the 1x16x16 configuration), so the compiler refuses it; before, the model was refused after calibration."""
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]), n("Relu", ["c"], ["r"], name="relu"),
             n("GlobalAveragePool", ["r"], ["p"], name="squeeze"),
             n("Conv", ["p", "w2"], ["y"], name="excite", kernel_shape=[1, 1])]
    consts = {"w": RNG.normal(0, 0.3, (16, 16, 1, 1)).astype(np.float32),
              "w2": RNG.normal(0, 0.3, (16, 16, 1, 1)).astype(np.float32)}
    path = save_model(tmp_path / "se.onnx", nodes, [tensor("x", [1, 16, 64, 64])], [tensor("y", None)], consts)
    model = compile_model(path, default_config(), RNG.normal(0, 1, (4, 16, 64, 64)).astype(np.float32))
    host = model.imported.qnet.network.on_host
    assert [(layer.node.name, layer.reason.split(":")[0]) for layer in host] == [("squeeze", "VTA cannot compile it")]
    assert [s.kind for s in model.network.steps] == ["vta", "host", "vta"]
    report = model.imported.report()
    assert "host GlobalAveragePool" in report and "(VTA cannot compile it: no tiling fits" in report
    qnet = model.imported.qnet
    x = RNG.normal(0, 1, (1, 16, 64, 64)).astype(np.float32)
    got = api.run(model.network, x, int8=True)["y"]
    assert np.array_equal(got, run_int8(qnet, qnet.quantise_input(x))["y"])
    want = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert sqnr(want, dequantise(got, model.network.tensors["y"].exp)) > 25

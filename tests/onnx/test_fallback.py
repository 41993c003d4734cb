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


def test_a_convolution_padded_beyond_the_dma_fields_runs_on_the_host(tmp_path):
    """A 1x1 convolution padded by 16 on each side: the importer takes it, but VTA's DMA pads at most 15 rows
    or columns a load, so the compiler refuses it; before, the model was refused after calibration."""
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]), n("Relu", ["c"], ["r"], name="relu"),
             n("Conv", ["r", "w2"], ["p"], name="wide", kernel_shape=[1, 1], pads=[16, 16, 16, 16]),
             n("Conv", ["p", "w3"], ["y"], name="after", kernel_shape=[1, 1])]
    consts = {"w": RNG.normal(0, 0.3, (16, 16, 1, 1)).astype(np.float32),
              "w2": RNG.normal(0, 0.3, (16, 16, 1, 1)).astype(np.float32),
              "w3": RNG.normal(0, 0.3, (16, 16, 1, 1)).astype(np.float32)}
    path = save_model(tmp_path / "wide.onnx", nodes, [tensor("x", [1, 16, 8, 8])], [tensor("y", None)], consts)
    model = compile_model(path, default_config(), RNG.normal(0, 1, (4, 16, 8, 8)).astype(np.float32))
    host = model.imported.qnet.network.on_host
    assert [(layer.node.name, layer.reason.split(":")[0]) for layer in host] == [("wide", "VTA cannot compile it")]
    assert [s.kind for s in model.network.steps] == ["vta", "host", "vta"]
    report = model.imported.report()
    assert "host Conv" in report and "(VTA cannot compile it: padding 16 exceeds" in report
    qnet = model.imported.qnet
    x = RNG.normal(0, 1, (1, 16, 8, 8)).astype(np.float32)
    got = api.run(model.network, x, int8=True)["y"]
    assert np.array_equal(got, run_int8(qnet, qnet.quantise_input(x))["y"])
    want = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert sqnr(want, dequantise(got, model.network.tensors["y"].exp)) > 25

"""Global pooling of any size runs on VTA (issue 38): a whole-image average is summed in parts by the compiler
(an image larger than the buffers included), a whole-image maximum is a cascade of max poolings; each bit
for bit the numpy reference, and close to onnxruntime's float result."""

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

RNG = np.random.default_rng(3801)
n = helper.make_node


def compile_and_check(path, shape: tuple[int, ...], output: str = "y", db: float = 20.0):
    """Compile the model at ``path`` on 4 random images, run one on vtasim: bit-exact with the numpy reference
    and within ``db`` of onnxruntime. Returns the compiled model."""
    model = compile_model(path, default_config(), RNG.normal(0, 1, (4,) + shape[1:]).astype(np.float32))
    qnet = model.imported.qnet
    x = RNG.normal(0, 1, shape).astype(np.float32)
    got = api.run(model.network, x, int8=True)[output]
    assert np.array_equal(got, run_int8(qnet, qnet.quantise_input(x))[output])
    want = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert sqnr(want, dequantise(got, model.network.tensors[output].exp)) > db
    return model


def _se(pool: str, channels: int, size: int) -> tuple[list, dict]:
    """A squeeze-and-excite block's squeeze over a ``size`` x ``size`` map of ``channels`` channels."""
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]), n("Relu", ["c"], ["r"], name="relu"),
             n(pool, ["r"], ["p"], name="squeeze"),
             n("Conv", ["p", "w2"], ["y"], name="excite", kernel_shape=[1, 1])]
    consts = {"w": RNG.normal(0, 0.3, (channels, 16, 1, 1)).astype(np.float32),
              "w2": RNG.normal(0, 0.1, (16, channels, 1, 1)).astype(np.float32)}
    return nodes, consts


def test_a_global_average_over_more_pixels_than_the_buffers_hold_runs_on_vta(tmp_path):
    """64x64 pixels of 96 channels: the input buffer holds 2048 of them (1x16x16); the sum runs in parts."""
    nodes, consts = _se("GlobalAveragePool", 96, 64)
    path = save_model(tmp_path / "se.onnx", nodes, [tensor("x", [1, 16, 64, 64])], [tensor("y", None)], consts)
    model = compile_and_check(path, (1, 16, 64, 64))
    assert model.imported.qnet.network.on_host == []
    assert [s.kind for s in model.network.steps] == ["vta"]


def test_a_global_maximum_of_any_shape_runs_on_vta_as_a_cascade(tmp_path):
    """GlobalMaxPool over 48x37 pixels (no form on VTA before) and a MaxPool and an AveragePool whose window
    is a whole 9x13 image (not square: on the host before)."""
    nodes, consts = _se("GlobalMaxPool", 32, 48)
    path = save_model(tmp_path / "max.onnx", nodes, [tensor("x", [1, 16, 48, 37])], [tensor("y", None)], consts)
    model = compile_and_check(path, (1, 16, 48, 37))
    assert model.imported.qnet.network.on_host == []
    stages = [q.layer for q in model.imported.qnet.layers if q.layer.sources == ["squeeze"]]
    assert [layer.shape[2:] for layer in stages] == [(12, 10), (3, 3), (1, 1)]
    for pool in ("MaxPool", "AveragePool"):
        nodes = [n("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                 n("Relu", ["c"], ["r"], name="relu"), n(pool, ["r"], ["p"], name="pool", kernel_shape=[9, 13]),
                 n("Flatten", ["p"], ["f"], name="flat"), n("Gemm", ["f", "fc"], ["y"], name="fc", transB=1)]
        consts = {"w": RNG.normal(0, 0.3, (32, 16, 3, 3)).astype(np.float32),
                  "fc": RNG.normal(0, 0.2, (10, 32)).astype(np.float32)}
        path = save_model(tmp_path / f"{pool}.onnx", nodes, [tensor("x", [1, 16, 9, 13])], [tensor("y", None)],
                          consts)
        model = compile_and_check(path, (1, 16, 9, 13))
        assert model.imported.qnet.network.on_host == [], pool

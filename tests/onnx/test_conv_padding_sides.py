"""Convolutions padded differently on each side and with oblong kernels run on VTA (issue 38): InceptionV3's
1x7 and 7x1 convolutions, TensorFlow's SAME padding after the image (explicit, or as auto_pad), and a Pad
joining a convolution's padding unevenly; bit for bit the numpy reference, close to onnxruntime."""

from __future__ import annotations

import numpy as np
from onnx import helper

from .models import save_model, tensor
from .test_global_pooling import compile_and_check

RNG = np.random.default_rng(3802)
n = helper.make_node


def _w(*shape: int) -> np.ndarray:
    return RNG.normal(0, 1 / np.sqrt(np.prod(shape[1:])), shape).astype(np.float32)


def test_oblong_kernels_and_uneven_padding_run_on_vta(tmp_path):
    nodes = [n("Conv", ["x", "w1"], ["a"], name="conv_1x7", kernel_shape=[1, 7], pads=[0, 3, 0, 3]),
             n("Relu", ["a"], ["ar"], name="relu_a"),
             n("Conv", ["ar", "w2"], ["b"], name="conv_7x1", kernel_shape=[7, 1], pads=[3, 0, 3, 0]),
             n("Relu", ["b"], ["br"], name="relu_b"),
             n("Conv", ["br", "w3"], ["c"], name="same_stride2", kernel_shape=[3, 3], strides=[2, 2],
               pads=[0, 0, 1, 1]),
             n("Relu", ["c"], ["cr"], name="relu_c"),
             n("Conv", ["cr", "w4"], ["d"], name="auto_same", kernel_shape=[2, 3], auto_pad="SAME_UPPER"),
             n("Relu", ["d"], ["dr"], name="relu_d"),
             n("Pad", ["dr", "pads"], ["p"], name="pad"),
             n("Conv", ["p", "w5"], ["y"], name="padded", kernel_shape=[3, 3], pads=[1, 0, 0, 1])]
    consts = {"w1": _w(32, 16, 1, 7), "w2": _w(32, 32, 7, 1), "w3": _w(16, 32, 3, 3), "w4": _w(16, 16, 2, 3),
              "w5": _w(16, 16, 3, 3), "pads": np.array([0, 0, 2, 0, 0, 0, 0, 1], dtype=np.int64)}
    path = save_model(tmp_path / "sides.onnx", nodes, [tensor("x", [1, 16, 12, 12])], [tensor("y", None)], consts)
    model = compile_and_check(path, (1, 16, 12, 12))
    assert model.imported.qnet.network.on_host == []
    sides = {q.layer.sources[0]: q.layer.sides for q in model.imported.qnet.layers}
    assert sides["conv_1x7"] == (0, 3, 0, 3) and sides["same_stride2"] == (0, 0, 1, 1)
    assert sides["auto_same"] == (0, 1, 1, 1) and sides["padded"] == (3, 0, 0, 2)

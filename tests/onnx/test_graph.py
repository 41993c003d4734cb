"""Loading ONNX models: static shapes and initialisers read, unsupported models refused naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from vtacc.frontend.onnx.graph import load_graph
from vtasm.errors import ModelError

from .models import save_model, tensor


def _conv_relu(tmp_path, x_shape=(1, 3, 8, 8), weights=True):
    w = np.ones((16, 3, 3, 3), np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="relu1")]
    return save_model(tmp_path / "m.onnx", nodes, [tensor("x", list(x_shape))], [tensor("y", None)],
                      {"w": w} if weights else {})


def test_shapes_and_initialisers(tmp_path):
    g = load_graph(_conv_relu(tmp_path))
    assert [n.op for n in g.nodes] == ["Conv", "Relu"]
    assert g.inputs == ["x"] and g.outputs == ["y"]
    assert g.shapes["c"] == (1, 16, 8, 8) and g.shapes["y"] == (1, 16, 8, 8)
    assert g.constants["w"].shape == (16, 3, 3, 3)
    assert g.nodes[0].attrs["pads"] == [1, 1, 1, 1]


def test_unsupported_operator_names_the_node(tmp_path):
    nodes = [helper.make_node("Softmax", ["x"], ["y"], name="prob")]
    path = save_model(tmp_path / "s.onnx", nodes, [tensor("x", [1, 10])], [tensor("y", [1, 10])], {})
    with pytest.raises(ModelError, match=r"s.onnx: node 'prob' \(Softmax\): operator Softmax is not supported"):
        load_graph(path)


def test_dynamic_shape_refused(tmp_path):
    with pytest.raises(ModelError, match="dynamic or unknown shape"):
        load_graph(_conv_relu(tmp_path, x_shape=("N", 3, 8, 8)))


def test_missing_initialiser_refused(tmp_path):
    with pytest.raises(ModelError, match=r"node 'conv1' \(Conv\): input 'w' is neither a graph input, an initialiser"):
        load_graph(_conv_relu(tmp_path, weights=False))


def test_not_a_model(tmp_path):
    bad = tmp_path / "junk.onnx"
    bad.write_bytes(b"\x00not a model")
    with pytest.raises(ModelError, match="junk.onnx"):
        load_graph(bad)
    with pytest.raises(ModelError, match="no such file"):
        load_graph(tmp_path / "absent.onnx")

"""What a new user ran into with host steps: overflowing and NaN-producing host operators, casts, traces
that end on the host, network files whose JSON does not fit the data, names from Python."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.vtacc.test_cli import tool
from vtacc.model import compile_model
from vtasim import api
from vtasim.host.ops import run_op
from vtasim.host.quant import quantise
from vtasm.config import default_config
from vtasm.errors import ModelError, UsageError
from vtasm.formats.network import read_network, write_network

from .models import save_model, tensor

RNG = np.random.default_rng(11)


def _conv_then(tmp_path, *nodes, consts=None, out=None):
    n = helper.make_node
    w = RNG.normal(0, 0.3, (16, 3, 3, 3)).astype(np.float32)
    graph = [n("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]), *nodes]
    path = save_model(tmp_path / "m.onnx", graph, [tensor("x", [1, 3, 8, 8])],
                      [out or tensor("y", None)], {"w": w, **(consts or {})})
    cal = RNG.normal(0, 1, (8, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "cal.npy", cal)
    return path, cal


@pytest.mark.parametrize("node, what", [
    (helper.make_node("Exp", ["m"], ["y"], name="exp_node"), "infinite"),
    (helper.make_node("Log", ["m"], ["y"], name="log_node"), "NaN"),
])
def test_host_node_that_overflows_on_calibration_data_is_named(tmp_path, node, what):
    mul = helper.make_node("Mul", ["c", "k"], ["m"], name="scale")
    path, _ = _conv_then(tmp_path, mul, node, consts={"k": np.array(300.0, np.float32)})
    r = tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "-o", tmp_path / "n.vbin", cwd=tmp_path)
    assert r.returncode == 1 and f"node '{node.name}'" in r.stderr and what in r.stderr
    assert "Traceback" not in r.stderr and "Warning" not in r.stderr and not (tmp_path / "n.vbin").exists()


def test_cast_follows_its_type(tmp_path):
    x = np.array([-2.7, -1.2, -0.5, 0.4, 1.5, 300.0, -300.0], np.float32)
    assert run_op("Cast", [x], {"to": TensorProto.INT32}, 13, [x.shape])[0].tolist() == [-2, -1, 0, 0, 1, 300, -300]
    assert run_op("Cast", [x], {"to": TensorProto.INT8}, 13, [x.shape])[0].tolist() == [-2, -1, 0, 0, 1, 127, -128]
    assert run_op("Cast", [x], {"to": TensorProto.BOOL}, 13, [x.shape])[0].tolist() == [1, 1, 1, 1, 1, 1, 1]
    with pytest.raises(ValueError, match="type 8"):
        run_op("Cast", [x], {"to": TensorProto.STRING}, 13, [x.shape])


def test_nan_stores_zero_and_infinities_saturate():
    assert quantise(np.array([np.nan, np.inf, -np.inf, 1.0]), -3).tolist() == [0, 127, -128, 8]


def test_trace_shows_host_steps_after_the_last_launch(tmp_path):
    path, _ = _conv_then(tmp_path, helper.make_node("Softmax", ["c"], ["y"], name="prob", axis=1))
    tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "-o", tmp_path / "n.vbin", cwd=tmp_path)
    np.save(tmp_path / "x.npy", RNG.normal(0, 1, (1, 3, 8, 8)).astype(np.float32))
    r = tool("vtasim", "run", tmp_path / "n.vbin", "--input", f"x={tmp_path / 'x.npy'}", "--trace", cwd=tmp_path)
    assert r.returncode == 0 and "== step 2: host step 'host2': Softmax 'prob' ==" in r.stdout


def test_network_file_whose_shapes_do_not_fit_its_data(tmp_path):
    path, cal = _conv_then(tmp_path, helper.make_node("Softmax", ["c"], ["y"], name="prob", axis=1))
    net = read_network(write_network(compile_model(path, default_config(), cal).network))
    net.steps[1].nodes[0].out_shapes = [(1, 16, 4, 4)]  # what a damaged file would say (the CRCs are fine)
    bad = tmp_path / "bad.vbin"
    bad.write_bytes(write_network(net))
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.float32))
    r = tool("vtasim", "run", bad, "--input", f"x={tmp_path / 'x.npy'}", cwd=tmp_path)
    assert r.returncode == 1 and "bad.vbin: host node 'prob' (Softmax)" in r.stderr and "Traceback" not in r.stderr


def test_python_api_names_inputs_in_its_own_words(tmp_path):
    path, cal = _conv_then(tmp_path, helper.make_node("Relu", ["c"], ["y"], name="relu"))
    net = compile_model(path, default_config(), cal).network
    with pytest.raises(UsageError, match="input X: the network's inputs are 'x'"):
        api.run(net, {"X": np.zeros((1, 3, 8, 8), np.float32)})
    stacked = api.run(net, np.zeros((4, 1, 3, 8, 8), np.float32))["y"]  # four runs on a new first axis
    assert stacked.shape == (4, 1, 16, 8, 8)
    assert api.run(net, np.zeros((4, 3, 8, 8), np.float32))["y"].shape == (4, 16, 8, 8)


def test_input_shape_that_contradicts_the_model(tmp_path):
    path, _ = _conv_then(tmp_path, helper.make_node("Relu", ["c"], ["y"], name="relu"))
    r = tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "--input-shape", "x=2,3,8,8", "-o",
             tmp_path / "n.vbin", cwd=tmp_path)
    assert r.returncode == 1 and "the model fixes dimension 0 of 'x' at 1" in r.stderr


def test_output_that_is_the_input(tmp_path):
    path = save_model(tmp_path / "i.onnx", [helper.make_node("Identity", ["x"], ["y"], name="same")],
                      [tensor("x", [1, 3, 8, 8])], [tensor("y", None)], {})
    with pytest.raises(ModelError, match="the output 'y' is the model's input itself"):
        compile_model(path, default_config(), RNG.normal(0, 1, (4, 3, 8, 8)))

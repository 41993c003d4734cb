"""What exporters write that the importer must take (issue 38): dimensions stored as -1 or 0, a Concat of one
tensor, a final Flatten or Reshape whose shape the model declares, rank-3 tensors (transformer-style exports)
that VTA does not lay out, HardSwish spelled out in elementary nodes: each built with onnx's helper API,
imported, run end to end, checked bit for bit against the numpy int8 reference and against onnxruntime's float
result."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from onnx import helper

from vtacc.model import compile_model
from vtacc.onnx.reference import run_int8
from vtasim import api
from vtasim.host.quant import dequantise
from vtasm.config import default_config
from vtasm.errors import ModelError

from .models import save_model, sqnr, tensor

RNG = np.random.default_rng(38)
n = helper.make_node


def _w(*shape, scale=0.3):
    return RNG.normal(0, scale, shape).astype(np.float32)



def _run_both(path, model, x: np.ndarray, output: str = "y") -> np.ndarray:
    """The network's int8 output on ``x``: equal to the numpy reference, close to onnxruntime in float (on the
    model at ``path``)."""
    qnet = model.imported.qnet
    got = api.run(model.network, x, int8=True)[output]
    assert np.array_equal(got, run_int8(qnet, qnet.quantise_input(x))[output])
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    assert got.shape == want.shape  # the shape the model declares
    assert sqnr(want, dequantise(got, model.network.tensors[output].exp)) > 20
    return got


@pytest.mark.parametrize("unset", [-1, 0])
def test_a_dimension_stored_as_minus_one_or_zero_is_open_and_input_shape_fixes_it(tmp_path, unset):
    """Paddle2ONNX writes a dynamic batch as -1: it is open, not fixed at -1."""
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Relu", ["c"], ["y"], name="relu")]
    w = _w(16, 3, 3, 3)
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [unset, 3, 8, 8])], [tensor("y", [unset, 16, 8, 8])],
                      {"w": w})
    fixed = save_model(tmp_path / "fixed.onnx", nodes, [tensor("x", [1, 3, 8, 8])], [tensor("y", None)], {"w": w})
    cal = RNG.normal(0, 1, (8, 3, 8, 8)).astype(np.float32)
    with pytest.raises(ModelError, match=r"leaves dimensions of its input 'x' \[\?, 3, 8, 8\] open.*--input-shape"):
        compile_model(path, default_config(), cal)
    model = compile_model(path, default_config(), cal, input_shapes={"x": (1, 3, 8, 8)})
    assert [s.kind for s in model.network.steps] == ["vta"]
    _run_both(fixed, model, RNG.normal(0, 1, (1, 3, 8, 8)).astype(np.float32))  # onnxruntime refuses the -1


def test_a_concat_of_one_tensor_is_that_tensor(tmp_path):
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             n("Concat", ["c"], ["k"], name="cat", axis=1), n("Relu", ["k"], ["y"], name="relu")]
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [1, 16, 4, 4])], [tensor("y", None)],
                      {"w": _w(16, 16, 1, 1)})
    model = compile_model(path, default_config(), RNG.normal(0, 1, (8, 16, 4, 4)).astype(np.float32))
    assert [s.kind for s in model.network.steps] == ["vta"]  # no host step, no copy
    _run_both(path, model, RNG.normal(0, 1, (1, 16, 4, 4)).astype(np.float32))


@pytest.mark.parametrize("final", ["Flatten", "Reshape"])
def test_a_final_flatten_keeps_the_shape_the_model_declares(tmp_path, final):
    """SqueezeNet's classifier: a global pool, then a Flatten (or Reshape) to [N, classes]; the output comes
    back as [N, classes], not [N, classes, 1, 1]."""
    flatten = n("Flatten", ["p"], ["y"], name="flat", axis=1) if final == "Flatten" else \
        n("Reshape", ["p", "shape"], ["y"], name="flat")
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]), n("Relu", ["c"], ["r"], name="relu"),
             n("GlobalAveragePool", ["r"], ["p"], name="pool"), flatten]
    consts = {"w": _w(32, 16, 1, 1), "shape": np.array([1, 32], np.int64)}
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [1, 16, 4, 4])], [tensor("y", [1, 32])], consts)
    model = compile_model(path, default_config(), RNG.normal(0, 1, (8, 16, 4, 4)).astype(np.float32))
    assert model.network.tensors["y"].shape == (1, 32)
    got = _run_both(path, model, RNG.normal(0, 1, (1, 16, 4, 4)).astype(np.float32))
    assert got.shape == (1, 32)


def test_rank_3_tensors_run_on_vta_as_rows(tmp_path):
    """A transformer-style [N, tokens, features] projection, ReLU and add: on VTA as the matrix of the
    tokens' rows; the host keeps the Reshape to tokens and one back to the model's output shape."""
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             n("Reshape", ["c", "shape"], ["t"], name="tokens"), n("MatMul", ["t", "m"], ["p"], name="project"),
             n("Relu", ["p"], ["r"], name="relu"), n("Add", ["t", "r"], ["y"], name="residual")]
    consts = {"w": _w(16, 16, 1, 1), "shape": np.array([1, 16, 16], np.int64), "m": _w(16, 16)}
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [1, 16, 4, 4])], [tensor("y", None)], consts)
    model = compile_model(path, default_config(), RNG.normal(0, 1, (8, 16, 4, 4)).astype(np.float32))
    host = model.imported.qnet.network.on_host
    assert [layer.node.op for layer in host] == ["Reshape", "Reshape"]
    _run_both(path, model, RNG.normal(0, 1, (1, 16, 4, 4)).astype(np.float32))


def test_a_launch_that_multiplies_nothing_between_host_steps_joins_them(tmp_path):
    """A ReLU and an add of tokens between two host Reshapes: on VTA they would be a launch of their own and
    two round trips; the host computes them in its one step, and the report says why."""
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             n("Reshape", ["c", "shape"], ["t"], name="tokens"), n("Relu", ["t"], ["r"], name="relu"),
             n("Add", ["t", "r"], ["y"], name="residual")]
    consts = {"w": _w(16, 16, 1, 1), "shape": np.array([1, 16, 16], np.int64)}
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [1, 16, 4, 4])], [tensor("y", None)], consts)
    model = compile_model(path, default_config(), RNG.normal(0, 1, (8, 16, 4, 4)).astype(np.float32))
    host = model.imported.qnet.network.on_host
    assert [layer.node.op for layer in host] == ["Reshape", "Relu", "Add"]
    assert [p.kind.value for p in model.imported.parts] == ["vta", "host"]
    assert "two round trips" in model.imported.report()
    _run_both(path, model, RNG.normal(0, 1, (1, 16, 4, 4)).astype(np.float32))


@pytest.mark.parametrize("name", ["test_Conv2d", "test_Conv1d_groups", "test_PReLU_2d_multiparam",
                                  "test_BatchNorm2d_eval", "test_MaxPool1d"])
def test_older_torch_exports_of_opset_6_are_upgraded_and_run(name):
    """torch.onnx's older exports (the onnx wheel's pytorch-converted models, opset 6): onnx's version
    converter brings them to opset 7; what VTA does not compute (1-D windows, PReLU) runs on the host."""
    import onnx

    from vtasm.errors import VtaError

    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "pytorch-converted" / name
    if not folder.exists():
        pytest.skip(f"the onnx wheel ships no {name}")

    def load(path: Path) -> np.ndarray:
        t = onnx.TensorProto()
        t.ParseFromString(path.read_bytes())
        return onnx.numpy_helper.to_array(t)

    x = load(folder / "test_data_set_0" / "input_0.pb")
    want = load(folder / "test_data_set_0" / "output_0.pb")
    calibration = np.concatenate([x[None], x[None] + RNG.normal(0, 0.1, (7,) + x.shape)]).reshape(
        (-1,) + x.shape[1:]).astype(np.float32)
    try:
        model = compile_model(folder / "model.onnx", default_config(), calibration)
    except VtaError as exc:
        pytest.fail(f"{name}: {exc.message}")
    got = api.run(model.network, x)[model.network.outputs[0]]
    assert sqnr(want, got.reshape(want.shape)) > 25


def _spelled_hard_swish(form: str, three: float = 3.0) -> list:
    """HardSwish of 'c' into 'h' as exports before opset 14 write it."""
    if form == "hard_sigmoid":  # torch.onnx's
        return [n("HardSigmoid", ["c"], ["g"], name="hsig", alpha=1 / 6, beta=0.5),
                n("Mul", ["c", "g"], ["h"], name="hs")]
    relu6 = [n("Add", ["c", "three"], ["a"], name="plus3"), n("Clip", ["a", "zero", "six"], ["r"], name="relu6")]
    if form == "div_last":  # Paddle2ONNX's
        return [*relu6, n("Mul", ["c", "r"], ["m"], name="times"), n("Div", ["m", "six"], ["h"], name="hs")]
    return [*relu6, n("Mul", ["r", "sixth"], ["s"], name="scaled"), n("Mul", ["s", "c"], ["h"], name="hs")]


@pytest.mark.parametrize("form", ["div_last", "sixth_inside", "hard_sigmoid"])
def test_a_hard_swish_spelled_out_is_one_host_hard_swish(tmp_path, form):
    """Paddle2ONNX (and torch.onnx before opset 14) write HardSwish as x * clip(x + 3, 0, 6) / 6 or
    x * HardSigmoid(x): one HardSwish on the host, not a product of two tensors whose int8 range (six
    times the activation's) rounds its small values away."""
    nodes = [n("Conv", ["x", "w1"], ["c"], name="conv1", kernel_shape=[1, 1]), *_spelled_hard_swish(form),
             n("Conv", ["h", "w2"], ["y"], name="conv2", kernel_shape=[1, 1])]
    consts = {"w1": _w(16, 16, 1, 1, scale=0.6), "w2": _w(16, 16, 1, 1), "three": np.array([3.0], np.float32),
              "zero": np.array(0.0, np.float32), "six": np.array(6.0, np.float32),
              "sixth": np.array([1 / 6], np.float32)}
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [1, 16, 4, 4])], [tensor("y", None)], consts)
    model = compile_model(path, default_config(), RNG.normal(0, 1, (8, 16, 4, 4)).astype(np.float32))
    host = model.imported.qnet.network.on_host
    assert [(layer.node.op, layer.sources) for layer in host] == [("HardSwish", ["hs"])]
    _run_both(path, model, RNG.normal(0, 1, (1, 16, 4, 4)).astype(np.float32))


def test_an_add_of_another_constant_before_the_product_is_not_a_hard_swish(tmp_path):
    nodes = [n("Conv", ["x", "w1"], ["c"], name="conv1", kernel_shape=[1, 1]), *_spelled_hard_swish("div_last"),
             n("Conv", ["h", "w2"], ["y"], name="conv2", kernel_shape=[1, 1])]
    consts = {"w1": _w(16, 16, 1, 1, scale=0.6), "w2": _w(16, 16, 1, 1), "three": np.array([2.5], np.float32),
              "zero": np.array(0.0, np.float32), "six": np.array(6.0, np.float32)}
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [1, 16, 4, 4])], [tensor("y", None)], consts)
    model = compile_model(path, default_config(), RNG.normal(0, 1, (8, 16, 4, 4)).astype(np.float32))
    assert [layer.node.op for layer in model.imported.qnet.network.on_host] == ["Mul"]
    _run_both(path, model, RNG.normal(0, 1, (1, 16, 4, 4)).astype(np.float32))

"""Loading ONNX models: static shapes and initialisers read, unsupported models refused naming the node."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from vtacc.onnx.read.graph import load_graph
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


def test_operator_neither_side_computes_names_the_node(tmp_path):
    nodes = [helper.make_node("Hardmax", ["x"], ["y"], name="mix")]
    path = save_model(tmp_path / "s.onnx", nodes, [tensor("x", [1, 10])], [tensor("y", [1, 10])], {})
    with pytest.raises(ModelError, match=r"s.onnx: 1 node that neither VTA nor the host CPU can compute: "
                                         r"node 'mix' \(Hardmax\)"):
        load_graph(path)


def test_every_node_neither_side_computes_is_listed_in_one_message(tmp_path):
    nodes = [helper.make_node("Hardmax", ["x"], ["a"], name="mix"),
             helper.make_node("Relu", ["a"], ["b"], name="relu"),
             helper.make_node("Softmax", ["b"], ["c"], name="prob"),  # the host computes this one
             helper.make_node("Foo", ["c"], ["y"], name="custom", domain="com.example")]
    path = save_model(tmp_path / "s.onnx", nodes, [tensor("x", [1, 4, 2, 2])], [tensor("y", [1, 4, 2, 2])], {},
                      opsets={"com.example": 1})
    with pytest.raises(ModelError, match=r"2 nodes that neither VTA nor the host CPU can compute: node 'mix' "
                                         r"\(Hardmax\), node 'custom' \(com.example.Foo\)"):
        load_graph(path)


def test_open_dimensions_are_refused_until_given(tmp_path):
    path = _conv_relu(tmp_path, x_shape=("N", 3, 8, 8))
    with pytest.raises(ModelError, match=r"input 'x' \[N, 3, 8, 8\] open; fix them with --input-shape"):
        load_graph(path)
    g = load_graph(path, {"x": (2, 3, 8, 8)})
    assert g.shapes["x"] == (2, 3, 8, 8) and g.shapes["y"] == (2, 16, 8, 8)
    with pytest.raises(ModelError, match=r"--input-shape names data, which the model does not take \(its "
                                         r"inputs: x\)"):
        load_graph(path, {"data": (1, 3, 8, 8)})
    with pytest.raises(ModelError, match="gives 3 dimensions; the model's input has 4"):
        load_graph(path, {"x": (3, 8, 8)})


def test_opsets_outside_the_importers_range_are_refused(tmp_path):
    import onnx

    path = _conv_relu(tmp_path)
    model = onnx.load(str(path))
    model.opset_import[0].version = 22
    onnx.save(model, str(path))
    with pytest.raises(ModelError, match="opset 22; the importer reads opsets 7 to 21"):
        load_graph(path)


def _dynamic_batch_model(tmp_path):
    """A PyTorch-style export: dynamic batch, Dropout, and a flatten computed as Shape-Gather-Unsqueeze-Concat."""
    rng = np.random.default_rng(4)
    inits = {"w": rng.normal(0, 0.3, (16, 3, 3, 3)).astype(np.float32),
             "wf": rng.normal(0, 0.2, (10, 16 * 4 * 4)).astype(np.float32),
             "zero": np.array(0, np.int64), "minus1": np.array([-1], np.int64), "axes": np.array([0], np.int64)}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Dropout", ["r"], ["d"], name="drop"),
        helper.make_node("MaxPool", ["d"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Shape", ["p"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="batch", axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="unsq"),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["p", "target"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "wf"], ["y"], name="fc", transB=1),
    ]
    return save_model(tmp_path / "dyn.onnx", nodes, [tensor("x", ["batch", 3, 8, 8])], [tensor("y", ["batch", 10])],
                      inits)


def test_shape_arithmetic_folds_once_the_batch_is_fixed(tmp_path):
    g = load_graph(_dynamic_batch_model(tmp_path), {"x": (1, 3, 8, 8)})
    assert [n.op for n in g.nodes] == ["Conv", "Relu", "Dropout", "MaxPool", "Reshape", "Gemm"]
    target = next(n for n in g.nodes if n.op == "Reshape").inputs[1]
    assert g.constants[target].tolist() == [1, -1]
    assert g.shapes["y"] == (1, 10)


def test_missing_initialiser_refused(tmp_path):
    with pytest.raises(ModelError, match=r"node 'conv1' \(Conv\): input 'w' is neither a graph input, an initialiser") \
            as caught:
        load_graph(_conv_relu(tmp_path, weights=False))
    assert caught.value.node == "conv1"  # the node at fault, beside the message


def test_layer_kinds_are_types_and_every_vta_kind_has_its_rules():
    from vtacc.onnx.convert.layers import Layer, LayerKind
    from vtacc.onnx.kinds import RULES, rules
    from vtacc.onnx.kinds.rules import Rules, no_macs, nothing

    layer = Layer("clip", "c", ["n"], ["x"], "y", (1, 16, 2, 2))
    assert layer.kind is LayerKind.CLIP
    with pytest.raises(ValueError, match="'softmax' is not a valid LayerKind"):
        Layer("softmax", "s", ["n"], ["x"], "y", (1, 16))
    assert set(RULES) == set(LayerKind) - {LayerKind.HOST}  # checked when the kinds load, too
    assert all(r.kind is kind for kind, r in RULES.items())
    with pytest.raises(KeyError):  # a host layer runs on the host: it has no VTA rules to fall into
        rules(LayerKind.HOST)
    clip = rules(LayerKind.CLIP)
    with pytest.raises(TypeError, match="give either its kernel or the built-in"):
        Rules(LayerKind.CLIP, clip.float, clip.int8, True, nothing, None, None, no_macs)
    with pytest.raises(TypeError):  # every rule is required: a kind cannot leave one out
        Rules(LayerKind.CLIP, clip.float, clip.int8, True, nothing, clip.kernel, None)


def test_not_a_model(tmp_path):
    bad = tmp_path / "junk.onnx"
    bad.write_bytes(b"\x00not a model")
    with pytest.raises(ModelError, match="junk.onnx"):
        load_graph(bad)
    with pytest.raises(ModelError, match="(?i)no such file"):
        load_graph(tmp_path / "absent.onnx")


def test_a_dynamic_batch_export_compiles_and_runs_bit_exact(tmp_path):
    import onnxruntime

    from tests.portable import lint_run
    from vtacc.model import compile_model
    from vtacc.onnx.reference import run_int8
    from vtasim.runs.session import run_arrays
    from vtasm.config import default_config

    path = _dynamic_batch_model(tmp_path)
    rng = np.random.default_rng(5)
    model = compile_model(path, default_config(), rng.normal(0, 1, (16, 3, 8, 8)), input_shapes={"x": (1, 3, 8, 8)})
    qnet = model.imported.qnet
    x = rng.normal(0, 1, (1, 3, 8, 8))
    xq = qnet.quantise_input(x)
    got = run_arrays(model.compiled.program, {model.input_name: xq}, [model.output_name])[0][model.output_name]
    assert np.array_equal(got, run_int8(qnet, xq)[qnet.network.output])
    assert lint_run(model.compiled.program) == []
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x.astype(np.float32)})[0]
    scaled = got.astype(np.float64) * 2.0 ** qnet.output_exp
    sqnr = 10 * np.log10((expected ** 2).sum() / ((expected - scaled) ** 2).sum())
    assert sqnr > 20, sqnr


def test_input_shape_on_the_command_line(tmp_path):
    import subprocess
    import sys

    path = _dynamic_batch_model(tmp_path)
    np.save(tmp_path / "cal.npy", np.random.default_rng(6).normal(0, 1, (8, 3, 8, 8)).astype(np.float32))
    base = [sys.executable, "-m", "vtacc.cli", str(path), "--calibrate", str(tmp_path / "cal.npy")]
    ok = subprocess.run([*base, "--input-shape", "x=1,3,8,8", "-o", str(tmp_path / "n.vbin")], capture_output=True,
                        text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "n.vbin").exists()
    bad = subprocess.run([*base, "--input-shape", "x=1,3,eight,8"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "expected NAME=D0,D1,..." in bad.stderr
    missing = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "--input-shape" in missing.stderr and "Traceback" not in missing.stderr


LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"  # model-zoo exports onnx ships


@pytest.mark.parametrize("name, kept, folded", [
    ("light_vgg19.onnx", "Softmax", "ConstantOfShape"),  # weights computed by ConstantOfShape
    ("light_bvlc_alexnet.onnx", "LRN", "ConstantOfShape"),
    ("light_densenet121.onnx", "Mul", "Unsqueeze"),  # opset 9: axes as an attribute
])
def test_model_zoo_exports_fold_what_is_constant(name, kept, folded):
    path = LIGHT / name
    if not path.exists():
        pytest.skip(f"{path} is not shipped by this onnx package")
    ops = {n.op for n in load_graph(path).nodes}
    assert kept in ops and folded not in ops

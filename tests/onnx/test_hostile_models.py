"""Models that would make the importer run for ever or allocate without end are refused in one line, fast.

Control flow is refused before constant folding could execute it (the
unsupported-operator refusal comes first, docs/onnx.md); folding bounds the
size of what it computes before computing it; renames along a chain of
Identity nodes cost linear time.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.vtacc.test_cli import tool
from vtacc.onnx.read.fold import MAX_FOLDED
from vtacc.onnx.read.graph import load_graph


def _save(path, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _vi(name, shape, kind=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, kind, shape)


def test_a_loop_of_constants_is_refused_before_anything_runs_it(tmp_path):
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond", [], TensorProto.BOOL), _vi("c", [1])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("c_out", [1])])
    nodes = [helper.make_node("Loop", ["trip", "cond0", "c0"], ["c1"], name="forever", body=body),
             helper.make_node("Add", ["x", "c1"], ["y"], name="add"),
             helper.make_node("If", ["cond0"], ["z"], name="branch", then_branch=body, else_branch=body)]
    path = _save(tmp_path / "loop.onnx", nodes, [_vi("x", [1, 1])], [_vi("y", [1, 1])],
                 {"trip": np.array(10**15, np.int64), "cond0": np.array(True), "c0": np.zeros(1, np.float32)})
    r = tool("vtacc", path.name, "-o", "l.vbin", cwd=tmp_path)  # would run 10^15 iterations if folded
    assert r.returncode == 1 and not (tmp_path / "l.vbin").exists()
    assert "2 nodes that neither VTA nor the host CPU can compute: node 'forever' (Loop), node 'branch' (If)" \
        in r.stderr


def test_folding_bounds_what_it_computes_before_computing_it(tmp_path):
    side = int(MAX_FOLDED ** 0.5) + 1
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["big"], name="fill"),
             helper.make_node("Add", ["x", "big"], ["y"], name="add")]
    path = _save(tmp_path / "cos.onnx", nodes, [_vi("x", [1, 1])], [_vi("y", None)],
                 {"shape": np.array([side, side], np.int64)})
    r = tool("vtacc", path.name, "-o", "c.vbin", cwd=tmp_path)  # 1 GB of float32 if it were evaluated
    assert r.returncode == 1 and f"output of {side * side:,} elements is more than" in r.stderr
    assert "node 'fill' (ConstantOfShape)" in r.stderr
    # a small one folds as before
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["k"], name="fill", value=numpy_helper.from_array(
        np.array([0.5], np.float32))), helper.make_node("Add", ["x", "k"], ["y"], name="add")]
    path = _save(tmp_path / "small.onnx", nodes, [_vi("x", [1, 4])], [_vi("y", [1, 4])],
                 {"shape": np.array([1, 4], np.int64)})
    assert np.array_equal(load_graph(path).constants["k"], np.full((1, 4), 0.5, np.float32))


def test_a_long_chain_of_renames_imports_in_linear_time(tmp_path):
    n = 20000
    w = np.random.default_rng(0).normal(0, 0.2, (16, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["t0"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    nodes += [helper.make_node("Identity", [f"t{k}"], [f"t{k + 1}"], name=f"id{k}") for k in range(n)]
    nodes.append(helper.make_node("Relu", [f"t{n}"], ["y"], name="relu"))
    path = _save(tmp_path / "chain.onnx", nodes, [_vi("x", [1, 3, 8, 8])], [_vi("y", [1, 16, 8, 8])], {"w": w})
    np.save(tmp_path / "cal.npy", np.random.default_rng(1).normal(0, 1, (2, 1, 3, 8, 8)).astype(np.float32))
    r = tool("vtacc", path.name, "--calibrate", "cal.npy", "-o", "c.vbin", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # (12 s when the renames were followed anew each time; under 1 s now)
    assert "one launch of 1 layers" in r.stderr

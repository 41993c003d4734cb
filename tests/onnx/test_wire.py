"""Reading a model without parsing its weights into the message (wire.py): the same model and values as
onnx.load gives, large weights mapped from the file, anything unexpected left to onnx.load."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from vtacc.onnx.kinds.product import DENSE_BLOCK_ELEMENTS, _dense
from vtacc.onnx.read.graph import load_graph
from vtacc.onnx.read.wire import CUT_BYTES, read_model, release
from vtasm.errors import ModelError

from .models import save_model, tensor


def _dense_model(tmp_path, dtype=np.float32, rows=300, cols=100, name="d.onnx"):
    rng = np.random.default_rng(7)
    w = rng.standard_normal((rows, cols)).astype(dtype)
    small = np.arange(8, dtype=np.int64)
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)]
    path = save_model(tmp_path / name, nodes, [tensor("x", [1, cols])], [tensor("y", [1, rows])],
                      {"w": w, "small": small})
    return path, w, small


def _without_data(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for t in copy.graph.initializer:
        if t.raw_data and len(t.raw_data) >= CUT_BYTES:
            t.ClearField("raw_data")
    return copy


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.float64])
def test_same_model_and_values_as_onnx_load(tmp_path, dtype):
    path, w, small = _dense_model(tmp_path, dtype, rows=700, cols=120)
    model, arrays = read_model(path)
    reference = onnx.load(str(path))
    assert model.SerializeToString() == _without_data(reference).SerializeToString()
    assert set(arrays) == {"w"}  # the small initialiser stays in the message
    assert arrays["w"].dtype == w.dtype and np.array_equal(arrays["w"], w)
    assert not arrays["w"].flags.writeable  # as numpy_helper gives raw data: read-only
    kept = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer if t.name not in arrays}
    assert np.array_equal(kept["small"], small)


def test_released_weights_read_again(tmp_path):
    path, w, _ = _dense_model(tmp_path, rows=2000, cols=64)
    _, arrays = read_model(path)
    mapped = arrays["w"]
    assert float(mapped.sum()) == pytest.approx(float(w.sum()), rel=1e-6)
    release(mapped)
    release(mapped.T[5:])  # views too; arrays that are not mapped are left alone
    release(np.ones(3))
    assert np.array_equal(mapped, w)


def test_weights_in_float_data_and_external_files(tmp_path):
    rows, cols = 400, 64
    w = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) / 7
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)], "g",
                              [tensor("x", [1, cols])], [tensor("y", [1, rows])],
                              [helper.make_tensor("w", onnx.TensorProto.FLOAT, w.shape, w.reshape(-1).tolist())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(tmp_path / "typed.onnx"))  # float_data, not raw_data: parsed as onnx parses it
    loaded, arrays = read_model(tmp_path / "typed.onnx")
    assert arrays == {} and np.array_equal(numpy_helper.to_array(loaded.graph.initializer[0]), w)
    onnx.save(model, str(tmp_path / "ext.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.data", size_threshold=0)
    loaded, arrays = read_model(tmp_path / "ext.onnx")  # external data is mapped from its file (external.py)
    value = arrays["w"] if "w" in arrays else numpy_helper.to_array(loaded.graph.initializer[0])
    assert np.array_equal(value, w) and not loaded.graph.initializer[0].external_data
    assert np.array_equal(load_graph(tmp_path / "ext.onnx").constants["w"], w)


def test_bad_files_named(tmp_path):
    path, _, _ = _dense_model(tmp_path, rows=600, cols=64)
    data = path.read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match=r"^cut.onnx: not a readable ONNX model"):
        load_graph(tmp_path / "cut.onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(ModelError, match=r"empty.onnx"):
        load_graph(tmp_path / "empty.onnx")


def test_data_that_does_not_fit_its_shape(tmp_path):
    rows, cols = 600, 64
    w = np.zeros((rows, cols), np.float32)
    t = numpy_helper.from_array(w, "w")
    t.dims[0] = rows + 1  # the header says one row more than the bytes hold
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)], "g",
                              [tensor("x", [1, cols])], [tensor("y", [1, rows])], [t])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(tmp_path / "bad.onnx"))
    with pytest.raises(ModelError, match=r"bad.onnx: initialiser 'w' holds 153600 bytes of data but its shape "
                                         r"\[601, 64\] of float32 needs 153856"):
        load_graph(tmp_path / "bad.onnx")


def test_dense_in_blocks_is_the_whole_product():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 1024))
    w = rng.standard_normal((2 * DENSE_BLOCK_ELEMENTS // 1024 + 1000, 1024)).astype(np.float32)  # in blocks
    want = x @ w.astype(np.float64).T  # the product in one call, from the definition
    np.testing.assert_allclose(_dense(x, w), want, rtol=0, atol=1e-12 * np.abs(want).max())

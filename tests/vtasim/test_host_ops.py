"""The host operators against onnxruntime, node by node (an independent implementation of the ONNX spec)."""

from __future__ import annotations

import numpy as np
import pytest

from vtasim.host.ops import OPS, run_op

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402


def _ort(op: str, inputs: list[np.ndarray | None], attrs: dict, opset: int, consts: dict[int, np.ndarray],
         n_out: int = 1) -> list[np.ndarray]:
    """Run one node on onnxruntime; inputs at positions in ``consts`` are initialisers."""
    names, feeds, graph_inputs, inits = [], {}, [], []
    for k, x in enumerate(inputs):
        if x is None:
            names.append("")
            continue
        name = f"in{k}"
        names.append(name)
        if k in consts:
            inits.append(onnx.numpy_helper.from_array(np.asarray(consts[k]), name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, x.shape))
            feeds[name] = x
    outs = [f"out{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph([node], "g", graph_inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


rng = np.random.default_rng(7)
X4 = rng.normal(size=(1, 6, 9, 11)).astype(np.float32)
CASES = [
    ("Softmax", [rng.normal(size=(2, 10)).astype(np.float32)], {}, 13, {}),
    ("Softmax", [rng.normal(size=(1, 10, 1, 1)).astype(np.float32)], {}, 11, {}),
    ("LogSoftmax", [rng.normal(size=(2, 10)).astype(np.float32)], {"axis": 1}, 13, {}),
    ("LRN", [X4], {"size": 5, "alpha": 1e-2, "beta": 0.75, "bias": 1.0}, 13, {}),
    ("LRN", [X4], {"size": 3}, 13, {}),
    ("Sigmoid", [X4 * 5], {}, 13, {}),
    ("Tanh", [X4], {}, 13, {}),
    ("Exp", [X4], {}, 13, {}),
    ("Erf", [X4], {}, 13, {}),
    ("LeakyRelu", [X4], {"alpha": 0.1}, 13, {}),
    ("HardSigmoid", [X4 * 4], {}, 13, {}),
    ("HardSwish", [X4 * 4], {}, 14, {}),
    ("Elu", [X4], {"alpha": 0.5}, 13, {}),
    ("Clip", [X4, np.float32(-0.5), np.float32(0.7)], {}, 13, {1: np.float32(-0.5), 2: np.float32(0.7)}),
    ("Clip", [X4], {"min": 0.0, "max": 6.0}, 9, {}),
    ("Div", [X4, X4[:, :, :1, :1] + 3], {}, 13, {}),
    ("Mul", [X4, X4], {}, 13, {}),
    ("Sum", [X4, X4 * 2, X4 * 3], {}, 13, {}),
    ("Mean", [X4, X4 * 2], {}, 13, {}),
    ("BatchNormalization", [X4, *(rng.uniform(0.5, 1.5, 6).astype(np.float32) for _ in range(4))], {}, 13,
     {k: None for k in range(1, 5)}),
    ("Conv", [X4, rng.normal(size=(4, 3, 3, 2)).astype(np.float32), rng.normal(size=4).astype(np.float32)],
     {"group": 2, "strides": [2, 1], "pads": [0, 1, 1, 0], "dilations": [1, 2]}, 13, {1: None, 2: None}),
    ("ConvTranspose", [X4, rng.normal(size=(6, 2, 3, 3)).astype(np.float32), rng.normal(size=4).astype(np.float32)],
     {"group": 2, "strides": [2, 2], "pads": [1, 1, 0, 1], "output_padding": [1, 0]}, 13, {1: None, 2: None}),
    ("ConvTranspose", [X4, rng.normal(size=(6, 3, 2, 3)).astype(np.float32)],
     {"strides": [2, 1], "dilations": [1, 2], "auto_pad": "SAME_UPPER"}, 13, {1: None}),
    ("MaxPool", [X4], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, 13, {}),
    ("MaxPool", [X4], {"kernel_shape": [2, 2], "strides": [1, 1], "pads": [0, 0, 1, 1]}, 13, {}),
    ("AveragePool", [X4], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}, 13, {}),
    ("AveragePool", [X4], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                           "count_include_pad": 1, "ceil_mode": 1}, 13, {}),
    ("GlobalAveragePool", [X4], {}, 13, {}),
    ("GlobalMaxPool", [X4], {}, 13, {}),
    ("ReduceMean", [X4], {"axes": [2, 3], "keepdims": 0}, 13, {}),
    ("ReduceMean", [X4, np.array([-1], np.int64)], {"keepdims": 1}, 18, {1: None}),
    ("Transpose", [X4], {"perm": [0, 2, 3, 1]}, 13, {}),
    ("Concat", [X4, X4], {"axis": 2}, 13, {}),
    ("Slice", [X4, np.array([1, -4]), np.array([5, 100]), np.array([1, 3]), np.array([2, 1])], {}, 13,
     {1: None, 2: None, 3: None, 4: None}),
    ("Gather", [X4, np.array([2, 0, -1])], {"axis": 1}, 13, {1: None}),
    ("Pad", [X4, np.array([0, 0, 1, 2, 0, 0, 2, -1])], {}, 13, {1: None}),
    ("Resize", [X4, None, np.array([1, 1, 2, 2], np.float32)], {"mode": "nearest"}, 13, {2: None}),
    ("Resize", [X4, np.array([], np.float32), np.array([1, 1, 2, 3], np.float32)],
     {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, 11,
     {1: None, 2: None}),
    ("Upsample", [X4, np.array([1, 1, 2, 2], np.float32)], {"mode": "nearest"}, 9, {1: None}),
    # every mode and coordinate transformation (segmentation models upsample bilinearly)
    *[("Resize", [X4, None, np.array([1, 1, 2, 2], np.float32)], {"mode": mode,
                                                                  "coordinate_transformation_mode": transform},
       13, {2: None}) for mode in ("linear", "cubic") for transform in ("half_pixel", "pytorch_half_pixel",
                                                                        "align_corners", "asymmetric")],
    ("Resize", [X4, None, np.array([1, 1, 2, 2], np.float32)], {"mode": "linear",
                                                                "coordinate_transformation_mode":
                                                                    "half_pixel_symmetric"}, 19, {2: None}),
    ("Resize", [X4, None, np.array([1, 1, 0.5, 0.5], np.float32)], {"mode": "linear"}, 13, {2: None}),
    ("Resize", [X4, None, None, np.array([1, 6, 5, 7], np.int64)], {"mode": "linear"}, 13, {3: None}),
    ("Resize", [X4, None, np.array([1, 1, 3, 2], np.float32)],
     {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, 13, {2: None}),
    ("Resize", [X4, None, np.array([1, 1, 2, 2], np.float32)],
     {"mode": "nearest", "coordinate_transformation_mode": "align_corners", "nearest_mode": "round_prefer_ceil"},
     13, {2: None}),
    ("Resize", [X4, np.array([1, 1, 2, 2], np.float32)], {"mode": "linear"}, 10, {1: None}),
    ("Upsample", [X4, np.array([1, 1, 2, 3], np.float32)], {"mode": "linear"}, 9, {1: None}),
    # torch's 1-D modules (Conv1d, MaxPool1d, AvgPool1d) and PReLU
    ("Conv", [X3 := rng.normal(size=(2, 4, 13)).astype(np.float32), rng.normal(size=(6, 2, 3)).astype(np.float32),
              rng.normal(size=6).astype(np.float32)],
     {"kernel_shape": [3], "strides": [2], "pads": [1, 2], "dilations": [2], "group": 2}, 13, {1: None, 2: None}),
    ("MaxPool", [X3], {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}, 13, {}),
    ("AveragePool", [X3], {"kernel_shape": [4], "strides": [3], "pads": [2, 1], "count_include_pad": 1}, 13, {}),
    ("AveragePool", [X3], {"kernel_shape": [2], "ceil_mode": 1}, 13, {}),
    ("PRelu", [X4, rng.normal(size=(6, 1, 1)).astype(np.float32)], {}, 13, {1: None}),
    ("PRelu", [X4, np.array([0.25], np.float32)], {}, 9, {1: None}),
    # what vision transformers and newer CNNs export
    ("LayerNormalization", [rng.normal(size=(2, 5, 8)).astype(np.float32), rng.normal(size=8).astype(np.float32),
                            rng.normal(size=8).astype(np.float32)], {"epsilon": 1e-5}, 17, {1: None, 2: None}),
    ("LayerNormalization", [X4, rng.normal(size=(9, 11)).astype(np.float32)], {"axis": 2}, 17, {1: None}),
    ("Gelu", [X4], {}, 20, {}),
    ("Gelu", [X4], {"approximate": "tanh"}, 20, {}),
    ("Mish", [X4], {}, 18, {}),
    ("Einsum", [rng.normal(size=(2, 3, 4)).astype(np.float32), rng.normal(size=(2, 4, 5)).astype(np.float32)],
     {"equation": "bij,bjk->bik"}, 12, {}),
    ("Einsum", [rng.normal(size=(3, 4)).astype(np.float32)], {"equation": "ij->ji"}, 12, {}),
    ("Gemm", [rng.normal(size=(2, 5)).astype(np.float32), rng.normal(size=(3, 5)).astype(np.float32),
              rng.normal(size=3).astype(np.float32)], {"transB": 1, "alpha": 0.5}, 13, {1: None, 2: None}),
    ("MatMul", [rng.normal(size=(2, 5)).astype(np.float32), rng.normal(size=(2, 5, 4)).astype(np.float32)], {}, 13, {}),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_host_operator_matches_onnxruntime(case):
    op, inputs, attrs, opset, consts = case
    consts = {k: inputs[k] for k in consts}
    want = _ort(op, inputs, attrs, opset, consts)
    plain = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
    got = run_op(op, [None if x is None else np.asarray(x) for x in inputs], plain, opset, [w.shape for w in want])
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)


def test_split_takes_its_output_shapes():
    x = np.arange(24, dtype=np.float32).reshape(1, 6, 2, 2)
    want = _ort("Split", [x], {"axis": 1, "split": [2, 4]}, 11, {}, n_out=2)
    got = run_op("Split", [x], {"axis": 1}, 11, [w.shape for w in want])
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


def test_every_registered_operator_is_named_as_onnx_names_it():
    from onnx import defs

    assert sorted(k for k in OPS if not defs.has(k)) == []


def test_macs_of_host_nodes_counted_by_hand():
    from vtasim.host.step import node_macs
    from vtasm.formats.network import HostNode

    conv = HostNode("Conv", "c", ["x", "w"], ["y"], {"group": 2}, [(1, 6, 9, 11), (4, 3, 3, 2)], [(1, 4, 5, 11)])
    assert node_macs(conv) == 1 * 4 * 5 * 11 * (3 * 3 * 2)
    deconv = HostNode("ConvTranspose", "d", ["x", "w"], ["y"], {}, [(1, 6, 4, 4), (6, 2, 3, 3)], [(1, 2, 9, 9)])
    assert node_macs(deconv) == 6 * 4 * 4 * (2 * 3 * 3)
    gemm = HostNode("Gemm", "g", ["x", "w"], ["y"], {"transB": 1}, [(2, 5), (3, 5)], [(2, 3)])
    assert node_macs(gemm) == 2 * 3 * 5
    assert node_macs(HostNode("Softmax", "s", ["x"], ["y"], {}, [(1, 10)], [(1, 10)])) == 0

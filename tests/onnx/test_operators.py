"""Every supported operator in a small ONNX model: imported, compiled, run on vtasim.

Each result is checked twice: exactly against the numpy int8 execution of the
quantised network (reference.py, written from the quantiser's definitions),
and against onnxruntime's float result within the quantisation error.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

from vtacc.model import compile_model
from vtacc.onnx.reference import run_int8
from vtasim.runs.session import run_arrays
from vtasm.config import default_config

from .models import save_model, tensor

RNG = np.random.default_rng(7)
X = [1, 16, 8, 8]


def _w(*shape, scale=0.2):
    return RNG.normal(0, scale, shape).astype(np.float32)


def _node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, name=f"{op.lower()}_{outputs[0]}", **attrs)


def _conv(x, w, out, **attrs):
    return _node("Conv", [x, w], [out], kernel_shape=[3, 3], pads=[1, 1, 1, 1], **attrs)


def _gemm(x, out):
    return _node("Gemm", [x, "fw", "fb"], [out], transB=1)


CASES = {
    "conv": ([_conv("x", "w", "y")], X, {"w": _w(32, 16, 3, 3)}),
    "conv_bias_stride": ([_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                strides=[2, 2])], X, {"w": _w(16, 16, 3, 3), "b": _w(16)}),
    "conv_3_channels": ([_node("Conv", ["x", "w"], ["y"], kernel_shape=[1, 1])], [1, 3, 6, 6],
                        {"w": _w(16, 3, 1, 1)}),
    "depthwise": ([_conv("x", "w", "y", group=16)], X, {"w": _w(16, 1, 3, 3, scale=0.5)}),
    "grouped_4": ([_conv("x", "w", "y", group=4)], X, {"w": _w(32, 4, 3, 3)}),
    "gemm": ([_gemm("x", "y")], [1, 64], {"fw": _w(10, 64), "fb": _w(10)}),
    "matmul": ([_node("MatMul", ["x", "mw"], ["y"])], [1, 32], {"mw": _w(32, 16)}),
    "relu": ([_node("Relu", ["x"], ["y"])], X, {}),
    "clip": ([_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]), _node("Clip", ["c", "lo", "hi"], ["y"])], X,
             {"w": _w(16, 16, 1, 1), "lo": np.array(0, np.float32), "hi": np.array(0.5, np.float32)}),
    "maxpool": ([_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])], X, {}),
    "averagepool": ([_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], X, {}),
    "globalaveragepool": ([_node("GlobalAveragePool", ["x"], ["y"])], [1, 16, 7, 7], {}),
    "add": ([_node("Relu", ["x"], ["r"]), _node("Add", ["x", "r"], ["y"])], X, {}),
    "flatten_gemm": ([_node("Flatten", ["x"], ["f"], axis=1), _gemm("f", "y")], [1, 16, 2, 2],
                     {"fw": _w(10, 64), "fb": _w(10)}),
    "reshape_gemm": ([_node("Reshape", ["x", "shape"], ["f"]), _gemm("f", "y")], [1, 16, 2, 2],
                     {"shape": np.array([1, 64], np.int64), "fw": _w(10, 64), "fb": _w(10)}),
    "concat": ([_conv("x", "w", "c"), _node("Concat", ["c", "x"], ["y"], axis=1)], X, {"w": _w(16, 16, 3, 3)}),
    "batchnorm": ([_conv("x", "w", "c"), _node("BatchNormalization", ["c", "g", "be", "m", "v"], ["y"])], X,
                  {"w": _w(16, 16, 3, 3), "g": RNG.uniform(0.5, 1.5, 16).astype(np.float32), "be": _w(16),
                   "m": _w(16), "v": RNG.uniform(0.5, 1.5, 16).astype(np.float32)}),
    "identity": ([_node("Identity", ["x"], ["i"]), _node("Relu", ["i"], ["y"])], X, {}),
    # what exports write for batch norms and affine steps: all on VTA (folded, or a depthwise 1x1 convolution)
    "batchnorm_alone": ([_node("BatchNormalization", ["x", "g", "be", "m", "v"], ["b"]), _node("Relu", ["b"], ["y"])],
                        X, {"g": RNG.uniform(0.5, 1.5, 16).astype(np.float32), "be": _w(16), "m": _w(16),
                            "v": RNG.uniform(0.5, 1.5, 16).astype(np.float32)}),
    "mul_add_vectors": ([_node("Mul", ["x", "scale"], ["s"]), _node("Add", ["s", "shift"], ["y"])], X,
                        {"scale": RNG.uniform(0.5, 1.5, (16, 1, 1)).astype(np.float32),
                         "shift": _w(1, 16, 1, 1)}),
    "div_sub_after_conv": ([_conv("x", "w", "c"), _node("Div", ["c", "d"], ["q"]), _node("Sub", ["q", "m"], ["y"])],
                           X, {"w": _w(16, 16, 3, 3), "d": np.array(2.5, np.float32), "m": _w(16, 1, 1)}),
    "constant_minus_tensor": ([_node("Sub", ["k", "x"], ["y"])], X, {"k": _w(16, 1, 1)}),
    "sum_of_three": ([_node("Relu", ["x"], ["r"]), _conv("x", "w", "c"), _node("Sum", ["x", "r", "c"], ["y"])], X,
                     {"w": _w(16, 16, 3, 3)}),
    "leaky_power_of_two": ([_conv("x", "w", "c"), _node("LeakyRelu", ["c"], ["y"], alpha=0.125)], X,
                           {"w": _w(16, 16, 3, 3)}),
    "leaky_darknet": ([_conv("x", "w", "c"), _node("LeakyRelu", ["c"], ["y"], alpha=0.1)], X,
                      {"w": _w(16, 16, 3, 3)}),
    "hard_sigmoid_after_conv": ([_conv("x", "w", "c"), _node("HardSigmoid", ["c"], ["y"], alpha=0.25, beta=0.5)],
                                X, {"w": _w(16, 16, 3, 3)}),
    "hard_sigmoid_alone": ([_node("HardSigmoid", ["x"], ["y"])], X, {}),
    "pad_into_conv": ([_node("Pad", ["x", "pads"], ["p"]), _node("Conv", ["p", "w"], ["y"], kernel_shape=[3, 3])],
                      X, {"pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "w": _w(16, 16, 3, 3)}),
    "maxpool_ceil_mode": ([_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
                          [1, 16, 9, 9], {}),
    # floor mode over an image the stride does not divide: the last row and column take no part
    "maxpool_floor_odd": ([_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], [1, 16, 7, 7], {}),
    "maxpool_3x3_floor": ([_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2])], [1, 16, 8, 8], {}),
    "averagepool_floor_odd": ([_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                              [1, 16, 9, 9], {}),
    "conv_maxpool_floor_odd": ([_conv("x", "w", "c"), _node("Relu", ["c"], ["r"]),
                                _node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                               [1, 16, 9, 9], {"w": _w(32, 16, 3, 3)}),
    "maxpool_darknet_pads": ([_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[1, 1],
                                    pads=[0, 0, 1, 1])], X, {}),
    "maxpool_caffe_end_pads": ([_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                                      pads=[0, 0, 1, 1])], [1, 16, 8, 8], {}),
    "neg_after_conv": ([_conv("x", "w", "c"), _node("Neg", ["c"], ["y"])], X, {"w": _w(16, 16, 3, 3)}),
    "neg_alone": ([_node("Neg", ["x"], ["n"]), _node("Relu", ["n"], ["y"])], X, {}),
    "nested_concat": ([_conv("x", "w", "c"), _node("Concat", ["x", "c"], ["k"], axis=1), _conv("k", "w2", "d"),
                       _node("Concat", ["k", "d"], ["y"], axis=1)], X,
                      {"w": _w(16, 16, 3, 3), "w2": _w(16, 32, 3, 3)}),
}


def _qdq_case():
    """A convolution quantised elsewhere: int8 weights dequantised, activations through Q/DQ pairs."""
    wq = RNG.integers(-100, 100, (16, 16, 3, 3)).astype(np.int8)
    consts = {"wq": wq, "ws": np.full(16, 2.0**-8, np.float32), "s_in": np.array(2.0**-5, np.float32),
              "s_out": np.array(2.0**-3, np.float32), "z": np.array(0, np.int8),
              "zw": np.zeros(16, np.int8)}
    nodes = [_node("QuantizeLinear", ["x", "s_in", "z"], ["xq"]),
             _node("DequantizeLinear", ["xq", "s_in", "z"], ["xd"]),
             _node("DequantizeLinear", ["wq", "ws", "zw"], ["wd"], axis=0), _conv("xd", "wd", "c"),
             _node("QuantizeLinear", ["c", "s_out", "z"], ["cq"]),
             _node("DequantizeLinear", ["cq", "s_out", "z"], ["y"])]
    return nodes, X, consts


CASES["qdq"] = _qdq_case()


def _model(tmp_path, name):
    nodes, shape, consts = CASES[name]
    return save_model(tmp_path / f"{name}.onnx", nodes, [tensor("x", shape)],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], consts), shape


@pytest.mark.parametrize("name", sorted(CASES))
def test_operator_against_onnxruntime_and_numpy(tmp_path, name):
    path, shape = _model(tmp_path, name)
    calibration = None if name == "qdq" else RNG.normal(0, 1, [64] + shape[1:])
    model = compile_model(path, default_config(), calibration)
    qnet = model.imported.qnet
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for _ in range(3):
        x = RNG.normal(0, 0.6, shape)  # inside the calibrated range: no saturation
        xq = qnet.quantise_input(x)
        assert [step.kind for step in model.network.steps] == ["vta"], name  # VTA computes all of it
        got = run_arrays(model.compiled.program, {model.input_name: xq}, [model.output_name])[0][model.output_name]
        assert np.array_equal(got, run_int8(qnet, xq)[qnet.network.output]), name
        expected = session.run(None, {"x": (xq * 2.0**qnet.input_exp).astype(np.float32)})[0]
        error = np.abs(qnet.dequantise_output(got) - expected)
        step = 2.0**qnet.output_exp
        assert error.max() <= 3 * step + 0.02 * np.abs(expected).max(), (name, error.max(), step)

"""Rank-3 tensors [N, T, C] run on VTA as the matrix of their N * T rows (issue 38): a transformer's residual
additions and its dense layers over the last axis (MatMul by a constant, with a bias and a ReLU); the host
nodes between them read and write the model's shapes. Bit for bit the numpy reference, close to onnxruntime."""

from __future__ import annotations

import numpy as np
from onnx import helper

from .models import save_model, tensor
from .test_global_pooling import compile_and_check

RNG = np.random.default_rng(3803)
n = helper.make_node


def test_residual_adds_and_dense_layers_of_tokens_run_on_vta(tmp_path):
    """ViT's block shape: tokens from a host Transpose, a dense layer with bias and ReLU, a second dense layer,
    the residual Add, a host Softmax after it, and a final residual Add that is the model's output (on the
host with the Softmax before it: a launch of its own would multiply nothing)."""
    nodes = [n("Reshape", ["x", "tokens_shape"], ["t0"], name="tokens"),
             n("Transpose", ["t0"], ["t"], name="to_tokens", perm=[0, 2, 1]),
             n("MatMul", ["t", "w1"], ["h0"], name="fc1"), n("Add", ["h0", "b1"], ["h1"], name="fc1_bias"),
             n("Relu", ["h1"], ["h"], name="relu"),
             n("MatMul", ["h", "w2"], ["m0"], name="fc2"), n("Add", ["m0", "b2"], ["m"], name="fc2_bias"),
             n("Add", ["t", "m"], ["r"], name="residual"),
             n("Softmax", ["r"], ["s"], name="softmax", axis=-1),
             n("Add", ["r", "s"], ["y"], name="residual_2")]
    consts = {"tokens_shape": np.array([1, 32, 20], dtype=np.int64),
              "w1": RNG.normal(0, 0.2, (32, 64)).astype(np.float32), "b1": RNG.normal(0, 0.1, 64).astype(np.float32),
              "w2": RNG.normal(0, 0.1, (64, 32)).astype(np.float32), "b2": RNG.normal(0, 0.1, 32).astype(np.float32)}
    path = save_model(tmp_path / "tokens.onnx", nodes, [tensor("x", [1, 32, 4, 5])], [tensor("y", [1, 20, 32])],
                      consts)
    model = compile_and_check(path, (1, 32, 4, 5))
    host = {layer.node.name for layer in model.imported.qnet.network.on_host}
    assert host <= {"tokens", "to_tokens", "softmax", "residual_2", "y__rows"} and "residual_2" in host, host
    on_vta = {q.layer.sources[0] for q in model.imported.qnet.layers if q.layer.node is None}
    assert {"fc1", "fc2", "residual"} <= on_vta  # the last add joins the host step around it: no MACs alone

"""Small ONNX models built with onnx.helper for the importer's tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save_model(path: Path, nodes: list, inputs: list, outputs: list, initializers: dict[str, np.ndarray],
               opsets: dict[str, int] | None = None) -> Path:
    """Write a one-graph model (opset 13, plus any other ``opsets`` by domain) and return its path."""
    graph = helper.make_graph(nodes, "test", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    opsets = {"": 13, **(opsets or {})}
    imports = [helper.make_opsetid(d, v) for d, v in opsets.items()]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def tensor(name: str, shape: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def sqnr(want: np.ndarray, got: np.ndarray) -> float:
    """10 log10(sum want^2 / sum (want - got)^2), in float64: how close ``got`` is to the reference ``want``."""
    want = np.asarray(want, dtype=np.float64)
    return float(10 * np.log10(np.sum(want**2) / max(np.sum((want - got) ** 2), 1e-30)))

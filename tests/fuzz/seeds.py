"""Small valid inputs to mutate, built programmatically: a .vbin, a network file, ONNX models, .npy arrays.

The seeds are made with the installed commands (``vtacc``), as a user makes them, so the fuzz suite
depends only on the file formats and the command lines, not on internal APIs.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .contract import REPO, tool_path

INPUT_SHAPE = (1, 3, 8, 8)


@dataclass(frozen=True)
class Seeds:
    """Paths of the valid seed files (all in one directory) and their bytes."""

    folder: Path
    vbin: Path  # examples/vadd.vk compiled: 3 tensors a, b (int32[1, 1024] inputs), c, with a source map
    network: Path  # host model compiled: VTA launches and host steps (LRN, Transpose, Mul by a constant, Softmax)
    host_onnx: Path  # the ONNX model of ``network``
    vta_onnx: Path  # an ONNX model VTA computes whole (--emit vk works on it)
    cal: Path  # calibration data for both models, float32[4, 3, 8, 8]
    x: Path  # one float input of the right shape, float32[1, 3, 8, 8]
    a: Path  # an int32[1, 1024] input for the .vbin's tensor a

    def vbin_bytes(self) -> bytes:
        return self.vbin.read_bytes()

    def network_bytes(self) -> bytes:
        """The network file's bytes (compiled from host.onnx on first use)."""
        if not self.network.exists():
            _build(self.folder, [tool_path("vtacc"), "host.onnx", "--calibrate", "cal.npy", "-o", "net.vbin"])
        return self.network.read_bytes()


def _weights(rng: np.random.Generator, *shape: int, scale: float = 0.2) -> np.ndarray:
    return rng.normal(0, scale, shape).astype(np.float32)


def host_model():
    """Conv -> Relu -> LRN, Transpose, Mul by a constant, Elu (host) -> GlobalAveragePool -> Gemm -> Softmax."""
    from onnx import helper

    rng = np.random.default_rng(11)
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Relu", ["c1"], ["r1"], name="relu1"),
             n("LRN", ["r1"], ["l1"], name="norm1", size=3, alpha=1e-3, beta=0.75, bias=1.0),
             n("Transpose", ["l1"], ["t1"], name="swap", perm=[0, 1, 3, 2]),
             n("Mul", ["t1", "k"], ["m1"], name="mask"),
             n("Elu", ["m1"], ["e1"], name="elu", alpha=0.5),
             n("GlobalAveragePool", ["e1"], ["p"], name="pool"),
             n("Flatten", ["p"], ["f"], name="flat"),
             n("Gemm", ["f", "fw", "fb"], ["logits"], name="fc", transB=1),
             n("Softmax", ["logits"], ["prob"], name="softmax", axis=1)]
    inits = {"w1": _weights(rng, 16, 3, 3, 3), "b1": _weights(rng, 16), "k": _weights(rng, 1, 16, 8, 8, scale=1.0),
             "fw": _weights(rng, 10, 16), "fb": _weights(rng, 10)}
    return _model(nodes, inits, ["prob"], [1, 10])


def vta_model():
    """Conv -> Relu -> Conv -> GlobalAveragePool -> Flatten -> Gemm: one VTA launch, so --emit vk works."""
    from onnx import helper

    rng = np.random.default_rng(12)
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Relu", ["c1"], ["r1"], name="relu1"),
             n("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[1, 1]),
             n("GlobalAveragePool", ["c2"], ["p"], name="pool"),
             n("Flatten", ["p"], ["f"], name="flat"),
             n("Gemm", ["f", "fw", "fb"], ["logits"], name="fc", transB=1)]
    inits = {"w1": _weights(rng, 16, 3, 3, 3), "b1": _weights(rng, 16), "w2": _weights(rng, 16, 16, 1, 1),
             "b2": _weights(rng, 16), "fw": _weights(rng, 10, 16), "fb": _weights(rng, 10)}
    return _model(nodes, inits, ["logits"], [1, 10])


def _model(nodes, inits: dict, outputs: list[str], out_shape: list[int]):
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        nodes, "fuzz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(INPUT_SHAPE))],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, out_shape) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _build(folder: Path, command: list[str]) -> None:
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"building a fuzz seed failed: {' '.join(command)}: {done.stderr.strip()}")


def build_seeds(folder: Path) -> Seeds:
    """Write the seeds into ``folder`` (compiling the .vbin with ``vtacc``; the network file is compiled when
    first asked for: ``network_bytes``)."""
    import onnx

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    np.save(folder / "cal.npy", rng.normal(0, 1, (4, *INPUT_SHAPE)).astype(np.float32))
    np.save(folder / "x.npy", rng.normal(0, 1, INPUT_SHAPE).astype(np.float32))
    np.save(folder / "a.npy", rng.integers(-1000, 1000, (1, 1024)).astype(np.int32))
    onnx.save(host_model(), str(folder / "host.onnx"))
    onnx.save(vta_model(), str(folder / "vta.onnx"))
    _build(folder, [tool_path("vtacc"), str(REPO / "examples" / "vadd.vk"), "-o", "vadd.vbin"])
    return Seeds(folder, folder / "vadd.vbin", folder / "net.vbin", folder / "host.onnx", folder / "vta.onnx",
                 folder / "cal.npy", folder / "x.npy", folder / "a.npy")

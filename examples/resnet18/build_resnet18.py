"""Build an ONNX ResNet-18 with random weights (nothing is downloaded) and calibration inputs for it.

    python examples/resnet18/build_resnet18.py OUT_DIR [--size 224] [--seed 0]

The graph is torchvision's ResNet-18 at batch 1 (convolutions without bias,
each followed by BatchNormalization, residual Adds, global average pool, a
1000-way Gemm). Weights are random but scaled (He-normal convolutions, the
second BatchNormalization of each block damped) so that activations stay in
a sane range through all 18 layers, which is what quantisation needs.
Writes OUT_DIR/resnet18.onnx, calibration.npy [4, 3, S, S] and input.npy.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.weights: dict[str, np.ndarray] = {}

    def node(self, op: str, inputs: list[str], name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv_bn(self, x: str, name: str, cin: int, cout: int, k: int, stride: int, gamma: tuple[float, float]) -> str:
        """Conv (He-normal, no bias) then BatchNormalization."""
        w = self.rng.normal(0, np.sqrt(2.0 / (cin * k * k)), (cout, cin, k, k))
        self.weights[f"{name}.w"] = w.astype(np.float32)
        y = self.node("Conv", [x, f"{name}.w"], name, kernel_shape=[k, k], strides=[stride, stride],
                      pads=[k // 2] * 4)
        bn = name.replace("conv", "bn")
        params = {"g": self.rng.uniform(*gamma, cout), "b": self.rng.normal(0, 0.1, cout),
                  "m": self.rng.normal(0, 0.1, cout), "v": self.rng.uniform(0.5, 1.5, cout)}
        for key, value in params.items():
            self.weights[f"{bn}.{key}"] = value.astype(np.float32)
        return self.node("BatchNormalization", [y] + [f"{bn}.{k}" for k in "gbmv"], bn, epsilon=1e-5)

    def block(self, x: str, name: str, cin: int, cout: int, stride: int) -> str:
        """A BasicBlock: two 3x3 convolutions and the shortcut (1x1 stride-2 when the shape changes)."""
        y = self.conv_bn(x, f"{name}.conv1", cin, cout, 3, stride, (0.5, 1.0))
        y = self.node("Relu", [y], f"{name}.relu1")
        y = self.conv_bn(y, f"{name}.conv2", cout, cout, 3, 1, (0.2, 0.5))
        shortcut = x
        if stride != 1 or cin != cout:
            shortcut = self.conv_bn(x, f"{name}.downsample.conv", cin, cout, 1, stride, (0.2, 0.5))
        y = self.node("Add", [y, shortcut], f"{name}.add")
        return self.node("Relu", [y], f"{name}.relu2")


def build(size: int = 224, seed: int = 0) -> onnx.ModelProto:
    """ResNet-18 for [1, 3, size, size] images, random weights."""
    b = _Builder(seed)
    x = b.conv_bn("image", "conv1", 3, 64, 7, 2, (0.5, 1.0))
    x = b.node("Relu", [x], "relu1")
    x = b.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512), start=1):
        for i in range(2):
            stride = 2 if stage > 1 and i == 0 else 1
            x = b.block(x, f"layer{stage}.{i}", cin, cout, stride)
            cin = cout
    x = b.node("GlobalAveragePool", [x], "avgpool")
    x = b.node("Flatten", [x], "flatten", axis=1)
    b.weights["fc.w"] = b.rng.normal(0, 0.01, (1000, 512)).astype(np.float32)
    b.weights["fc.b"] = np.zeros(1000, np.float32)
    b.node("Gemm", [x, "fc.w", "fc.b"], "logits", transB=1)
    graph = helper.make_graph(b.nodes, "resnet18", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                                                   [1, 3, size, size])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])],
                              [numpy_helper.from_array(v, k) for k, v in b.weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.shape_inference.infer_shapes(model, strict_mode=True)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    onnx.save(build(args.size, args.seed), str(args.out / "resnet18.onnx"))
    rng = np.random.default_rng(args.seed + 1)
    np.save(args.out / "calibration.npy", rng.normal(0, 1, (4, 3, args.size, args.size)).astype(np.float32))
    np.save(args.out / "input.npy", rng.normal(0, 1, (1, 3, args.size, args.size)).astype(np.float32))
    print(f"resnet18: wrote {args.out}/resnet18.onnx ({args.size}x{args.size} input), calibration.npy, input.npy")


if __name__ == "__main__":
    main()

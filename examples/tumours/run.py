"""A trained network on real data beyond digits: scikit-learn's bundled Wisconsin breast-cancer set.

    python examples/tumours/run.py [OUT_DIR]

569 tumours, 30 measurements each, malignant or benign (shipped with
scikit-learn; nothing is downloaded). A fixed permutation keeps 455 for
training and 114 held out; the measurements are standardised with the
training set's mean and deviation (the preprocessing step, outside the
model). An MLP 30 -> 64 -> 32 -> 2 with ReLUs is trained in numpy (Adam on
softmax cross-entropy), exported to ONNX, imported and compiled by vtacc
(calibrated on the training set) and run by vtasim on all held-out tumours in
one call. Prints float accuracy (onnxruntime) and int8 accuracy on vtasim;
exit 1 when the int8 accuracy is more than one point below the float one, or
an output differs from the numpy execution of the quantised network.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

TRAIN = 455
SIZES = (30, 64, 32, 2)
EPOCHS = 60
BATCH = 32
RATE = 1e-3


def load() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Standardised training and held-out measurements and their labels."""
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    order = np.random.default_rng(0).permutation(len(data.target))
    x, y = data.data[order].astype(np.float64), data.target[order].astype(np.int64)
    mean, std = x[:TRAIN].mean(0), x[:TRAIN].std(0)
    x = ((x - mean) / std).astype(np.float32)
    return x[:TRAIN], y[:TRAIN], x[TRAIN:], y[TRAIN:]


def train(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """Adam on mini-batches; layers as (weight [out, in], bias)."""
    layers = [(rng.normal(0, np.sqrt(2 / i), (o, i)), np.zeros(o)) for i, o in zip(SIZES, SIZES[1:], strict=False)]
    params = [p for layer in layers for p in layer]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    step = 0
    for _ in range(EPOCHS):
        order = rng.permutation(len(x))
        for start in range(0, len(x), BATCH):
            idx = order[start:start + BATCH]
            acts = [x[idx].astype(np.float64)]
            for k in range(0, len(params), 2):
                z = acts[-1] @ params[k].T + params[k + 1]
                acts.append(np.maximum(z, 0) if k < len(params) - 2 else z)
            probs = np.exp(acts[-1] - acts[-1].max(1, keepdims=True))
            probs /= probs.sum(1, keepdims=True)
            probs[np.arange(len(idx)), y[idx]] -= 1
            grad = probs / len(idx)
            grads = [None] * len(params)
            for k in range(len(params) - 2, -1, -2):
                grads[k], grads[k + 1] = grad.T @ acts[k // 2], grad.sum(0)
                grad = (grad @ params[k]) * (acts[k // 2] > 0)
            step += 1
            for k, p in enumerate(params):
                m[k] = 0.9 * m[k] + 0.1 * grads[k]
                v[k] = 0.999 * v[k] + 0.001 * grads[k] ** 2
                p -= RATE * (m[k] / (1 - 0.9**step)) / (np.sqrt(v[k] / (1 - 0.999**step)) + 1e-8)
    return [(params[k], params[k + 1]) for k in range(0, len(params), 2)]


def export(layers: list[tuple[np.ndarray, np.ndarray]], path: Path) -> None:
    """The MLP as ONNX (opset 13): Gemm-Relu-Gemm-Relu-Gemm, input 'features' [1, 30], output 'logits'."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, x = [], [], "features"
    for k, (w, b) in enumerate(layers):
        inits += [numpy_helper.from_array(w.astype(np.float32), f"w{k}"),
                  numpy_helper.from_array(b.astype(np.float32), f"b{k}")]
        out = "logits" if k == len(layers) - 1 else f"h{k}"
        nodes.append(helper.make_node("Gemm", [x, f"w{k}", f"b{k}"], [out], name=f"fc{k}", transB=1))
        if k < len(layers) - 1:
            nodes.append(helper.make_node("Relu", [out], [f"r{k}"], name=f"relu{k}"))
            out = f"r{k}"
        x = out
    graph = helper.make_graph(nodes, "tumours", [helper.make_tensor_value_info("features", TensorProto.FLOAT,
                                                                                [1, SIZES[0]])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, SIZES[-1]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def main() -> int:
    import onnxruntime

    from vtacc.onnx import import_model
    from vtacc.onnx.reference import run_int8
    from vtasim import api

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "out/tumours")
    out.mkdir(parents=True, exist_ok=True)
    x_train, y_train, x_test, y_test = load()
    export(train(x_train, y_train, np.random.default_rng(1)), out / "tumours.onnx")
    np.save(out / "calibration.npy", x_train)
    vtacc = Path(sys.executable).parent / "vtacc"
    subprocess.run([str(vtacc), str(out / "tumours.onnx"), "--calibrate", str(out / "calibration.npy"), "-o",
                    str(out / "tumours.vbin")], check=True, capture_output=True)
    session = onnxruntime.InferenceSession(str(out / "tumours.onnx"), providers=["CPUExecutionProvider"])
    floats = np.concatenate([session.run(None, {"features": row[None]})[0] for row in x_test])
    got = api.run(api.load(out / "tumours.vbin"), x_test, int8=True)["logits"]
    qnet = import_model(out / "tumours.onnx", out / "calibration.npy").qnet
    want = np.concatenate([run_int8(qnet, qnet.quantise_input(row[None]))["logits"] for row in x_test])
    float_acc = float(np.mean(floats.argmax(1) == y_test))
    int8_acc = float(np.mean(got.argmax(1) == y_test))
    exact = int(np.sum(np.all(got == want, axis=1)))
    print(f"tumours: {len(y_test)} held-out tumours; float accuracy {float_acc:.1%} (onnxruntime), int8 accuracy "
          f"on vtasim {int8_acc:.1%} ({100 * (int8_acc - float_acc):+.1f} points); {exact}/{len(y_test)} outputs "
          "bit-exact with numpy")
    return 0 if exact == len(y_test) and int8_acc >= float_acc - 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())

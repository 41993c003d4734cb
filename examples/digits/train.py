"""Train a small CNN on scikit-learn's bundled 8x8 digits in numpy and export it to ONNX.

    python examples/digits/train.py [OUT_DIR]

The 1797 images ship with scikit-learn (nothing is downloaded). A fixed
permutation keeps 1437 for training and 360 held out. The network is
conv 3x3 (1 -> 16) - ReLU - max-pool 2 - conv 3x3 (16 -> 32) - ReLU - max-pool 2
- flatten - dense (128 -> 10), trained with Adam on softmax cross-entropy by
hand-written forward and backward passes. OUT_DIR (default
examples/digits/out) receives digits.onnx, calibration.npy (256 training
images), test_images.npy and test_labels.npy.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

TRAIN = 1437
EPOCHS = 30
BATCH = 32
RATE = 2e-3
DECAY = 1e-4


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """Images [1797, 1, 8, 8] in [0, 1] and their labels."""
    from sklearn.datasets import load_digits as sklearn_digits

    data = sklearn_digits()
    return (data.images / 16.0).astype(np.float32)[:, None], data.target.astype(np.int64)


def im2col(x: np.ndarray) -> np.ndarray:
    """[N, C, H, W] -> [N, C*9, H*W]: the 3x3 neighbourhoods (zero padded) of every pixel."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[:, :, i:i + h, j:j + w] for i in range(3) for j in range(3)], axis=2)
    return cols.reshape(n, c * 9, h * w)


def col2im(cols: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The adjoint of im2col: gradients of the columns summed back onto the pixels."""
    n, c, h, w = shape
    cols = cols.reshape(n, c, 9, h, w)
    xp = np.zeros((n, c, h + 2, w + 2), dtype=cols.dtype)
    for k in range(9):
        i, j = divmod(k, 3)
        xp[:, :, i:i + h, j:j + w] += cols[:, :, k]
    return xp[:, :, 1:-1, 1:-1]


def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n, _, h, wd = x.shape
    cols = im2col(x)
    y = np.einsum("ok,nkp->nop", w.reshape(w.shape[0], -1), cols) + b[None, :, None]
    return y.reshape(n, w.shape[0], h, wd), cols


def pool(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """2x2 max-pool and the mask of the maxima (for the backward pass)."""
    n, c, h, w = x.shape
    blocks = x.reshape(n, c, h // 2, 2, w // 2, 2)
    y = blocks.max(axis=(3, 5))
    mask = blocks == y[:, :, :, None, :, None]
    return y, mask


def unpool(grad: np.ndarray, mask: np.ndarray) -> np.ndarray:
    n, c, h, _, w, _ = mask.shape
    return (mask * grad[:, :, :, None, :, None]).reshape(n, c, h * 2, w * 2)


def init(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """He-initialised weights, zero biases."""
    def he(*shape: int) -> np.ndarray:
        return (rng.normal(0, np.sqrt(2.0 / np.prod(shape[1:])), shape)).astype(np.float32)

    return {"w1": he(16, 1, 3, 3), "b1": np.zeros(16, np.float32), "w2": he(32, 16, 3, 3),
            "b2": np.zeros(32, np.float32), "w3": he(10, 128), "b3": np.zeros(10, np.float32)}


def forward(p: dict[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, dict]:
    c1, cols1 = conv(x, p["w1"], p["b1"])
    r1 = np.maximum(c1, 0)
    p1, m1 = pool(r1)
    c2, cols2 = conv(p1, p["w2"], p["b2"])
    r2 = np.maximum(c2, 0)
    p2, m2 = pool(r2)
    flat = p2.reshape(len(x), -1)
    logits = flat @ p["w3"].T + p["b3"]
    return logits, dict(cols1=cols1, c1=c1, m1=m1, p1=p1, cols2=cols2, c2=c2, m2=m2, flat=flat)


def backward(p: dict[str, np.ndarray], cache: dict, dlogits: np.ndarray) -> dict[str, np.ndarray]:
    g = {"w3": dlogits.T @ cache["flat"], "b3": dlogits.sum(0)}
    dp2 = (dlogits @ p["w3"]).reshape(cache["m2"].shape[0], 32, 2, 2)
    dc2 = unpool(dp2, cache["m2"]) * (cache["c2"] > 0)
    d2 = dc2.reshape(len(dc2), 32, -1)
    g["w2"] = np.einsum("nop,nkp->ok", d2, cache["cols2"]).reshape(p["w2"].shape)
    g["b2"] = d2.sum((0, 2))
    dcols2 = np.einsum("ok,nop->nkp", p["w2"].reshape(32, -1), d2)
    dp1 = col2im(dcols2, cache["p1"].shape)
    dc1 = unpool(dp1, cache["m1"]) * (cache["c1"] > 0)
    d1 = dc1.reshape(len(dc1), 16, -1)
    g["w1"] = np.einsum("nop,nkp->ok", d1, cache["cols1"]).reshape(p["w1"].shape)
    g["b1"] = d1.sum((0, 2))
    return g


def train(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Adam on mini-batches of softmax cross-entropy, with a little L2 weight decay."""
    p = init(rng)
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(val) for k, val in p.items()}
    step = 0
    for _ in range(EPOCHS):
        order = rng.permutation(len(x))
        for start in range(0, len(x), BATCH):
            idx = order[start:start + BATCH]
            logits, cache = forward(p, x[idx])
            probs = np.exp(logits - logits.max(1, keepdims=True))
            probs /= probs.sum(1, keepdims=True)
            probs[np.arange(len(idx)), y[idx]] -= 1
            grads = backward(p, cache, probs / len(idx))
            step += 1
            for k in p:
                grad = grads[k] + (DECAY * p[k] if k.startswith("w") else 0)
                m[k] = 0.9 * m[k] + 0.1 * grad
                v[k] = 0.999 * v[k] + 0.001 * grad * grad
                p[k] -= RATE * (m[k] / (1 - 0.9**step)) / (np.sqrt(v[k] / (1 - 0.999**step)) + 1e-8)
    return p


def export(p: dict[str, np.ndarray], path: Path) -> None:
    """The trained network as an ONNX model (opset 13, batch 1, input 'image', output 'logits')."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def node(op: str, inputs: list[str], output: str, name: str, **attrs) -> onnx.NodeProto:
        return helper.make_node(op, inputs, [output], name=name, **attrs)

    conv_attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1]}
    pool_attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    nodes = [node("Conv", ["image", "w1", "b1"], "c1", "conv1", **conv_attrs), node("Relu", ["c1"], "r1", "relu1"),
             node("MaxPool", ["r1"], "p1", "pool1", **pool_attrs),
             node("Conv", ["p1", "w2", "b2"], "c2", "conv2", **conv_attrs), node("Relu", ["c2"], "r2", "relu2"),
             node("MaxPool", ["r2"], "p2", "pool2", **pool_attrs), node("Flatten", ["p2"], "flat", "flatten", axis=1),
             node("Gemm", ["flat", "w3", "b3"], "logits", "fc", transB=1)]
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 8, 8])
    graph = helper.make_graph(nodes, "digits", [image],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in p.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "examples/digits/out")
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    images, labels = load_digits()
    rng = np.random.default_rng(0)
    order = rng.permutation(len(images))
    train_idx, test_idx = order[:TRAIN], order[TRAIN:]
    params = train(images[train_idx], labels[train_idx], rng)
    seconds = time.perf_counter() - started
    export(params, out / "digits.onnx")
    np.save(out / "calibration.npy", images[train_idx[:256]])
    np.save(out / "test_images.npy", images[test_idx])
    np.save(out / "test_labels.npy", labels[test_idx])
    ours = forward(params, images[test_idx])[0].argmax(1)
    import onnxruntime

    session = onnxruntime.InferenceSession(str(out / "digits.onnx"), providers=["CPUExecutionProvider"])
    theirs = np.array([session.run(None, {"image": img[None]})[0].argmax() for img in images[test_idx]])
    accuracy = float(np.mean(theirs == labels[test_idx]))
    print(f"digits: trained in {seconds:.1f} s, float accuracy {accuracy:.1%} on {len(test_idx)} held-out images "
          f"(onnxruntime); wrote {out}/digits.onnx")
    if not np.array_equal(ours, theirs):
        print("digits: onnxruntime and the numpy forward pass disagree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

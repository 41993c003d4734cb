"""How calibration sets scales, measured: "max" (the largest magnitude fits) against "mse" (the power-of-two
scale with the least squared error), on the digits CNN (accuracy on its held-out images) and on the model-zoo
networks at their test sizes (SQNR of the logits against onnxruntime).

    python benchmarks/calibration.py [--zoo NAME ...]

Prints one line per network and method; the importer's default is the better one.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.zoo.build import image_input  # noqa: E402
from examples.zoo.networks import build  # noqa: E402
from examples.zoo.run import SMALL  # noqa: E402
from vtacc.onnx import import_model  # noqa: E402
from vtacc.onnx.reference import run_int8  # noqa: E402

METHODS = ("max", "mse")


def digits(work: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "examples/digits/train.py"), str(work)], check=True,
                   capture_output=True)
    images, labels = np.load(work / "test_images.npy"), np.load(work / "test_labels.npy")
    for method in METHODS:
        qnet = import_model(work / "digits.onnx", work / "calibration.npy", method=method).qnet
        x = qnet.quantise_input(images)
        y = run_int8(qnet, x)[qnet.network.output]
        accuracy = float(np.mean(np.argmax(y.reshape(len(images), -1), axis=1) == labels))
        print(f"digits        {method}: int8 accuracy {accuracy:.1%} on {len(images)} held-out images", flush=True)


def zoo(name: str, work: Path) -> None:
    import onnx
    import onnxruntime

    model = build(name, SMALL[name])
    path = work / f"{name}.onnx"
    onnx.save(model, str(path))
    inp = image_input(model)
    shape = [1] + [d.dim_value for d in inp.type.tensor_type.shape.dim][1:]
    rng = np.random.default_rng(1)
    cal = rng.normal(0, 1, [8] + shape[1:]).astype(np.float32)
    x = rng.normal(0, 1, [2] + shape[1:]).astype(np.float32)
    producer = {o: n for n in model.graph.node for o in n.output}
    out = model.graph.output[0].name
    logits = producer[out].input[0] if producer[out].op_type == "Softmax" else out
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    if logits != out:
        probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(logits))
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run([logits], {inp.name: x[k:k + 1]})[0] for k in range(len(x))])
    for method in METHODS:
        qnet = import_model(path, cal, {inp.name: tuple(shape)}, method=method).qnet
        t = qnet.network.aliases.get(logits, logits)
        got = np.concatenate([run_int8(qnet, qnet.quantise_input(x[k:k + 1]))[t] * qnet.scale(t)
                              for k in range(len(x))]).reshape(want.shape)
        db = 10 * np.log10(np.sum(want.astype(np.float64) ** 2) / np.sum((want - got) ** 2))
        print(f"{name:<13} {method}: logits SQNR {db:.1f} dB against onnxruntime", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--zoo", nargs="*", default=sorted(SMALL), help="model-zoo networks to measure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        digits(Path(tmp))
        for name in args.zoo:
            zoo(name, Path(tmp))


if __name__ == "__main__":
    main()

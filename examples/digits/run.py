"""Run the digits CNN on vtasim over the held-out images and compare it with the float model and numpy.

    python examples/digits/run.py OUT_DIR

OUT_DIR holds what train.py wrote (digits.onnx, calibration.npy, test_images.npy,
test_labels.npy) and the network file `vtacc` compiled from the model
(digits.vbin, which records the input's scale). vtasim runs it on the float
test images, all of them in one call; the script imports the model again
(the same quantisation: it is deterministic) only for the numpy int8
reference, and reports float accuracy (onnxruntime), int8 accuracy on
vtasim, whether every output is bit-exact with numpy, and the cycles and
time per image from the timing model. Exit 1 if any output differs.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from vtacc.onnx import import_model
from vtacc.onnx.reference import run_int8
from vtasim import api
from vtasim.timing.profile import load_profile
from vtasim.timing.run import time_program


def float_predictions(model: Path, images: np.ndarray) -> np.ndarray:
    """The float model's class per image, from onnxruntime."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return np.array([int(np.argmax(session.run(None, {name: img[None].astype(np.float32)})[0]))
                     for img in images])


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "examples/digits/out")
    model = out / "digits.onnx"
    images, labels = np.load(out / "test_images.npy"), np.load(out / "test_labels.npy")
    net = api.load(out / "digits.vbin")
    started = time.perf_counter()
    got = api.run(net, images.astype(np.float32), int8=True)[net.outputs[0]]  # float images in, one call
    seconds = time.perf_counter() - started
    qnet = import_model(model, out / "calibration.npy").qnet  # for the numpy reference only
    want = np.concatenate([run_int8(qnet, qnet.quantise_input(img[None]))[qnet.network.output] for img in images])
    exact = int(np.sum(np.all(got.reshape(len(images), -1) == want.reshape(len(images), -1), axis=1)))
    predictions = np.argmax(got.reshape(len(images), -1), axis=1)
    int8_acc = float(np.mean(np.array(predictions) == labels))
    float_acc = float(np.mean(float_predictions(model, images) == labels))
    profile = load_profile()
    cycles = time_program(net.programs[0], profile, record=False).report.cycles
    n = len(images)
    print(f"digits: {n} held-out images; float accuracy {float_acc:.1%} (onnxruntime), int8 accuracy on vtasim "
          f"{int8_acc:.1%} ({int8_acc - float_acc:+.1%} points)")
    print(f"digits: {exact}/{n} int8 outputs bit-exact with the numpy execution of the quantised network")
    print(f"digits: {cycles:,} cycles per image on {profile.name} = {cycles / profile.clock_mhz:.1f} us at "
          f"{profile.clock_mhz:g} MHz; vtasim ran {n} images in {seconds:.1f} s ({1000 * seconds / n:.1f} ms each)")
    return 0 if exact == n else 1


if __name__ == "__main__":
    sys.exit(main())

"""Peak memory of `vtasim run NET.vbin --input x=N.npy` against the number of samples N.

Builds a small network with a host step (Conv -> Relu -> LRN on the host ->
GlobalAveragePool -> Gemm -> Softmax on 8x8 images), compiles it with
`vtacc`, and runs N stacked float images through it in one `vtasim` process
for each N, printing the process's peak resident memory and wall time. A
batch run streams its samples (each one's machines are let go once its
outputs are taken), so the peak should stay flat as N grows.

    python benchmarks/stream_memory.py [--samples 10 1000 10000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BIN = Path(sys.executable).parent


def build(folder: Path) -> Path:
    """The network file of the small model, compiled with vtacc in ``folder``."""
    rng = np.random.default_rng(0)

    def w(*shape, scale=0.2):
        return numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32))

    inits = {"w1": w(16, 3, 3, 3), "b1": w(16), "fw": w(10, 16, scale=0.5), "fb": w(10)}
    for name, tensor in inits.items():
        tensor.name = name
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Relu", ["c"], ["r"], name="relu"),
             n("LRN", ["r"], ["l"], name="norm", size=5, alpha=1e-3, beta=0.75),
             n("GlobalAveragePool", ["l"], ["p"], name="pool"),
             n("Flatten", ["p"], ["f"], name="flat"),
             n("Gemm", ["f", "fw", "fb"], ["logits"], name="fc", transB=1),
             n("Softmax", ["logits"], ["prob"], name="softmax", axis=1)]
    graph = helper.make_graph(nodes, "stream", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10])],
                              list(inits.values()))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(folder / "m.onnx"))
    np.save(folder / "cal.npy", rng.normal(0, 1, (8, 1, 3, 8, 8)).astype(np.float32))
    subprocess.run([BIN / "vtacc", "m.onnx", "--calibrate", "cal.npy", "-o", "net.vbin"], cwd=folder, check=True,
                   capture_output=True)
    return folder / "net.vbin"


def peak(folder: Path, samples: int) -> tuple[float, float]:
    """Peak resident MB and wall seconds of one vtasim process over ``samples`` images."""
    np.save(folder / "x.npy", np.random.default_rng(1).normal(0, 1, (samples, 3, 8, 8)).astype(np.float32))
    code = ("import atexit, resource, sys\n"
            "atexit.register(lambda: print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
            "file=sys.stderr))\n"
            "from vtasim.cli import main\n"
            "main(['run', 'net.vbin', '--input', 'x=x.npy', '--output', 'prob=p.npy'], prog_name='vtasim')\n")
    started = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - started
    kb = next(int(line.split()[1]) for line in r.stderr.splitlines() if line.startswith("peak "))
    return kb / 1024, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, nargs="+", default=[10, 1000, 10000])
    parser.add_argument("--keep", type=Path, help="work in this folder (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        build(folder)
        print(f"{'samples':>8} {'peak MB':>9} {'seconds':>8} {'ms/sample':>10}")
        for n in args.samples:
            mb, seconds = peak(folder, n)
            print(f"{n:>8,} {mb:>9.1f} {seconds:>8.2f} {1e3 * seconds / n:>10.2f}")


if __name__ == "__main__":
    main()

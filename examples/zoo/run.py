"""One model-zoo CNN end to end: build it, import and compile it with vtacc, run it with vtasim, check it.

    python examples/zoo/run.py NAME [--size S] [--out DIR] [--calibration N]
    python examples/zoo/run.py --all [--small] [--table]

What it does, with the commands a user would type:

1. ``build.py`` writes the network with seeded random weights (nothing is downloaded) and a set of random
   N(0, 1) calibration images and test images;
2. ``vtacc NET.onnx --calibrate cal.npy --input-shape ... -o NET.vbin`` (timed: import + compile);
3. ``vtasim run NET.vbin --input NAME=test.npy --output ...`` on the float test images (timed);
4. checks: every output bit for bit against the numpy execution of the quantised network (host steps
   included), and the float outputs (the logits: the input of a final Softmax) against onnxruntime (SQNR).

It prints one line per network (with --table, the rows of the table in docs/onnx.md): the operators on VTA and
on the host, the MACs VTA computes, the cycles of the VTA launches on each timing profile, the times, the SQNR.
Exit 1 when an output differs from numpy or the SQNR is under 20 dB.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

if not __package__:  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.zoo.build import image_input  # noqa: E402
from examples.zoo.networks import NETWORKS, build  # noqa: E402
from vtasim.timing.names import BUILTIN  # noqa: E402

SMALL = {"resnet50": 32, "mobilenetv2": 32, "squeezenet1_1": 32, "shufflenet_v2": 32, "densenet121": 32,
         "googlenet": 64, "vgg16": 32, "vgg19": 32, "alexnet": 67, "yolov3_tiny": 64}
PROFILES = BUILTIN  # every measured design
BIN = Path(sys.executable).parent


@dataclass
class Result:
    """What one network's run measured."""

    name: str
    size: int
    vta_ops: dict[str, int]
    host_ops: dict[str, int]
    macs: int
    cycles: dict[str, int]
    compile_s: float
    run_s: float
    exact: bool
    sqnr: dict[str, float]

    def line(self) -> str:
        host = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in self.host_ops.items()) or "none"
        db = ", ".join(f"{v:.1f}" for v in self.sqnr.values())
        return (f"{self.name}@{self.size}: {'bit-exact' if self.exact else 'DIFFERS'} with numpy, SQNR {db} dB "
                f"against onnxruntime; compile {self.compile_s:.1f} s, run {self.run_s:.1f} s; {self.macs:,} MACs "
                f"on VTA, {self.cycles['chisel-2019']:,} cycles (chisel-2019); host: {host}")

    def row(self) -> str:
        vta = ", ".join(sorted(self.vta_ops))
        host = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in self.host_ops.items()) or "-"
        cycles = " | ".join(f"{self.cycles[p] / 1e6:,.1f} M" for p in PROFILES)
        db = ", ".join(f"{v:.1f}" for v in self.sqnr.values())
        return (f"| {self.name} | {self.size} | {vta} | {host} | {self.macs / 1e9:.2f} G | {cycles} | "
                f"{self.compile_s:.1f} s | {self.run_s:.1f} s | {db} |")


def _tool(*args) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(str(a) for a in args[:2])} failed:\n{r.stderr}")
    return r


def _logits(model: onnx.ModelProto) -> dict[str, str]:
    """Model output -> the tensor to compare in float: a final Softmax's input, else the output itself."""
    producer = {o: n for n in model.graph.node for o in n.output}
    names = {}
    for out in model.graph.output:
        node = producer.get(out.name)
        names[out.name] = node.input[0] if node is not None and node.op_type == "Softmax" else out.name
    return names


def run_network(name: str, size: int, out: Path, samples: int = 8, tests: int = 2) -> Result:
    """Build, compile, run and check one network; the files go to ``out``."""
    from vtacc.onnx import import_model
    from vtacc.onnx.convert.layers import LayerKind
    from vtacc.onnx.kinds import layer_macs
    from vtacc.onnx.reference import run_int8
    from vtasim.timing.profile import resolve_profile
    from vtasim.timing.run import time_program
    from vtasm.formats.network import load_network

    out.mkdir(parents=True, exist_ok=True)
    model = build(name, size)
    path = out / f"{name}.onnx"
    onnx.save(model, str(path))
    inp = image_input(model)
    shape = [1] + [d.dim_value for d in inp.type.tensor_type.shape.dim][1:]
    rng = np.random.default_rng(1)
    np.save(out / "cal.npy", rng.normal(0, 1, [samples] + shape[1:]).astype(np.float32))
    x = rng.normal(0, 1, [tests] + shape[1:]).astype(np.float32)
    np.save(out / "test.npy", x)
    vbin = out / f"{name}.vbin"
    started = time.perf_counter()
    _tool(BIN / "vtacc", path, "--calibrate", out / "cal.npy", "--input-shape",
          f"{inp.name}={','.join(map(str, shape))}", "-o", vbin)
    compile_s = time.perf_counter() - started
    net = load_network(vbin)
    outputs = [a for k, o in enumerate(net.outputs) for a in ("--output", f"{o}={out / f'out{k}.npy'}")]
    started = time.perf_counter()
    _tool(BIN / "vtasim", "run", vbin, "--input", f"{inp.name}={out / 'test.npy'}", "--int8", *outputs)
    run_s = (time.perf_counter() - started) / tests
    got = {o: np.load(out / f"out{k}.npy") for k, o in enumerate(net.outputs)}
    # the numpy reference of the same quantisation (import is deterministic) and onnxruntime's float model
    qnet = import_model(path, out / "cal.npy", {inp.name: tuple(shape)}).qnet
    exact = True
    compare = _logits(model)
    floats: dict[str, list[np.ndarray]] = {o: [] for o in net.outputs}
    for k in range(tests):
        want = run_int8(qnet, qnet.quantise_input(x[k:k + 1]))
        exact &= all(np.array_equal(got[o][k:k + 1], want[o]) for o in net.outputs)
        for o in net.outputs:
            t = qnet.network.aliases.get(compare[o], compare[o])
            floats[o].append(want[t] * qnet.scale(t))
    sqnr = _sqnr_against_onnxruntime(model, inp.name, x, compare, floats)
    vta_ops: dict[str, int] = {}
    host_ops: dict[str, int] = {}
    for layer in qnet.network.layers:
        for src in layer.sources if layer.kind != LayerKind.HOST else []:
            op = qnet.network.ops[src]
            vta_ops[op] = vta_ops.get(op, 0) + 1
        if layer.kind == LayerKind.HOST:
            host_ops[layer.node.op] = host_ops.get(layer.node.op, 0) + 1
    cycles = {}
    for profile in PROFILES:
        reports = [time_program(p, resolve_profile(profile, None, ()), record=False).report for p in net.programs]
        cycles[profile] = sum(r.cycles for r in reports)
    macs = sum(layer_macs(q.layer) for q in qnet.layers if q.kind != LayerKind.HOST)
    return Result(name, size, vta_ops, host_ops, macs, cycles, compile_s, run_s, exact, sqnr)


def _sqnr_against_onnxruntime(model: onnx.ModelProto, input_name: str, x: np.ndarray, compare: dict[str, str],
                              floats: dict[str, list[np.ndarray]]) -> dict[str, float]:
    import onnxruntime

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for t in set(compare.values()) - {o.name for o in model.graph.output}:
        probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(t))
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    result = {}
    for o, t in compare.items():
        want = np.concatenate([session.run([t], {input_name: x[k:k + 1]})[0] for k in range(len(x))])
        got = np.concatenate([f.reshape(want[k:k + 1].shape) for k, f in enumerate(floats[o])])
        noise = float(np.sum((want.astype(np.float64) - got) ** 2))
        result[o] = math.inf if noise == 0 else 10 * math.log10(float(np.sum(want.astype(np.float64) ** 2)) / noise)
    assert names
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", nargs="?", choices=sorted(NETWORKS))
    parser.add_argument("--size", type=int, help="input height and width (default: the network's own)")
    parser.add_argument("--all", action="store_true", help="every network, one after the other")
    parser.add_argument("--small", action="store_true", help="with --all: the small test sizes")
    parser.add_argument("--table", action="store_true", help="print the rows of docs/onnx.md's table")
    parser.add_argument("--out", type=Path, default=Path("out/zoo"))
    parser.add_argument("--calibration", type=int, default=8, help="random calibration images")
    args = parser.parse_args()
    if not args.all and args.name is None:
        parser.error("give a network NAME or --all")
    names = sorted(NETWORKS) if args.all else [args.name]
    ok = True
    for name in names:
        size = args.size or (SMALL[name] if args.small else NETWORKS[name][1])
        result = run_network(name, size, args.out / name, args.calibration)
        print(result.row() if args.table else result.line(), flush=True)
        ok &= result.exact and min(result.sqnr.values()) >= 20
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

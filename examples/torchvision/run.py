"""torchvision architectures exported by torch.onnx, end to end on vtacc and vtasim, beside onnxruntime's int8.

    python examples/torchvision/run.py [NAME ...] [--size S] [--opset 17] [--out DIR] [--table]

Needs torch and torchvision (an optional extra, never used by `make demo` or the tests that run without
it: `pip install torch==2.14.1 torchvision==0.29.1`). Each architecture is built with seeded random
weights (`weights=None`; nothing is downloaded), its batch-norm statistics set by forward passes over
random images in training mode (so each normalises its activations as a trained network's would: random
weights otherwise compound through depth) and each residual branch's last batch norm scaled by 0.2 (a
trained network's branches add small corrections), exported with torch.onnx at the opset given, then:

1. ``vtacc`` imports it (calibrated on 8 random images), compiles it and writes a network file (timed);
2. ``vtasim`` runs it on 2 test images; its int8 outputs are checked bit for bit against the numpy
   reference of the quantisation (vtacc.onnx.reference);
3. its float logits are compared with onnxruntime's float result (SQNR, dB), beside onnxruntime's own
   static int8 quantisation (quantize_static: QDQ, per channel, the same calibration images), with its
   activations asymmetric (its default) and symmetric (as VTA has them: signed int8, zero padding);
4. the cycles of its VTA launches on each timing profile.

One line per architecture (with --table, a row of docs/onnx.md's table).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

if not __package__:  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

ARCHITECTURES = ("resnet18", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_1", "shufflenet_v2_x0_5",
                 "efficientnet_b0", "regnet_y_400mf", "densenet121", "googlenet", "convnext_tiny",
                 "vit_b_16", "lraspp_mobilenet_v3_large")


# the blocks whose output is their input plus a branch: that branch's last batch norm is scaled down
RESIDUAL_BLOCKS = ("BasicBlock", "Bottleneck", "ResBottleneckBlock", "InvertedResidual", "MBConv", "FusedMBConv")
BRANCH_SCALE = 0.2


def build(name: str, size: int, seed: int = 0):
    """The architecture with seeded random weights and batch-norm statistics from random images."""
    import torch

    import torchvision

    torch.manual_seed(seed)
    if name == "lraspp_mobilenet_v3_large":
        model = torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None)
    elif name == "vit_b_16":
        model = torchvision.models.vit_b_16(weights=None, image_size=size)
        torch.nn.init.normal_(model.heads.head.weight, std=0.02)  # torchvision starts it at zero: logits all 0
    elif name == "googlenet":
        model = torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True)
    else:
        model = getattr(torchvision.models, name)(weights=None)
    for m in model.modules():  # running statistics: a cumulative average over the passes below
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.momentum = None
            m.reset_running_stats()
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(4, 3, size, size))
        for block in model.modules():  # residual branches start small, as in a trained network
            if type(block).__name__ in RESIDUAL_BLOCKS:
                norms = [m for m in block.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
                if norms:
                    norms[-1].weight.mul_(BRANCH_SCALE)
                    norms[-1].bias.mul_(BRANCH_SCALE)
    return model.eval()


def export(model, size: int, path: Path, opset: int, dynamo: bool = False) -> None:
    """torch.onnx's TorchScript exporter, or with ``dynamo`` its torch.export-based default (which needs
    onnxscript and writes the weights to an external data file beside the model)."""
    import torch

    x = torch.randn(1, 3, size, size)
    if dynamo:
        torch.onnx.export(model, (x,), str(path), input_names=["image"], opset_version=opset, dynamo=True,
                          external_data=True)
    else:
        torch.onnx.export(model, (x,), str(path), input_names=["image"], opset_version=opset, dynamo=False)


def _sqnr(want: np.ndarray, got: np.ndarray) -> float:
    """The SQNR of ``got`` against ``want``, as the import report measures it (vtacc.onnx.accuracy)."""
    from vtacc.onnx.accuracy import sqnr_db

    want = want.astype(np.float64)
    return sqnr_db(float(np.sum(want * want)), float(np.sum((want - got) ** 2)))


def ort_int8(path: Path, calibration: np.ndarray, out: Path, symmetric: bool = False):
    """onnxruntime's own static int8 quantisation of the model (QDQ, per channel; activations with a zero
    point, or with ``symmetric`` without one, as VTA's signed int8 and zero padding have them) and a
    session of it."""
    import onnxruntime
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{"image": calibration[k:k + 1]} for k in range(len(calibration))])

        def get_next(self):
            return next(self.items, None)

    quantize_static(str(path), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    extra_options={"ActivationSymmetric": symmetric})
    return onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])


def run(name: str, size: int, opset: int, out: Path, dynamo: bool = False) -> dict:
    """Build, export, compile, run and check one architecture; the figures of its row."""
    import onnxruntime

    from vtacc.model import compile_model
    from vtacc.onnx.reference import run_int8
    from vtasim import api
    from vtasim.timing.names import BUILTIN
    from vtasim.timing.profile import load_profile
    from vtasim.timing.run import time_program
    from vtasm.config import default_config

    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.onnx"
    export(build(name, size), size, path, opset, dynamo)
    rng = np.random.default_rng(1)
    calibration = rng.normal(0, 1, (8, 3, size, size)).astype(np.float32)
    x = rng.normal(0, 1, (2, 3, size, size)).astype(np.float32)
    started = time.perf_counter()
    model = compile_model(path, default_config(), calibration)
    compile_s = time.perf_counter() - started
    net, qnet = model.network, model.imported.qnet
    output = net.outputs[0]
    exact, ours, theirs, symmetric = True, [], [], []
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    quantised = ort_int8(path, calibration, out / f"{name}.int8.onnx")
    quantised_symmetric = ort_int8(path, calibration, out / f"{name}.int8-symmetric.onnx", symmetric=True)
    for k in range(len(x)):
        got = api.run(net, x[k:k + 1], int8=True)[output]
        exact &= bool(np.array_equal(got, run_int8(qnet, qnet.quantise_input(x[k:k + 1]))[output]))
        want = session.run(None, {"image": x[k:k + 1]})[0]
        ours.append((want, api.run(net, x[k:k + 1])[output].reshape(want.shape)))
        theirs.append((want, quantised.run(None, {"image": x[k:k + 1]})[0]))
        symmetric.append((want, quantised_symmetric.run(None, {"image": x[k:k + 1]})[0]))
    db, ort_db, ort_symmetric_db = (_sqnr(np.concatenate([w for w, _ in pairs]), np.concatenate([g for _, g in pairs]))
                                    for pairs in (ours, theirs, symmetric))
    cycles = {p: sum(time_program(s.program, load_profile(p), record=False).report.cycles
                     for s in net.steps if s.kind == "vta") for p in BUILTIN}
    host = sorted({n.op for s in net.steps if s.kind == "host" for n in s.nodes})
    return {"name": name, "size": size, "opset": opset, "exact": exact, "sqnr": db, "ort_sqnr": ort_db,
            "ort_symmetric_sqnr": ort_symmetric_db,
            "launches": sum(s.kind == "vta" for s in net.steps), "host_steps": sum(s.kind == "host" for s in net.steps),
            "host_ops": host, "cycles": cycles, "compile_s": compile_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"of {', '.join(ARCHITECTURES)} (default: all)")
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--out", type=Path, default=Path("out/torchvision"))
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--dynamo", action="store_true", help="torch.onnx's default exporter (torch.export; "
                        "needs onnxscript; weights in an external data file), with --opset 18")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401

        import torchvision  # noqa: F401
    except ImportError:
        print("this example needs torch and torchvision: pip install torch==2.14.1 torchvision==0.29.1")
        return 2
    unknown = sorted(set(args.names) - set(ARCHITECTURES))
    if unknown:
        parser.error(f"unknown architecture(s) {', '.join(unknown)}")
    ok = True
    for name in args.names or ARCHITECTURES:
        try:
            r = run(name, args.size, args.opset, args.out / name, args.dynamo)
        except Exception as exc:  # one architecture's failure is reported and the others still run
            print(f"{name}: FAILED: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}", flush=True)
            ok = False
            continue
        cycles = " | ".join(f"{c / 1e6:,.2f} M" for c in r["cycles"].values())
        host = ", ".join(r["host_ops"]) or "-"
        if args.table:
            print(f"| {name} | {r['size']} | {r['opset']} | {'yes' if r['exact'] else 'NO'} | {r['sqnr']:.1f} | "
                  f"{r['ort_sqnr']:.1f} | {r['ort_symmetric_sqnr']:.1f} | "
                  f"{r['launches']} + {r['host_steps']} ({host}) | {cycles} | {r['compile_s']:.1f} s |", flush=True)
        else:
            print(f"{name}@{r['size']} opset {r['opset']}: {'bit-exact' if r['exact'] else 'DIFFERS'} with numpy; "
                  f"SQNR {r['sqnr']:.1f} dB (onnxruntime int8 {r['ort_sqnr']:.1f} dB, with symmetric activations "
                  f"{r['ort_symmetric_sqnr']:.1f} dB); {r['launches']} VTA "
                  f"launches, {r['host_steps']} host steps ({host}); cycles {cycles}; compile {r['compile_s']:.1f} s",
                  flush=True)
        ok &= r["exact"] and r["sqnr"] >= r["ort_sqnr"] - 3
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Write one model-zoo CNN as an ONNX file with seeded random weights (nothing is downloaded).

    python examples/zoo/build.py NAME OUT.onnx [--size S] [--seed N] [--check]
    python examples/zoo/build.py --list

Prints one line: name, node count, parameter count, opset, input name and
shape, output names. --check also runs onnx's full checker and onnxruntime on a
random N(0, 1) input (batch 2 when the batch is symbolic) and prints each
output's shape and statistics; exit 1 if an output is not finite or constant.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import onnx

if not __package__:  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.zoo.networks import MIN_SIZES, NETWORKS, build  # noqa: E402


def image_input(model: onnx.ModelProto) -> onnx.ValueInfoProto:
    """The graph input that is not an initialiser (old exports list their weights as inputs too)."""
    weights = {t.name for t in model.graph.initializer}
    return next(i for i in model.graph.input if i.name not in weights)


def dims(info: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param or d.dim_value for d in info.type.tensor_type.shape.dim]


def summary(name: str, model: onnx.ModelProto) -> str:
    """One line: name, nodes, parameters, opset, input name and shape, output names."""
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    inp = image_input(model)
    outputs = ", ".join(o.name for o in model.graph.output)
    return (f"{name}: {len(model.graph.node)} nodes, {params:,} parameters, opset {opset}, "
            f"input {inp.name} {dims(inp)}, outputs {outputs}")


def check(model: onnx.ModelProto, seed: int = 0) -> bool:
    """Full onnx check, then one onnxruntime run on random input; print output stats; True if all look sane."""
    import onnxruntime as ort

    onnx.checker.check_model(model, full_check=True)
    options = ort.SessionOptions()
    options.log_severity_level = 3  # weights listed as graph inputs draw one warning each
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    shape = [2 if isinstance(d, str) else d for d in dims(image_input(model))]
    x = np.random.default_rng(seed + 1).standard_normal(shape, dtype=np.float32)
    ok = True
    for info, y in zip(session.get_outputs(), session.run(None, {image_input(model).name: x}), strict=True):
        finite = bool(np.isfinite(y).all())
        ok &= finite and float(y.std()) > 0
        print(f"  {info.name} {list(y.shape)}: mean {y.mean():.4g} std {y.std():.4g} min {y.min():.4g} "
              f"max {y.max():.4g}{'' if finite else ' NOT FINITE'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", nargs="?", choices=sorted(NETWORKS))
    parser.add_argument("out", nargs="?", type=Path)
    parser.add_argument("--size", type=int, help="input height and width (default: the network's own)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="run the onnx checker and onnxruntime on the model")
    parser.add_argument("--list", action="store_true", help="list the networks with default and smallest sizes")
    args = parser.parse_args()
    if args.list:
        for name, (function, default) in NETWORKS.items():
            print(f"{name:14} default {default:3}  smallest {MIN_SIZES[name]:3}  {function.__doc__.splitlines()[0]}")
        return 0
    if args.name is None or args.out is None:
        parser.error("NAME and OUT.onnx are required (or --list)")
    started = time.perf_counter()
    try:
        model = build(args.name, args.size, args.seed)
    except ValueError as e:
        parser.error(str(e))
    built = time.perf_counter() - started
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)  # out/zoo/ on a fresh checkout (make demo)
    onnx.save(model, str(args.out))
    print(f"{summary(args.name, model)} (built in {built:.2f} s)")
    return 0 if not args.check or check(model, args.seed) else 1


if __name__ == "__main__":
    sys.exit(main())

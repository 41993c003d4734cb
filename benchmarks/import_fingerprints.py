"""What the ONNX importer makes of a set of models, one JSON line each: checksums of every product.

For the ten model-zoo networks (examples/zoo, at their small sizes, seeded weights) and the models of the
onnx package's backend tests (onnx/backend/test/data/light: caffe2 exports, when the onnx extra is
installed), it imports with 4 seeded calibration inputs and prints the SHA-256 (first 16 hex digits) of
the import report, the kernel-language text (a model VTA computes whole), the int8 reference's outputs on
one input, and the network file vtacc writes. Run it before and after a change to the importer and compare:
a refactor must leave every line as it was.

    python benchmarks/import_fingerprints.py [--only zoo|light] > before.jsonl
    python benchmarks/import_fingerprints.py --compare before.jsonl after.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

from examples.zoo.build import image_input  # noqa: E402
from examples.zoo.networks import NETWORKS, build  # noqa: E402
from examples.zoo.run import SMALL  # noqa: E402
from vtacc.model import compile_imported  # noqa: E402
from vtacc.onnx import import_model  # noqa: E402
from vtacc.onnx.reference import run_int8  # noqa: E402
from vtasm.config import default_config  # noqa: E402
from vtasm.errors import VtaError  # noqa: E402
from vtasm.formats.network import write_network  # noqa: E402


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _models(only: str | None, work: Path):
    """(name, model path, input name, input shape) of each model."""
    if only in (None, "zoo"):
        for name in sorted(NETWORKS):
            model = build(name, SMALL[name])
            path = work / f"{name}.onnx"
            onnx.save(model, str(path))
            inp = image_input(model)
            yield name, path, inp.name, [1] + [d.dim_value for d in inp.type.tensor_type.shape.dim][1:]
    if only in (None, "light"):
        light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
        for path in sorted(light.glob("*.onnx")):
            model = onnx.load(str(path), load_external_data=False)
            weights = {i.name for i in model.graph.initializer}
            inp = next(i for i in model.graph.input if i.name not in weights)
            yield path.stem, path, inp.name, [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]


def fingerprint(name: str, path: Path, input_name: str, shape: list[int]) -> dict:
    """The checksums of one model's import products (or the error that stopped it)."""
    rng = np.random.default_rng(1)
    calibration = rng.normal(0, 1, [4] + shape[1:]).astype(np.float32)
    x = rng.normal(0, 1, [1] + shape[1:]).astype(np.float32)
    try:
        imported = import_model(path, calibration, {input_name: tuple(shape)})
        outputs = run_int8(imported.qnet, imported.qnet.quantise_input(x))
        network = write_network(compile_imported(imported, default_config(), vk_name=f"{name}.vk").network)
    except VtaError as exc:
        return {"model": name, "error": exc.message[:300]}
    return {"model": name, "report": _digest(imported.report().encode()), "vk": _digest(imported.source.encode()),
            "int8": _digest(b"".join(np.ascontiguousarray(outputs[t]).tobytes() for t in sorted(outputs))),
            "network": _digest(network)}


def compare(before: Path, after: Path) -> int:
    """Say which models' lines differ (exit 1 when any does)."""
    old = {r["model"]: r for r in map(json.loads, before.read_text().splitlines())}
    new = {r["model"]: r for r in map(json.loads, after.read_text().splitlines())}
    changed = [m for m in sorted(old.keys() | new.keys()) if old.get(m) != new.get(m)]
    for m in changed:
        fields = sorted(k for k in (old.get(m, {}).keys() | new.get(m, {}).keys())
                        if old.get(m, {}).get(k) != new.get(m, {}).get(k))
        print(f"{m}: {', '.join(fields)} differ")
    print(f"{len(old.keys() | new.keys())} models, {len(changed)} changed")
    return 1 if changed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("zoo", "light"))
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, path, input_name, shape in _models(args.only, work):
            print(json.dumps(fingerprint(name, path, input_name, shape)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

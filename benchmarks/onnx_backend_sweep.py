"""The models of the onnx package's backend tests that onnxruntime runs, run through vtacc and vtasim.

The onnx wheel ships small models with their inputs and expected outputs: torch.nn modules converted by
torch.onnx (pytorch-converted), torch operators (pytorch-operator) and a few hand-made graphs (simple). For
each model of one input this imports it (calibrated on its own test input and 15 noisy copies), compiles
it, runs the network file on vtasim and compares the float outputs with the expected ones (SQNR). It prints
one line per model and a summary: how many run, how many run within 20 dB, and every refusal's reason.

    python benchmarks/onnx_backend_sweep.py [--only NAME_PART] [--set pytorch-converted|pytorch-operator|simple]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from vtacc.model import compile_model  # noqa: E402
from vtasim import api  # noqa: E402
from vtasm.config import default_config  # noqa: E402
from vtasm.errors import VtaError  # noqa: E402

SETS = ("pytorch-converted", "pytorch-operator", "simple")
DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"


def _tensor(path: Path) -> np.ndarray:
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(t)


def _sqnr(want: np.ndarray, got: np.ndarray) -> float:
    """The SQNR of ``got`` against ``want``, as the import report measures it (vtacc.onnx.accuracy)."""
    from vtacc.onnx.accuracy import sqnr_db

    want = want.astype(np.float64)
    return sqnr_db(float(np.sum(want * want)), float(np.sum((want - got) ** 2)))


def sweep_one(folder: Path) -> tuple[str, str]:
    """(outcome, detail): 'ok'/'low' with the worst output's SQNR, 'skip' or 'refused' with the reason."""
    data = folder / "test_data_set_0"
    inputs = sorted(data.glob("input_*.pb"))
    if len(inputs) != 1:
        return "skip", f"{len(inputs)} inputs (the importer takes one)"
    x = _tensor(inputs[0])
    if not np.issubdtype(x.dtype, np.floating):
        return "skip", f"a {x.dtype} input"
    wants = [_tensor(p) for p in sorted(data.glob("output_*.pb"))]
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.1 * (float(np.std(x)) or 1.0), (15,) + x.shape).astype(x.dtype)
    calibration = np.concatenate([x[None], x[None] + noise]).reshape((-1,) + x.shape[1:])
    try:
        model = compile_model(folder / "model.onnx", default_config(), calibration,
                              input_shapes=None)
        outs = api.run(model.network, x)
    except VtaError as exc:
        return "refused", exc.message.split(": ", 1)[-1][:160]
    names = list(model.network.outputs)
    worst = min(_sqnr(w, outs[n].reshape(w.shape)) for w, n in zip(wants, names, strict=False))
    return ("ok" if worst >= 20 else "low"), f"{worst:.1f} dB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=SETS, action="append")
    parser.add_argument("--only", help="models whose name holds this")
    args = parser.parse_args()
    outcomes: Counter = Counter()
    reasons: Counter = Counter()
    for name in args.set or SETS:
        for folder in sorted((DATA / name).iterdir()):
            if args.only and args.only not in folder.name:
                continue
            outcome, detail = sweep_one(folder)
            outcomes[outcome] += 1
            if outcome == "refused":
                reasons[detail.split(":")[0][:80]] += 1
            print(f"{name}/{folder.name:50} {outcome:8} {detail}", flush=True)
    tried = sum(outcomes.values()) - outcomes["skip"]
    print(f"\n{tried} models of one float input: {outcomes['ok']} run within 20 dB of the expected outputs, "
          f"{outcomes['low']} run below it, {outcomes['refused']} refused ({outcomes['skip']} others skipped)")
    for reason, count in reasons.most_common():
        print(f"  {count:3} refused: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

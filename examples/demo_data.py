"""Random inputs and numpy references for the demo programs (used by `make demo`).

    python examples/demo_data.py inputs vadd|c8 DIR   # write random inputs into DIR
    python examples/demo_data.py check  vadd|c8 DIR   # compare DIR's output with numpy

The references are written from the math (the shapes of ResNet-18 layer C8 and a vector addition), independently of the
compiler and the simulator.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def _conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    n, c, h, wd = x.shape
    oc, ic, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad), np.int64)
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, oc, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.int64))
    return out.astype(np.int32)  # wrapping int32 accumulation


WORKLOADS = {
    "vadd": {
        "inputs": lambda rng: {
            "A": rng.integers(-(2**31), 2**31, (1, 1024), dtype=np.int64).astype(np.int32),
            "B": rng.integers(-(2**31), 2**31, (1, 1024), dtype=np.int64).astype(np.int32),
        },
        "output": "C",
        "reference": lambda t: (t["A"].astype(np.int64) + t["B"]).astype(np.int32).astype(np.int8),
        "math": "int8(A + B)",
    },
    "c8": {
        "inputs": lambda rng: {
            "x": rng.integers(-128, 128, (1, 256, 14, 14), dtype=np.int8),
            "w": rng.integers(-128, 128, (256, 256, 3, 3), dtype=np.int8),
            "b": rng.integers(-2000, 2000, (256,)).astype(np.int32),
        },
        "output": "y",
        "reference": lambda t: np.clip((_conv(t["x"], t["w"], 1, 1) >> 8) + t["b"][None, :, None, None],
                                       0, 127).astype(np.int8),
        "math": "clip((conv2d(x, w, pad=1) >> 8) + b, 0, 127)",
    },
}


def make_inputs(name: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for key, array in WORKLOADS[name]["inputs"](np.random.default_rng()).items():
        np.save(out / f"{key}.npy", array)
        print(f"  {out / key}.npy: random {array.dtype}{list(array.shape)}")


def check(name: str, out: Path) -> int:
    w = WORKLOADS[name]
    tensors = {key: np.load(out / f"{key}.npy") for key in w["inputs"](np.random.default_rng(0))}
    expected = w["reference"](tensors)
    got = np.load(out / f"{w['output']}.npy")
    if got.shape != expected.shape or got.dtype != expected.dtype or not (got == expected).all():
        bad = int((got != expected).sum()) if got.shape == expected.shape else got.size
        print(f"MISMATCH: {bad} of {expected.size} values of {w['output']} differ from numpy's {w['math']}")
        return 1
    print(f"OK: all {expected.size} values of {w['output']} equal numpy's {w['math']}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("inputs", "check") or sys.argv[2] not in WORKLOADS:
        sys.exit(__doc__)
    if sys.argv[1] == "inputs":
        make_inputs(sys.argv[2], Path(sys.argv[3]))
    else:
        sys.exit(check(sys.argv[2], Path(sys.argv[3])))

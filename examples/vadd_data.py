"""Inputs and the numpy reference for examples/vadd.vasm (used by `make demo`).

    python examples/vadd_data.py inputs DIR   # writes DIR/a.npy, DIR/b.npy (random int32 [1, 1024])
    python examples/vadd_data.py check DIR    # checks DIR/c.npy == int8(a + b)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def make_inputs(out: Path) -> None:
    rng = np.random.default_rng()
    out.mkdir(parents=True, exist_ok=True)
    for name in ("a", "b"):
        np.save(out / f"{name}.npy", rng.integers(-(2**31), 2**31, size=(1, 1024), dtype=np.int32))
    print(f"wrote random int32 [1, 1024] inputs {out}/a.npy and {out}/b.npy")


def check(out: Path) -> int:
    a, b = np.load(out / "a.npy"), np.load(out / "b.npy")
    expected = (a.astype(np.int64) + b).astype(np.int32).astype(np.int8)  # wrapping add, low 8 bits
    got = np.load(out / "c.npy")
    if got.shape != expected.shape or got.dtype != expected.dtype or not (got == expected).all():
        bad = int((got != expected).sum()) if got.shape == expected.shape else got.size
        print(f"MISMATCH: {bad} of {expected.size} values differ from numpy's int8(a + b)")
        return 1
    print(f"OK: all {expected.size} values of C equal numpy's int8(a + b)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("inputs", "check"):
        sys.exit(__doc__)
    if sys.argv[1] == "inputs":
        make_inputs(Path(sys.argv[2]))
    else:
        sys.exit(check(Path(sys.argv[2])))

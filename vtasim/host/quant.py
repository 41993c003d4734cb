"""int8 <-> float at power-of-two scales: the one definition the importer, the host steps and the CLI use."""

from __future__ import annotations

import numpy as np


def quantise(x: np.ndarray, exp: int) -> np.ndarray:
    """Float values -> int8 at scale 2**exp: round to nearest (ties to even), saturate to -128..127
    (infinities too); NaN, which int8 cannot hold, becomes 0."""
    scaled = np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf) * 2.0 ** -exp
    return np.clip(np.rint(scaled), -128, 127).astype(np.int8)


def dequantise(q: np.ndarray, exp: int, dtype=np.float32) -> np.ndarray:
    """int8 at scale 2**exp -> float (exact: every int8 times a power of two is a float32)."""
    return np.asarray(q, dtype=dtype) * dtype(2.0**exp)

"""int8 <-> float at a tensor's scale: the one definition the importer, the host steps and the CLI use."""

from __future__ import annotations

import numpy as np


def scale_of(exp: int, sixteenths: int = 0) -> float:
    """The scale 2**(exp + sixteenths / 16), as every tool computes it: 2**(sixteenths / 16) times a power
    of two (a network file's tensor: its ``exp`` and its mantissa's ``sixteenths`` of an octave)."""
    return 2.0 ** (sixteenths / 16) * 2.0**exp


def quantise(x: np.ndarray, exp: int, sixteenths: int = 0) -> np.ndarray:
    """Float values -> int8 at scale 2**(exp + sixteenths / 16): round to nearest (ties to even), saturate
    to -128..127 (infinities too); NaN, which int8 cannot hold, becomes 0."""
    scaled = np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf)
    scaled = scaled / scale_of(exp, sixteenths)
    return np.clip(np.rint(scaled), -128, 127).astype(np.int8)


def dequantise(q: np.ndarray, exp: int, dtype=np.float32, sixteenths: int = 0) -> np.ndarray:
    """int8 at scale 2**(exp + sixteenths / 16) -> float (exact at a power of two: every int8 times one is
    a float32; else the product rounded to ``dtype``)."""
    return np.asarray(q, dtype=dtype) * dtype(scale_of(exp, sixteenths))

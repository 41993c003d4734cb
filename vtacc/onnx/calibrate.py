"""Calibration statistics: per tensor, the largest magnitude and a histogram of magnitudes on a log scale.

For the input of each convolution (per channel) and dense layer (per
element), the mean value too: the quantiser takes the mean error its
rounded weights make on it off the bias. All are gathered a bounded piece
of the calibration inputs at a time (the float network's values are
dropped after each piece), so a few hundred images fit in little memory. The histogram (BINS per octave) is enough to
weigh every candidate power-of-two scale: values beyond 127 steps are
clipped, values below keep a rounding error of a twelfth of a step squared
(or their own square, when they round to zero).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .convert import LayerKind, Network
from .float_run import batches, run_float
from .quantised import exponent_for

BINS = 8  # per octave
LOW = -64  # log2 of the smallest magnitude binned (smaller ones count in the first bin)
OCTAVES = 128
CENTRES = 2.0 ** (LOW + (np.arange(OCTAVES * BINS) + 0.5) / BINS)  # each bin's magnitude


@dataclass
class Statistics:
    """One tensor's magnitudes over the calibration inputs."""

    largest: float = 0.0
    counts: np.ndarray = field(default_factory=lambda: np.zeros(OCTAVES * BINS, dtype=np.int64))
    total: np.ndarray | None = None  # a product layer's input: the sum of its values per channel (conv) or
    samples: int = 0  # per element of a row (dense), over this many values each (see add_mean)

    def add_mean(self, values: np.ndarray, row: int | None) -> None:
        """Count ``values`` [N, ...] into the mean input of a convolution (``row`` None: per channel, axis 1,
        summed over the image) or of a dense layer (per element of its rows of ``row`` values: a flattened
        image, or the last axis of a rank-3 tensor read as rows)."""
        if row is None:
            part = values.reshape(values.shape[0], values.shape[1], -1).sum(axis=(0, 2), dtype=np.float64)
            count = values.size // values.shape[1]
        else:
            part = values.reshape(-1, row).sum(axis=0, dtype=np.float64)
            count = values.size // row
        self.total = part if self.total is None else self.total + part
        self.samples += count

    @property
    def mean(self) -> np.ndarray | None:
        return None if self.total is None else self.total / self.samples

    def add(self, values: np.ndarray) -> None:
        a = np.abs(values[values != 0]).astype(np.float64)
        if not a.size:
            return
        self.largest = max(self.largest, float(a.max()))
        index = np.clip(np.floor((np.log2(a) - LOW) * BINS), 0, OCTAVES * BINS - 1).astype(np.int64)
        self.counts += np.bincount(index, minlength=OCTAVES * BINS)

    def error(self, exp: int, mantissa: float = 1.0) -> float:
        """The squared error, summed over the values seen, of int8 at scale mantissa * 2**exp."""
        step = mantissa * 2.0**exp
        limit = 127 * step
        err = np.where(CENTRES > limit, (CENTRES - limit) ** 2, np.minimum(CENTRES**2, step * step / 12))
        return float(np.sum(self.counts * err))

    @property
    def energy(self) -> float:
        """The sum of the squares of the values seen (as the histogram places them)."""
        return float(np.sum(self.counts * CENTRES**2))

    def exponent(self, method: str, mantissa: float = 1.0) -> int:
        """The exponent of the scale mantissa * 2**e: "max" holds the largest value; "mse" has the least
        error of that one and the two finer ones (a finer scale wins only when it is clearly better)."""
        top = exponent_for(self.largest / mantissa)
        if method == "max" or not self.counts.any():
            return top
        best, best_err = top, self.error(top, mantissa)
        for exp in (top - 1, top - 2):
            err = self.error(exp, mantissa)
            if err < 0.9 * best_err:
                best, best_err = exp, err
        return best


def calibrate(net: Network, data: np.ndarray, keep: int = 0
              ) -> tuple[dict[str, Statistics], dict[str, np.ndarray] | None]:
    """Every tensor's statistics over the calibration inputs, a bounded piece at a time; and, when the
    first piece is the first ``keep`` inputs exactly, its float activations (the SQNR report needs those
    again: accuracy.measure)."""
    stats: dict[str, Statistics] = {}
    kept = None
    read = {layer.inputs[0]: None if layer.kind == LayerKind.CONV else layer.weight.shape[1] for layer in net.layers
            if layer.kind in (LayerKind.CONV, LayerKind.DENSE)}  # product layers' inputs: their means too
    for k, piece in enumerate(batches(net, data)):
        values = run_float(net, piece)
        if k == 0 and keep and len(piece) == keep:
            kept = values
        for t, v in values.items():
            stats.setdefault(t, Statistics()).add(v)
            if t in read:
                stats[t].add_mean(v, read[t])
    return stats, kept

"""Layers that copy: a channel concatenation (each part written in place; main writes it with concat) and
a copy with bounds (ReLU or Clip on its own, or a concatenation's part used again). Both keep the scale."""

from __future__ import annotations

import numpy as np

from ..convert.layers import Layer, LayerKind
from ..quantised import QLayer
from .rules import Kernel, Rules, bounded, no_macs, nothing


def _float_concat(layer: Layer, ins: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(ins, axis=1)


def _int8_concat(q: QLayer, ins: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(ins, axis=1)


def _concat_in_main(args: list[str]) -> str:
    return f"concat({', '.join(args)})"


def _float_clip(layer: Layer, ins: list[np.ndarray]) -> np.ndarray:
    return ins[0]  # the bounds are applied with every layer's (float_run)


def _int8_clip(q: QLayer, ins: list[np.ndarray]) -> np.ndarray:
    return np.clip(ins[0].astype(np.int64), q.low, q.high)


def _clip_kernel(q: QLayer, xs: list[str]) -> Kernel:
    return "", bounded(xs[0], q), []


CONCAT = Rules(LayerKind.CONCAT, _float_concat, _int8_concat, True, nothing, None, _concat_in_main, no_macs)
CLIP = Rules(LayerKind.CLIP, _float_clip, _int8_clip, True, nothing, _clip_kernel, None, no_macs)

"""What the importer knows about a layer kind, as one record: a new kind is one module that makes one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..convert.layers import Layer, LayerKind

if TYPE_CHECKING:
    from ..quantised import QLayer

Param = tuple[str, str, np.ndarray]  # a kernel's weight parameter: suffix, declaration type, value
Kernel = tuple[str, str, list[Param]]  # a kernel's lines before its result, the result's expression, parameters


@dataclass(frozen=True)
class Rules:
    """One layer kind's meaning, every field required.

    ``float``: the layer on float64 inputs, before its fused slope and bounds (float_run applies those).
    ``int8``: the layer on int8 inputs, bit for bit what VTA computes (the reference): written from the
    definitions (definitions.py), sharing no arithmetic with the float path or the compiler.
    ``keeps_scale``: whether the output takes its inputs' scale (they and it share one).
    ``quantise``: what the kind sets on its QLayer beyond scales and bounds (weights, shifts), noting what
    it approximates. ``kernel``: its kernel's text on the inputs named ``xs`` (None for a kind ``main``
    writes itself, with the built-in ``in_main`` names). ``macs``: its multiply-accumulates.
    """

    kind: LayerKind
    float: Callable[[Layer, list[np.ndarray]], np.ndarray]
    int8: Callable[[QLayer, list[np.ndarray]], np.ndarray]
    keeps_scale: bool
    quantise: Callable[[QLayer, dict[str, tuple[int, ...]], list[str]], None]
    kernel: Callable[[QLayer, list[str]], Kernel] | None
    in_main: Callable[[list[str]], str] | None
    macs: Callable[[Layer], int]

    def __post_init__(self) -> None:
        if (self.kernel is None) == (self.in_main is None):
            raise TypeError(f"layer kind {self.kind}: give either its kernel or the built-in main writes it with")


def nothing(q: QLayer, shapes: dict[str, tuple[int, ...]], notes: list[str]) -> None:
    """The quantise rule of a kind with nothing to set beyond its scales and bounds."""


def no_macs(layer: Layer) -> int:
    """The MACs rule of a kind that multiplies nothing."""
    return 0


def int8_type(dtype: str, shape) -> str:
    """A kernel-language tensor type: int8[1, 16, 8, 8]."""
    return f"{dtype}[{', '.join(str(int(d)) for d in shape)}]"


def bounded(expr: str, q: QLayer) -> str:
    """``expr`` clipped to the layer's bounds."""
    return f"clip({expr}, {q.low}, {q.high})"

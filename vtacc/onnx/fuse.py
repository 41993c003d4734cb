"""Which layers of a VTA launch become one kernel: a pass over the quantised layers that asks the compiler
what it can compute as one operator, and checks that joining them keeps every bit.

- A max pooling that alone reads a convolution's result pools its accumulator (emit: pooled kernel) when
  the compiler takes the pooled product on every configuration (vtacc.schedule.tiling.pooling_compiles)
  and no accumulator plus bias can leave int32 (where the two would wrap differently).
- A residual add takes the convolution or dense layer that alone gives one of its inputs into that
  layer's epilogue (emit: fused kernel).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from vtacc.schedule.tiling import pooling_compiles
from vtasm.portability import SHIFT_MAX

from .convert.layers import LayerKind
from .quantised import QLayer

ACC_LIMIT = 1 << 31


@dataclass
class Fusions:
    """The joins of one launch: add layer -> the product in its epilogue; max pooling -> the convolution
    whose accumulator it pools."""

    residual: dict[str, QLayer]
    pooled: dict[str, QLayer]

    @property
    def inside(self) -> set[str]:
        """The layers computed by the kernel of the layer they feed."""
        return {product.name for product in [*self.residual.values(), *self.pooled.values()]}

    def product_of(self, name: str) -> QLayer | None:
        """The product layer joined into layer ``name``'s kernel, if any."""
        return self.residual.get(name) or self.pooled.get(name)


def fusions(layers: list[QLayer], outs: list[str]) -> Fusions:
    """The joins among ``layers``, none of which may hide a tensor the launch writes (``outs``)."""
    return Fusions(residual_fusions(layers, outs), pool_fusions(layers, outs))


def _readers(layers: list[QLayer]) -> Counter:
    """How many of the layers read each tensor."""
    return Counter(t for q in layers for t in q.layer.inputs)


def pool_fusions(layers: list[QLayer], outs: list[str]) -> dict[str, QLayer]:
    """Max pooling layer -> the convolution whose accumulator it pools: one that only the pooling reads,
    that the part does not write for later, of an image of at least 2 x 2, that the compiler pools in its
    accumulator on every configuration, with a leaky slope below 1 if any (so it never decreases), and no
    accumulator plus bias that can leave int32."""
    readers = _readers(layers)
    producer = {q.layer.output: q for q in layers}
    fused: dict[str, QLayer] = {}
    for q in layers:
        conv = producer.get(q.layer.inputs[0]) if q.kind == LayerKind.MAXPOOL else None
        if conv is None or conv.kind != LayerKind.CONV or readers[conv.layer.output] != 1 \
                or conv.layer.output in outs or min(conv.layer.shape[2:]) < 2 or 0 in conv.layer.leaky:
            continue
        p = q.layer
        if pooling_compiles((p.size, p.stride, p.pad), conv.layer.shape[2:], p.shape[2:]) \
                and reach_fits(conv, conv.bias.astype(np.int64)):
            fused[q.name] = conv
    return fused


def residual_fusions(layers: list[QLayer], outs: list[str]) -> dict[str, QLayer]:
    """Add layer -> the convolution or dense layer whose result it adds in that layer's epilogue: of an
    add's two inputs (different tensors) that a layer with weights computes, nothing else reads and the part
    does not write for later, one at the finer scale whose other passes the add's shift whole (the cheapest
    epilogue, see emit.fused_kernel), else the one computed last."""
    readers = _readers(layers)
    producer = {q.layer.output: (k, q) for k, q in enumerate(layers)}
    fused: dict[str, QLayer] = {}
    for q in layers:
        ins = q.layer.inputs
        if q.kind != LayerKind.ADD or len(ins) != 2 or ins[0] == ins[1] or min(q.left) < 0:
            continue  # (an input shifted right: its scale far below the other's, see kinds.add)
        able = [(q.left[at] == 0 and q.left[1 - at] >= q.shift, *producer[t]) for at, t in enumerate(ins)
                if t in producer and readers[t] == 1 and t not in outs
                and producer[t][1].kind in (LayerKind.CONV, LayerKind.DENSE)]
        if able:
            fused[q.name] = max(able, key=lambda made: made[:2])[2]
    return fused


def foldable(q: QLayer, bias: np.ndarray, shift: np.ndarray) -> bool:
    """Whether ``bias`` and ``shift`` may replace the layer's own in an exact rewrite: no leaky slope (its
    max sits between the bias and the shift), portable shifts, and no accumulator plus either bias that can
    leave int32 (where the two would wrap differently): |acc| <= 128 * sum |w| per output channel."""
    return not q.layer.leaky and not np.any(shift > SHIFT_MAX) and reach_fits(q, bias)


def reach_fits(q: QLayer, bias: np.ndarray) -> bool:
    """Whether no accumulator plus ``bias`` or the layer's own bias can leave int32 (where values would wrap):
    |acc| <= 128 * sum |w| per output channel."""
    reach = 128 * np.abs(q.weight.reshape(len(q.weight), -1).astype(np.int64)).sum(axis=1)
    return bool(np.all(reach + np.maximum(np.abs(bias), np.abs(q.bias.astype(np.int64))) < ACC_LIMIT))

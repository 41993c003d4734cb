"""Concat along channels: each part written in place, in whole blocks of channels."""

from __future__ import annotations

from ..read.nodes import Node
from .layers import Layer, LayerKind
from .lowering import Lowering
from .registry import converts
from .tensors import identity


@converts("Concat")
def concat(lw: Lowering, node: Node) -> None:
    if len(node.inputs) == 1:  # a concatenation of one tensor is that tensor
        identity(lw, node)
        return
    parts = [lw.activation(node, t) for t in node.inputs]
    rank = len(lw.g.shapes[parts[0]])
    if node.attrs.get("axis", 1) % rank != 1:
        raise lw.fail(node, f"Concat along axis {node.attrs.get('axis')} is not supported (channels, axis 1)")
    channels = [lw.g.shapes[p][1] for p in parts]
    for k, p in enumerate(parts):  # a concatenation is written in place: copy one that is a part again
        made = lw.by_output.get(p)
        if made is not None and made.kind == LayerKind.CONCAT:
            copy = f"{p}__copy"
            lw.g.shapes[copy] = lw.g.shapes[p]
            lw.add(Layer(LayerKind.CLIP, lw.fresh(f"{node.name}_copy"), [node.name], [p], copy, lw.g.shapes[p]))
            parts[k] = copy
    if any(c % lw.block for c in channels[:-1]):
        raise lw.fail(node, f"parts of {', '.join(map(str, channels))} channels: VTA writes each part in "
                            f"place, in whole blocks of {lw.block} channels")
    out = node.outputs[0]
    lw.add(Layer(LayerKind.CONCAT, lw.fresh(node.name), [node.name], parts, out, lw.g.shapes[out]))

"""Every VTA layer kind's rules in one record each (rules.Rules): float and int8 evaluation, whether it
keeps its input's scale, its quantisation, its kernel text and its MACs.

    product.py  conv, dense        pooling.py  maxpool, avgpool, gap
    add.py      add                copies.py   concat, clip

A host layer is an ONNX node the host CPU computes (vtasim.host): its float and int8 evaluation are the
host's, it has its own scale, and no kernel. Adding a VTA kind is a LayerKind and a module making its
Rules, listed here; a kind without rules stops the importer when it loads, not a model at run time.
"""

from __future__ import annotations

from vtasim.host.step import node_macs

from ..convert.layers import Layer, LayerKind
from .add import ADD
from .copies import CLIP, CONCAT
from .pooling import AVGPOOL, GAP, MAXPOOL
from .product import CONV, DENSE
from .rules import Rules

RULES: dict[LayerKind, Rules] = {r.kind: r for r in (CONV, DENSE, MAXPOOL, AVGPOOL, GAP, ADD, CONCAT, CLIP)}
_missing = set(LayerKind) - set(RULES) - {LayerKind.HOST}
if _missing:
    raise TypeError(f"layer kinds without rules: {', '.join(sorted(map(str, _missing)))} (vtacc/onnx/kinds)")

def rules(kind: LayerKind) -> Rules:
    """The rules of a VTA layer kind (KeyError for HOST, which runs on the host)."""
    return RULES[kind]


def layer_macs(layer: Layer) -> int:
    """Multiply-accumulates of a layer: convolutions and dense layers on VTA, the same operators on the host."""
    if layer.kind == LayerKind.HOST:
        return node_macs(layer.host_node)
    return RULES[layer.kind].macs(layer)

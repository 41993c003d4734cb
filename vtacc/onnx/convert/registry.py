"""The converters, registered by ONNX operator and opset range: what VTA can compute is read off here.

A converter takes the lowering (lowering.Lowering: the layers made so far, the constants, renames) and
one node, and adds layers or renames tensors, or raises NotOnVta when VTA cannot compute the node as
written (the node then goes to the host when the host has the operator, vtasim.host.ops).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vtasm.formats.network import ONNX_OPSETS

if TYPE_CHECKING:
    from ..read.nodes import Node
    from .lowering import Lowering

Convert = Callable[["Lowering", "Node"], None]


@dataclass(frozen=True)
class Converter:
    """One operator's converter over the default-domain opsets ``first``..``last``."""

    op: str
    first: int
    last: int
    convert: Convert


CONVERTERS: dict[str, list[Converter]] = {}


def converts(op: str, first: int = ONNX_OPSETS[0], last: int = ONNX_OPSETS[1]) -> Callable[[Convert], Convert]:
    """Register the decorated function as ``op``'s converter for opsets ``first``..``last`` (ranges of one
    operator may not overlap)."""
    def register(fn: Convert) -> Convert:
        known = CONVERTERS.setdefault(op, [])
        clash = next((c for c in known if c.first <= last and first <= c.last), None)
        if clash is not None:
            raise ValueError(f"{op}: opsets {first}..{last} overlap {clash.first}..{clash.last}")
        known.append(Converter(op, first, last, fn))
        return fn

    return register


def converter_for(op: str, opset: int) -> Convert | None:
    """The converter of ``op`` at ``opset``, or None when VTA has no form of it there."""
    return next((c.convert for c in CONVERTERS.get(op, ()) if c.first <= opset <= c.last), None)


def vta_operators() -> frozenset[str]:
    """Every operator some converter maps onto VTA (at some opset)."""
    return frozenset(CONVERTERS)

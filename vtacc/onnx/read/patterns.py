"""Operators that exports write out as several nodes, recognised and written back as one.

HardSwish, x * clip(x + 3, 0, 6) / 6, is an ONNX operator only from opset 14; exports to older opsets
(Paddle2ONNX's, torch.onnx's before 14) spell it with elementary nodes:

- ``Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)`` (or the Mul by 1/6; or the division inside the product,
  ``Mul(x, Div(Clip(Add(x, 3), 0, 6), 6))``): Paddle2ONNX's;
- ``Mul(x, HardSigmoid(x, alpha=1/6, beta=1/2))``: torch.onnx's.

Left as they are, the product of two tensors runs on the host and its int8 result, x * relu6(x + 3), has a
range six times the activation's, so a scale that holds its largest values rounds its small ones away
before the division by 6 (the activation's values near zero, most of them). One HardSwish node computes
the same function in float on the host and rounds once, at its output's scale.
"""

from __future__ import annotations

import math

import numpy as np

from vtasim.host import forms

from .nodes import Graph, Node

TOLERANCE = 1e-6  # relative: how close a constant must be to 3, 6 or 1/6


def fuse_hard_swish(g: Graph) -> int:
    """Rewrite every spelled-out HardSwish of ``g`` as one HardSwish node (named as the node that computes
    its result, whose output it keeps); the number rewritten."""
    producer = {t: node for node in g.nodes for t in node.outputs if t}
    readers: dict[str, int] = {}
    for node in g.nodes:
        for t in node.inputs:
            readers[t] = readers.get(t, 0) + 1
    for t in g.outputs:
        readers[t] = readers.get(t, 0) + 1
    gone: set[str] = set()
    found: dict[str, Node] = {}
    for node in g.nodes:
        match = _hard_swish(g, node, producer, readers)
        if match is None or g.shapes.get(match[0]) != g.shapes.get(node.outputs[0]):  # no broadcast to a new shape
            continue
        x, inner = match
        if gone & {m.name for m in inner} or {m.name for m in inner} & set(found) or node.name in gone:
            continue
        gone.update(m.name for m in inner)
        found[node.name] = Node("HardSwish", node.name, [x], [node.outputs[0]])
    g.nodes[:] = [found.get(n.name, n) for n in g.nodes if n.name not in gone]
    return len(found)


def _hard_swish(g: Graph, node: Node, producer: dict[str, Node], readers: dict[str, int]
                ) -> tuple[str, list[Node]] | None:
    """(x, the nodes before ``node`` that the HardSwish replaces) when ``node`` computes HardSwish(x)."""
    def only(t: str, op: str) -> Node | None:  # the node of type ``op`` making t, read by one node only
        made = producer.get(t)
        return made if made is not None and made.op == op and readers.get(t) == 1 and len(made.outputs) == 1 \
            else None

    scaled = _by_constant(g, node, 1 / 6)  # the division by 6 at the end
    if scaled is not None:
        product = only(scaled, "Mul")
        if product is not None:
            for x, other in _pairs(product):
                relu6 = _relu6_of(g, x, other, only)
                if relu6 is not None:
                    return x, [product, *relu6]
    if node.op == "Mul":
        for x, other in _pairs(node):
            sigmoid = only(other, "HardSigmoid")
            if sigmoid is not None and sigmoid.inputs[0] == x and _close(forms.hard_sigmoid(sigmoid.attrs),
                                                                         (1 / 6, 0.5)):
                return x, [sigmoid]
            inner = only(other, "Div") or only(other, "Mul")
            divided = _by_constant(g, inner, 1 / 6)
            relu6 = _relu6_of(g, x, divided, only) if divided is not None else None
            if relu6 is not None:
                return x, [inner, *relu6]
    return None


def _pairs(node: Node) -> list[tuple[str, str]]:
    """A two-input node's inputs in both orders."""
    return [(node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])] if len(node.inputs) == 2 else []


def _by_constant(g: Graph, node: Node | None, factor: float) -> str | None:
    """The input that ``node`` multiplies by ``factor`` (a Mul by it, a Div by its inverse), else None."""
    if node is None or node.op not in ("Mul", "Div") or len(node.inputs) != 2:
        return None
    if node.op == "Div":
        return node.inputs[0] if _scalar(g, node.inputs[1], 1 / factor) else None
    return next((a for a, b in _pairs(node) if _scalar(g, b, factor)), None)


def _relu6_of(g: Graph, x: str, t: str, only) -> list[Node] | None:
    """[Clip, Add] when ``t`` is clip(x + 3, 0, 6), each read once."""
    clip = only(t, "Clip")
    if clip is None or any(i and i not in g.constants for i in clip.inputs[1:]):
        return None
    bounds = forms.clip_bounds([None, *(g.constants.get(i) if i else None for i in clip.inputs[1:])], clip.attrs)
    if not _close(tuple(float(np.asarray(b).reshape(-1)[0]) if np.size(b) == 1 else math.nan for b in bounds),
                  (0.0, 6.0)):
        return None
    add = only(clip.inputs[0], "Add")
    if add is None or not any(a == x and _scalar(g, b, 3.0) for a, b in _pairs(add)):
        return None
    return [clip, add]


def _scalar(g: Graph, t: str, value: float) -> bool:
    """Whether ``t`` is a constant of one element (any rank) equal to ``value``."""
    c = g.constants.get(t)
    return c is not None and c.size == 1 and np.issubdtype(c.dtype, np.floating) and \
        _close((float(c.reshape(-1)[0]),), (value,))


def _close(got: tuple[float, ...], want: tuple[float, ...]) -> bool:
    return all(math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE) for a, b in zip(got, want, strict=True))

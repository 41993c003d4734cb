"""The graph's types: a node (an ONNX operator with its tensors' names and attributes as Python values) and
the graph of them, as graph.py reads a model and the rewrites (patterns.py) change it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Node:
    """One operator: its ONNX type, name, input and output tensor names, and attributes as Python values."""

    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict = field(default_factory=dict)

    def where(self, model: str) -> str:
        return f"{model}: node '{self.name}' ({self.op})"


@dataclass
class Graph:
    """A model's operators in topological order, with every tensor's static shape and the initialisers."""

    name: str  # the model file, for messages
    nodes: list[Node]
    inputs: list[str]  # graph inputs that are not initialisers
    outputs: list[str]
    shapes: dict[str, tuple[int, ...]]
    constants: dict[str, np.ndarray]
    opset: int = 13  # of the default domain

    def producer(self, tensor: str) -> Node | None:
        return next((n for n in self.nodes if tensor in n.outputs), None)

    def consumers(self, tensor: str) -> list[Node]:
        return [n for n in self.nodes if tensor in n.inputs]

"""An ONNX model as a plain graph: static shapes, initialisers as numpy arrays, supported operators only.

``load_graph`` reads a model with the ``onnx`` package and refuses, with one
line naming the node, what the importer cannot take: an operator outside
what the converters and the host compute (every such node, in one message), a dynamic or unknown shape, an
input that nothing produces. Input dimensions the model leaves open are fixed
by the caller (``--input-shape``); shapes then come from ONNX's own shape
inference, and shape arithmetic on constants is folded away (fold.py).
"""

from __future__ import annotations

import math
from pathlib import Path

from vtasim.host.ops import OPS as HOST_OPS
from vtasm import budget
from vtasm.errors import ModelError, printable
from vtasm.names import unique

from .fold import FOLD_ONLY, fix_input_shapes, model_opset, open_inputs, static_model, upgraded
from .nodes import Graph, Node
from .patterns import fuse_hard_swish
from .validate import check_nodes, check_weights
from .wire import read_model


def _refuse_unknown(nodes, name: str, known) -> None:
    """One line listing every node whose operator is not in ``known`` (or of another domain)."""
    refused = [f"node '{n.name}' ({n.domain}.{n.op_type})" if n.domain not in ("", "ai.onnx") else
               f"node '{n.name}' ({n.op_type})" for n in nodes
               if n.domain not in ("", "ai.onnx") or n.op_type not in known]
    if refused:
        shown = ", ".join(refused[:20]) + (f" and {len(refused) - 20} more" if len(refused) > 20 else "")
        raise ModelError(f"{name}: {len(refused)} node{'s' if len(refused) > 1 else ''} that neither VTA nor the "
                         f"host CPU can compute: {shown} (docs/onnx.md lists the operators of each)")


def printable_names(graph) -> None:
    """Rename, consistently, every node and tensor whose name holds a character that is not printable (a line
    break, a terminal escape, a lone surrogate) to its escaped spelling: names reach the import report, the
    kernel language --emit vk writes and network files, where they must stay data."""
    for item in [*graph.node, *graph.initializer, *graph.input, *graph.output, *graph.value_info]:
        if isinstance(item.name, bytes):  # a name that is not UTF-8 (protobuf hands it over as bytes)
            item.name = item.name.decode("utf-8", "backslashreplace")
    names = {t.name for t in graph.initializer} | {v.name for v in [*graph.input, *graph.output, *graph.value_info]}
    for n in graph.node:
        names.update(n.input)
        names.update(n.output)
    odd = sorted(x for x in names if not x.isprintable())
    for n in graph.node:
        if not n.name.isprintable():
            n.name = printable(n.name, keep="")
    if not odd:
        return
    taken = names - set(odd)
    renamed = {}
    for old in odd:
        renamed[old] = unique(printable(old, keep=""), taken)
    for t in graph.initializer:
        t.name = renamed.get(t.name, t.name)
    for v in [*graph.input, *graph.output, *graph.value_info]:
        v.name = renamed.get(v.name, v.name)
    for n in graph.node:
        n.input[:] = [renamed.get(x, x) for x in n.input]
        n.output[:] = [renamed.get(x, x) for x in n.output]


def load_graph(path: str | Path, input_shapes: dict[str, tuple[int, ...]] | None = None) -> Graph:
    """Read and check an ONNX model file; ``input_shapes`` fixes the dimensions the model leaves open."""
    try:
        import onnx
    except ImportError:
        raise ModelError(f"{path}: importing ONNX models needs the onnx package: pip install '.[onnx]'") from None
    name = printable(Path(path).name, keep="")  # messages and generated text quote it
    try:
        model, arrays = read_model(path)  # the weights read once, not parsed into the message (wire.py)
    except FileNotFoundError:
        raise ModelError(f"{path}: no such file") from None
    except ModelError:
        raise
    except Exception as exc:  # the onnx package raises its own protobuf errors
        raise ModelError(f"{name}: not a readable ONNX model ({' '.join(str(exc).split())[:200]})") from None
    printable_names(model.graph)
    model = upgraded(model, name)
    opset = model_opset(model, name)
    for k, n in enumerate(model.graph.node):  # unnamed nodes are named by their place in the file, before folding
        n.name = n.name or f"{n.op_type.lower()}_{k}"
    # before any other work (folding included, which would execute what it folds): an operator that no
    # side computes and that folding could not remove (control flow, other domains) is refused
    from ..convert import vta_operators  # (read here: the converters' package reads graphs)

    computable = vta_operators() | frozenset(HOST_OPS)
    _refuse_unknown(model.graph.node, name, computable | FOLD_ONLY)
    check_nodes(model, name, opset)  # each node against its schema and what the importer relies on
    fix_input_shapes(model, name, input_shapes or {})
    still_open = open_inputs(model)
    if still_open:
        raise ModelError(f"{name}: the model leaves dimensions of its input{'s' if len(still_open) > 1 else ''} "
                         f"{', '.join(still_open)} open; fix them with --input-shape NAME=D0,D1,... "
                         "(e.g. a batch of 1)")
    model, constants = static_model(model, name, opset, arrays)
    g = model.graph
    _refuse_unknown(g.node, name, computable)  # what folding was to remove and did not
    nodes = [Node(n.op_type, n.name, list(n.input), list(n.output),
                  {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}) for n in g.node]
    inputs = [i.name for i in g.input if i.name not in constants]
    known = set(inputs) | set(constants)
    for node in nodes:
        for tensor in node.inputs:
            if tensor and tensor not in known:
                raise ModelError(f"{node.where(name)}: input '{tensor}' is neither a graph input, an initialiser "
                                 "nor the output of an earlier node", node=node.name)
        known.update(node.outputs)
    shapes: dict[str, tuple[int, ...]] = {}
    for info in list(g.input) + list(g.value_info) + list(g.output):
        dims = info.type.tensor_type.shape.dim
        if info.name in constants:
            continue
        if not info.type.tensor_type.HasField("shape") or any(not d.HasField("dim_value") for d in dims):
            shown = ", ".join(d.dim_param or "?" if not d.HasField("dim_value") else str(d.dim_value) for d in dims)
            user = next((n for n in nodes if info.name in n.inputs + n.outputs), None)
            where = user.where(name) if user else f"{name}: tensor '{info.name}'"
            raise ModelError(f"{where}: tensor '{info.name}' has a dynamic or unknown shape [{shown}]; "
                             "the importer needs static shapes")
        shapes[info.name] = tuple(int(d.dim_value) for d in dims)
        if any(d < 0 for d in shapes[info.name]):
            raise ModelError(f"{name}: tensor '{info.name}' has a negative dimension {list(shapes[info.name])}")
        budget.check(4 * math.prod(shapes[info.name]), f"{name}: tensor '{info.name}' "
                     f"{list(shapes[info.name])} as float32", ModelError)
    for key, value in constants.items():
        shapes[key] = tuple(value.shape)
    read = {t for n in nodes for t in n.inputs} | {o.name for o in g.output}
    for node in nodes:
        for k, tensor in enumerate(node.outputs):
            if tensor not in shapes:
                if tensor not in read:  # an optional output nothing reads (Dropout's mask): dropped
                    node.outputs[k] = ""
                    continue
                raise ModelError(f"{node.where(name)}: ONNX shape inference gave no shape for output '{tensor}'",
                                 node=node.name)
    check_weights(g, constants, shapes, name)
    graph = Graph(name, nodes, inputs, [o.name for o in g.output], shapes, constants, opset)
    fuse_hard_swish(graph)  # an older opset's spelled-out HardSwish as one node
    return graph

"""Static shapes and folded shape arithmetic, before the importer reads an ONNX model.

Exports often carry a dynamic batch (or other symbolic dimensions) and the
arithmetic that computes reshape targets from them at run time (Shape,
Gather, Slice, Cast, Concat, Unsqueeze, ConstantOfShape, ...). Once every
input's shape is fixed (``--input-shape NAME=1,3,224,224`` for what the model
leaves open), ONNX's shape inference makes every shape static, and every node
whose inputs are all constants (or a Shape of a tensor whose shape is known)
is evaluated once with onnx's reference evaluator and becomes an initialiser.
"""

from __future__ import annotations

import math

import numpy as np

from vtasm.errors import ModelError
from vtasm.formats.network import ONNX_DTYPES, ONNX_OPSETS

OPSETS = ONNX_OPSETS  # the default-domain opsets the importer reads (and a network file's host steps follow)
KEEP = frozenset({"QuantizeLinear", "DequantizeLinear"})  # the importer reads their scales: never folded
MAX_FOLDED = 1 << 28  # elements a folded constant may have (weights that exports compute, as VGG's 102 M-element
# fc6 by ConstantOfShape, fold too; this only bounds what a malformed model could make)
SMALL = 1 << 12  # folded constants up to this many elements stay in the graph for shape inference to read
# operators that only constant folding removes (the shape arithmetic exports write): accepted in a model only
# to be folded away; control flow (Loop, If, Scan) is not among them and is refused before anything runs
FOLD_ONLY = frozenset({"Shape", "Size", "Constant", "ConstantOfShape", "Range", "Equal", "Less", "LessOrEqual",
                       "Greater", "GreaterOrEqual", "Where", "Not", "And", "Or", "Xor", "ReduceProd", "Mod", "Tile",
                       "CastLike", "Sign", "Round", "NonZero", "ArgMax", "ArgMin"})
# operators whose outputs are never larger than their inputs broadcast together
BY_INPUTS = frozenset({"Shape", "Size", "Gather", "Slice", "Cast", "CastLike", "Squeeze", "Unsqueeze", "Reshape",
                       "Flatten", "Transpose", "Identity", "Concat", "Split", "Not", "Sign", "Round", "Abs", "Neg",
                       "Floor", "Ceil", "Sqrt", "Exp", "Log", "Reciprocal", "Relu", "Sigmoid", "Tanh", "Erf",
                       "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Equal", "Less",
                       "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Where", "Clip",
                       "NonZero", "ArgMax", "ArgMin", "ReduceProd", "ReduceSum", "ReduceMean", "ReduceMax",
                       "ReduceMin", "Dropout", "QuantizeLinear", "DequantizeLinear"})
PASSES = 16  # inference and folding alternate until nothing changes (a Shape folds once its input's is known)


def _default_opset(model) -> int | None:
    """The model's opset of the default domain, None when it names none."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def model_opset(model, name: str) -> int:
    """The model's default-domain opset, refused outside OPSETS."""
    opset = _default_opset(model) or 1
    if not OPSETS[0] <= opset <= OPSETS[1]:
        raise ModelError(f"{name}: opset {opset}; the importer reads opsets {OPSETS[0]} to {OPSETS[1]}")
    return opset


def upgraded(model, name: str):
    """A model of an opset older than OPSETS (torch.onnx's older exports write opset 6) converted to the
    first one the importer reads, by onnx's version converter (which rewrites what changed: broadcasting
    attributes, BatchNormalization's and Dropout's training flags); the model as it is otherwise."""
    opset = _default_opset(model)
    if opset is None or opset >= OPSETS[0]:
        return model
    from onnx import version_converter

    try:
        return version_converter.convert_version(model, OPSETS[0])
    except Exception as exc:  # the converter raises its own errors for what it cannot rewrite
        raise ModelError(f"{name}: opset {opset}; the importer reads opsets {OPSETS[0]} to {OPSETS[1]}, and "
                         f"onnx's version converter could not bring it to {OPSETS[0]} "
                         f"({' '.join(str(exc).split())[:160]})") from None


def open_unset_dims(model) -> None:
    """Make every dimension the model stores as a number below 1 open: exporters write -1 (Paddle2ONNX) or 0
    for a dimension they leave to the runtime, where ONNX would leave it unset or name it."""
    g = model.graph
    for info in [*g.input, *g.output, *g.value_info]:
        for d in info.type.tensor_type.shape.dim:
            if d.HasField("dim_value") and d.dim_value < 1:
                d.Clear()


def fix_input_shapes(model, name: str, given: dict[str, tuple[int, ...]]) -> None:
    """Set the shape of every graph input named in ``given``; refuse names the model does not have."""
    open_unset_dims(model)
    constants = {t.name for t in model.graph.initializer}
    inputs = {i.name: i for i in model.graph.input if i.name not in constants}
    unknown = sorted(set(given) - set(inputs))
    if unknown:
        raise ModelError(f"{name}: --input-shape names {', '.join(unknown)}, which the model does not take "
                         f"(its inputs: {', '.join(inputs)})")
    for key, dims in given.items():
        shape = inputs[key].type.tensor_type.shape
        if len(shape.dim) and len(shape.dim) != len(dims):
            raise ModelError(f"{name}: --input-shape {key} gives {len(dims)} dimensions; the model's input has "
                             f"{len(shape.dim)}")
        for k, (d, want) in enumerate(zip(shape.dim, dims, strict=False)):
            if d.HasField("dim_value") and d.dim_value != want:
                raise ModelError(f"{name}: --input-shape {key}={','.join(map(str, dims))}: the model fixes "
                                 f"dimension {k} of '{key}' at {d.dim_value}")
        del shape.dim[:]
        for d in dims:
            shape.dim.add().dim_value = d


def open_inputs(model) -> list[str]:
    """Graph inputs (not initialisers) with a dimension that is not a fixed number, as 'name [N, 3, 224, 224]'."""
    constants = {t.name for t in model.graph.initializer}
    found = []
    for info in model.graph.input:
        dims = info.type.tensor_type.shape.dim
        if info.name in constants or all(d.HasField("dim_value") for d in dims):
            continue
        shown = ", ".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in dims)
        found.append(f"'{info.name}' [{shown}]")
    return found


def static_model(model, name: str, opset: int, arrays: dict[str, np.ndarray] | None = None):
    """The model with shapes inferred and constant subgraphs folded, and every constant (initialisers and
    folded values) as arrays.

    Nodes are evaluated as ``opset`` defines their operators. A constant of
    up to SMALL elements is an initialiser (shape inference propagates its
    values into the shapes it computes); a larger one (a weight, given or
    computed by the export) stays out of the graph, declared as a graph input
    of its type and shape, so that no round of inference copies its data (a
    VGG's 550 MB of weights took inference 6 s).
    """
    from onnx import shape_inference

    arrays = arrays or {}  # initialisers whose bytes were read apart from the message (wire.py)
    values = {t.name: arrays[t.name] if t.name in arrays else _array(t, name) for t in model.graph.initializer}
    _lift_large(model, values)
    for _ in range(PASSES):
        try:
            model = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        except Exception as exc:
            raise ModelError(f"{name}: ONNX shape inference failed: {' '.join(str(exc).split())[:300]}") from None
        folded = _fold_once(model, name, opset, values)
        if not folded:
            break
        values.update(folded)
        _place(model, folded)
    return model, values


NUMERIC_TYPES = frozenset(ONNX_DTYPES) | {16}  # the plain numbers, and bfloat16 (onnx converts it)


def _array(tensor, name: str) -> np.ndarray:
    """An initialiser's values, or a ModelError naming it (a type the importer does not read, data that
    does not fill its dims)."""
    from onnx import numpy_helper

    where = f"{name}: initialiser '{tensor.name}'"
    if tensor.data_type not in NUMERIC_TYPES:
        raise ModelError(f"{where}: ONNX element type {tensor.data_type}, which is not a number type the importer "
                         "reads")
    if any(d < 0 for d in tensor.dims):
        raise ModelError(f"{where}: a negative dimension {list(tensor.dims)}")
    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:  # onnx raises ValueError, TypeError or KeyError for data that do not fit
        raise ModelError(f"{where}: its data do not fit its shape {list(tensor.dims)} "
                         f"({' '.join(str(exc).split())[:120]})") from None


def _lift_large(model, values: dict[str, np.ndarray]) -> None:
    """Take the model's initialisers of more than SMALL elements out of the graph, leaving typed graph inputs
    (their values are in ``values``)."""
    from onnx import helper

    g = model.graph
    large = {t.name for t in g.initializer if values[t.name].size > SMALL}
    if not large:
        return
    kept = [t for t in g.initializer if t.name not in large]
    del g.initializer[:]
    g.initializer.extend(kept)
    listed = {i.name for i in g.input}  # IR 3 models list their initialisers as inputs too
    g.input.extend(helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(values[k].dtype),
                                                 values[k].shape) for k in sorted(large - listed))


def _place(model, folded: dict[str, np.ndarray]) -> None:
    """Put folded constants into the graph: small ones as initialisers, large ones as typed inputs."""
    from onnx import helper, numpy_helper

    g = model.graph
    large = {k: v for k, v in folded.items() if v.size > SMALL}
    g.initializer.extend(numpy_helper.from_array(v, k) for k, v in folded.items() if k not in large)
    g.input.extend(helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                   for k, v in large.items())
    stale = [v for v in g.value_info if v.name in folded]
    for v in stale:
        g.value_info.remove(v)


def _output_bound(node, feeds: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]]) -> int | None:
    """An upper bound on the elements of any one of a node's outputs, worked out before evaluating it (None:
    no bound; the node is then not folded). Shape inference's shapes when it found them all; else the
    inputs broadcast together for operators no larger than that, and the size the values ask for where
    values decide it (ConstantOfShape, Expand, Tile, Range)."""
    outs = [t for t in node.output if t]
    if outs and all(t in shapes for t in outs):
        return max(math.prod(shapes[t]) for t in outs)
    if any(a.type in (5, 10) for a in node.attribute):  # GRAPH or GRAPHS: control flow is never evaluated
        return None
    values = [np.asarray(feeds[t]) for t in node.input if t]
    try:
        if node.op_type == "ConstantOfShape":
            return math.prod(int(d) for d in values[0].reshape(-1)) if values and values[0].size <= 64 else None
        if node.op_type == "Expand" and len(values) == 2 and values[1].size <= 64:
            return math.prod(np.broadcast_shapes(values[0].shape, tuple(int(d) for d in values[1].reshape(-1))))
        if node.op_type == "Tile" and len(values) == 2 and values[1].size == values[0].ndim:
            return values[0].size * math.prod(int(r) for r in values[1].reshape(-1))
        if node.op_type == "Range" and len(values) == 3 and all(v.size == 1 for v in values):
            start, limit, delta = (float(v.reshape(-1)[0]) for v in values)
            return max(0, math.ceil((limit - start) / delta)) if delta and math.isfinite(limit - start) else None
        if node.op_type in BY_INPUTS:
            return math.prod(np.broadcast_shapes(*(v.shape for v in values))) if values else 1
    except (ValueError, OverflowError, TypeError):  # shapes that do not broadcast, negative sizes: evaluation says
        return 1
    return None


def _known_shapes(model) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for info in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        dims = info.type.tensor_type.shape.dim
        if info.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            shapes[info.name] = tuple(int(d.dim_value) for d in dims)
    return shapes


def _fold_once(model, name: str, opset: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate every foldable node (``values``: the constants so far) and drop it from the graph; returns
    what they computed."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    g = model.graph
    shapes = _known_shapes(model)
    outputs = {o.name for o in g.output}
    kept, folded = [], {}

    def evaluate(node, feeds):  # in a one-node model, so that the operator is the one of the model's opset
        graph = helper.make_graph([node], "fold", [helper.make_tensor_value_info(t, 0, None) for t in feeds],
                                  [helper.make_tensor_value_info(t, 0, None) for t in node.output if t])
        one = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return ReferenceEvaluator(one).run(None, feeds)

    for node in g.node:
        results = None
        if node.domain in ("", "ai.onnx") and node.op_type not in KEEP and not set(node.output) & outputs:
            if node.op_type == "Shape" and node.input[0] in shapes and node.input[0] not in values:
                attrs = {a.name: a.i for a in node.attribute}
                dims = shapes[node.input[0]]
                results = [np.array(dims[slice(attrs.get("start", 0), attrs.get("end", len(dims)))], np.int64)]
            elif all(not t or t in values or t in folded for t in node.input):
                feeds = {t: folded.get(t, values.get(t)) for t in node.input if t}
                size = _output_bound(node, feeds, shapes)
                if size is not None and size > MAX_FOLDED and node.op_type in FOLD_ONLY:
                    raise ModelError(f"{name}: node '{node.name or node.op_type}' ({node.op_type}): its inputs are "
                                     f"constants, but its output of {size:,} elements is more than the "
                                     f"{MAX_FOLDED:,} constant folding computes", node=node.name or None)
                if size is None or size > MAX_FOLDED:  # not evaluated: its size is unknown or too large
                    kept.append(node)
                    continue
                try:
                    results = evaluate(node, feeds)
                except Exception as exc:
                    where = f"{name}: node '{node.name or node.op_type}' ({node.op_type})"
                    raise ModelError(f"{where}: its inputs are constants but it could not be evaluated "
                                     f"({' '.join(str(exc).split())[:200]})", node=node.name or None) from None
        if results is None:
            kept.append(node)
            continue
        for out, value in zip(node.output, results, strict=False):
            if out:
                folded[out] = np.asarray(value)
    if folded:
        del g.node[:]
        g.node.extend(kept)
    return folded

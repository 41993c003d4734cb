"""A quantised network as a kernel-language file: one kernel per layer and a ``main`` that calls them.

The weights, biases and per-channel shifts are ``main``'s parameters; their
values come beside the text, as arrays (``vtacc net.vk --params net.npz``
packs them into the program, as the importer does).
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np

from vtasm.names import kernel_identifier, unique
from vtasm.portability import MIN_ACC_DISTANCE, SHIFT_MAX

from .convert.layers import LayerKind, unhandled
from .partition import Part
from .quantise import QLayer, QuantisedNetwork


def _type(dtype: str, shape) -> str:
    return f"{dtype}[{', '.join(str(int(d)) for d in shape)}]"


def _clip(expr: str, q: QLayer) -> str:
    pools = (LayerKind.MAXPOOL, LayerKind.AVGPOOL, LayerKind.GAP)
    return expr if (q.low, q.high) == (-128, 127) and q.kind in pools else f"clip({expr}, {q.low}, {q.high})"


def _exp_text(e: int) -> str:
    return f"2^{e}"


def _describe(q: QLayer, qnet: QuantisedNetwork) -> str:
    layer = q.layer
    ins = ", ".join(_exp_text(e) for e in q.in_exps)
    text = f"# {layer.name}: {' + '.join(layer.sources)}; input scale {ins}, output {_exp_text(q.out_exp)}"
    if q.w_exps is not None:
        lo, hi = int(q.w_exps.min()), int(q.w_exps.max())
        text += f", weights {_exp_text(lo)}" + (f"..{_exp_text(hi)} per channel" if lo != hi else "")
    seen = qnet.ranges.get(layer.output)
    if seen is not None:
        text += f"; calibration range +-{seen:.4g}"
    return text


def _product(q: QLayer, x: str, bias: np.ndarray | None = None, shift: np.ndarray | int | None = None,
             bounds: tuple[int, int] | None = None,
             pool: QLayer | None = None) -> tuple[str, str, list[tuple[str, str, np.ndarray]]]:
    """A convolution's or dense layer's int8 result on input ``x``: the lines before it, its expression
    and its weight parameters (suffix, declaration type, value). ``bias``, ``shift`` and ``bounds`` replace
    the layer's own (a fused add's rounding moved into them); ``pool``: a max pooling of the accumulator
    before the bias (see _pooled_kernel)."""
    layer = q.layer
    bias = q.bias if bias is None else bias
    shift = q.shift if shift is None else shift
    low, high = (q.low, q.high) if bounds is None else bounds
    params = [("w", _type("int8", q.weight.shape), q.weight),
              ("b", _type("int32", bias.shape), np.asarray(bias, dtype=np.int32))]
    if np.ndim(shift):
        params.append(("s", _type("int32", np.shape(shift)), np.asarray(shift, dtype=np.int32)))
    amount = "s" if np.ndim(shift) else str(int(shift))
    if q.kind == LayerKind.CONV:
        opts = "".join(f", {k}={v}" for k, v, d in (("stride", layer.stride, 1), ("pad", layer.pad, 0),
                                                      ("groups", layer.groups, 1)) if v != d)
        product = f"conv2d({x}, w{opts})"
    else:
        product = f"matmul(flatten({x}), w)" if layer.flatten else f"matmul({x}, w)"
    if pool is not None:
        p = pool.layer
        end = f", pad_end={p.pad_end}" if p.pad_end != p.pad else ""
        product = f"max_pool({product}, {p.size}, stride={p.stride}, pad={p.pad}{end})"
    before = ""
    body = f"({product} + b)"
    if layer.leaky:  # the slope as shifts of the accumulator a (see network.power_sum)
        before = f"    a = {body}\n"
        body = f"max(a, {' + '.join(f'(a >> {k})' for k in layer.leaky)})"
    body += f" >> {amount}" if amount != "0" else ""
    return before, f"clip({body}, {low}, {high})", params


def _sum(q: QLayer, terms: list[str]) -> str:
    """An add layer's expression over its inputs' expressions: aligned, summed, rounded, clipped."""
    shifted = [f"({t} << {left})" if left else t for t, left in zip(terms, q.left, strict=True)]
    total = " + ".join(shifted)
    if q.shift:
        total = f"({total} + {1 << (q.shift - 1)}) >> {q.shift}"
    return _clip(total, q)


def _kernel(q: QLayer, qnet: QuantisedNetwork, shapes: dict) -> tuple[str, list[tuple[str, str, np.ndarray]]]:
    """The kernel's text and its weight parameters (suffix, declaration type, value)."""
    layer = q.layer
    out = _type("int8", layer.shape)
    before = ""
    end = f", pad_end={layer.pad_end}" if layer.pad_end != layer.pad else ""
    params: list[tuple[str, str, np.ndarray]] = []
    xs = [f"x{i}" if len(layer.inputs) > 1 else "x" for i in range(len(layer.inputs))]
    decls = [f"{n}: {_type('int8', shapes[t])}" for n, t in zip(xs, layer.inputs, strict=True)]
    if q.kind in (LayerKind.CONV, LayerKind.DENSE):
        before, expr, params = _product(q, "x")
    elif q.kind == LayerKind.MAXPOOL:
        expr = f"max_pool(x, {layer.size}, stride={layer.stride}, pad={layer.pad}{end})"
    elif q.kind == LayerKind.AVGPOOL:
        expr = f"avg_pool(x, {layer.size}, stride={layer.stride}, pad={layer.pad}{end})"
    elif q.kind == LayerKind.GAP:
        expr = "global_avg_pool(x)"
    elif q.kind == LayerKind.ADD:
        expr = _sum(q, xs)
    elif q.kind == LayerKind.CLIP:
        expr = _clip("x", q)
    else:
        raise unhandled(layer, "the kernel-language emitter")
    decls += [f"{suffix}: {kind}" for suffix, kind, _ in params]
    text = (f"{_describe(q, qnet)}\nkernel {layer.name}({', '.join(decls)}) -> y: {out} {{\n"
            f"{before}    y = {expr}\n}}\n")
    return text, params


def _fused_kernel(product: QLayer, add: QLayer, qnet: QuantisedNetwork, shapes: dict,
                  taken: set[str]) -> tuple[str, str, list[tuple[str, str, np.ndarray]]]:
    """A convolution (or dense layer) and the residual add that alone reads its result, as one kernel: the
    add in the product's epilogue, the same bits as the two layers. Its name (none of ``taken``), text and
    weight parameters; it takes the product's input, then the add's other input ``r``.

    With c the product's int8 result, the add computes clip((c << lc) + (r << lr) + 2^(k-1)) >> k). Where
    lr >= k (and the sum cannot leave int32), r's term is a whole multiple of 2^k and passes the shift as
    r << (lr - k), so r accumulates onto the tile on the GEMM core; the rounding constant left then goes
    into the product's bias (its shift grows by k and its clip bounds pass the same rounding shift: a
    monotone step commutes with clip). That saves the add's own shift, rounding and alignment passes on
    the ALU.
    """
    name = _fused_name(product, add, taken)
    other = next(t for t in add.layer.inputs if t != product.layer.output)
    at = add.layer.inputs.index(product.layer.output)
    lc, lr, k = add.left[at], add.left[1 - at], int(add.shift)
    rest = (1 << (k - 1)) if k else 0  # the add's rounding constant, until it moves into the bias
    # r passes the shift whole when its term is a multiple of 2^k and the sum cannot leave int32 (where the
    # add's wrapping sum and the split one would differ)
    whole = lr >= k and (128 << lc) + (128 << lr) + rest < ACC_LIMIT
    shifted = lr - k if whole else lr
    r = f"(r << {shifted})" if shifted else "r"
    bias, shift, bounds = product.bias.astype(np.int64), np.asarray(product.shift, dtype=np.int64), None
    if whole and lc == 0 and _foldable(product, bias + (rest << shift), shift + k):
        bias, shift = bias + (rest << shift), shift + k
        bounds = ((product.low + rest) >> k, (product.high + rest) >> k)
        k = rest = 0
    elif not whole and lc < k and _foldable(product, bias + ((rest >> lc) << shift), shift):
        bias, bounds = bias + ((rest >> lc) << shift), (product.low + (rest >> lc), product.high + (rest >> lc))
        rest = 0  # added to c before its clip: c + n is clip(v + n, low + n, high + n)
    before, c, params = _product(product, "x", bias, shift if np.ndim(product.shift) else int(shift), bounds)
    c = f"({c} << {lc})" if lc else c
    if whole:
        total = (f"(({c} + {rest}) >> {k})" if rest else f"({c} >> {k})") if k else c
        total += f" + {r}"
    else:  # the add's own sum (wrapping as it does), its rounding folded into c where it fits below 2^lc
        total = f"({c} + {r}" + (f" + {rest}" if rest else "") + f") >> {k}"
    text = _fused_text(name, product, add, qnet, [f"r: {_type('int8', shapes[other])}"], params,
                       "the add in the product's epilogue, its rounding in the product's bias where exact",
                       before, _clip(total, add), shapes)
    return name, text, params


def _pooled_kernel(product: QLayer, pool: QLayer, qnet: QuantisedNetwork, shapes: dict,
                   taken: set[str]) -> tuple[str, str, list[tuple[str, str, np.ndarray]]]:
    """A convolution and the max pooling that alone reads its result, as one kernel: the pooling folds the
    accumulator's windows before the bias, the slope, the shift and the clip, on a stride-squared fewer
    elements, and the product is never stored. The same bits as the two layers: each of those steps is the
    same for a whole channel and never decreases, so it commutes with a window's max (and padding, the
    smallest int8 value, never wins a window, which always holds a pixel of the image), as long as no
    accumulator plus the bias leaves int32 (_reach_fits). Its name (none of ``taken``), text and weights."""
    name = _fused_name(product, pool, taken)
    before, expr, params = _product(product, "x", pool=pool)
    text = _fused_text(name, product, pool, qnet, [], params,
                       "the max pooling folds the accumulator before the bias, shift and clip (the same bits)",
                       before, expr, shapes)
    return name, text, params


def _fused_name(product: QLayer, consumer: QLayer, taken: set[str]) -> str:
    """A joined kernel's name: the product's, then the consumer's past the prefix they share
    (layer1_0_conv2 and layer1_0_add: layer1_0_conv2_add), none of ``taken``."""
    common = os.path.commonprefix([product.name, consumer.name])
    return unique(kernel_identifier(f"{product.name}_{consumer.name[common.rfind('_') + 1:]}"), taken)


def _tensor_names(tensors: list[str]) -> tuple[dict[str, str], set[str]]:
    """The kernel-language name of each of a program's input and output tensors, distinct (the program's
    tensor table names them so: emit_vk and program_names both read it), and every name given."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for t in tensors:
        names[t] = unique(kernel_identifier(t), taken)
    return names, taken


def _fused_text(name: str, product: QLayer, consumer: QLayer, qnet: QuantisedNetwork, more: list[str],
                params: list[tuple[str, str, np.ndarray]], how: str, before: str, expr: str, shapes: dict) -> str:
    """A joined kernel's text: both layers described, how they join, then the kernel reading the product's
    input ``x``, the declarations ``more`` and the weight parameters."""
    decls = [f"x: {_type('int8', shapes[product.layer.inputs[0]])}", *more]
    decls += [f"{suffix}: {kind}" for suffix, kind, _ in params]
    return (f"{_describe(product, qnet)}\n{_describe(consumer, qnet)}\n# fused: {how}\n"
            f"kernel {name}({', '.join(decls)}) -> y: {_type('int8', consumer.layer.shape)} {{\n"
            f"{before}    y = {expr}\n}}\n")


def pool_fusions(layers: list[QLayer], outs: list[str]) -> dict[str, QLayer]:
    """Max pooling layer -> the convolution whose accumulator it pools (_pooled_kernel): one that only the
    pooling reads, that the part does not write for later, an image of at least 2 x 2 whose windows read at
    least 3 of its pixels (a tile of them all can keep a GEMM's writes to one element apart), a leaky slope
    below 1 if any (so it never decreases), and no accumulator plus bias that can leave int32."""
    readers = _readers(layers)
    producer = {q.layer.output: q for q in layers}
    fused: dict[str, QLayer] = {}
    for q in layers:
        conv = producer.get(q.layer.inputs[0]) if q.kind == LayerKind.MAXPOOL else None
        if conv is None or conv.kind != LayerKind.CONV or readers[conv.layer.output] != 1 \
                or conv.layer.output in outs or min(conv.layer.shape[2:]) < 2 or 0 in conv.layer.leaky:
            continue
        p = q.layer
        read = [min(extent, (out - 1) * p.stride + p.size - p.pad) for out, extent in
                zip(p.shape[2:], conv.layer.shape[2:], strict=True)]  # product rows and columns the windows read
        if read[0] * read[1] >= MIN_ACC_DISTANCE and _reach_fits(conv, conv.bias.astype(np.int64)):
            fused[q.name] = conv  # (a tile must compute at least MIN_ACC_DISTANCE product pixels)
    return fused


def _readers(layers: list[QLayer]) -> Counter:
    """How many of the layers read each tensor."""
    return Counter(t for q in layers for t in q.layer.inputs)


ACC_LIMIT = 1 << 31


def _foldable(q: QLayer, bias: np.ndarray, shift: np.ndarray) -> bool:
    """Whether ``bias`` and ``shift`` may replace the layer's own in an exact rewrite: no leaky slope (its
    max sits between the bias and the shift), portable shifts, and no accumulator plus either bias that can
    leave int32 (where the two would wrap differently): |acc| <= 128 * sum |w| per output channel."""
    return not q.layer.leaky and not np.any(shift > SHIFT_MAX) and _reach_fits(q, bias)


def _reach_fits(q: QLayer, bias: np.ndarray) -> bool:
    """Whether no accumulator plus ``bias`` or the layer's own bias can leave int32 (where values would wrap):
    |acc| <= 128 * sum |w| per output channel."""
    reach = 128 * np.abs(q.weight.reshape(len(q.weight), -1).astype(np.int64)).sum(axis=1)
    return bool(np.all(reach + np.maximum(np.abs(bias), np.abs(q.bias.astype(np.int64))) < ACC_LIMIT))


def residual_fusions(layers: list[QLayer], outs: list[str]) -> dict[str, QLayer]:
    """Add layer -> the convolution or dense layer whose result it adds in that layer's epilogue: of an
    add's two inputs (different tensors) that a layer with weights computes, nothing else reads and the part
    does not write for later, one at the finer scale whose other passes the add's shift whole (the cheapest
    epilogue, see _fused_kernel), else the one computed last."""
    readers = _readers(layers)
    producer = {q.layer.output: (k, q) for k, q in enumerate(layers)}
    fused: dict[str, QLayer] = {}
    for q in layers:
        ins = q.layer.inputs
        if q.kind != LayerKind.ADD or len(ins) != 2 or ins[0] == ins[1]:
            continue
        able = [(q.left[at] == 0 and q.left[1 - at] >= q.shift, *producer[t]) for at, t in enumerate(ins)
                if t in producer and readers[t] == 1 and t not in outs
                and producer[t][1].kind in (LayerKind.CONV, LayerKind.DENSE)]
        if able:
            fused[q.name] = max(able, key=lambda made: made[:2])[2]
    return fused


def emit_vk(qnet: QuantisedNetwork, part: Part | None = None) -> tuple[str, dict[str, np.ndarray]]:
    """The network (or one VTA ``part`` of it) as kernel-language text, and the values of ``main``'s weight
    parameters; ``main`` takes the tensors the part reads and returns those it writes for later steps."""
    net = qnet.network
    shapes = net.shapes
    layers = qnet.layers if part is None else part.layers
    ins = [net.input] if part is None else part.inputs
    outs = list(net.outputs) if part is None else part.outputs
    scales = ", ".join(f"'{t}' at scale 2^{qnet.exps[t]}" for t in ins)
    results = ", ".join(f"'{t}' at scale 2^{qnet.exps[t]}" for t in outs)
    parts = [f"# {net.name}, imported by vtacc: int8 with power-of-two scales (every requantisation a shift)\n"
             f"# input {scales}, output {results}\n"]
    for note in qnet.notes:
        parts.append(f"# note: {note}\n")
    values: dict[str, np.ndarray] = {}
    local, taken = _tensor_names(ins + outs)
    main_params = [f"{local[t]}: {_type('int8', shapes[t])}" for t in ins]
    lines = []
    fusions = residual_fusions(layers, outs)
    pooled = pool_fusions(layers, outs)
    inside = {product.name for product in [*fusions.values(), *pooled.values()]}
    kernels = {q.name for q in layers}
    for q in layers:
        layer = q.layer
        if q.name in inside:
            continue  # computed by the add or pooling it feeds
        product = fusions.get(q.name) or pooled.get(q.name)
        args = [local[t] for t in layer.inputs if product is None or t != product.layer.output]
        if q.kind == LayerKind.CONCAT:
            call = f"concat({', '.join(args)})"
        else:
            if product is None:
                kernel, (text, params), owner = layer.name, _kernel(q, qnet, shapes), layer.name
            else:
                fuse = _fused_kernel if q.kind == LayerKind.ADD else _pooled_kernel
                kernel, text, params = fuse(product, q, qnet, shapes, kernels)
                args, owner = [local[product.layer.inputs[0]]] + args, product.name
            parts.append("\n" + text)
            for suffix, kind, value in params:
                name = f"{owner}_{suffix}"
                main_params.append(f"{name}: {kind}")
                values[name] = value
                args.append(name)
            call = f"{kernel}({', '.join(args)})"
        if layer.output in outs:
            target = local[layer.output]
        else:
            target = unique(kernel_identifier(f"t_{layer.name}"), taken)
            local[layer.output] = target
        lines.append(f"    {target} = {call}")
    decls = [f"{local[t]}: {_type('int8', shapes[t])}" for t in outs]
    result = decls[0] if len(decls) == 1 else f"({', '.join(decls)})"
    head = f"kernel main({', '.join(main_params)})\n    -> {result} {{\n"
    parts.append("\n" + head + "\n".join(lines) + "\n}\n")
    return "".join(parts), values


def program_names(qnet: QuantisedNetwork, part: Part) -> dict[str, str]:
    """The program tensor each of the part's inputs and outputs is called by (as emit_vk names them)."""
    return _tensor_names(part.inputs + part.outputs)[0]

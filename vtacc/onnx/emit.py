"""A quantised network as a kernel-language file: one kernel per layer and a ``main`` that calls them.

Each layer's kernel is its kind's (kinds/); the joins fuse.py finds become one kernel each. The weights,
biases and per-channel shifts are ``main``'s parameters; their values come beside the text, as arrays
(``vtacc net.vk --params net.npz`` packs them into the program, as the importer does).
"""

from __future__ import annotations

import os

import numpy as np

from vtacc.frontend.names import ENTRY
from vtasm.names import kernel_identifier, unique

from .convert.layers import LayerKind
from .fuse import ACC_LIMIT, Fusions, foldable, fusions
from .kinds import rules
from .kinds.product import product_kernel
from .kinds.rules import Param, bounded, int8_type
from .partition import Part
from .quantised import QLayer, QuantisedNetwork, shown_scale


def _describe(q: QLayer, qnet: QuantisedNetwork) -> str:
    layer = q.layer
    ins = ", ".join(shown_scale(q.in_mant(k), e) for k, e in enumerate(q.in_exps))
    out = shown_scale(q.out_mant, q.out_exp)
    text = f"# {layer.name}: {' + '.join(layer.sources)}; input scale {ins}, output {out}"
    if q.w_exps is not None:
        text += f", weights {q.weight_scales()}" + (" per channel" if q.w_exps.min() != q.w_exps.max() else "")
    seen = qnet.ranges.get(layer.output)
    if seen is not None:
        text += f"; calibration range +-{seen:.4g}"
    return text


def _kernel(q: QLayer, qnet: QuantisedNetwork, shapes: dict) -> tuple[str, list[Param]]:
    """The layer's kernel text (its kind's expression) and its weight parameters."""
    layer = q.layer
    xs = [f"x{i}" if len(layer.inputs) > 1 else "x" for i in range(len(layer.inputs))]
    before, expr, params = rules(q.kind).kernel(q, xs)
    decls = [f"{n}: {int8_type('int8', shapes[t])}" for n, t in zip(xs, layer.inputs, strict=True)]
    decls += [f"{suffix}: {kind}" for suffix, kind, _ in params]
    text = (f"{_describe(q, qnet)}\nkernel {layer.name}({', '.join(decls)}) -> y: {int8_type('int8', layer.shape)} "
            f"{{\n{before}    y = {expr}\n}}\n")
    return text, params


def fused_kernel(product: QLayer, add: QLayer, qnet: QuantisedNetwork, shapes: dict,
                 taken: set[str]) -> tuple[str, str, list[Param]]:
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
    if whole and lc == 0 and foldable(product, bias + (rest << shift), shift + k):
        bias, shift = bias + (rest << shift), shift + k
        bounds = ((product.low + rest) >> k, (product.high + rest) >> k)
        k = rest = 0
    elif not whole and lc < k and foldable(product, bias + ((rest >> lc) << shift), shift):
        bias, bounds = bias + ((rest >> lc) << shift), (product.low + (rest >> lc), product.high + (rest >> lc))
        rest = 0  # added to c before its clip: c + n is clip(v + n, low + n, high + n)
    before, c, params = product_kernel(product, "x", bias, shift if np.ndim(product.shift) else int(shift), bounds)
    c = f"({c} << {lc})" if lc else c
    if whole:
        total = (f"(({c} + {rest}) >> {k})" if rest else f"({c} >> {k})") if k else c
        total += f" + {r}"
    else:  # the add's own sum (wrapping as it does), its rounding folded into c where it fits below 2^lc
        total = f"({c} + {r}" + (f" + {rest}" if rest else "") + f") >> {k}"
    text = _fused_text(name, product, add, qnet, [f"r: {int8_type('int8', shapes[other])}"], params,
                       "the add in the product's epilogue, its rounding in the product's bias where exact",
                       before, bounded(total, add), shapes)
    return name, text, params


def pooled_kernel(product: QLayer, pool: QLayer, qnet: QuantisedNetwork, shapes: dict,
                  taken: set[str]) -> tuple[str, str, list[Param]]:
    """A convolution and the max pooling that alone reads its result, as one kernel: the pooling folds the
    accumulator's windows before the bias, the slope, the shift and the clip, on a stride-squared fewer
    elements, and the product is never stored. The same bits as the two layers: each of those steps is the
    same for a whole channel and never decreases, so it commutes with a window's max (and padding, the
    smallest int8 value, never wins a window, which always holds a pixel of the image), as long as no
    accumulator plus the bias leaves int32 (fuse.reach_fits). Its name (none of ``taken``), text and
    weights."""
    name = _fused_name(product, pool, taken)
    before, expr, params = product_kernel(product, "x", pool=pool)
    text = _fused_text(name, product, pool, qnet, [], params,
                       "the max pooling folds the accumulator before the bias, shift and clip (the same bits)",
                       before, expr, shapes)
    return name, text, params


def _fused_name(product: QLayer, consumer: QLayer, taken: set[str]) -> str:
    """A joined kernel's name: the product's, then the consumer's past the prefix they share
    (layer1_0_conv2 and layer1_0_add: layer1_0_conv2_add), none of ``taken`` (it is added there)."""
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
                params: list[Param], how: str, before: str, expr: str, shapes: dict) -> str:
    """A joined kernel's text: both layers described, how they join, then the kernel reading the product's
    input ``x``, the declarations ``more`` and the weight parameters."""
    decls = [f"x: {int8_type('int8', shapes[product.layer.inputs[0]])}", *more]
    decls += [f"{suffix}: {kind}" for suffix, kind, _ in params]
    return (f"{_describe(product, qnet)}\n{_describe(consumer, qnet)}\n# fused: {how}\n"
            f"kernel {name}({', '.join(decls)}) -> y: {int8_type('int8', consumer.layer.shape)} {{\n"
            f"{before}    y = {expr}\n}}\n")


def _call(q: QLayer, joined: Fusions, qnet: QuantisedNetwork, local: dict[str, str], kernels: set[str],
          texts: list[str], main_params: list[str], values: dict[str, np.ndarray]) -> str:
    """The expression ``main`` computes layer ``q`` with (its kernel's text added to ``texts``, its weights
    to main's parameters)."""
    layer = q.layer
    product = joined.product_of(q.name)
    args = [local[t] for t in layer.inputs if product is None or t != product.layer.output]
    in_main = rules(q.kind).in_main
    if in_main is not None:
        return in_main(args)
    shapes = qnet.network.shapes
    if product is None:
        kernel, (text, params), owner = layer.name, _kernel(q, qnet, shapes), layer.name
    else:
        fuse = fused_kernel if q.kind == LayerKind.ADD else pooled_kernel
        kernel, text, params = fuse(product, q, qnet, shapes, kernels)
        args, owner = [local[product.layer.inputs[0]]] + args, product.name
    texts.append("\n" + text)
    for suffix, kind, value in params:
        name = f"{owner}_{suffix}"
        main_params.append(f"{name}: {kind}")
        values[name] = value
        args.append(name)
    return f"{kernel}({', '.join(args)})"


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
    texts = [f"# {net.name}, imported by vtacc: int8 (every requantisation a shift)\n"
             f"# input {scales}, output {results}\n"]
    texts += [f"# note: {note}\n" for note in qnet.notes]
    values: dict[str, np.ndarray] = {}
    local, taken = _tensor_names(ins + outs)
    main_params = [f"{local[t]}: {int8_type('int8', shapes[t])}" for t in ins]
    lines = []
    joined = fusions(layers, outs)
    inside = joined.inside
    kernels = {q.name for q in layers}
    for q in layers:
        if q.name in inside:
            continue  # computed by the add or pooling it feeds
        call = _call(q, joined, qnet, local, kernels, texts, main_params, values)
        output = q.layer.output
        if output not in outs:
            local[output] = unique(kernel_identifier(f"t_{q.name}"), taken)
        lines.append(f"    {local[output]} = {call}")
    decls = [f"{local[t]}: {int8_type('int8', shapes[t])}" for t in outs]
    result = decls[0] if len(decls) == 1 else f"({', '.join(decls)})"
    head = f"kernel {ENTRY}({', '.join(main_params)})\n    -> {result} {{\n"
    texts.append("\n" + head + "\n".join(lines) + "\n}\n")
    return "".join(texts), values


def program_names(qnet: QuantisedNetwork, part: Part) -> dict[str, str]:
    """The program tensor each of the part's inputs and outputs is called by (as emit_vk names them)."""
    return _tensor_names(part.inputs + part.outputs)[0]

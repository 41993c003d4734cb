"""A quantised network as a kernel-language file: one kernel per layer and a ``main`` that calls them.

The weights, biases and per-channel shifts are ``main``'s parameters; their
values come beside the text, as arrays (``vtacc net.vk --params net.npz``
packs them into the program, as the importer does).
"""

from __future__ import annotations

import numpy as np

from vtasm.formats.network import kernel_identifier

from .network import LayerKind, unhandled
from .partition import Part
from .quantise import QLayer, QuantisedNetwork


def kernel_name(name: str) -> str:
    """An ONNX tensor name as a kernel-language name."""
    return _ident(name)


_ident = kernel_identifier


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
        params += [("w", _type("int8", q.weight.shape), q.weight), ("b", _type("int32", q.bias.shape), q.bias)]
        if np.ndim(q.shift):
            params.append(("s", _type("int32", np.shape(q.shift)), np.asarray(q.shift, dtype=np.int32)))
        shift = "s" if np.ndim(q.shift) else str(int(q.shift))
        if q.kind == LayerKind.CONV:
            opts = "".join(f", {k}={v}" for k, v, d in (("stride", layer.stride, 1), ("pad", layer.pad, 0),
                                                          ("groups", layer.groups, 1)) if v != d)
            product = f"conv2d(x, w{opts})"
        else:
            product = "matmul(flatten(x), w)" if layer.flatten else "matmul(x, w)"
        body = f"({product} + b)"
        if layer.leaky:  # the slope as shifts of the accumulator a (see network.power_sum)
            before = f"    a = {body}\n"
            body = f"max(a, {' + '.join(f'(a >> {k})' for k in layer.leaky)})"
        body += f" >> {shift}" if shift != "0" else ""
        expr = _clip(body, q)
    elif q.kind == LayerKind.MAXPOOL:
        expr = f"max_pool(x, {layer.size}, stride={layer.stride}, pad={layer.pad}{end})"
    elif q.kind == LayerKind.AVGPOOL:
        expr = f"avg_pool(x, {layer.size}, stride={layer.stride}, pad={layer.pad}{end})"
    elif q.kind == LayerKind.GAP:
        expr = "global_avg_pool(x)"
    elif q.kind == LayerKind.ADD:
        terms = [f"({n} << {left})" if left else n for n, left in zip(xs, q.left, strict=True)]
        total = " + ".join(terms)
        if q.shift:
            total = f"({total} + {1 << (q.shift - 1)}) >> {q.shift}"
        expr = _clip(total, q)
    elif q.kind == LayerKind.CLIP:
        expr = _clip("x", q)
    else:
        raise unhandled(layer, "the kernel-language emitter")
    decls += [f"{suffix}: {kind}" for suffix, kind, _ in params]
    text = (f"{_describe(q, qnet)}\nkernel {layer.name}({', '.join(decls)}) -> y: {out} {{\n"
            f"{before}    y = {expr}\n}}\n")
    return text, params


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
    local: dict[str, str] = {}
    taken: set[str] = set()
    for t in ins + outs:
        name = _ident(t)
        while name in taken:
            name += "_"
        taken.add(name)
        local[t] = name
    main_params = [f"{local[t]}: {_type('int8', shapes[t])}" for t in ins]
    lines = []
    for q in layers:
        layer = q.layer
        args = [local[t] for t in layer.inputs]
        if q.kind == LayerKind.CONCAT:
            call = f"concat({', '.join(args)})"
        else:
            text, params = _kernel(q, qnet, shapes)
            parts.append("\n" + text)
            for suffix, kind, value in params:
                name = f"{layer.name}_{suffix}"
                main_params.append(f"{name}: {kind}")
                values[name] = value
                args.append(name)
            call = f"{layer.name}({', '.join(args)})"
        if layer.output in outs:
            target = local[layer.output]
        else:
            target = _ident(f"t_{layer.name}")
            while target in taken:
                target += "_"
            taken.add(target)
            local[layer.output] = target
        lines.append(f"    {target} = {call}")
    decls = [f"{local[t]}: {_type('int8', shapes[t])}" for t in outs]
    result = decls[0] if len(decls) == 1 else f"({', '.join(decls)})"
    head = f"kernel main({', '.join(main_params)})\n    -> {result} {{\n"
    parts.append("\n" + head + "\n".join(lines) + "\n}\n")
    return "".join(parts), values


def program_names(qnet: QuantisedNetwork, part: Part) -> dict[str, str]:
    """The program tensor each of the part's inputs and outputs is called by (as emit_vk names them)."""
    names, taken = {}, set()
    for t in part.inputs + part.outputs:
        name = _ident(t)
        while name in taken:
            name += "_"
        taken.add(name)
        names[t] = name
    return names

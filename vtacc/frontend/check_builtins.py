"""The rules of the built-in functions: arguments, shapes and dtypes of each call.

:data:`BUILTINS` says how each built-in takes its arguments; the
:class:`BuiltinRules` mixin (mixed into the kernel checker) binds them and
builds the matmul, conv2d, pooling, element-wise and cast nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vtasm.errors import SourceSpan

from . import syntax_tree as st
from .check_support import Errors, broadcast, fold, plural, suggest, type_text
from .checked import (
    INT8,
    INT32,
    AvgWindow,
    Binary,
    Call,
    Cast,
    Concat,
    Const,
    Conv2d,
    Flatten,
    MatMul,
    Node,
    Pool,
    TensorRef,
)


@dataclass(frozen=True)
class Builtin:
    """How a built-in function takes its arguments."""

    operands: tuple[str, ...]  # expressions, positional
    options: tuple[str, ...] = ()  # integer constants, by keyword
    positional_options: bool = False  # options may also follow the operands positionally


PAD_SIDES = ("pad_top", "pad_left", "pad_bottom", "pad_right")  # conv2d's padding per side (default: pad)


def conv_padding(pads: tuple[int, ...]) -> str:
    """conv2d's padding options as the language spells them: ``pad=P``, or each side where they differ."""
    if len(set(pads)) == 1:
        return f"pad={pads[0]}"
    return ", ".join(f"{side}={p}" for side, p in zip(PAD_SIDES, pads, strict=True))


_POOL = Builtin(("x",), ("size", "stride", "pad", "pad_end"), True)
BUILTINS: dict[str, Builtin] = {
    "matmul": Builtin(("x", "w")),
    "dense": Builtin(("x", "w")),
    "conv2d": Builtin(("x", "w"), ("stride", "pad", "groups") + PAD_SIDES),
    "max_pool": _POOL,
    "sum_pool": _POOL,
    "avg_pool": _POOL,
    "global_avg_pool": Builtin(("x",), ("multiplier", "shift")),
    "flatten": Builtin(("x",)),
    "concat": Builtin(("a", "b")),  # and any number more: checked by BuiltinRules.concat
    "min": Builtin(("a", "b")),
    "max": Builtin(("a", "b")),
    "clip": Builtin(("x", "lo", "hi")),
    "relu": Builtin(("x",)),
    "int8": Builtin(("x",)),
    "int32": Builtin(("x",)),
}
def exact_average(area: int) -> bool:
    """Whether VTA divides a sum of ``area`` values exactly: by a shift, so only a power of two (avg_pool
    takes these areas alone; global_avg_pool approximates the others, see average_multiplier)."""
    return area & (area - 1) == 0


def average_multiplier(area: int) -> tuple[int, int]:
    """(multiplier, shift) with ``sum * multiplier >> shift`` close to ``sum / area``.

    A power-of-two area divides exactly (multiplier 1). Otherwise the shift is
    floor(log2(area)) + 7 and the multiplier round(2**shift / area), at most
    127 (an int8 weight): within 0.8 % of the true average.
    """
    if exact_average(area):
        return 1, area.bit_length() - 1
    shift = area.bit_length() - 1 + 7
    return min(127, round((1 << shift) / area)), shift


OPS = {"+": "add", "-": "sub", "*": "mul", "<<": "shl", ">>": "shr"}
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "shl": "<<", "shr": ">>", "min": "min", "max": "max"}
Operand = tuple[Node, st.Arg]


class BuiltinRules:
    """The rules of the built-in functions (mixed into the kernel checker)."""

    error: Errors
    expr: Callable[[st.Expr], Node | None]  # checks a sub-expression: the kernel checker's method

    def builtin(self, e: st.CallExpr) -> Node | None:
        if e.func == "concat":
            return self.concat(e)
        bound = self.bind_args(e, BUILTINS[e.func])
        if bound is None:
            return None
        ops, opts = bound
        f = e.func
        if f in ("matmul", "dense"):
            return self.matmul(e, ops)
        if f == "conv2d":
            return self.conv2d(e, ops, opts)
        if f == "global_avg_pool":
            return self.global_avg_pool(e, ops, opts)
        if f == "flatten":
            return self.flatten(e, ops)
        if f.endswith("_pool"):
            return self.pool(e, ops, opts)
        nodes = [node for node, _ in ops]
        spans = [arg.value.span for _, arg in ops]
        if f in ("min", "max"):
            return self.binary(f, nodes[0], nodes[1], e.span, e.name_span, spans[1])
        if f == "clip":
            low = self.binary("max", nodes[0], nodes[1], e.span, e.name_span, spans[1])
            return self.binary("min", low, nodes[2], e.span, e.name_span, spans[2])
        if f == "relu":
            return self.binary("max", nodes[0], Const((), INT32, e.span, 0), e.span, e.name_span)
        x = nodes[0]
        if isinstance(x, Const):
            value = ((x.value + 128) % 256) - 128 if f == INT8 else x.value
            return Const((), INT32, e.span, value)
        return Cast(x.shape, f, e.span, x)

    def bind_args(self, e: st.CallExpr, rule: Builtin) -> tuple[list[Operand], dict] | None:
        """Operand nodes and option values ``{name: (value, span)}``, or None after reporting errors."""
        positional: list[st.Arg] = []
        keywords: dict[str, st.Arg] = {}
        ok = True
        for arg in e.args:
            if arg.name is None:
                if keywords:
                    self.error("a positional argument cannot follow a keyword argument", arg.span)
                    ok = False
                    continue
                positional.append(arg)
            elif arg.name not in rule.options:
                takes = f" (it takes {', '.join(rule.options)})" if rule.options else ""
                message = f"unknown keyword '{arg.name}' for {e.func}{takes}{suggest(arg.name, rule.options)}"
                self.error(message if rule.options else f"{e.func} takes no keyword arguments", arg.span)
                ok = False
            elif arg.name in keywords:
                self.error(f"'{arg.name}' is given twice", arg.span)
                ok = False
            else:
                keywords[arg.name] = arg
        limit = len(rule.operands) + (len(rule.options) if rule.positional_options else 0)
        names = ", ".join(rule.operands + (rule.options if rule.positional_options else ()))
        if len(positional) > limit:
            hint = "; give stride, pad and groups by keyword, as in stride=2" if rule.options and limit == 2 else ""
            most = plural(limit, "positional argument")
            self.error(f"{e.func} takes at most {most} ({names}), got {len(positional)}{hint}", positional[limit].span)
            ok = False
        elif len(positional) < len(rule.operands):
            self.error(f"{e.func} needs {plural(len(rule.operands), 'argument')} ({', '.join(rule.operands)}), "
                       f"got {len(positional)}", e.name_span)
            ok = False
        for name, arg in zip(rule.options, positional[len(rule.operands):limit], strict=False):
            if name in keywords:
                self.error(f"'{name}' is given twice", keywords[name].span)
                ok = False
            keywords[name] = arg
        operands = [(self.expr(arg.value), arg) for arg in positional[: len(rule.operands)]]
        for arg in positional[limit:]:
            self.expr(arg.value)
        options = {}
        for name, arg in keywords.items():
            node = self.expr(arg.value)
            if node is not None and not isinstance(node, Const):
                self.error(f"{name} must be an integer constant, got {type_text(node)}", arg.value.span)
                node = None
            if node is None:
                ok = False
            else:
                options[name] = (node.value, arg.value.span)
        if not ok or any(node is None for node, _ in operands):
            return None
        return operands, options

    def tensor_input(self, f: str, operand: Operand, gemm: bool, hint: str = "") -> Node | None:
        """The operand if it is a tensor read from DRAM (int8 for GEMM), else None after an error (``hint``
        ends its message)."""
        node, arg = operand
        if isinstance(node, Cast) and isinstance(node.x, (TensorRef, Call)) and node.dtype == node.x.dtype:
            node = node.x
        tensor = isinstance(node, (TensorRef, Call))
        if tensor and (node.dtype == INT8 or not gemm):
            return node
        text = st.unparse(arg.value)
        if isinstance(node, Const):
            got = f"the constant {node.value}"
        elif tensor:
            got = f"an int32 tensor ({type_text(node)})"
        else:
            got = (f"a value computed in this kernel ({type_text(node)}); to use it, make it the int8 result of "
                   "another kernel and call that kernel")
        if gemm:
            self.error(f"{f} needs '{text}' as an int8 tensor (a parameter or the int8 result of a called kernel): "
                       f"VTA's GEMM reads int8 inputs and weights, and '{text}' is {got}", arg.value.span)
        else:
            self.error(f"{f} needs '{text}' as a tensor (a parameter or the result of a called kernel): pooling "
                       f"reads its input from DRAM, and '{text}' is {got}{hint}", arg.value.span)
        return None

    def concat(self, e: st.CallExpr) -> Node | None:
        named = [a for a in e.args if a.name is not None]
        if named:
            self.error("concat takes no keyword arguments (it joins along the channel axis)", named[0].span)
            return None
        if len(e.args) < 2:
            self.error(f"concat needs at least 2 tensors, got {len(e.args)}", e.name_span)
            return None
        parts = [self.expr(a.value) for a in e.args]
        if any(p is None for p in parts):
            return None
        for part, arg in zip(parts, e.args, strict=True):
            if not isinstance(part, (TensorRef, Call)) or part.dtype != INT8:
                self.error(f"concat joins int8 tensors (parameters or int8 results of called kernels); "
                           f"'{st.unparse(arg.value)}' is {type_text(part)}", arg.value.span)
                return None
        first = parts[0]
        for part, arg in zip(parts, e.args, strict=True):
            if len(part.shape) not in (2, 4) or len(part.shape) != len(first.shape) or \
                    part.shape[:1] + part.shape[2:] != first.shape[:1] + first.shape[2:]:
                self.error(f"concat joins tensors that differ only in their channels (axis 1): "
                           f"'{st.unparse(arg.value)}' is {type_text(part)}, the first is {type_text(first)}",
                           arg.value.span)
                return None
        shape = (first.shape[0], sum(p.shape[1] for p in parts)) + first.shape[2:]
        return Concat(shape, INT8, e.span, tuple(parts))

    def flatten(self, e: st.CallExpr, ops: list[Operand]) -> Node | None:
        x = self.tensor_input("flatten", ops[0], True)
        if x is None:
            return None
        if len(x.shape) != 4:
            self.error(f"flatten needs {st.unparse(ops[0][1].value)} as [N, C, H, W], got {type_text(x)}",
                       ops[0][1].value.span)
            return None
        n, c, h, w = x.shape
        return Flatten((n, c * h * w), INT8, e.span, x)

    def global_avg_pool(self, e: st.CallExpr, ops: list[Operand], opts: dict) -> Node | None:
        x = self.tensor_input("global_avg_pool", ops[0], True)
        if x is None:
            return None
        if len(x.shape) != 4:
            self.error(f"global_avg_pool needs {st.unparse(ops[0][1].value)} as [N, C, H, W], got {type_text(x)}",
                       ops[0][1].value.span)
            return None
        n, c, h, w = x.shape
        multiplier, shift = average_multiplier(h * w)
        multiplier = self.option(opts, "multiplier", multiplier, 1, 127)  # every weight tap holds it: int8
        shift = self.option(opts, "shift", shift, 0, 31)
        if multiplier is None or shift is None:
            return None
        window = AvgWindow((n, c, 1, 1), INT32, e.span, x, multiplier, shift)
        return self.binary("shr", window, Const((), INT32, e.span, shift), e.span, e.name_span)

    def matmul(self, e: st.CallExpr, ops: list[Operand]) -> Node | None:
        x = ops[0][0]
        if not isinstance(x, Flatten):
            x = self.tensor_input(e.func, ops[0], True)
        w = self.tensor_input(e.func, ops[1], True)
        if x is None or w is None:
            return None
        tx, tw = st.unparse(ops[0][1].value), st.unparse(ops[1][1].value)
        head = f"{e.func}({tx}, {tw})"
        if len(x.shape) != 2:
            self.error(f"{head} needs {tx} as [N, K], got {type_text(x)}", ops[0][1].value.span)
        elif len(w.shape) != 2:
            self.error(f"{head} needs {tw} as [O, K], got {type_text(w)}", ops[1][1].value.span)
        elif w.shape[1] != x.shape[1]:
            self.error(f"shape mismatch: {head} needs {tw} as [O, {x.shape[1]}] ({tw}[o, k] pairs with {tx}[n, k]), "
                       f"got {type_text(w)}", ops[1][1].value.span)
        else:
            return MatMul((x.shape[0], w.shape[0]), INT32, e.span, x, w)
        return None

    def option(self, opts: dict, name: str, default: int, low: int, high: int | None = None) -> int | None:
        value, span = opts.get(name, (default, None))
        if value < low or (high is not None and value > high):
            limit = f"in {low}..{high}" if high is not None else f">= {low}"
            self.error(f"{name} must be {limit}, got {value}", span)
            return None
        return value

    def conv2d(self, e: st.CallExpr, ops: list[Operand], opts: dict) -> Node | None:
        x, w = self.tensor_input("conv2d", ops[0], True), self.tensor_input("conv2d", ops[1], True)
        stride, pad = self.option(opts, "stride", 1, 1), self.option(opts, "pad", 0, 0)
        groups = self.option(opts, "groups", 1, 1)
        pads = tuple(self.option(opts, side, pad or 0, 0) for side in PAD_SIDES)
        if None in (x, w, stride, pad, groups) or None in pads:
            return None
        tx, tw = st.unparse(ops[0][1].value), st.unparse(ops[1][1].value)
        head = f"conv2d({tx}, {tw})"
        if len(x.shape) != 4:
            self.error(f"{head} needs {tx} as [N, IC, H, W], got {type_text(x)}", ops[0][1].value.span)
            return None
        if len(w.shape) != 4:
            self.error(f"{head} needs {tw} as [OC, IC/groups, KH, KW], got {type_text(w)}", ops[1][1].value.span)
            return None
        (n, ic, h, wd), (oc, icg, kh, kw) = x.shape, w.shape
        where = opts.get("groups", (0, e.name_span))[1]
        if ic % groups or oc % groups:
            count, what = (ic, f"input channels of {tx}") if ic % groups else (oc, f"output channels of {tw}")
            self.error(f"groups={groups} must divide the {count} {what}", where)
            return None
        if icg != ic // groups:
            per = f"{ic} input channels / groups={groups}" if groups > 1 else f"{ic} input channels"
            self.error(f"shape mismatch: {head} needs {tw} as [OC, {ic // groups}, KH, KW] ({per}), "
                       f"got {type_text(w)}", ops[1][1].value.span)
            return None
        top, left, bottom, right = pads
        oh, ow = (h + top + bottom - kh) // stride + 1, (wd + left + right - kw) // stride + 1
        if oh < 1 or ow < 1:
            self.error(f"{head} has no output: the {kh}x{kw} kernel does not fit the {h}x{wd} input with "
                       f"{conv_padding(pads)} (output would be {oh}x{ow})", e.name_span)
            return None
        return Conv2d((n, oc, oh, ow), INT32, e.span, x, w, stride, pads, groups)

    def pool(self, e: st.CallExpr, ops: list[Operand], opts: dict) -> Node | None:
        f = e.func
        # max pooling of a convolution folds in the accumulator, before the epilogue (max commutes with it)
        hint = ("; or a conv2d itself, pooled in the accumulator before the rest: max_pool(conv2d(x, w), ...) + b"
                if f == "max_pool" else "")
        x = ops[0][0] if f == "max_pool" and isinstance(ops[0][0], Conv2d) else self.tensor_input(f, ops[0], False,
                                                                                                 hint)
        if "size" not in opts:
            self.error(f"{f} needs a window size, as in {f}(x, 2)", e.name_span)
            return None
        size = self.option(opts, "size", 0, 1)
        stride = self.option(opts, "stride", size or 1, 1)
        pad = self.option(opts, "pad", 0, 0, (size or 1) - 1)
        pad_end = self.option(opts, "pad_end", pad or 0, 0, (size or 1) - 1)  # after the last row and column
        if None in (x, size, stride, pad, pad_end):
            return None
        text = st.unparse(ops[0][1].value)
        if len(x.shape) != 4:
            self.error(f"{f} needs {text} as [N, C, H, W], got {type_text(x)}", ops[0][1].value.span)
            return None
        n, c, h, w = x.shape
        oh, ow = (h + pad + pad_end - size) // stride + 1, (w + pad + pad_end - size) // stride + 1
        if oh < 1 or ow < 1:
            self.error(f"{f} has no output: a {size}x{size} window does not fit the {h}x{w} input with pad={pad}"
                       + (f", pad_end={pad_end}" if pad_end != pad else ""), e.name_span)
            return None
        area = size * size
        if f == "avg_pool" and not exact_average(area):
            self.error(f"avg_pool with size={size} divides by {area}, which is not a power of two (avg_pool is "
                       f"sum_pool >> log2(size*size)); use sum_pool and scale explicitly", e.name_span)
            return None
        pad_value = (-128 if x.dtype == INT8 else -(2**31)) if f == "max_pool" else 0
        kind = "max" if f == "max_pool" else "sum"
        node = Pool((n, c, oh, ow), INT32, e.span, kind, x, size, stride, pad, pad_value, pad_end)
        if f == "avg_pool":
            return self.binary("shr", node, Const((), INT32, e.span, area.bit_length() - 1), e.span, e.name_span)
        return node

    def binary(self, op: str, a: Node | None, b: Node | None, span: SourceSpan, op_span: SourceSpan,
               b_span: SourceSpan | None = None) -> Node | None:
        """An element-wise node (or a folded constant), or None after reporting errors."""
        if op in ("shl", "shr") and isinstance(b, Const) and not 0 <= b.value <= 31:
            self.error(f"shift amount must be 0..31, got {b.value}", b_span or op_span)
            return None
        if a is None or b is None:
            return None
        if isinstance(a, Const) and isinstance(b, Const):
            return Const((), INT32, span, fold(op, a.value, b.value))
        aligned = broadcast(a.shape, b.shape)
        if isinstance(aligned, str):
            self.error(f"cannot broadcast {type_text(a)} with {type_text(b)} in '{_SYMBOLS[op]}': {aligned}", op_span)
            return None
        shape, a_shape, b_shape = aligned
        return Binary(shape, INT32, span, op, a, b, a_shape, b_shape)

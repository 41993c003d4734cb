"""Checking a parsed kernel source into the checked program of :mod:`vtacc.checked`.

The checker resolves names, computes every node's shape and dtype, applies
the rules of the built-in functions and of kernel calls, folds constants, and
reads the schedule blocks. It never stops at the first problem: every error
of the file is collected and, sorted by position, raised as one
:class:`CompileErrors`. Syntax errors come from :mod:`vtacc.parse`.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from vtasm.errors import CompileError, SourceSpan

from . import syntax_tree as st
from .checked import (
    INT8,
    INT32,
    Assign,
    Binary,
    Call,
    Cast,
    CheckedFile,
    Const,
    Conv2d,
    Kernel,
    MatMul,
    Node,
    Pool,
    Schedule,
    TensorDecl,
    TensorRef,
)
from .parse import parse


class CompileErrors(CompileError):
    """Every error of one source file, sorted by position; ``render()`` shows them all."""

    def __init__(self, errors: list[CompileError]):
        super().__init__(errors[0].message, errors[0].span)
        self.errors = tuple(errors)

    def render(self) -> str:
        return "\n".join(error.render() for error in self.errors)


def load_kernels(path: str | Path) -> CheckedFile:
    """Read, parse and check a .vk file."""
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise CompileError(f"cannot read {path}: {reason}") from None
    return check_source(source, str(path))


def check_source(source: str, path: str) -> CheckedFile:
    """Parse and check kernel source text (``path`` is used in messages)."""
    return check(parse(source, path), source, path)


def check(tree: st.SourceFile, source: str, path: str) -> CheckedFile:
    """Check a parsed file; raises :class:`CompileErrors` listing every error."""
    errors = Errors()
    signatures = _signatures(tree, errors)
    recursive = _recursive_calls(tree, signatures, errors)
    kernels = tuple(_KernelChecker(k, signatures, recursive, errors).run() for k in tree.kernels)
    errors.raise_if_any()
    return CheckedFile(path, source, kernels)


class Errors:
    """The errors collected so far."""

    def __init__(self):
        self.items: list[CompileError] = []

    def __call__(self, message: str, span: SourceSpan) -> None:
        self.items.append(CompileError(message, span))

    def raise_if_any(self) -> None:
        unique = {(e.span.line, e.span.column, e.message): e for e in self.items}
        if unique:
            raise CompileErrors([unique[key] for key in sorted(unique)])


def suggest(word: str, candidates) -> str:
    """``"; did you mean 'x'?"`` for the closest candidate, or an empty string."""
    close = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def plural(count: int, word: str) -> str:
    """``1 argument``, ``2 arguments``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def type_text(node: Node) -> str:
    """``int8[1, 1024]``, or ``the constant 3``."""
    if isinstance(node, Const):
        return f"the constant {node.value}"
    return f"{node.dtype}[{', '.join(map(str, node.shape))}]"


# -- kernel headers ---------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    inputs: tuple[TensorDecl, ...]
    outputs: tuple[TensorDecl, ...]
    valid: bool  # False when a declaration had an error (calls are then not checked)


def _signatures(tree: st.SourceFile, error: Errors) -> dict[str, Signature]:
    signatures: dict[str, Signature] = {}
    first_line: dict[str, int] = {}
    for k in tree.kernels:
        if k.name in BUILTINS:
            error(f"kernel '{k.name}' has the name of a built-in function", k.name_span)
        if k.name in first_line:
            error(f"kernel '{k.name}' is defined twice (first at line {first_line[k.name]})", k.name_span)
            continue
        first_line[k.name] = k.name_span.line
        signatures[k.name] = _signature(k, error)
    return signatures


def _signature(k: st.KernelDef, error: Errors) -> Signature:
    decls: dict[str, list[TensorDecl]] = {"input": [], "output": []}
    seen: dict[str, SourceSpan] = {}
    valid = True
    for role, group in (("input", k.params), ("output", k.results)):
        for d in group:
            ok = True
            if d.name in seen:
                where = seen[d.name]
                error(f"'{d.name}' is declared twice (first at {where.line}:{where.column})", d.name_span)
                ok = False
            seen.setdefault(d.name, d.name_span)
            if d.dtype not in (INT8, INT32):
                error(f"unknown dtype '{d.dtype}': tensors are int8 or int32{suggest(d.dtype, (INT8, INT32))}",
                      d.dtype_span)
                ok = False
            for dim in d.dims:
                if dim.value < 1:
                    error(f"a dimension must be a positive integer, got {dim.value}", dim.span)
                    ok = False
            if ok:
                decls[role].append(TensorDecl(d.name, d.dtype, tuple(x.value for x in d.dims), role, d.span))
            valid = valid and ok
    return Signature(tuple(decls["input"]), tuple(decls["output"]), valid)


# -- recursion ------------------------------------------------------------------------------


def _calls(expr: st.Expr):
    """Every call expression inside an expression."""
    if isinstance(expr, st.CallExpr):
        yield expr
        for arg in expr.args:
            yield from _calls(arg.value)
    elif isinstance(expr, st.BinOp):
        yield from _calls(expr.a)
        yield from _calls(expr.b)
    elif isinstance(expr, st.Neg):
        yield from _calls(expr.x)


def _recursive_calls(tree: st.SourceFile, signatures: dict, error: Errors) -> set[int]:
    """Report calls that close a cycle of kernel calls; returns their ids."""
    sites = {k.name: [] for k in tree.kernels}
    for k in tree.kernels:
        for stmt in k.body:
            if isinstance(stmt, st.Assign):
                sites[k.name] += [c for c in _calls(stmt.value) if c.func in signatures and c.func not in BUILTINS]
    recursive = set()
    for k in tree.kernels:
        for call in sites[k.name]:
            path = _path(call.func, k.name, sites)
            if path:
                chain = " -> ".join([k.name, *path])
                error(f"recursive call: {chain} (a kernel cannot call itself, directly or indirectly)", call.name_span)
                recursive.add(id(call))
    return recursive


def _path(start: str, goal: str, sites: dict) -> list[str] | None:
    """The kernels from ``start`` to ``goal`` along calls, or None."""
    previous = {start: None}
    queue = [start]
    for name in queue:
        if name == goal:
            path = [name]
            while previous[path[-1]] is not None:
                path.append(previous[path[-1]])
            return path[::-1]
        for call in sites.get(name, ()):
            if call.func not in previous:
                previous[call.func] = name
                queue.append(call.func)
    return None


# -- built-in functions --------------------------------------------------------------------


@dataclass(frozen=True)
class Builtin:
    """How a built-in function takes its arguments."""

    operands: tuple[str, ...]  # expressions, positional
    options: tuple[str, ...] = ()  # integer constants, by keyword
    positional_options: bool = False  # options may also follow the operands positionally


_POOL = Builtin(("x",), ("size", "stride", "pad"), True)
BUILTINS: dict[str, Builtin] = {
    "matmul": Builtin(("x", "w")),
    "dense": Builtin(("x", "w")),
    "conv2d": Builtin(("x", "w"), ("stride", "pad", "groups")),
    "max_pool": _POOL,
    "sum_pool": _POOL,
    "avg_pool": _POOL,
    "min": Builtin(("a", "b")),
    "max": Builtin(("a", "b")),
    "clip": Builtin(("x", "lo", "hi")),
    "relu": Builtin(("x",)),
    "int8": Builtin(("x",)),
    "int32": Builtin(("x",)),
}
_OPS = {"+": "add", "-": "sub", "*": "mul", "<<": "shl", ">>": "shr"}
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "shl": "<<", "shr": ">>", "min": "min", "max": "max"}
Operand = tuple[Node, st.Arg]


class _Builtins:
    """The rules of the built-in functions (mixed into the kernel checker)."""

    error: Errors

    def expr(self, e: st.Expr) -> Node | None:  # provided by the kernel checker
        raise NotImplementedError

    def builtin(self, e: st.CallExpr) -> Node | None:
        bound = self.bind_args(e, BUILTINS[e.func])
        if bound is None:
            return None
        ops, opts = bound
        f = e.func
        if f in ("matmul", "dense"):
            return self.matmul(e, ops)
        if f == "conv2d":
            return self.conv2d(e, ops, opts)
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

    def tensor_input(self, f: str, operand: Operand, gemm: bool) -> Node | None:
        """The operand if it is a tensor read from DRAM (int8 for GEMM), else None after an error."""
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
                       f"reads its input from DRAM, and '{text}' is {got}", arg.value.span)
        return None

    def matmul(self, e: st.CallExpr, ops: list[Operand]) -> Node | None:
        x, w = self.tensor_input(e.func, ops[0], True), self.tensor_input(e.func, ops[1], True)
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
        if None in (x, w, stride, pad, groups):
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
        oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
        if oh < 1 or ow < 1:
            self.error(f"{head} has no output: the {kh}x{kw} kernel does not fit the {h}x{wd} input with pad={pad} "
                       f"(output would be {oh}x{ow})", e.name_span)
            return None
        return Conv2d((n, oc, oh, ow), INT32, e.span, x, w, stride, pad, groups)

    def pool(self, e: st.CallExpr, ops: list[Operand], opts: dict) -> Node | None:
        f = e.func
        x = self.tensor_input(f, ops[0], False)
        if "size" not in opts:
            self.error(f"{f} needs a window size, as in {f}(x, 2)", e.name_span)
            return None
        size = self.option(opts, "size", 0, 1)
        stride = self.option(opts, "stride", size or 1, 1)
        pad = self.option(opts, "pad", 0, 0, (size or 1) - 1)
        if None in (x, size, stride, pad):
            return None
        text = st.unparse(ops[0][1].value)
        if len(x.shape) != 4:
            self.error(f"{f} needs {text} as [N, C, H, W], got {type_text(x)}", ops[0][1].value.span)
            return None
        n, c, h, w = x.shape
        oh, ow = (h + 2 * pad - size) // stride + 1, (w + 2 * pad - size) // stride + 1
        if oh < 1 or ow < 1:
            self.error(f"{f} has no output: a {size}x{size} window does not fit the {h}x{w} input with pad={pad}",
                       e.name_span)
            return None
        area = size * size
        if f == "avg_pool" and area & (area - 1):
            self.error(f"avg_pool with size={size} divides by {area}, which is not a power of two (avg_pool is "
                       f"sum_pool >> log2(size*size)); use sum_pool and scale explicitly", e.name_span)
            return None
        pad_value = (-128 if x.dtype == INT8 else -(2**31)) if f == "max_pool" else 0
        kind = "max" if f == "max_pool" else "sum"
        node = Pool((n, c, oh, ow), INT32, e.span, kind, x, size, stride, pad, pad_value)
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


def wrap32(value: int) -> int:
    """The int32 value with the low 32 bits of ``value`` (two's complement)."""
    return ((value + 2**31) % 2**32) - 2**31


def fold(op: str, a: int, b: int) -> int:
    """An element-wise op on two int32 constants, with the hardware's wrapping."""
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    if op == "shl":
        return wrap32(a << b)
    if op == "shr":
        return a >> b
    return wrap32({"add": a + b, "sub": a - b, "mul": a * b}[op])


def broadcast(a: tuple[int, ...], b: tuple[int, ...]):
    """``(shape, a_shape, b_shape)`` with both operands aligned to the result's rank, or an error text."""
    note = ""
    if len(a) == 1 and len(b) == 4:
        a, note = (1, a[0], 1, 1), " (a 1-D operand against a 4-D value is per channel: [1, C, 1, 1])"
    elif len(b) == 1 and len(a) == 4:
        b, note = (1, b[0], 1, 1), " (a 1-D operand against a 4-D value is per channel: [1, C, 1, 1])"
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    for i, (p, q) in enumerate(zip(a, b, strict=True)):
        if p != q and 1 not in (p, q):
            return f"dimension {i} is {p} against {q}{note}"
    return tuple(max(p, q) for p, q in zip(a, b, strict=True)), a, b


# -- schedules ---------------------------------------------------------------------------------

TILE_KEYS = ("tile_n", "tile_k", "tile_o", "tile_oc", "tile_ic", "tile_h", "tile_w")
AXES = ("n", "k", "o", "oc", "ic", "h", "w")
SCHEDULE_KEYS = (*TILE_KEYS, "threads", "order")


def check_schedule(block: st.ScheduleBlock | None, expr, error: Errors) -> Schedule:
    """The Schedule of a kernel (``expr`` evaluates a value in the kernel's scope)."""
    if block is None:
        return Schedule()
    tiles: dict[str, int] = {}
    spans: dict[str, SourceSpan] = {}
    order = threads = None
    for s in block.settings:
        if s.key not in SCHEDULE_KEYS:
            error(f"unknown schedule key '{s.key}'{suggest(s.key, SCHEDULE_KEYS)} (keys: {', '.join(SCHEDULE_KEYS)})",
                  s.key_span)
            continue
        if s.key in spans:
            error(f"'{s.key}' is set twice in the schedule", s.key_span)
            continue
        spans[s.key] = s.key_span
        if s.key == "order":
            order = _order(s, error)
            continue
        node = None if isinstance(s.value, tuple) else expr(s.value)
        if isinstance(s.value, tuple) or (node is not None and not isinstance(node, Const)):
            got = "a list of names" if isinstance(s.value, tuple) else type_text(node)
            error(f"{s.key} must be an integer constant, got {got}", s.span)
        elif node is None:
            continue
        elif s.key == "threads":
            if node.value in (1, 2):
                threads = node.value
            else:
                error(f"threads must be 1 or 2 (VTA runs one or two virtual threads), got {node.value}", s.value.span)
        elif node.value < 1:
            error(f"{s.key} must be a positive integer, got {node.value}", s.value.span)
        else:
            tiles[s.key.removeprefix("tile_")] = node.value
    return Schedule(tiles, order, threads, block.span, spans)


def _order(s: st.Setting, error: Errors) -> tuple[str, ...] | None:
    names = s.value if isinstance(s.value, tuple) else (s.value,) if isinstance(s.value, st.Name) else None
    if names is None:
        error("order must be a parenthesised list of axis names, as in order = (n, o, k)", s.span)
        return None
    seen: set[str] = set()
    ok = True
    for n in names:
        if n.name not in AXES:
            error(f"unknown axis '{n.name}' in order{suggest(n.name, AXES)} (axes: {', '.join(AXES)})", n.span)
            ok = False
        elif n.name in seen:
            error(f"axis '{n.name}' appears twice in order", n.span)
            ok = False
        seen.add(n.name)
    return tuple(n.name for n in names) if ok else None


# -- kernel bodies ----------------------------------------------------------------------------


class _KernelChecker(_Builtins):
    """Checks one kernel body: statements in order, expressions into nodes."""

    def __init__(self, k: st.KernelDef, signatures: dict[str, Signature], recursive: set[int], error: Errors):
        self.k = k
        self.signatures = signatures
        self.recursive = recursive
        self.error = error
        sig = _signature(k, Errors())  # this kernel's own decls (errors were reported once already)
        self.inputs = {d.name: d for d in sig.inputs}
        self.outputs = {d.name: d for d in sig.outputs}
        self.params = {d.name for d in k.params}
        self.results = {d.name for d in k.results}
        self.scope: dict[str, Node | None] = {}  # assigned names (None: its value had an error)
        self.assigned_at: dict[str, SourceSpan] = {}
        self.later = {t.name: t.span for s in k.body if isinstance(s, st.Assign) for t in s.targets}
        self.assigns: list[Assign] = []

    def run(self) -> Kernel:
        schedule_blocks = [s for s in self.k.body if isinstance(s, st.ScheduleBlock)]
        for block in schedule_blocks[1:]:
            self.error("a kernel has at most one schedule block", block.span)
        if schedule_blocks and self.k.body[-1] is not schedule_blocks[-1]:
            self.error("the schedule block must be the last item of the kernel body", schedule_blocks[0].span)
        for stmt in self.k.body:
            if isinstance(stmt, st.Assign):
                self.statement(stmt)
        for name, decl in self.outputs.items():
            if name not in self.assigned_at:
                self.error(f"result '{name}' is never assigned", decl.span)
        schedule = check_schedule(schedule_blocks[0] if schedule_blocks else None, self.expr, self.error)
        return Kernel(self.k.name, tuple(self.inputs.values()), tuple(self.outputs.values()),
                      tuple(self.assigns), schedule, self.k.name_span)

    # -- statements
    def statement(self, stmt: st.Assign) -> None:
        if len(stmt.targets) == 1:
            self.bind(stmt.targets[0], self.expr(stmt.value), stmt)
            return
        value = stmt.value
        sig = self.signatures.get(value.func) if isinstance(value, st.CallExpr) else None
        nodes = None
        if sig is None or value.func in BUILTINS:
            self.error(f"only a call of a kernel with {len(stmt.targets)} results can be unpacked into "
                       f"{len(stmt.targets)} names", value.span)
        elif sig.valid and len(sig.outputs) != len(stmt.targets):
            self.error(f"kernel '{value.func}' has {plural(len(sig.outputs), 'result')}, but {len(stmt.targets)} names "
                       "are assigned", value.span)
        else:
            nodes = self.kernel_call(value, sig)
        for i, target in enumerate(stmt.targets):
            self.bind(target, nodes[i] if nodes else None, stmt)

    def bind(self, target: st.Target, node: Node | None, stmt: st.Assign) -> None:
        name = target.name
        if name in self.params:
            self.error(f"cannot assign to '{name}': it is an input of kernel '{self.k.name}'", target.span)
            return
        if name in self.assigned_at:
            what = "result" if name in self.results else "local"
            first = self.assigned_at[name].line
            self.error(f"{what} '{name}' is assigned twice (first at line {first}); each name is assigned once",
                       target.span)
            return
        self.assigned_at[name] = target.span
        self.scope[name] = node
        decl = self.outputs.get(name)
        if decl is None or node is None:
            return
        if node.shape != decl.shape:
            got = type_text(node) + (" (shape [])" if isinstance(node, Const) else "")
            self.error(f"shape mismatch: result '{name}' is declared {decl.dtype}[{', '.join(map(str, decl.shape))}] "
                       f"but its value is {got}", stmt.value.span)
            return
        self.assigns.append(Assign(decl, node, stmt.span))

    # -- expressions
    def expr(self, e: st.Expr) -> Node | None:
        """The node of an expression, or None after reporting its errors."""
        if isinstance(e, st.IntLit):
            return self.constant(e.value, e.span)
        if isinstance(e, st.Neg):
            if isinstance(e.x, st.IntLit):
                return self.constant(-e.x.value, e.span)
            x = self.expr(e.x)
            return None if x is None else self.binary("sub", Const((), INT32, e.span, 0), x, e.span, e.span)
        if isinstance(e, st.Name):
            return self.name(e)
        if isinstance(e, st.BinOp):
            a, b = self.expr(e.a), self.expr(e.b)
            return self.binary(_OPS[e.op], a, b, e.span, e.op_span, e.b.span)
        return self.call(e)

    def constant(self, value: int, span: SourceSpan) -> Const | None:
        if not -(2**31) <= value < 2**31:
            self.error(f"integer {value} does not fit in int32 (-2147483648..2147483647)", span)
            return None
        return Const((), INT32, span, value)

    def name(self, e: st.Name) -> Node | None:
        if e.name in self.inputs:
            decl = self.inputs[e.name]
            return TensorRef(decl.shape, decl.dtype, e.span, decl)
        if e.name in self.scope:
            return self.scope[e.name]
        if e.name in self.params or (e.name in self.results and e.name not in self.outputs):
            return None  # a parameter or result whose declaration had an error
        if e.name in self.later or e.name in self.results:
            what = "result" if e.name in self.results else "local"
            where = f" (it is assigned at line {self.later[e.name].line})" if e.name in self.later else ""
            self.error(f"{what} '{e.name}' is used before it is assigned{where}", e.span)
        elif e.name in BUILTINS or e.name in self.signatures:
            self.error(f"'{e.name}' is a function: call it as {e.name}(...)", e.span)
        else:
            names = (*self.inputs, *self.scope, *self.outputs, *self.later)
            self.error(f"unknown name '{e.name}'{suggest(e.name, names)}", e.span)
        return None

    def call(self, e: st.CallExpr) -> Node | None:
        if e.func in BUILTINS:
            return self.builtin(e)
        sig = self.signatures.get(e.func)
        if sig is None:
            if e.func in self.params or e.func in self.results or e.func in self.later:
                self.error(f"'{e.func}' is a tensor, not a function", e.name_span)
            else:
                known = (*BUILTINS, *self.signatures)
                self.error(f"unknown function '{e.func}'{suggest(e.func, known)}", e.name_span)
            for arg in e.args:
                self.expr(arg.value)
            return None
        nodes = self.kernel_call(e, sig)
        if nodes is None:
            return None
        if len(nodes) > 1:
            names = ", ".join(d.name for d in sig.outputs)
            self.error(f"kernel '{e.func}' has {len(nodes)} results: unpack them, as in `{names} = {e.func}(...)`",
                       e.name_span)
            return None
        return nodes[0]

    def kernel_call(self, e: st.CallExpr, sig: Signature) -> list[Call] | None:
        """One Call node per result of the callee, or None after reporting errors."""
        args = [self.expr(a.value) for a in e.args]
        ok = sig.valid and id(e) not in self.recursive
        for arg in e.args:
            if arg.name is not None:
                self.error(f"kernel calls take positional arguments only ('{arg.name}=' given)", arg.span)
                ok = False
        if ok and len(args) != len(sig.inputs):
            names = ", ".join(d.name for d in sig.inputs)
            self.error(f"kernel '{e.func}' takes {plural(len(sig.inputs), 'argument')} ({names}), got {len(args)}",
                       e.name_span)
            ok = False
        if not ok:
            return None
        for i, (arg, node, param) in enumerate(zip(e.args, args, sig.inputs, strict=True)):
            if node is None or (node.dtype == param.dtype and node.shape == param.shape):
                continue
            want = f"{param.dtype}[{', '.join(map(str, param.shape))}]"
            hint = ""
            if node.dtype != param.dtype and node.shape == param.shape and not isinstance(node, Const):
                hint = f"; {param.dtype}(...) converts (int8 keeps the low 8 bits)"
            self.error(f"argument {i + 1} of '{e.func}' ({param.name}) must be {want}, got {type_text(node)}{hint}",
                       arg.span)
            ok = False
        if not ok or any(node is None for node in args):
            return None
        return [Call(d.shape, d.dtype, e.span, e.func, tuple(args), i) for i, d in enumerate(sig.outputs)]

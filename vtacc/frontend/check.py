"""Checking a parsed kernel source into the checked program of :mod:`vtacc.frontend.checked`.

The checker resolves names, computes every node's shape and dtype, applies
the rules of the built-in functions and of kernel calls, folds constants, and
reads the schedule blocks. It never stops at the first problem: every error
of the file is collected and, sorted by position, raised as one
:class:`CompileErrors`. Syntax errors come from :mod:`vtacc.frontend.parse`.

This module checks kernel bodies; the other parts live in :mod:`vtacc.frontend.check_support`
(errors and helpers), :mod:`vtacc.frontend.check_calls` (signatures and recursion),
:mod:`vtacc.frontend.check_builtins` (built-in functions) and :mod:`vtacc.frontend.check_schedule`
(schedule blocks). Their public names are re-exported here.
"""

from __future__ import annotations

from pathlib import Path

from vtasm.errors import CompileError, FormatError, SourceSpan
from vtasm.fileio import read_text

from . import syntax_tree as st
from .check_builtins import BUILTINS, OPS, Builtin, BuiltinRules
from .check_calls import (
    Signature,
    kernel_signature,
    kernel_signatures,
    needed_kernels,
    recursive_calls,
    unknown_kernel,
)
from .check_schedule import AXES, SCHEDULE_KEYS, TILE_KEYS, check_schedule
from .check_support import CompileErrors, Errors, broadcast, fold, plural, suggest, type_text, wrap32
from .checked import INT32, Assign, Call, CheckedFile, Const, Kernel, Node, TensorRef
from .parse import parse

__all__ = [
    "AXES",
    "BUILTINS",
    "SCHEDULE_KEYS",
    "TILE_KEYS",
    "Builtin",
    "CompileErrors",
    "Errors",
    "Signature",
    "broadcast",
    "check",
    "check_schedule",
    "check_source",
    "fold",
    "load_kernels",
    "plural",
    "suggest",
    "type_text",
    "unknown_kernel",
    "wrap32",
]


def load_kernels(path: str | Path, entry: str | None = None) -> CheckedFile:
    """Read, parse and check a .vk file (only ``entry`` and what it calls, when given)."""
    try:
        source = read_text(path, "kernel source")  # a FIFO or device refused; a byte-order mark dropped
    except FormatError as exc:
        raise CompileError(exc.message) from None
    return check_source(source, str(path), entry)


def check_source(source: str, path: str, entry: str | None = None) -> CheckedFile:
    """Parse and check kernel source text (``path`` is used in messages)."""
    return check(parse(source, path), source, path, entry)


def check(tree: st.SourceFile, source: str, path: str, entry: str | None = None) -> CheckedFile:
    """Check a parsed file; raises :class:`CompileErrors` listing every error.

    With ``entry``, only that kernel and the kernels it calls (directly or
    not) are checked and kept: an error in a kernel it does not need is not
    its problem. The whole file is still parsed.
    """
    if entry is not None:
        tree = needed_kernels(tree, entry)
    errors = Errors()
    signatures = kernel_signatures(tree, errors)
    recursive = recursive_calls(tree, signatures, errors)
    kernels = tuple(_KernelChecker(k, signatures, recursive, errors).run() for k in tree.kernels)
    errors.raise_if_any()
    return CheckedFile(path, source, kernels)


class _KernelChecker(BuiltinRules):
    """Checks one kernel body: statements in order, expressions into nodes."""

    def __init__(self, k: st.KernelDef, signatures: dict[str, Signature], recursive: set[int], error: Errors):
        self.k = k
        self.signatures = signatures
        self.recursive = recursive
        self.error = error
        sig = kernel_signature(k, Errors())  # this kernel's own decls (errors were reported once already)
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
            return self.binary(OPS[e.op], a, b, e.span, e.op_span, e.b.span)
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

"""Kernel signatures and the call graph: headers are read first, recursion is rejected.

:func:`kernel_signatures` reads every kernel's declared inputs and outputs
(reporting duplicate kernels and bad declarations); :func:`recursive_calls`
reports every kernel call that closes a cycle of calls; :func:`needed_kernels`
keeps the kernels one entry kernel needs, so that only those are checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtasm.errors import CompileError, SourceSpan

from . import syntax_tree as st
from .check_builtins import BUILTINS
from .check_support import Errors, suggest
from .checked import INT8, INT32, TensorDecl


@dataclass(frozen=True)
class Signature:
    """A kernel's declared inputs and outputs, as callers see them."""

    inputs: tuple[TensorDecl, ...]
    outputs: tuple[TensorDecl, ...]
    valid: bool  # False when a declaration had an error (calls are then not checked)


def kernel_signatures(tree: st.SourceFile, error: Errors) -> dict[str, Signature]:
    """The signature of every kernel of the file, by name (a name defined twice keeps its first)."""
    signatures: dict[str, Signature] = {}
    first_line: dict[str, int] = {}
    for k in tree.kernels:
        if k.name in BUILTINS:
            error(f"kernel '{k.name}' has the name of a built-in function", k.name_span)
        if k.name in first_line:
            error(f"kernel '{k.name}' is defined twice (first at line {first_line[k.name]})", k.name_span)
            continue
        first_line[k.name] = k.name_span.line
        signatures[k.name] = kernel_signature(k, error)
    return signatures


def kernel_signature(k: st.KernelDef, error: Errors) -> Signature:
    """The declared inputs and outputs of one kernel; declarations with errors are left out."""
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


def unknown_kernel(path: str, name: str, names) -> CompileError:
    """The error for an entry kernel (``--kernel NAME``) the file does not define."""
    return CompileError(f"{path}: no kernel named {name} (kernels: {', '.join(names)})")


def needed_kernels(tree: st.SourceFile, entry: str) -> st.SourceFile:
    """The file cut down to kernel ``entry`` and the kernels it calls, directly or not, in source order.

    Every definition of a needed name is kept, so a kernel defined twice is
    still reported; a kernel nothing needed calls is left out, errors and all.
    """
    by_name: dict[str, list[st.KernelDef]] = {}
    for k in tree.kernels:
        by_name.setdefault(k.name, []).append(k)
    if entry not in by_name:
        raise unknown_kernel(tree.path, entry, by_name)
    needed = [entry]
    for name in needed:
        for k in by_name[name]:
            for stmt in k.body:
                if isinstance(stmt, st.Assign):
                    needed += [c.func for c in _calls(stmt.value) if c.func in by_name and c.func not in needed]
    return st.SourceFile(tree.path, tuple(k for k in tree.kernels if k.name in needed))


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


def recursive_calls(tree: st.SourceFile, signatures: dict, error: Errors) -> set[int]:
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

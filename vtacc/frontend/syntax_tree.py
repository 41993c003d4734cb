"""The parsed form of a kernel source (.vk): frozen dataclasses, each with its span.

:mod:`vtacc.frontend.parse` builds these from the Lark tree; :mod:`vtacc.frontend.check`
resolves names and computes shapes. Nothing here knows what a name means:
dtypes, built-in functions, keyword arguments and schedule keys are plain
strings until checking.

Spans cover the node's text on its first line; operator and name tokens have
their own spans (``op_span``, ``name_span``) so errors can point at them.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtasm.errors import SourceSpan

# -- expressions -------------------------------------------------------------------


@dataclass(frozen=True)
class IntLit:
    """An integer literal (decimal or 0x hex), always non-negative."""

    value: int
    span: SourceSpan


@dataclass(frozen=True)
class Name:
    """A reference to a parameter, result or local."""

    name: str
    span: SourceSpan


@dataclass(frozen=True)
class BinOp:
    """``a OP b`` with OP one of ``<< >> + - *``."""

    op: str
    a: Expr
    b: Expr
    span: SourceSpan
    op_span: SourceSpan


@dataclass(frozen=True)
class Neg:
    """Unary minus."""

    x: Expr
    span: SourceSpan


@dataclass(frozen=True)
class Arg:
    """One call argument: positional (``name`` None) or ``name=value``."""

    name: str | None
    value: Expr
    span: SourceSpan


@dataclass(frozen=True)
class CallExpr:
    """``func(args)``: a built-in function or a kernel of the file."""

    func: str
    args: tuple[Arg, ...]
    span: SourceSpan
    name_span: SourceSpan


Expr = IntLit | Name | BinOp | Neg | CallExpr

_PRECEDENCE = {"<<": 1, ">>": 1, "+": 2, "-": 2, "*": 3}


def unparse(expr: Expr, parent: int = 0) -> str:
    """Source-like text of an expression (minimal parentheses), for messages."""
    if isinstance(expr, IntLit):
        return str(expr.value)
    if isinstance(expr, Name):
        return expr.name
    if isinstance(expr, Neg):
        return "-" + unparse(expr.x, 4)
    if isinstance(expr, CallExpr):
        args = ", ".join(unparse(a.value) if a.name is None else f"{a.name}={unparse(a.value)}" for a in expr.args)
        return f"{expr.func}({args})"
    level = _PRECEDENCE[expr.op]
    text = f"{unparse(expr.a, level)} {expr.op} {unparse(expr.b, level + 1)}"
    return f"({text})" if level < parent else text


# -- declarations, statements, kernels ----------------------------------------------


@dataclass(frozen=True)
class Dim:
    value: int
    span: SourceSpan


@dataclass(frozen=True)
class Decl:
    """``name: dtype[d0, d1, ...]``, a parameter or a result."""

    name: str
    dtype: str
    dims: tuple[Dim, ...]
    span: SourceSpan
    name_span: SourceSpan
    dtype_span: SourceSpan


@dataclass(frozen=True)
class Target:
    """A name on the left of ``=``."""

    name: str
    span: SourceSpan


@dataclass(frozen=True)
class Assign:
    """``a = expr`` or ``a, b = kernel(...)``."""

    targets: tuple[Target, ...]
    value: Expr
    span: SourceSpan


@dataclass(frozen=True)
class Setting:
    """``key = value`` in a schedule block; ``value`` is an expression or a tuple of names."""

    key: str
    value: Expr | tuple[Name, ...]
    span: SourceSpan
    key_span: SourceSpan


@dataclass(frozen=True)
class ScheduleBlock:
    settings: tuple[Setting, ...]
    span: SourceSpan  # the word "schedule"


Statement = Assign | ScheduleBlock


@dataclass(frozen=True)
class KernelDef:
    name: str
    params: tuple[Decl, ...]
    results: tuple[Decl, ...]
    body: tuple[Statement, ...]
    span: SourceSpan
    name_span: SourceSpan


@dataclass(frozen=True)
class SourceFile:
    """Every kernel of one file, in source order."""

    path: str
    kernels: tuple[KernelDef, ...]

"""The parsed form of an assembly file: one dataclass per statement, each with its span.

:mod:`vtasm.asm.parse` builds these from the Lark tree; the assembler passes
read them. Nothing here knows what a mnemonic or a directive means.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtasm.errors import SourceSpan

# -- expressions ---------------------------------------------------------------


@dataclass(frozen=True)
class Num:
    value: int
    span: SourceSpan


@dataclass(frozen=True)
class Sym:
    name: str
    span: SourceSpan


@dataclass(frozen=True)
class BinOp:
    op: str  # one of + - * /
    left: Expr
    right: Expr
    span: SourceSpan


@dataclass(frozen=True)
class Neg:
    operand: Expr
    span: SourceSpan


Expr = Num | Sym | BinOp | Neg

# -- operand values --------------------------------------------------------------


@dataclass(frozen=True)
class Tuple:
    """``(a, b, ...)``"""

    items: tuple[Expr, ...]
    span: SourceSpan


@dataclass(frozen=True)
class Range:
    """``lo:hi``"""

    lo: Expr
    hi: Expr
    span: SourceSpan


@dataclass(frozen=True)
class Seq:
    """``a, b, ...`` without parentheses (queue lists, positional fields)."""

    items: tuple[Expr, ...]
    span: SourceSpan


Value = Num | Sym | BinOp | Neg | Tuple | Range | Seq


@dataclass(frozen=True)
class Str:
    value: str
    span: SourceSpan


@dataclass(frozen=True)
class Name:
    """A declared name; ``quoted`` when written as a string (declares no symbol)."""

    value: str
    span: SourceSpan
    quoted: bool = False


@dataclass(frozen=True)
class Operand:
    """``key=value``, or (key None) a bare word or comma list."""

    key: str | None
    value: Value
    span: SourceSpan
    key_span: SourceSpan | None = None


@dataclass(frozen=True)
class KeyValue:
    """One ``KEY=VALUE`` of .config / .layout; value is an int, str, float, Expr..."""

    key: str
    value: object
    span: SourceSpan


# -- statements --------------------------------------------------------------------


@dataclass(frozen=True)
class Label:
    name: Name
    span: SourceSpan


@dataclass(frozen=True)
class Insn:
    """An instruction or micro-op line: mnemonic and operands."""

    mnemonic: str
    operands: tuple[Operand, ...]
    span: SourceSpan
    mnemonic_span: SourceSpan


@dataclass(frozen=True)
class Directive:
    """A directive: its name (with the dot), positional arguments and options.

    ``args`` holds Expr / Str / Name / tuples of Expr / KeyValue in the order
    written; ``options`` maps ``@``, ``align``, ``file``, ``from`` to (value, span).
    """

    name: str
    args: tuple
    span: SourceSpan
    options: tuple[tuple[str, object, SourceSpan], ...] = ()


Statement = Label | Insn | Directive

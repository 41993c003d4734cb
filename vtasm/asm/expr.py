"""Symbols and expression evaluation for the assembler.

One namespace holds the built-in constants, ``.equ`` names (evaluated when
first used, so they may refer to anything defined anywhere in the file),
micro-op labels (indices) and segment names (byte addresses, known once the
segments are placed).
"""

from __future__ import annotations

from dataclasses import dataclass

from vtasm.errors import AsmError, SourceSpan

from . import ast
from .parse import suggest
from .syntax import BUILTIN_NAMES, is_symbol_name

BUILTIN, EQU, LABEL, SEGMENT = "built-in constant", "constant", "micro-op label", "segment"


@dataclass
class _Symbol:
    kind: str
    value: int | None = None
    expr: ast.Expr | None = None
    span: SourceSpan | None = None


class Symbols:
    """The symbol table of one assembly, and the evaluator of its expressions."""

    def __init__(self, builtins: dict[str, int]):
        self._table = {name: _Symbol(BUILTIN, value) for name, value in builtins.items()}
        self._resolving: set[str] = set()

    # -- definitions -----------------------------------------------------------------
    def define(self, name: ast.Name, kind: str, value: int | None = None, expr: ast.Expr | None = None) -> None:
        """Declare a symbol; a quoted name declares nothing (it is not referable)."""
        if name.quoted:
            return
        if name.value in BUILTIN_NAMES:
            raise AsmError(f"'{name.value}' is a built-in constant and cannot be redefined", name.span)
        if not is_symbol_name(name.value):
            raise AsmError(f"'{name.value}' is not a valid symbol name (write it in quotes)", name.span)
        old = self._table.get(name.value)
        if old is not None:
            where = f" (line {old.span.line})" if old.span else ""
            raise AsmError(f"symbol '{name.value}' is already defined as a {old.kind}{where}", name.span)
        self._table[name.value] = _Symbol(kind, value, expr, name.span)

    def place(self, name: str, value: int) -> None:
        """Give a declared segment its address."""
        sym = self._table.get(name)
        if sym is not None and sym.kind == SEGMENT:
            sym.value = value

    def kind(self, name: str) -> str | None:
        sym = self._table.get(name)
        return sym.kind if sym else None

    # -- evaluation --------------------------------------------------------------------
    def lookup(self, ref: ast.Sym) -> int:
        sym = self._table.get(ref.name)
        if sym is None:
            raise AsmError(f"undefined symbol '{ref.name}'{suggest(ref.name, self._table)}", ref.span)
        if sym.value is not None:
            return sym.value
        if sym.kind == SEGMENT:
            raise AsmError(
                f"the address of segment '{ref.name}' is not known here "
                "(sizes, alignments and addresses of segments are needed to place them)",
                ref.span,
            )
        if ref.name in self._resolving:
            raise AsmError(f"constant '{ref.name}' is defined in terms of itself", ref.span)
        self._resolving.add(ref.name)
        try:
            sym.value = self.eval(sym.expr)
        finally:
            self._resolving.discard(ref.name)
        return sym.value

    def eval(self, expr: ast.Expr) -> int:
        """The integer value of an expression (``/`` divides rounding down)."""
        if isinstance(expr, ast.Num):
            return expr.value
        if isinstance(expr, ast.Sym):
            return self.lookup(expr)
        if isinstance(expr, ast.Neg):
            return -self.eval(expr.operand)
        if isinstance(expr, ast.BinOp):
            left, right = self.eval(expr.left), self.eval(expr.right)
            if expr.op == "+":
                return left + right
            if expr.op == "-":
                return left - right
            if expr.op == "*":
                return left * right
            if right == 0:
                raise AsmError("division by zero", expr.span)
            return left // right
        raise AsmError("expected a number", getattr(expr, "span", None))

    def uop_index(self, expr: ast.Expr) -> int | None:
        """The micro-op index if ``expr`` is a micro-op expression, else None.

        A micro-op expression has exactly one symbol that is a micro-op label,
        added (never subtracted, multiplied or divided) to plain numbers.
        """
        labels = [s for s in _symbols(expr) if self.kind(s.name) == LABEL]
        if len(labels) != 1 or not _added(expr, labels[0]):
            return None
        return self.eval(expr)


def _symbols(expr: ast.Expr) -> list[ast.Sym]:
    if isinstance(expr, ast.Sym):
        return [expr]
    if isinstance(expr, ast.Neg):
        return _symbols(expr.operand)
    if isinstance(expr, ast.BinOp):
        return _symbols(expr.left) + _symbols(expr.right)
    return []


def _added(expr: ast.Expr, target: ast.Sym) -> bool:
    """Whether ``target`` enters ``expr`` with coefficient +1 through + and - only."""
    if expr is target:
        return True
    if isinstance(expr, ast.BinOp) and expr.op in "+-":
        if any(s is target for s in _symbols(expr.left)):
            return _added(expr.left, target)
        return expr.op == "+" and _added(expr.right, target)
    return False

"""What the checker's parts share: the error collection and small helpers.

:class:`Errors` collects every error of a file and raises them, sorted by
position, as one :class:`CompileErrors`. The helpers word messages
(:func:`suggest`, :func:`plural`, :func:`type_text`) and compute constants and
shapes the way the hardware does (:func:`wrap32`, :func:`fold`, :func:`broadcast`).
"""

from __future__ import annotations

from vtasm.errors import CompileError, SourceSpan

from .checked import Const, Node


class CompileErrors(CompileError):
    """Every error of one source file, sorted by position; ``render()`` shows them all."""

    def __init__(self, errors: list[CompileError]):
        super().__init__(errors[0].message, errors[0].span)
        self.errors = tuple(errors)

    def render(self) -> str:
        return "\n".join(error.render() for error in self.errors)

    def report(self) -> str:
        """Every error as the command line prints it, each starting with ``error: ``."""
        return "\n".join(error.report() for error in self.errors)


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
    import difflib  # only a misspelt name needs it (a compile that succeeds never does)

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

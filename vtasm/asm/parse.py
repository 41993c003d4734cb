"""Parsing assembly text into the statements of :mod:`vtasm.asm.ast`.

The grammar (``grammar.lark``) is built once at import. Lark's errors are
turned into :class:`AsmError` here, with the position and a readable list of
what was expected.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError
from lark.lexer import PatternStr

from vtasm.cache import grammar_cache
from vtasm.errors import AsmError, SourceSpan

from . import ast

_PARSER = Lark(
    Path(__file__).with_name("grammar.lark").read_text(),
    parser="lalr",
    propagate_positions=True,
    maybe_placeholders=True,
    cache=grammar_cache("assembly"),
)

#: Every directive the grammar knows, with its dot (".text", ".data", ...).
DIRECTIVES = tuple(
    sorted(
        t.pattern.value
        for t in _PARSER.terminals
        if isinstance(t.pattern, PatternStr) and t.pattern.value.startswith(".")
    )
)

_TERMINAL_WORDS = {
    "NAME": "a name",
    "NUMBER": "a number",
    "FLOAT": "a number",
    "STRING": "a string",
    "_NL": "end of line",
    "$END": "end of input",
}
_INT_RE = re.compile(r"0x[0-9a-f]+(_[0-9a-f]+)*|0b[01]+(_[01]+)*|[0-9]+(_[0-9]+)*")
_DIRECTIVE_AT_START = re.compile(r'^(\s*(?:(?:[A-Za-z_][\w.]*|"[^"]*")\s*:\s*)?)(\.[A-Za-z_]\w*)')


def parse(text: str, filename: str = "<input>") -> list[ast.Statement]:
    """Parse assembly text into statements; syntax errors raise AsmError."""
    if not text.endswith("\n"):
        text += "\n"
    lines = text.split("\n")
    try:
        tree = _PARSER.parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, lines, filename) from None
    try:
        return _ToAst(filename, lines).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, AsmError):
            raise exc.orig_exc from None
        raise


def make_span(filename: str, lines: list[str], line: int, column: int, length: int = 1) -> SourceSpan:
    """A span with the source line attached (for the caret display)."""
    source = lines[line - 1] if 0 < line <= len(lines) else None
    return SourceSpan(filename, line, column, source, max(1, length))


def parse_int(text: str) -> int | None:
    """The value of an integer literal (decimal, 0x, 0b, with ``_``), or None."""
    if text.isdigit():
        return int(text)
    lowered = text.lower()
    if not _INT_RE.fullmatch(lowered):
        return None
    digits = lowered.replace("_", "")
    if digits.startswith("0x"):
        return int(digits[2:], 16)
    if digits.startswith("0b"):
        return int(digits[2:], 2)
    return int(digits, 10)


# -- syntax errors -----------------------------------------------------------------


def _describe_terminal(name: str) -> str:
    if name in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[name]
    try:
        pattern = _PARSER.get_terminal(name).pattern
    except KeyError:
        return name
    return f"'{pattern.value}'" if isinstance(pattern, PatternStr) else name.lower()


def _expected(names: set[str] | frozenset[str] | None) -> str:
    words = sorted({_describe_terminal(n) for n in names or ()})
    if not words:
        return ""
    if len(words) > 8:
        words = words[:8] + ["..."]
    return "; expected " + (words[0] if len(words) == 1 else "one of " + ", ".join(words))


def _syntax_error(exc: UnexpectedInput, lines: list[str], filename: str) -> AsmError:
    line = getattr(exc, "line", 1) or 1
    column = getattr(exc, "column", 1) or 1
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    unknown = _DIRECTIVE_AT_START.match(source)
    if unknown and unknown.group(2) not in DIRECTIVES:
        word = unknown.group(2)
        span = make_span(filename, lines, line, len(unknown.group(1)) + 1, len(word))
        return AsmError(f"unknown directive '{word}'{suggest(word, DIRECTIVES)}", span)
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        if tok.type == "_NL":
            what = "end of line"
        elif tok.type == "$END":
            what = "end of input"
        else:
            what = f"'{tok.value}'"
        length = len(str(tok.value)) if tok.type not in ("_NL", "$END") else 1
        message = f"unexpected {what}{_expected(exc.accepts or exc.expected)}"
        return AsmError(message, make_span(filename, lines, line, column, length))
    if isinstance(exc, UnexpectedCharacters):
        if exc.char == '"':
            return AsmError("unterminated string", make_span(filename, lines, line, column))
        message = f"unexpected character {exc.char!r}{_expected(exc.allowed)}"
        return AsmError(message, make_span(filename, lines, line, column))
    return AsmError(f"syntax error: {exc}", make_span(filename, lines, line, column))


def suggest(word: str, candidates) -> str:
    """``"; did you mean 'x'?"`` for the closest candidate, or an empty string."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


# -- tree to dataclasses ----------------------------------------------------------------


@v_args(meta=True)
class _ToAst(Transformer):
    """Turns the Lark tree into asm_ast statements (each node with its span)."""

    def __init__(self, filename: str, lines: list[str]):
        super().__init__()
        self.filename = filename
        self.lines = lines

    # -- spans
    def _span(self, meta) -> SourceSpan:
        length = meta.end_column - meta.column if meta.end_line == meta.line else 1
        return make_span(self.filename, self.lines, meta.line, meta.column, length)

    def _tok_span(self, tok: Token) -> SourceSpan:
        return make_span(self.filename, self.lines, tok.line, tok.column, len(tok.value))

    def _str(self, tok: Token) -> ast.Str:
        span = self._tok_span(tok)
        try:
            value = json.loads(tok.value)
        except ValueError:
            raise AsmError("invalid escape in string (strings use JSON escapes)", span) from None
        return ast.Str(value, span)

    def _name(self, tok: Token) -> ast.Name:
        if tok.type == "STRING":
            s = self._str(tok)
            return ast.Name(s.value, s.span, quoted=True)
        return ast.Name(str(tok), self._tok_span(tok))

    # -- structure
    def start(self, meta, lines):
        return [stmt for line in lines for stmt in line]

    def line(self, meta, items):
        return [item for item in items if item is not None]

    def label(self, meta, children):
        return ast.Label(self._name(children[0]), self._span(meta))

    def insn(self, meta, children):
        tok, *operands = children
        return ast.Insn(str(tok), tuple(operands), self._span(meta), self._tok_span(tok))

    def keyval(self, meta, children):
        tok, value = children
        return ast.Operand(str(tok), value, self._span(meta), self._tok_span(tok))

    def bare(self, meta, items):
        value = items[0] if len(items) == 1 else ast.Seq(tuple(items), self._span(meta))
        return ast.Operand(None, value, self._span(meta))

    def v_expr(self, meta, children):
        return children[0]

    def v_range(self, meta, children):
        return ast.Range(children[0], children[1], self._span(meta))

    def v_tuple(self, meta, children):
        return ast.Tuple(tuple(children), self._span(meta))

    def v_list(self, meta, children):
        return ast.Seq(tuple(children), self._span(meta))

    def exprs(self, meta, children):
        return tuple(children)

    # -- expressions
    def num(self, meta, children):
        tok = children[0]
        value = parse_int(tok.value)
        if value is None:
            raise AsmError(f"invalid number '{tok.value}'", self._tok_span(tok))
        return ast.Num(value, self._tok_span(tok))

    def sym(self, meta, children):
        return ast.Sym(str(children[0]), self._tok_span(children[0]))

    def _binop(op):  # noqa: N805 - a helper run at class creation
        def method(self, meta, children):
            return ast.BinOp(op, children[0], children[1], self._span(meta))

        return method

    add, sub, mul, div = _binop("+"), _binop("-"), _binop("*"), _binop("/")

    def neg(self, meta, children):
        return ast.Neg(children[0], self._span(meta))

    # -- directive pieces
    def dname(self, meta, children):
        return self._name(children[0])

    def _option(key):  # noqa: N805
        def method(self, meta, children):
            value = children[0]
            if isinstance(value, Token):
                value = self._str(value)
            return (key, value, self._span(meta))

        return method

    opt_at, opt_align, opt_file = _option("@"), _option("align"), _option("file")
    opt_from, opt_repeat = _option("from"), _option("repeat")

    def opt_view(self, meta, children):
        return ("view", children[0], self._span(meta))

    def opt_groups(self, meta, children):
        return ("groups", tuple(children), self._span(meta))

    def opt_patches(self, meta, children):
        return ("patches", tuple(children), self._span(meta))

    def kv(self, meta, children):
        key, value = children
        key_name = self._name(key).value
        if isinstance(value, Token):
            value = self._str(value).value if value.type == "STRING" else float(value)
        return ast.KeyValue(key_name, value, self._span(meta))

    def negfloat(self, meta, children):
        return -float(children[0])

    # -- directives
    def _directive(self, name: str, meta, children) -> ast.Directive:
        args, options = [], []
        for child in children:
            if isinstance(child, tuple) and len(child) == 3 and isinstance(child[0], str):
                options.append(child)
            elif isinstance(child, Token):
                args.append(self._str(child) if child.type == "STRING" else self._name(child))
            else:
                args.append(child)
        return ast.Directive(name, tuple(args), self._span(meta), tuple(options))

    def __default__(self, data, children, meta):
        if isinstance(data, str) and data.startswith("d_"):
            name = "." + data[2:].removesuffix("_word")
            return self._directive(name, meta, children)
        return super().__default__(data, children, meta)

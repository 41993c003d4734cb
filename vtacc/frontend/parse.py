"""Parsing kernel sources (.vk) into the dataclasses of :mod:`vtacc.frontend.syntax_tree`.

The grammar (``grammar.lark``) is built once at import. A small post-lexer
drops newlines inside parentheses and brackets, so expressions and parameter
lists may span lines. Lark's errors become :class:`CompileError` here, with the
position and a readable list of what was expected.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from vtasm.cache import grammar_cache
from vtasm.errors import CompileError, SourceSpan

from . import syntax_tree as st


class _DropNewlinesInBrackets:
    """Post-lexer: a newline inside ``( )`` or ``[ ]`` is white space."""

    always_accept = ("_NL",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        depth = 0
        for tok in stream:
            if tok.type == "_NL":
                if depth > 0:
                    continue
            elif tok.value in ("(", "["):
                depth += 1
            elif tok.value in (")", "]"):
                depth = max(0, depth - 1)
            yield tok


_PARSER = Lark(
    Path(__file__).with_name("grammar.lark").read_text(),
    parser="lalr",
    propagate_positions=True,
    maybe_placeholders=True,
    cache=grammar_cache("kernel"),
    postlex=_DropNewlinesInBrackets(),
)

_EXPRESSION_START = {"NAME", "INT", "LPAR", "MINUS"}
_OPERATORS = {"SHL", "SHR", "PLUS", "MINUS", "STAR"}
_WORDS = {"NAME": "a name", "INT": "an integer", "_NL": "end of line", "$END": "end of input"}


def parse(source: str, path: str) -> st.SourceFile:
    """Parse a kernel source into a :class:`SourceFile`; a syntax error raises CompileError."""
    lines = source.split("\n")
    try:
        tree = _PARSER.parse(source)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, lines, path) from None
    return _ToSyntaxTree(path, lines).transform(tree)


def make_span(path: str, lines: list[str], line: int, column: int, length: int = 1) -> SourceSpan:
    """A span with its source line attached (for the caret display)."""
    source = lines[line - 1].rstrip("\r") if 0 < line <= len(lines) else None
    return SourceSpan(path, line, column, source, max(1, length))


# -- syntax errors ---------------------------------------------------------------------


def _describe(names) -> str:
    names = set(names or ())
    words = []
    if _EXPRESSION_START <= names:
        words.append("an expression")
        names -= _EXPRESSION_START
    if _OPERATORS <= names:
        words.append("an operator")
        names -= _OPERATORS
    rest = set()
    for name in names:
        if name in _WORDS:
            rest.add(_WORDS[name])
            continue
        try:
            pattern = _PARSER.get_terminal(name).pattern
        except KeyError:
            rest.add(name.lower())
            continue
        rest.add(f"'{pattern.value}'" if isinstance(pattern, PatternStr) else name.lower())
    if "end of line" in rest and "';'" in rest:
        rest -= {"end of line", "';'"}
        rest.add("end of statement (newline or ';')")
    words += sorted(rest)
    if not words:
        return ""
    if len(words) == 1:
        return f" — expected {words[0]}"
    return " — expected " + ", ".join(words[:-1]) + " or " + words[-1]


def _syntax_error(exc: UnexpectedInput, lines: list[str], path: str) -> CompileError:
    line = getattr(exc, "line", None) or 1
    column = getattr(exc, "column", None) or 1
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        if tok.type == "$END":
            line, column = len(lines), len(lines[-1]) + 1
            what, length = "end of input", 1
        elif tok.type == "_NL":
            what, length = "end of line", 1
        else:
            what, length = f"'{tok.value}'", len(str(tok.value))
        message = f"unexpected {what}{_describe(exc.accepts or exc.expected)}"
        return CompileError(message, make_span(path, lines, line, column, length))
    if isinstance(exc, UnexpectedCharacters):
        return CompileError(f"unexpected character {exc.char!r}", make_span(path, lines, line, column))
    return CompileError(f"syntax error: {exc}", make_span(path, lines, line, column))  # pragma: no cover


# -- Lark tree to dataclasses ------------------------------------------------------------


@v_args(meta=True)
class _ToSyntaxTree(Transformer):
    """Turns the Lark tree into syntax_tree dataclasses, each node with its span."""

    def __init__(self, path: str, lines: list[str]):
        super().__init__()
        self.path = path
        self.lines = lines

    def _span(self, meta) -> SourceSpan:
        """The span of a tree node: its text, cut at the end of its first line."""
        if meta.end_line == meta.line:
            length = meta.end_column - meta.column
        else:
            length = len(self.lines[meta.line - 1].rstrip()) - meta.column + 1
        return make_span(self.path, self.lines, meta.line, meta.column, length)

    def _tok(self, tok: Token) -> SourceSpan:
        return make_span(self.path, self.lines, tok.line, tok.column, len(tok.value))

    # -- structure
    def start(self, meta, items):
        return st.SourceFile(self.path, tuple(items))

    def kernel(self, meta, children):
        name, *rest = children
        params = tuple(c for c in rest if isinstance(c, st.Decl))
        results = next(c for c in rest if isinstance(c, tuple))
        body = next(c for c in rest if isinstance(c, list))
        return st.KernelDef(str(name), params, results, tuple(body), self._span(meta), self._tok(name))

    def one_result(self, meta, children):
        return (children[0],)

    def many_results(self, meta, children):
        return tuple(c for c in children if c is not None)

    def decl(self, meta, children):
        name, dtype, *dims = children
        dims = tuple(d for d in dims if d is not None)
        return st.Decl(str(name), str(dtype), dims, self._span(meta), self._tok(name), self._tok(dtype))

    def dim(self, meta, children):
        return st.Dim(_int_value(children[0]), self._tok(children[0]))

    def body(self, meta, items):
        return [item for item in items if item is not None]

    def assign(self, meta, children):
        *names, value = children
        targets = tuple(st.Target(str(n), self._tok(n)) for n in names)
        return st.Assign(targets, value, self._span(meta))

    # -- schedule
    def schedule(self, meta, children):
        word, *settings = children
        return st.ScheduleBlock(tuple(s for s in settings if s is not None), self._tok(word))

    def setting_value(self, meta, children):
        key, value = children
        return st.Setting(str(key), value, self._span(meta), self._tok(key))

    def setting_names(self, meta, children):
        key, *names = children
        value = tuple(st.Name(str(n), self._tok(n)) for n in names if n is not None)
        return st.Setting(str(key), value, self._span(meta), self._tok(key))

    # -- expressions
    def binop(self, meta, children):
        a, op, b = children
        return st.BinOp(str(op), a, b, self._span(meta), self._tok(op))

    def neg(self, meta, children):
        return st.Neg(children[1], self._span(meta))

    def int_lit(self, meta, children):
        return st.IntLit(_int_value(children[0]), self._tok(children[0]))

    def name(self, meta, children):
        return st.Name(str(children[0]), self._tok(children[0]))

    def call(self, meta, children):
        name, *args = children
        args = tuple(a for a in args if a is not None)
        return st.CallExpr(str(name), args, self._span(meta), self._tok(name))

    def pos_arg(self, meta, children):
        return st.Arg(None, children[0], self._span(meta))

    def kw_arg(self, meta, children):
        name, value = children
        return st.Arg(str(name), value, self._span(meta))


def _int_value(tok: Token) -> int:
    text = str(tok)
    return int(text[2:], 16) if text[:2].lower() == "0x" else int(text, 10)

"""Parsing kernel sources: structure, spans, line rules and syntax errors."""

from __future__ import annotations

import pytest

from vtacc.frontend import syntax_tree as st
from vtacc.frontend.parse import parse
from vtasm.errors import CompileError

FC = """\
# fully connected layer with requantisation
kernel fc(x: int8[1, 1024], w: int8[1024, 1024]) -> y: int8[1, 1024] {
    acc = matmul(x, w)            # int32
    y = clip(acc >> 8, 0, 127)    # stored as the low 8 bits
}
"""


def only_kernel(source: str) -> st.KernelDef:
    (kernel,) = parse(source, "t.vk").kernels
    return kernel


def body_value(expr_text: str) -> st.Expr:
    kernel = only_kernel(f"kernel k(x: int8[4]) -> y: int8[4] {{\n    y = {expr_text}\n}}\n")
    return kernel.body[0].value


def shape(expr: st.Expr):
    """An expression as nested tuples, independent of unparse()."""
    if isinstance(expr, st.IntLit):
        return expr.value
    if isinstance(expr, st.Name):
        return expr.name
    if isinstance(expr, st.Neg):
        return ("neg", shape(expr.x))
    if isinstance(expr, st.BinOp):
        return (expr.op, shape(expr.a), shape(expr.b))
    return (expr.func, *[shape(a.value) if a.name is None else (a.name, shape(a.value)) for a in expr.args])


def test_fc_structure_and_spans():
    k = only_kernel(FC)
    assert k.name == "fc"
    assert (k.name_span.line, k.name_span.column, k.name_span.length) == (2, 8, 2)
    assert [(d.name, d.dtype, tuple(x.value for x in d.dims)) for d in k.params] == [
        ("x", "int8", (1, 1024)),
        ("w", "int8", (1024, 1024)),
    ]
    assert [(d.name, d.dtype) for d in k.results] == [("y", "int8")]
    assert k.params[1].dtype_span.column == 32
    acc, y = k.body
    assert [t.name for t in acc.targets] == ["acc"]
    assert shape(acc.value) == ("matmul", "x", "w")
    assert shape(y.value) == ("clip", (">>", "acc", 8), 0, 127)
    call = y.value
    assert (call.span.line, call.span.column, call.span.length) == (4, 9, 22)
    assert (call.name_span.column, call.name_span.length) == (9, 4)
    shift = call.args[0].value
    assert (shift.op_span.column, shift.op_span.length) == (18, 2)
    assert shift.span.source_line == "    y = clip(acc >> 8, 0, 127)    # stored as the low 8 bits"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("x + 1 >> 2", (">>", ("+", "x", 1), 2)),
        ("x >> 1 + 2", (">>", "x", ("+", 1, 2))),
        ("x << 2 >> 1", (">>", ("<<", "x", 2), 1)),
        ("x - 1 - 2", ("-", ("-", "x", 1), 2)),
        ("x + 2 * x", ("+", "x", ("*", 2, "x"))),
        ("-x * 3", ("*", ("neg", "x"), 3)),
        ("- -x", ("neg", ("neg", "x"))),
        ("(x + 1) * 2", ("*", ("+", "x", 1), 2)),
        ("0x7f + 0X10", ("+", 127, 16)),
        ("max_pool(x, 2, stride=1)", ("max_pool", "x", 2, ("stride", 1))),
        ("f()", ("f",)),
        ("f(x,)", ("f", "x")),
    ],
)
def test_precedence_and_atoms(text, expected):
    assert shape(body_value(text)) == expected


def test_unparse_puts_back_needed_parentheses():
    assert st.unparse(body_value("(x + 1) >> (2 - 1)")) == "x + 1 >> 2 - 1"
    assert st.unparse(body_value("(x >> 1) + 2")) == "(x >> 1) + 2"
    assert st.unparse(body_value("x + (1 >> 2)")) == "x + (1 >> 2)"
    assert st.unparse(body_value("x - (1 - 2)")) == "x - (1 - 2)"
    assert st.unparse(body_value("-(x * 2) + f(x, a=1)")) == "-(x * 2) + f(x, a=1)"


def test_semicolons_blank_lines_comments_and_continuations():
    source = """
# leading comment

kernel k(x: int8[1, 16],
         w: int8[16, 16])    # parameters over two lines
    -> (a: int8[1, 16], b: int32[1, 16])
{
    t = matmul(x,
               w) ; a = t >> 1

    # a comment line in the body
    b = (t +
         1)   ;
    schedule {
        tile_o = 16; threads = 2
        order = (n, o,
                 k)
    }
}
kernel second(x: int8[2]) -> y: int8[2] { y = x }
"""
    first, second = parse(source, "t.vk").kernels
    assert [d.name for d in first.results] == ["a", "b"]
    t, a, b, schedule = first.body
    assert shape(t.value) == ("matmul", "x", "w")
    assert shape(a.value) == (">>", "t", 1)
    assert (a.span.line, a.span.column) == (9, 21)
    assert shape(b.value) == ("+", "t", 1)
    assert b.value.span.line == 12 and b.value.span.length == len("(t +") - 1
    assert isinstance(schedule, st.ScheduleBlock)
    assert [s.key for s in schedule.settings] == ["tile_o", "threads", "order"]
    assert [n.name for n in schedule.settings[2].value] == ["n", "o", "k"]
    assert second.name == "second" and shape(second.body[0].value) == "x"


def test_unpacking_assignment_and_single_name_order():
    k = only_kernel("kernel k(x: int8[2]) -> y: int8[2] {\n a, b = g(x); y = a\n schedule { order = (h,) }\n}")
    assert [t.name for t in k.body[0].targets] == ["a", "b"]
    assert [n.name for n in k.body[2].settings[0].value] == ["h"]


def test_empty_file_has_no_kernels():
    assert parse("# nothing here\n\n", "t.vk").kernels == ()


def syntax_error(source: str) -> CompileError:
    with pytest.raises(CompileError) as info:
        parse(source, "bad.vk")
    return info.value


HEAD = "kernel k(x: int8[4]) -> y: int8[4] {\n"


@pytest.mark.parametrize(
    "source, where, message",
    [
        (HEAD + "    y = \n}", "2:9", "unexpected end of line — expected an expression"),
        (HEAD + "    y = clip(x, }\n", "2:17", "unexpected '}' — expected an expression"),
        (HEAD + "    y = x +\n}", "2:12", "unexpected end of line — expected an expression"),
        (HEAD + "    y = x x\n}", "2:11", "unexpected 'x' — expected an operator"),
        (HEAD + "    y = x $ 1\n}", "2:11", "unexpected character '$'"),
        (HEAD + "    y = x", "2:10", "unexpected end of input"),
        ("kernel k(x int8[4]) -> y: int8[4] {}", "1:12", "unexpected 'int8' — expected ':'"),
        ("kernel k(x: int8[]) -> y: int8[4] {}", "1:18", "unexpected ']' — expected an integer"),
        ("kernel k(x: int8[4]) y: int8[4] {}", "1:22", "unexpected 'y' — expected '->'"),
        (HEAD + "    schedule = 1\n}", "2:14", "unexpected '=' — expected '{'"),
        (HEAD + "    schedule, a = f(x)\n}", "2:13", "unexpected ',' — expected '{'"),
        (HEAD + "    y = 1.5\n}", "2:10", "unexpected character '.'"),
        ("y = x\n", "1:1", "unexpected 'y' — expected 'kernel', end of input or end of line"),
    ],
)
def test_syntax_errors(source, where, message):
    error = syntax_error(source)
    assert f"{error.span.line}:{error.span.column}" == where
    assert error.message.startswith(message), error.message


def test_syntax_error_render_shows_line_and_caret():
    error = syntax_error(HEAD + "    y = clip(x, }\n")
    assert error.render() == (
        "bad.vk:2:17: unexpected '}' — expected an expression or ')'\n"
        "        y = clip(x, }\n"
        "                    ^"
    )


def test_syntax_error_lists_statement_ends():
    error = syntax_error(HEAD + "    y = x x\n}")
    assert error.message == (
        "unexpected 'x' — expected an operator, '(', '}' or end of statement (newline or ';')"
    )

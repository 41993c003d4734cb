"""Constants at the int32 and 16-bit-immediate extremes, in every operator position, run bit-exact.

Each kernel is compiled, run on vtasim and compared with a reference that
evaluates the parsed expression by the documented rules alone
(docs/language.md section 5): every operation wraps to int32, shifts are
arithmetic, ``int8(...)`` and the int8 store keep the low 8 bits. The
reference reads the syntax tree, not the checked program, so the checker's
constant folding is tested along with the compiler's immediates, immediate
splitting, wide-constant vectors in DRAM and ``x - c`` rewritten as
``x + (-c)``.
"""

from __future__ import annotations

import numpy as np
import pytest

from vtacc.frontend import syntax_tree as st
from vtacc.frontend.check import check_source
from vtacc.frontend.checked import Binary, Const
from vtacc.frontend.parse import parse
from vtasm.errors import CompileError
from vtasm.isa import ALU_OPS

from .harness import CONFIGS, config, run

IMM = (1 << 15) - 1
EXTREMES = (-(2**31), -(2**31) + 1, 2**31 - 1, 2**31 - 2, -(2**15) - 1, -(2**15), 2**15 - 1, 2**15,
            4 * IMM, 4 * IMM + 1, -4 * IMM - 1, 0, 1, -1)
HEAD = "kernel k(a: int32[2, 32], x: int8[2, 32], b: int32[32], w: int8[32, 32]) -> y: int8[2, 32] {{ y = {} }}"

# Every position a constant can take: operands of + - min max clip, folded sub-expressions, around shifts.
TEMPLATES = (
    "a + {c}", "{c} + a", "a - {c}", "{c} - x", "x - {c}", "-x - {c}", "-x + {c}", "a + -{c}", "a - -{c}",
    "a - (0 - {c})", "(a + x) - {c}", "a + {c} + {c}", "a - {c} - {c}",
    "min(a, {c})", "min({c}, a)", "max(a, {c})", "max({c}, a)", "clip(a, {c}, {c})",
    "clip(a, {c}, 2147483647)", "clip(a, -2147483648, {c})", "relu(a - {c})", "min(a - {c}, {c})",
    "max(a + b, {c}) - {c}", "min(b + {c}, a)", "max(b, {c}) + a",
    "a + ({c} - 1)", "a + ({c} + {c})", "a + {c} * {c}", "a + ({c} << 1)", "a + ({c} << 31)", "a + ({c} >> 31)",
    "a + ({c} >> 15)", "a + int8({c})", "a + -({c} - {c})", "a - -(-{c})",
    "(a - {c}) >> 24", "(a - {c}) >> 31", "(a + {c}) << 31 >> 31", "(x << 24) - {c}", "(a << 31) - {c}",
    "int8(a - {c}) >> 3", "(matmul(x, w) - {c}) >> 24", "max(matmul(x, w), {c}) - {c}",
)


def _lit(c: int) -> str:
    return f"({c})" if c >= 0 else f"(-{-c})"


def _wrap(v):
    return (v + 2**31) % 2**32 - 2**31


def _shift(a, b, left: bool):
    return np.vectorize(lambda p, q: _wrap(p << q) if left else p >> q, otypes=[object])(a, b)


def _reference(e: st.Expr, env: dict[str, np.ndarray]):
    """The documented value of an expression, on Python integers (object arrays)."""
    if isinstance(e, st.IntLit):
        return np.asarray(e.value, dtype=object)
    if isinstance(e, st.Name):
        return env[e.name]
    if isinstance(e, st.Neg):
        return _wrap(-_reference(e.x, env))
    if isinstance(e, st.BinOp):
        a, b = _reference(e.a, env), _reference(e.b, env)
        if e.op in ("<<", ">>"):
            return _shift(a, b, e.op == "<<")
        return _wrap({"+": a + b, "-": a - b, "*": a * b}[e.op])
    args = [_reference(arg.value, env) for arg in e.args]
    if e.func == "matmul":
        return _wrap(args[0].dot(args[1].T))
    if e.func == "clip":
        return np.minimum(np.maximum(args[0], args[1]), args[2])
    if e.func == "relu":
        return np.maximum(args[0], 0)
    if e.func == "int8":
        return (args[0] + 128) % 256 - 128
    return {"min": np.minimum, "max": np.maximum}[e.func](*args)


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(31)
    a = rng.integers(-(2**31), 2**31, (2, 32)).astype(np.int32)
    a[0, :10] = [-(2**31), 2**31 - 1, 0, -1, 1, -(2**15), 2**15, -(2**31) + 1, -(2**15) - 1, 2**15 - 1]
    x = rng.integers(-128, 128, (2, 32)).astype(np.int8)
    x[0, :4] = [-128, 127, 0, -1]
    b = rng.integers(-(2**31), 2**31, (32,)).astype(np.int32)
    b[:3] = [-(2**31), 2**31 - 1, 0]
    w = rng.integers(-128, 128, (32, 32)).astype(np.int8)
    w[0] = -128  # x . w[0] reaches the extremes of a product sum
    return {"a": a, "x": x, "b": b, "w": w}


def _mismatch(expr: str, cfg_name: str = "default") -> str | None:
    """None when the compiled kernel's output equals the reference, else what went wrong."""
    source = HEAD.format(expr)
    inputs = _inputs()
    env = {name: np.asarray(v, dtype=object) for name, v in inputs.items()}
    value = _reference(parse(source, "t.vk").kernels[0].body[0].value, env)
    expected = ((np.broadcast_to(value, (2, 32)) + 128) % 256 - 128).astype(np.int64)
    try:
        result = run(source, inputs, config(cfg_name))
    except CompileError as exc:
        return f"{expr}: refused: {exc.message}"
    for insn in result.compiled.program.instructions:
        if insn.kind == "alu" and insn["use_imm"] and insn["alu_opcode"] == ALU_OPS["shr"]:
            if not -16 <= insn["imm"] <= 15:  # isa.md section 7: the portable shift amounts
                return f"{expr}: shift by {insn['imm']} is not portable"
    got = result.outputs["y"].astype(np.int64)
    if not np.array_equal(got, expected):
        where = np.argwhere(got != expected)[0]
        return f"{expr}: y{list(where)} is {got[tuple(where)]}, expected {expected[tuple(where)]}"
    return None


@pytest.mark.parametrize("template", TEMPLATES)
def test_constant_at_the_extremes_in_every_position(template):
    problems = [p for c in EXTREMES if (p := _mismatch(template.format(c=_lit(c))))]
    assert problems == []


@pytest.mark.parametrize("cfg_name", CONFIGS)
def test_subtracting_the_most_negative_constant_on_every_configuration(cfg_name):
    """The reported case: ``a - (1 << 31)`` is ``a + (-2**31)`` (wrapping), not an internal error."""
    cases = ("(a - (1 << 31)) >> 24", "x - (1 << 31)", "(a - -2147483648) >> 31", "max(a + b, 1 << 31) - (1 << 31)",
             "(a - -2147483647 - 1) >> 24", "min(a - 2147483647, -32769) - -32768")
    assert [p for case in cases if (p := _mismatch(case, cfg_name))] == []


@pytest.mark.parametrize("c", (*EXTREMES, -(2**30), 2**30, -2, 2))
def test_multiplication_by_extreme_constants(c):
    """``* c`` compiles as a shift when c is 2**k modulo 2**32 (so -2**31 too), as a negation and a shift
    when c is -2**k and the operand an int8 tensor, and is refused (naming MUL) otherwise."""
    def pow2(v: int) -> bool:
        return v > 0 and v & (v - 1) == 0

    for operand in ("a", "x"):
        expr = f"{operand} * {_lit(c)}"
        ok = c == 0 or pow2(c % 2**32) or (operand == "x" and pow2(-c))
        problem = _mismatch(expr)
        if ok:
            assert problem is None
        else:
            assert problem is not None and "refused" in problem and ("MUL" in problem or "negat" in problem)


@pytest.mark.parametrize("c", (-(2**31), 2**31 - 1, -(2**15) - 1, 2**15))
def test_int32_max_pool_padding_and_extreme_constants(c):
    """Padding of an int32 max_pool is -2**31 and never wins, even against -2**31 inputs; then ``- c``, ``max``."""
    rng = np.random.default_rng(5)
    p = rng.integers(-(2**31), 2**31, (1, 16, 5, 5)).astype(np.int32)
    p[0, :4] = -(2**31)  # whole planes at the minimum: the padding ties them
    p[0, 4, 0, :3] = [2**31 - 1, -(2**31) + 1, 0]
    source = f"""kernel k(p: int32[1, 16, 5, 5]) -> y: int8[1, 16, 3, 3] {{
        y = max(max_pool(p, 3, stride=2, pad=1) - {_lit(c)}, {_lit(c)}) >> 24
    }}"""
    padded = np.full((1, 16, 7, 7), -(2**31), dtype=object)
    padded[:, :, 1:6, 1:6] = p
    pooled = np.max([padded[:, :, i:i + 5:2, j:j + 5:2] for i in range(3) for j in range(3)], axis=0)
    expected = (np.maximum(_wrap(pooled - c), c) >> 24).astype(np.int64)
    got = run(source, {"p": p}).outputs["y"].astype(np.int64)
    np.testing.assert_array_equal(got, (expected + 128) % 256 - 128)


@pytest.mark.parametrize("text, value", [
    ("-(-2147483648)", -(2**31)), ("1 << 31", -(2**31)), ("2147483647 + 1", -(2**31)),
    ("-2147483648 - 1", 2**31 - 1), ("-2147483648 * -1", -(2**31)), ("(1 << 31) >> 31", -1),
    ("-(1 << 31)", -(2**31)), ("0 - (1 << 31)", -(2**31)), ("65535 * 65537", -1), ("int8(2147483647)", -1),
    ("int8(-2147483648)", 0), ("min(-2147483648, 2147483647)", -(2**31)), ("-2147483648 >> 0", -(2**31)),
    ("2147483647 << 1", -2), ("clip(2147483647 + 1, -5, 5)", -5),
])
def test_constant_folding_wraps_like_the_hardware(text, value):
    checked = check_source(f"kernel k(a: int32[2]) -> y: int8[2] {{ y = a + ({text}) }}", "f.vk")
    node = checked.kernels[0].assigns[0].value
    assert isinstance(node, Binary) and isinstance(node.b, Const) and node.b.value == value

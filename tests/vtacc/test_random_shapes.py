"""Random operator shapes on every golden configuration, against numpy: tiling, padding and DMA edge cases.

Every program is also run under the portability lint and must draw no
warning (a shift by a tensor, whose amounts are data, may keep its own).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .harness import CONFIGS, config, conv_ref, low8, matmul_ref, rand8, rand32
from .linting import run_linted

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def conv_case(draw):
    k = draw(st.sampled_from([1, 2, 3, 5]))
    stride = draw(st.sampled_from([1, 2]))
    pad = draw(st.integers(0, k // 2 + (1 if k > 1 else 0)))
    h = draw(st.integers(max(1, k - 2 * pad), 12))
    w = draw(st.integers(max(1, k - 2 * pad), 12))
    groups = draw(st.sampled_from([1, 1, 2]))
    ic = draw(st.integers(1, 40)) if groups == 1 else 16 * draw(st.integers(1, 2)) * groups
    oc = draw(st.integers(1, 40)) if groups == 1 else 16 * draw(st.integers(1, 2)) * groups
    n = draw(st.integers(1, 3))
    cfg = draw(st.sampled_from(CONFIGS))
    return n, ic, oc, h, w, k, stride, pad, groups, cfg, draw(st.integers(0, 2**32 - 1))


@SETTINGS
@given(conv_case())
def test_random_convolutions(case):
    n, ic, oc, h, w, k, stride, pad, groups, cfg_name, seed = case
    cfg = config(cfg_name)
    if groups > 1 and (ic // groups) % cfg.block_in or (oc // groups) % cfg.block_out:
        groups = 1
    rng = np.random.default_rng(seed)
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    x, wt = rand8(rng, n, ic, h, w), rand8(rng, oc, ic // groups, k, k)
    b = rand32(rng, oc, lo=-500, hi=500)
    src = f"""kernel c(x: int8[{n}, {ic}, {h}, {w}], w: int8[{oc}, {ic // groups}, {k}, {k}], b: int32[{oc}])
        -> y: int8[{n}, {oc}, {oh}, {ow}] {{
        y = clip((conv2d(x, w, stride={stride}, pad={pad}, groups={groups}) >> 6) + b, -100, 100)
    }}"""
    result, warnings = run_linted(src, {"x": x, "w": wt, "b": b}, cfg)
    expected = np.clip((conv_ref(x, wt, stride, pad, groups) >> 6) + b[None, :, None, None], -100, 100)
    assert result.races == []
    assert warnings == []
    np.testing.assert_array_equal(result.outputs["y"], expected.astype(np.int8))


@SETTINGS
@given(st.integers(1, 40), st.integers(1, 300), st.integers(1, 300), st.sampled_from(CONFIGS),
       st.integers(0, 2**32 - 1))
def test_random_matmuls(n, k, o, cfg_name, seed):
    rng = np.random.default_rng(seed)
    x, w = rand8(rng, n, k), rand8(rng, o, k)
    src = f"kernel m(x: int8[{n}, {k}], w: int8[{o}, {k}]) -> y: int8[{n}, {o}] {{ y = matmul(x, w) >> 3 }}"
    result, warnings = run_linted(src, {"x": x, "w": w}, config(cfg_name))
    assert result.races == []
    assert warnings == []
    np.testing.assert_array_equal(result.outputs["y"], low8(matmul_ref(x, w) >> 3))


@SETTINGS
@given(st.integers(1, 4), st.integers(1, 70), st.integers(1, 9), st.integers(1, 9), st.sampled_from([2, 3]),
       st.sampled_from(CONFIGS), st.integers(0, 2**32 - 1))
def test_random_max_pools(n, c, h, w, size, cfg_name, seed):
    stride = size if h >= size and w >= size else 1
    pad = 1 if size == 3 else 0
    if (h + 2 * pad - size) < 0 or (w + 2 * pad - size) < 0:
        return
    rng = np.random.default_rng(seed)
    x = rand8(rng, n, c, h, w)
    oh, ow = (h + 2 * pad - size) // stride + 1, (w + 2 * pad - size) // stride + 1
    src = f"""kernel p(x: int8[{n}, {c}, {h}, {w}]) -> y: int8[{n}, {c}, {oh}, {ow}] {{
        y = max_pool(x, {size}, stride={stride}, pad={pad})
    }}"""
    result, warnings = run_linted(src, {"x": x}, config(cfg_name))
    xp = np.full((n, c, h + 2 * pad, w + 2 * pad), -128, np.int64)
    xp[:, :, pad:pad + h, pad:pad + w] = x
    expected = np.max([xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                       for i in range(size) for j in range(size)], axis=0)
    assert result.races == []
    assert warnings == []
    np.testing.assert_array_equal(result.outputs["y"], expected.astype(np.int8))


# -- random element-wise expressions ------------------------------------------------------------

OPERANDS = {"a": "int32", "b": "int32", "x": "int8", "s": "int8"}


@st.composite
def expression(draw, depth=0):
    """(source text, numpy function of the inputs) for a random expression the ALU can evaluate."""
    if depth >= 3 or draw(st.integers(0, 3)) == 0:
        name = draw(st.sampled_from(["a", "b", "x", "bias"]))
        return name, (lambda t, n=name: t[n].astype(np.int64))
    kind = draw(st.sampled_from(["add", "min", "max", "shr", "shl", "addc", "minc", "subc", "subx", "relu", "cast",
                                 "mul2", "clip"]))
    a_src, a_fn = draw(expression(depth + 1))
    w = _wrap
    if kind in ("add", "min", "max"):
        b_src, b_fn = draw(expression(depth + 1))
        sym = {"add": "+"}.get(kind)
        text = f"({a_src} + {b_src})" if sym else f"{kind}({a_src}, {b_src})"
        fn = {"add": lambda t: w(a_fn(t) + b_fn(t)), "min": lambda t: np.minimum(a_fn(t), b_fn(t)),
              "max": lambda t: np.maximum(a_fn(t), b_fn(t))}[kind]
        return text, fn
    c = draw(st.integers(0, 31)) if kind in ("shr", "shl") else draw(st.integers(-70000, 70000))
    if kind == "shr":
        return f"({a_src} >> {c})", lambda t: w(a_fn(t)) >> c
    if kind == "shl":
        return f"({a_src} << {c})", lambda t: w(a_fn(t) << c)
    if kind == "addc":
        return f"({a_src} + {c})", lambda t: w(a_fn(t) + c)
    if kind == "subc":
        return f"({a_src} - {c})", lambda t: w(a_fn(t) - c)
    if kind == "minc":
        c = max(-32768, min(32767, c))
        return f"min({a_src}, {c})", lambda t: np.minimum(a_fn(t), c)
    if kind == "subx":
        return f"({a_src} - s)", lambda t: w(a_fn(t) - t["s"])
    if kind == "relu":
        return f"relu({a_src})", lambda t: np.maximum(a_fn(t), 0)
    if kind == "cast":
        return f"int8({a_src})", lambda t: w(a_fn(t)).astype(np.int8).astype(np.int64)
    if kind == "mul2":
        k = draw(st.integers(0, 4))
        return f"({a_src} * {1 << k})", lambda t: w(a_fn(t) << k)
    return f"clip({a_src}, -50, 50)", lambda t: np.clip(a_fn(t), -50, 50)


def _wrap(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, dtype=np.int64).astype(np.int32).astype(np.int64)


@SETTINGS
@given(expression(), st.sampled_from(CONFIGS), st.integers(0, 2**32 - 1), st.booleans())
def test_random_elementwise_expressions(expr, cfg_name, seed, four_d):
    text, fn = expr
    shape = (2, 24, 3, 5) if four_d else (3, 40)
    c = shape[1]
    rng = np.random.default_rng(seed)
    t = {"a": rand32(rng, *shape), "b": rand32(rng, *shape, lo=-1000, hi=1000), "x": rand8(rng, *shape),
         "s": rand8(rng, *shape), "bias": rand32(rng, c, lo=-5000, hi=5000)}
    dims = ", ".join(map(str, shape))
    src = f"""kernel e(a: int32[{dims}], b: int32[{dims}], x: int8[{dims}], s: int8[{dims}], bias: int32[{c}])
        -> y: int8[{dims}] {{
        y = ({text}) + 0 * 0 + max(s, -128) - s
    }}"""
    inputs = dict(t)
    bias = t["bias"].reshape((1, c, 1, 1) if four_d else (1, c))
    expected = low8(_wrap(np.broadcast_to(fn({**t, "bias": bias}), shape)))
    result, warnings = run_linted(src, inputs, config(cfg_name))
    assert result.races == []
    assert warnings == []
    np.testing.assert_array_equal(result.outputs["y"], expected)


@SETTINGS
@given(conv_case(), st.data())
def test_random_convolutions_with_random_schedules(case, data):
    """Every tiling the schedule block can force must still compute the same numbers (or be refused cleanly)."""
    from vtasm.errors import CompileError

    n, ic, oc, h, w, k, stride, pad, groups, cfg_name, seed = case
    cfg = config(cfg_name)
    if groups > 1 and ((ic // groups) % cfg.block_in or (oc // groups) % cfg.block_out):
        groups = 1
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    settings_ = []
    if data.draw(st.booleans()):
        settings_.append(f"tile_h = {data.draw(st.integers(1, oh))}")
    if data.draw(st.booleans()):
        settings_.append(f"tile_oc = {cfg.block_out * data.draw(st.integers(1, max(1, oc // cfg.block_out)))}")
    if data.draw(st.booleans()):
        settings_.append(f"tile_ic = {cfg.block_in * data.draw(st.integers(1, max(1, ic // groups // cfg.block_in)))}")
    if data.draw(st.booleans()):
        settings_.append(f"threads = {data.draw(st.sampled_from([1, 2]))}")
    if data.draw(st.booleans()):
        settings_.append(f"order = {data.draw(st.sampled_from(['(oc, h, w)', '(h, w, oc)']))}")
    rng = np.random.default_rng(seed)
    x, wt = rand8(rng, n, ic, h, w), rand8(rng, oc, ic // groups, k, k)
    src = f"""kernel c(x: int8[{n}, {ic}, {h}, {w}], w: int8[{oc}, {ic // groups}, {k}, {k}])
        -> y: int8[{n}, {oc}, {oh}, {ow}] {{
        y = conv2d(x, w, stride={stride}, pad={pad}, groups={groups}) >> 5
        schedule {{ {'; '.join(settings_)} }}
    }}"""
    try:
        result, warnings = run_linted(src, {"x": x, "w": wt}, cfg)
    except CompileError as exc:  # refused for a stated reason: it does not fit, or the settings contradict
        assert "no tiling fits" in exc.message or "tile_ic cannot split" in exc.message, exc.message
        return
    assert result.races == []
    assert warnings == []
    np.testing.assert_array_equal(result.outputs["y"], low8(conv_ref(x, wt, stride, pad, groups) >> 5))

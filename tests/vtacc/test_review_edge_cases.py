"""Review of the compiler back end: edge cases the other end-to-end tests do not reach.

Passing tests are regression tests for paths found to work (batch > 1 with N not
a multiple of BATCH, pooling over several batch / channel tiles, grouped
convolutions in the 'inputs' loop order, kernel calls with several results or
computed arguments, micro-op tables larger than the micro-op buffer, buffers
near their limits). The later tests reproduced bugs found in the review (all
fixed) and guard against their return.
"""

from __future__ import annotations

import numpy as np
import pytest

from vtasm import isa
from vtasm.errors import CompileError

from .harness import compile_source, config, conv_ref, low8, matmul_ref, rand8, rand32, run


def _w32(v) -> np.ndarray:
    return np.asarray(v, dtype=np.int64).astype(np.int32).astype(np.int64)


def _max_pool_ref(x: np.ndarray, size: int, stride: int, pad: int) -> np.ndarray:
    n, c, h, w = x.shape
    xp = np.full((n, c, h + 2 * pad, w + 2 * pad), -128, np.int64)
    xp[:, :, pad:pad + h, pad:pad + w] = x
    oh, ow = (h + 2 * pad - size) // stride + 1, (w + 2 * pad - size) // stride + 1
    return np.max([xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                   for i in range(size) for j in range(size)], axis=0)


def _sum_pool_ref(x: np.ndarray, size: int, stride: int, pad: int) -> np.ndarray:
    n, c, h, w = x.shape
    xp = np.zeros((n, c, h + 2 * pad, w + 2 * pad), np.int64)
    xp[:, :, pad:pad + h, pad:pad + w] = x
    oh, ow = (h + 2 * pad - size) // stride + 1, (w + 2 * pad - size) // stride + 1
    return np.sum([xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                   for i in range(size) for j in range(size)], axis=0)


# -- regression: batch > 1, pooling tiles, grouped convolutions ---------------------------------


@pytest.mark.parametrize("cfg_name", ["batch2", "batch4", "block8"])
@pytest.mark.parametrize("sched", ["", "order = (h, w, oc)", "tile_oc = {bl}; tile_n = {b}", "threads = 1; tile_h = 1"])
def test_pool_with_int8_and_bias_epilogue_over_batch_and_channel_tiles(cfg_name, sched):
    """max_pool then '- s', max with a per-channel vector, '+ s': N=3 (not a multiple of BATCH), C not of BLOCK."""
    cfg = config(cfg_name)
    sched = sched.format(bl=cfg.block_out, b=cfg.batch)
    rng = np.random.default_rng(2)
    n, c, h, w = 3, 2 * cfg.block_out + 3, 7, 5
    x = rand8(rng, n, c, h, w)
    oh, ow = (h + 2 - 3) // 2 + 1, (w + 2 - 3) // 2 + 1
    s, b = rand8(rng, n, c, oh, ow), rand32(rng, c, lo=-99, hi=99)
    src = f"""kernel p(x: int8[{n}, {c}, {h}, {w}], s: int8[{n}, {c}, {oh}, {ow}], b: int32[{c}])
        -> y: int8[{n}, {c}, {oh}, {ow}] {{
        y = max(max_pool(x, 3, stride=2, pad=1) - s, b) + s
        schedule {{ {sched} }}
    }}"""
    result = run(src, {"x": x, "s": s, "b": b}, cfg)
    s64 = s.astype(np.int64)
    expected = low8(np.maximum(_max_pool_ref(x, 3, 2, 1) - s64, b.reshape(1, -1, 1, 1)) + s64)
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["y"], expected)


@pytest.mark.parametrize("size, stride, pad, sched", [(2, 3, 1, "tile_h = 1; tile_w = 1"), (3, 4, 2, "tile_h = 1"),
                                                      (1, 2, 0, ""), (3, 1, 2, "tile_h = 2")])
def test_sum_pool_stride_larger_than_window(size, stride, pad, sched):
    rng = np.random.default_rng(size * 100 + stride * 10 + pad)
    x = rand8(rng, 2, 20, 7, 5)
    oh, ow = (7 + 2 * pad - size) // stride + 1, (5 + 2 * pad - size) // stride + 1
    src = f"""kernel p(x: int8[2, 20, 7, 5]) -> y: int8[2, 20, {oh}, {ow}] {{
        y = sum_pool(x, {size}, {stride}, {pad}) >> 1
        schedule {{ {sched} }}
    }}"""
    result = run(src, {"x": x}, config("block8"))
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["y"], low8(_sum_pool_ref(x, size, stride, pad) >> 1))


@pytest.mark.parametrize("cfg_name", ["batch2", "batch4", "block8"])
@pytest.mark.parametrize("groups", [2, 3])
@pytest.mark.parametrize("extra", ["", "tile_h = 2", "tile_oc = {bl}", "threads = 1", "tile_n = {b}"])
def test_grouped_convolution_in_inputs_order(cfg_name, groups, extra):
    cfg = config(cfg_name)
    bl = cfg.block_out
    n, ic, oc, h, w = 3, 2 * bl * groups, bl * groups, 5, 4
    rng = np.random.default_rng(7)
    x, wt = rand8(rng, n, ic, h, w), rand8(rng, oc, ic // groups, 3, 3)
    sched = "; ".join(p for p in ["order = (h, w, oc)", extra.format(bl=bl, b=cfg.batch)] if p)
    src = f"""kernel c(x: int8[{n}, {ic}, {h}, {w}], w: int8[{oc}, {ic // groups}, 3, 3])
        -> y: int8[{n}, {oc}, {h}, {w}] {{
        y = conv2d(x, w, pad=1, groups={groups}) >> 6
        schedule {{ {sched} }}
    }}"""
    result = run(src, {"x": x, "w": wt}, cfg)
    assert result.compiled.planned[0].tiling.order == "inputs"
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["y"], low8(conv_ref(x, wt, 1, 1, groups) >> 6))


@pytest.mark.parametrize("cfg_name", ["batch2", "batch4", "block8", "default"])
def test_strided_conv_epilogue_with_negated_int8_and_bias(cfg_name):
    rng = np.random.default_rng(7)
    x, wt = rand8(rng, 3, 20, 5, 5), rand8(rng, 24, 20, 3, 3)
    r, b = rand8(rng, 3, 24, 3, 3), rand32(rng, 24, lo=-999, hi=999)
    src = """kernel c(x: int8[3, 20, 5, 5], w: int8[24, 20, 3, 3], r: int8[3, 24, 3, 3], b: int32[24])
        -> y: int8[3, 24, 3, 3] {
        y = (conv2d(x, w, stride=2, pad=1) >> 6) - r + b
    }"""
    result = run(src, {"x": x, "w": wt, "r": r, "b": b}, config(cfg_name))
    expected = (conv_ref(x, wt, 2, 1) >> 6) - r.astype(np.int64) + b.reshape(1, -1, 1, 1)
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["y"], low8(expected))


# -- regression: element-wise expressions -----------------------------------------------------

EXPRESSIONS = [
    ("t = a + x\n y = t + (t >> 3)", lambda a, b, x, s, c: _w32(_w32(a + x) + (_w32(a + x) >> 3))),
    ("t = x + 5\n y = max(t, b) + t - s", lambda a, b, x, s, c: _w32(np.maximum(x + 5, b) + x + 5 - s)),
    ("t = c + 0\n y = t + a + t", lambda a, b, x, s, c: _w32(c + a + c)),
    ("y = c - x", lambda a, b, x, s, c: _w32(c - x)),
    ("y = a - x - s + x", lambda a, b, x, s, c: _w32(a - x - s + x)),
    ("y = min(c, x) + max(x, c)", lambda a, b, x, s, c: _w32(np.minimum(c, x) + np.maximum(x, c))),
    ("y = a + 100000 - 70000", lambda a, b, x, s, c: _w32(a + 30000)),
    ("y = a - 70000", lambda a, b, x, s, c: _w32(a - 70000)),
    ("t = int8(a)\n y = t + t + x", lambda a, b, x, s, c: _w32(2 * a.astype(np.int8).astype(np.int64) + x)),
    ("t = a >> 1\n u = t + x\n y = u + u + t", lambda a, b, x, s, c: _w32(2 * _w32((a >> 1) + x) + (a >> 1))),
    ("y = (a << 31) >> 31", lambda a, b, x, s, c: _w32(a << 31) >> 31),
    ("y = relu(c) + relu(x) + int32(b)", lambda a, b, x, s, c: _w32(np.maximum(c, 0) + np.maximum(x, 0) + b)),
    ("y = clip(c, -5, 5) + x", lambda a, b, x, s, c: _w32(np.clip(c, -5, 5) + x)),
]


@pytest.mark.parametrize("cfg_name, shape", [("batch2", (3, 40)), ("batch4", (5, 24, 2, 3)), ("block8", (3, 20, 3, 2)),
                                             ("batch4", (1, 17))])
def test_shared_locals_int8_operands_and_vectors(cfg_name, shape):
    """Shared locals (copies of a slot), int8 tensors through the identity GEMM, per-channel vectors."""
    cfg = config(cfg_name)
    dims = ", ".join(map(str, shape))
    rng = np.random.default_rng(5)
    a, b = rand32(rng, *shape), rand32(rng, *shape, lo=-1000, hi=1000)
    x, s = rand8(rng, *shape), rand8(rng, *shape)
    c = rand32(rng, shape[1], lo=-300, hi=300)
    cb = c.reshape((1, shape[1]) + (1,) * (len(shape) - 2)).astype(np.int64)
    args = [v.astype(np.int64) for v in (a, b, x, s)] + [cb]
    for text, fn in EXPRESSIONS:
        src = f"""kernel e(a: int32[{dims}], b: int32[{dims}], x: int8[{dims}], s: int8[{dims}], c: int32[{shape[1]}])
            -> y: int8[{dims}] {{
            {text}
        }}"""
        result = run(src, {"a": a, "b": b, "x": x, "s": s, "c": c}, cfg)
        assert result.races == [], text
        expected = low8(_w32(np.broadcast_to(fn(*args), shape)))
        np.testing.assert_array_equal(result.outputs["y"], expected, err_msg=text)


@pytest.mark.parametrize("cfg_name", ["block8", "batch4"])
def test_many_live_slots_three_vectors_and_tensor_shift_by_vector(cfg_name):
    shape = (5, 40, 9, 11)
    rng = np.random.default_rng(3)
    a, b = rand32(rng, *shape), rand32(rng, *shape, lo=-9999, hi=9999)
    x, s = rand8(rng, *shape), rand8(rng, *shape)
    c1, c2, c3 = (rand32(rng, 40, lo=-20, hi=20) for _ in range(3))
    dims = ", ".join(map(str, shape))
    src = f"""kernel e(a: int32[{dims}], b: int32[{dims}], x: int8[{dims}], s: int8[{dims}], c1: int32[40],
                       c2: int32[40], c3: int32[40]) -> y: int8[{dims}] {{
        t = (a >> 7) + x
        u = max(t, b + c1) - s
        v = min(u + t, c2) + (t >> 2)
        y = ((v + u) >> 1) + max(c3, x) + (s >> c2)
    }}"""
    result = run(src, {"a": a, "b": b, "x": x, "s": s, "c1": c1, "c2": c2, "c3": c3}, config(cfg_name))

    def ch(v):
        return v.reshape(1, -1, 1, 1).astype(np.int64)

    a64, b64, x64, s64 = (v.astype(np.int64) for v in (a, b, x, s))
    t = _w32((a64 >> 7) + x64)
    u = _w32(np.maximum(t, _w32(b64 + ch(c1))) - s64)
    v = _w32(np.minimum(_w32(u + t), ch(c2)) + (t >> 2))
    shifted = np.where(ch(c2) >= 0, s64 >> (ch(c2) & 31), _w32(s64 << ((-ch(c2)) & 31)))
    expected = low8(_w32(_w32(_w32(v + u) >> 1) + np.maximum(ch(c3), x64)) + shifted)
    assert result.compiled.planned[0].needs.acc_slots >= 3
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["y"], expected)


# -- regression: kernel calls ----------------------------------------------------------------

SPLIT = "kernel split(x: int8[3, 40]) -> (hi: int8[3, 40], lo: int8[3, 40]) { hi = x >> 4; lo = x + 3 }\n"
INC = "kernel inc(x: int8[3, 40]) -> y: int8[3, 40] { y = x + 1 }\n"
MM = "kernel mm(x: int8[3, 40], w: int8[16, 40]) -> y: int8[3, 16] { y = matmul(x, w) >> 2 }\n"


def test_calls_with_several_results_expression_arguments_and_reused_results():
    rng = np.random.default_rng(11)
    a, b, w = rand8(rng, 3, 40), rand8(rng, 3, 40), rand8(rng, 16, 40)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    hi, lo = low8(a64 >> 4).astype(np.int64), low8(a64 + 3).astype(np.int64)
    cases = [
        (SPLIT + "kernel main(a: int8[3, 40]) -> (p: int8[3, 40], q: int8[3, 40]) { p, q = split(a) }",
         {"p": hi, "q": lo}),
        (SPLIT + "kernel main(a: int8[3, 40]) -> (p: int8[3, 40], q: int8[3, 40]) { h, l = split(a)\n p = l\n"
                 " q = (h << 4) + l }", {"p": lo, "q": (hi << 4) + lo}),
        (INC + "kernel main(a: int8[3, 40]) -> (p: int8[3, 40], q: int8[3, 40]) { p = inc(a)\n q = p + inc(p) }",
         {"p": a64 + 1, "q": (a64 + 1) + low8(a64 + 1).astype(np.int64) + 1}),
        (INC + "kernel main(a: int8[3, 40], b: int8[3, 40]) -> (p: int8[3, 40], q: int8[3, 40]) {"
               " p = inc(int8(a + b))\n q = inc(int8(a - b)) }",
         {"p": low8(a64 + b64).astype(np.int64) + 1, "q": low8(a64 - b64).astype(np.int64) + 1}),
        (INC + "kernel main(a: int8[3, 40]) -> p: int8[3, 40] { p = inc(inc(inc(a))) }", {"p": a64 + 3}),
        (SPLIT + MM + "kernel main(a: int8[3, 40], w: int8[16, 40]) -> (p: int8[3, 16], q: int8[3, 16]) {"
                      " h, l = split(a)\n p = mm(h, w)\n q = mm(l, w) + p }",
         {"p": matmul_ref(hi, w) >> 2, "q": (matmul_ref(lo, w) >> 2) + low8(matmul_ref(hi, w) >> 2)}),
    ]
    for src, expected in cases:
        main = src[src.index("kernel main("):].split("->")[0]
        inputs = {name: v for name, v in (("a", a), ("b", b), ("w", w)) if f"{name}: int8" in main}
        result = run(src, inputs, kernel="main")
        assert result.races == [], src
        for name, values in expected.items():
            np.testing.assert_array_equal(result.outputs[name], low8(values), err_msg=f"{name} of\n{src}")


# -- regression: micro-op buffer and buffer limits ------------------------------------------------


def test_micro_op_table_larger_than_the_buffer_uop14():
    """Six large pools: the micro-op table (>4096 entries) no longer fits the uop14 buffer; kernels are reloaded."""
    cfg = config("uop14")
    rng = np.random.default_rng(0)
    params, results, body, inputs, expected, kernels = [], [], [], {}, {}, []
    # each pool in its own kernel with wide channel tiles, so the kernels differ and the table overflows
    for i, (hw, c, tile) in enumerate([(3, 16 * 300, 1600), (3, 16 * 310, 992), (3, 16 * 320, 1280),
                                       (3, 16 * 330, 1056), (4, 16 * 200, 800), (3, 16 * 290, 1552)]):
        oh = hw - 2
        params.append(f"x{i}: int8[1, {c}, {hw}, {hw}]")
        results.append(f"y{i}: int8[1, {c}, {oh}, {oh}]")
        kernels.append(f"kernel pool{i}(x: int8[1, {c}, {hw}, {hw}]) -> y: int8[1, {c}, {oh}, {oh}] {{\n"
                       f"    y = max_pool(x, 3, stride=1)\n    schedule {{ tile_oc = {tile} }}\n}}\n")
        body.append(f"y{i} = pool{i}(x{i})")
        inputs[f"x{i}"] = rand8(rng, 1, c, hw, hw)
        expected[f"y{i}"] = _max_pool_ref(inputs[f"x{i}"], 3, 1, 0)
    src = "".join(kernels) + f"kernel p({', '.join(params)}) -> ({', '.join(results)}) {{ {'; '.join(body)} }}"
    result = run(src, inputs, cfg)
    stats = result.compiled.generated.stats
    assert len(result.compiled.program.uops) > cfg.uop_depth
    assert stats["uop_loads"] > 1
    program = result.compiled.program
    table_start = program.uop_addr // cfg.uop_elem_bytes
    uop_loads = [i for i in program.instructions
                 if i.kind == "load" and i["memory_type"] == isa.MEM_TYPES["uop"] and i["x_size"]]
    # kernels past the buffer's end go to slots other than their table index (the cyclic allocator)
    assert any(i["sram_base"] != i["dram_base"] - table_start for i in uop_loads)
    assert result.races == []
    for name, values in expected.items():
        np.testing.assert_array_equal(result.outputs[name], values.astype(np.int8), err_msg=name)


@pytest.mark.parametrize("cfg_name, n, k, o", [("block8", 3, 4104, 72), ("batch4", 9, 2050, 40),
                                               ("block8", 1, 20000, 8), ("batch4", 130, 64, 520),
                                               ("block8", 2100, 8, 8), ("default", 1, 1, 40000)])
def test_matmuls_near_buffer_limits(cfg_name, n, k, o):
    rng = np.random.default_rng(1)
    x, w, b = rand8(rng, n, k), rand8(rng, o, k), rand32(rng, o, lo=-1000, hi=1000)
    src = f"""kernel m(x: int8[{n}, {k}], w: int8[{o}, {k}], b: int32[{o}]) -> y: int8[{n}, {o}] {{
        y = (matmul(x, w) >> 7) + b
    }}"""
    result = run(src, {"x": x, "w": w, "b": b}, config(cfg_name))
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["y"], low8((matmul_ref(x, w) >> 7) + b))


@pytest.mark.parametrize("k, pad, sched", [(1, 1, "tile_h = 1"), (3, 3, ""), (3, 3, "tile_h = 1"),
                                           (2, 2, "tile_h = 2")])
def test_conv_window_rows_entirely_in_padding(k, pad, sched):
    """Row tiles whose window lies in the padding: a load of zero rows with y_pad only (pad <= k)."""
    rng = np.random.default_rng(1)
    x, wt = rand8(rng, 2, 16, 4, 4), rand8(rng, 16, 16, k, k)
    oh = 4 + 2 * pad - k + 1
    src = f"""kernel c(x: int8[2, 16, 4, 4], w: int8[16, 16, {k}, {k}]) -> y: int8[2, 16, {oh}, {oh}] {{
        y = conv2d(x, w, pad={pad}) >> 4
        schedule {{ {sched} }}
    }}"""
    result = run(src, {"x": x, "w": wt}, config("default"))
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["y"], low8(conv_ref(x, wt, 1, pad) >> 4))


# -- bugs ---------------------------------------------------------------------------------------

NESTED = """
kernel g(x: int8[2, 16]) -> y: int8[2, 16] { y = x + 1 }
kernel f(x: int8[2, 16]) -> y: int8[2, 16] { y = g(x) + 1 }
kernel h(x: int8[2, 16]) -> (y: int8[2, 16], z: int8[2, 16]) { y = x + 1; z = x + 3 }
kernel f2(x: int8[2, 16]) -> y: int8[2, 16] { u, v = h(x)
    y = u + v }
"""


def test_same_kernel_called_twice_with_different_arguments():
    rng = np.random.default_rng(0)
    a, b = rand8(rng, 2, 16), rand8(rng, 2, 16)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    cases = [
        ("p = f(a) + 0\n q = f(b)", a64 + 2, b64 + 2),
        ("p = f2(a) + 0\n q = f2(b)", 2 * a64 + 4, 2 * b64 + 4),
    ]
    wrong = []
    for body, p, q in cases:
        head = "kernel main(a: int8[2, 16], b: int8[2, 16]) -> (p: int8[2, 16], q: int8[2, 16])"
        src = NESTED + f"{head} {{\n {body}\n}}"
        result = run(src, {"a": a, "b": b}, kernel="main")
        if not (result.outputs["p"] == low8(p)).all() or not (result.outputs["q"] == low8(q)).all():
            wrong.append(body)
    assert wrong == []


def test_conv_column_tile_entirely_in_padding():
    rng = np.random.default_rng(1)
    x, wt = rand8(rng, 1, 16, 4, 4), rand8(rng, 16, 16, 1, 1)
    src = """kernel c(x: int8[1, 16, 4, 4], w: int8[16, 16, 1, 1]) -> y: int8[1, 16, 6, 6] {
        y = conv2d(x, w, pad=1) >> 4
        schedule { tile_h = 1; tile_w = 1 }
    }"""
    result = run(src, {"x": x, "w": wt}, config("default"))
    np.testing.assert_array_equal(result.outputs["y"], low8(conv_ref(x, wt, 1, 1) >> 4))


def test_conv_padding_wider_than_the_kernel():
    rng = np.random.default_rng(1)
    x, wt = rand8(rng, 1, 16, 4, 4), rand8(rng, 16, 16, 1, 1)
    src = """kernel c(x: int8[1, 16, 4, 4], w: int8[16, 16, 1, 1]) -> y: int8[1, 16, 8, 8] {
        y = conv2d(x, w, pad=2) >> 4
        schedule { tile_h = 1 }
    }"""
    result = run(src, {"x": x, "w": wt}, config("default"))
    np.testing.assert_array_equal(result.outputs["y"], low8(conv_ref(x, wt, 1, 2) >> 4))


def test_conv_padding_wider_than_the_kernel_without_schedule():
    src = """kernel c(x: int8[1, 512, 30, 30], w: int8[512, 512, 1, 1]) -> y: int8[1, 512, 34, 34] {
        y = conv2d(x, w, pad=2) >> 8
    }"""
    compile_source(src, config("default"))


def test_local_holding_the_matmul_used_twice():
    rng = np.random.default_rng(2)
    x, w = rand8(rng, 4, 32), rand8(rng, 16, 32)
    src = """kernel k(x: int8[4, 32], w: int8[16, 32]) -> y: int8[4, 16] {
        t = matmul(x, w)
        y = (t >> 4) + (t >> 6)
    }"""
    m = matmul_ref(x, w)
    result = run(src, {"x": x, "w": w})
    np.testing.assert_array_equal(result.outputs["y"], low8((m >> 4) + (m >> 6)))


def test_subtracting_a_call_result_used_twice():
    rng = np.random.default_rng(11)
    a = rand8(rng, 3, 40)
    a1 = low8(a.astype(np.int64) + 1).astype(np.int64)
    src = INC + """kernel f(x: int8[3, 40], s: int8[3, 40]) -> y: int8[3, 40] { y = (x >> 1) - s }
    kernel main(a: int8[3, 40]) -> (p: int8[3, 40], q: int8[3, 40]) {
        t = inc(a)
        p = f(t, t)
        q = (t >> 2) - t
    }"""
    result = run(src, {"a": a}, kernel="main")
    np.testing.assert_array_equal(result.outputs["p"], low8((a1 >> 1) - a1))
    np.testing.assert_array_equal(result.outputs["q"], low8((a1 >> 2) - a1))


def test_schedule_fixing_tile_h_and_tile_w():
    rng = np.random.default_rng(4)
    x, wt = rand8(rng, 1, 64, 8, 8), rand8(rng, 32, 64, 3, 3)
    src = """kernel c(x: int8[1, 64, 8, 8], w: int8[32, 64, 3, 3]) -> y: int8[1, 32, 8, 8] {
        y = conv2d(x, w, pad=1) >> 8
        schedule { tile_h = 2; tile_w = 3 }
    }"""
    result = run(src, {"x": x, "w": wt})
    np.testing.assert_array_equal(result.outputs["y"], low8(conv_ref(x, wt, 1, 1) >> 8))


def test_inputs_order_with_input_channel_tile_names_the_conflict():
    src = """kernel c(x: int8[1, 64, 8, 8], w: int8[32, 64, 3, 3]) -> y: int8[1, 32, 8, 8] {
        y = conv2d(x, w, pad=1) >> 8
        schedule { order = (h, w, oc); tile_ic = 16 }
    }"""
    with pytest.raises(CompileError) as info:
        compile_source(src, config("default"))
    assert "no tiling fits the on-chip buffers" not in info.value.message


def test_tensor_names_with_double_underscore_are_reserved():
    """Names beginning with __ belong to the compiler's constants (such as __identity): refused clearly."""
    for src, name in [("kernel k(__w: int8[2, 16]) -> y: int8[2, 16] { y = __w + 1 }", "__w"),
                      ("kernel k(x: int8[2, 16]) -> __y: int8[2, 16] { __y = x + 1 }", "__y"),
                      ("kernel k(__identity: int8[2, 16]) -> y: int8[2, 16] { y = __identity + 1 }", "__identity")]:
        with pytest.raises(CompileError) as info:
            compile_source(src, config("default"))
        assert "reserved" in info.value.message and name in info.value.message


def test_vector_used_per_channel_and_as_a_full_operand():
    rng = np.random.default_rng(3)
    c, a = rand32(rng, 40, lo=-999, hi=999), rand8(rng, 3, 40)
    src = "kernel k(a: int8[3, 40], c: int32[40]) -> (y: int8[3, 40], z: int8[40]) { y = a + c; z = c >> 2 }"
    result = run(src, {"a": a, "c": c}, config("batch4"))
    np.testing.assert_array_equal(result.outputs["y"], low8(a.astype(np.int64) + c))
    np.testing.assert_array_equal(result.outputs["z"], low8(c >> 2))


def test_unary_minus_of_an_int8_tensor():
    rng = np.random.default_rng(3)
    a, x = rand32(rng, 3, 40, lo=-999, hi=999), rand8(rng, 3, 40)
    result = run("kernel k(a: int32[3, 40], x: int8[3, 40]) -> y: int8[3, 40] { y = -x + a }", {"a": a, "x": x})
    np.testing.assert_array_equal(result.outputs["y"], low8(a.astype(np.int64) - x))


def test_a_field_past_its_width_is_an_internal_limit_naming_the_instruction():
    """Codegen checks every field once the program is complete: a loop count past ITER_OUT's 14 bits (a
    schedule the tiler never makes) is a one-line 'internal limit' error naming the instruction and field."""
    from vtacc.backend.codegen import generate
    from vtacc.schedule.steps import Alu, Group, Kernel

    cfg = config("default")
    huge = Alu(Kernel(((0, 0, 0),), 1 << 14, 1, (0, 1), (0, 1)), "add", imm=1)
    with pytest.raises(CompileError, match=r"internal limit: instruction 1: alu field iter_out = 16384 is out of "
                                           r"range 0\.\.16383"):
        generate([Group("too long", None, [huge])], [], {}, [], cfg, "t.vk")

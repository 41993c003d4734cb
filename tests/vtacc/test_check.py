"""Checking: the reference workloads, the checked IR's structure, and every error message."""

from __future__ import annotations

import pytest

from vtacc.frontend.check import CompileErrors, broadcast, check_source, fold, load_kernels
from vtacc.frontend.checked import Binary, Call, Cast, Const, Conv2d, MatMul, Node, Pool, TensorRef
from vtasm.errors import CompileError

from .resnet import RESNET, layer_source


def tree(node: Node):
    """A node as nested tuples: an expectation written independently of the printer."""
    if isinstance(node, TensorRef):
        return node.tensor.name
    if isinstance(node, Const):
        return node.value
    if isinstance(node, MatMul):
        return ("matmul", tree(node.x), tree(node.w))
    if isinstance(node, Conv2d):
        return ("conv2d", tree(node.x), tree(node.w), node.stride, node.pad, node.groups)
    if isinstance(node, Pool):
        return (node.kind + "_pool", tree(node.x), node.size, node.stride, node.pad, node.pad_value)
    if isinstance(node, Binary):
        return (node.op, tree(node.a), tree(node.b))
    if isinstance(node, Cast):
        return (node.dtype, tree(node.x))
    assert isinstance(node, Call)
    return ("call", node.kernel, node.result_index, *map(tree, node.args))


def kernel(source: str, name: str | None = None):
    checked = check_source(source, "t.vk")
    return checked.kernel(name) if name else checked.kernels[-1]


def value(source: str, result: str = "y", name: str | None = None) -> Node:
    k = kernel(source, name)
    return next(a.value for a in k.assigns if a.target.name == result)


# -- the reference workloads (shared/spec/workloads.md) ------------------------------------------------

VADD = "kernel vadd(a: int32[1, 1024], b: int32[1, 1024]) -> c: int8[1, 1024] {\n    c = a + b\n}\n"
MATMUL = "kernel mm(a: int8[1, 256], w: int8[256, 256]) -> c: int8[1, 256] {\n    c = matmul(a, w)\n}\n"
BLOCKED = """\
kernel blocked_matmul(a: int8[1, 1024], w: int8[1024, 1024]) -> c: int8[1, 1024] {
    c = clip(matmul(a, w) >> 8, 0, 127)
    schedule { tile_k = 256; tile_o = 256; threads = 2 }
}
"""
LOAD_STORE = "kernel load_store(x: int32[6, 96]) -> y: int8[6, 96] { y = x >> 0 }\n"
GEMM = """\
kernel gemm(x: int8[4, 16], w: int8[64, 16]) -> y: int8[4, 64] {
    y = clip(dense(x, w) >> 8, 0, 127)
}
"""
ALU = """\
kernel alu(a: int32[8, 128], b: int32[8, 128])
    -> (shl: int32[8, 128], maxi: int32[8, 128], maxt: int32[8, 128],
        addi: int32[8, 128], addt: int32[8, 128], shr: int32[8, 128]) {
    shl = a << 3; maxi = max(a, 2); maxt = max(a, b)
    addi = a + 4; addt = a + b; shr = a >> 1
}
"""
RELU = "kernel relu_k(a: int32[8, 160]) -> y: int8[8, 160] {\n    y = min(max(a, 0), 127)\n}\n"
SHIFT_AND_SCALE = "kernel shift_and_scale(a: int32[2, 128]) -> y: int32[2, 128] {\n    y = (a + 3) >> 2\n}\n"
DENSE = """\
kernel dense_layer(x: int8[16, 512], w: int8[1008, 512]) -> y: int8[16, 1008] {
    y = clip(matmul(x, w) >> 8, 0, 127)
}
"""
POOLING = """\
kernel pools(x: int8[1, 64, 56, 56]) -> (a: int8[1, 64, 28, 28], b: int8[1, 64, 28, 28], c: int32[1, 64, 28, 28]) {
    a = max_pool(x, 2)
    b = max_pool(x, 3, stride=2, pad=1)
    c = avg_pool(x, 2)
}
"""
GROUPED = """\
kernel grouped(x: int8[1, 128, 56, 56], w: int8[128, 16, 3, 3]) -> y: int8[1, 128, 56, 56] {
    y = clip(conv2d(x, w, pad=1, groups=8) >> 8, 0, 127)
}
"""
RESIDUAL = """\
kernel conv(x: int8[1, 64, 56, 56], w: int8[64, 64, 3, 3], b: int32[64]) -> y: int8[1, 64, 56, 56] {
    y = clip((conv2d(x, w, stride=1, pad=1) >> 8) + b, 0, 127)
    schedule { tile_h = 7; tile_oc = 32; threads = 2 }
}

kernel block(x: int8[1, 64, 56, 56], w1: int8[64, 64, 3, 3], w2: int8[64, 64, 3, 3], b: int32[64])
    -> y: int8[1, 64, 56, 56] {
    t = conv(x, w1, b)            # a call of another kernel: result goes through DRAM
    y = clip(((conv2d(t, w2, pad=1) >> 8) + x) >> 1, 0, 127)
}
"""

def resnet_source(name: str) -> tuple[str, int]:
    source, (hw, ic, oc, k, pad, stride) = layer_source(name)
    return source, (hw + 2 * pad - k) // stride + 1


@pytest.mark.parametrize(
    "source, expected",
    [
        (VADD, ("add", "a", "b")),
        (MATMUL, ("matmul", "a", "w")),
        (BLOCKED, ("min", ("max", ("shr", ("matmul", "a", "w"), 8), 0), 127)),
        (LOAD_STORE, ("shr", "x", 0)),
        (GEMM, ("min", ("max", ("shr", ("matmul", "x", "w"), 8), 0), 127)),
        (RELU, ("min", ("max", "a", 0), 127)),
        (SHIFT_AND_SCALE, ("shr", ("add", "a", 3), 2)),
        (DENSE, ("min", ("max", ("shr", ("matmul", "x", "w"), 8), 0), 127)),
        (GROUPED, ("min", ("max", ("shr", ("conv2d", "x", "w", 1, 1, 8), 8), 0), 127)),
    ],
)
def test_workload_structure(source, expected):
    k = kernel(source)
    (assign,) = k.assigns
    assert tree(assign.value) == expected
    assert assign.value.shape == assign.target.shape


def test_workload_shapes_and_dtypes():
    c = value(BLOCKED, "c")
    matmul = c.a.a.a
    assert (matmul.shape, matmul.dtype) == ((1, 1024), "int32")
    assert (matmul.x.shape, matmul.x.dtype, matmul.w.shape) == ((1, 1024), "int8", (1024, 1024))
    assert c.dtype == "int32" and kernel(BLOCKED).outputs[0].dtype == "int8"
    assert value(DENSE).shape == (16, 1008)
    assert value(GEMM).a.a.a.shape == (4, 64)
    assert value(VADD, "c").a_shape == (1, 1024) and value(VADD, "c").b_shape == (1, 1024)


def test_alu_workload_has_six_results_in_order():
    k = kernel(ALU)
    assert [a.target.name for a in k.assigns] == ["shl", "maxi", "maxt", "addi", "addt", "shr"]
    assert [tree(a.value) for a in k.assigns] == [
        ("shl", "a", 3), ("max", "a", 2), ("max", "a", "b"), ("add", "a", 4), ("add", "a", "b"), ("shr", "a", 1),
    ]
    maxi = k.assigns[1].value
    assert maxi.a_shape == (8, 128) and maxi.b_shape == (1, 1)


@pytest.mark.parametrize("name", sorted(RESNET))
def test_resnet_convolutions(name):
    source, out = resnet_source(name)
    hw, ic, oc, k, pad, stride = RESNET[name]
    y = value(source)
    assert tree(y) == ("min", ("max", ("add", ("shr", ("conv2d", "x", "w", stride, pad, 1), 8), "b"), 0), 127)
    conv, add = y.a.a.a.a, y.a.a
    assert conv.shape == (1, oc, out, out) and conv.dtype == "int32"
    assert add.b_shape == (1, oc, 1, 1) and add.a_shape == (1, oc, out, out)


def test_pooling():
    k = kernel(POOLING)
    a, b, c = (x.value for x in k.assigns)
    assert tree(a) == ("max_pool", "x", 2, 2, 0, -128)
    assert tree(b) == ("max_pool", "x", 3, 2, 1, -128)
    assert tree(c) == ("shr", ("sum_pool", "x", 2, 2, 0, 0), 2)
    assert a.shape == b.shape == c.shape == (1, 64, 28, 28)


def test_pool_positional_options_and_int32_max_pool_padding():
    source = (
        "kernel p(x: int32[1, 16, 9, 9]) -> (a: int32[1, 16, 4, 4], b: int32[1, 16, 5, 5], c: int32[1, 16, 1, 1]) {\n"
        "    a = sum_pool(x, 3, 2)\n    b = max_pool(x, 3, 2, 1)\n    c = avg_pool(x, size=4, stride=9)\n}\n"
    )
    a, b, c = (x.value for x in kernel(source).assigns)
    assert tree(a) == ("sum_pool", "x", 3, 2, 0, 0)
    assert tree(b) == ("max_pool", "x", 3, 2, 1, -(2**31))
    assert tree(c) == ("shr", ("sum_pool", "x", 4, 9, 0, 0), 4)


def test_residual_block_calls_conv_through_dram():
    checked = check_source(RESIDUAL, "t.vk")
    assert [k.name for k in checked.kernels] == ["conv", "block"]
    y = checked.kernel("block").assigns[0].value
    assert tree(y) == (
        "min",
        ("max", ("shr", ("add", ("shr", ("conv2d", ("call", "conv", 0, "x", "w1", "b"), "w2", 1, 1, 1), 8), "x"), 1),
         0),
        127,
    )
    call = y.a.a.a.a.a.x
    assert (call.shape, call.dtype) == ((1, 64, 56, 56), "int8")
    schedule = checked.kernel("conv").schedule
    assert (schedule.tiles, schedule.threads, schedule.order) == ({"h": 7, "oc": 32}, 2, None)
    assert set(schedule.spans) == {"tile_h", "tile_oc", "threads"} and schedule.span.line == 3
    assert checked.kernel("block").schedule.tiles == {}


def test_a_local_used_twice_is_one_node():
    source = "kernel k(x: int8[4, 8]) -> (a: int32[4, 8], b: int32[4, 8]) {\n t = x * 3\n a = t + t\n b = t >> 1\n}"
    a, b = (x.value for x in kernel(source).assigns)
    assert a.a is a.b is b.a
    assert isinstance(a.a, Binary) and a.a.span.line == 2


def test_a_result_once_assigned_can_be_read():
    source = "kernel k(x: int8[4]) -> (a: int8[4], b: int32[4]) {\n a = x + 1\n b = a * 2\n}"
    a, b = (x.value for x in kernel(source).assigns)
    assert b.a is a


def test_kernels_can_be_called_before_their_definition_and_unpacked():
    source = """\
kernel user(x: int8[2, 16]) -> y: int32[2, 16] {
    lo, hi = split(x)
    y = lo + hi
}
kernel split(x: int8[2, 16]) -> (lo: int8[2, 16], hi: int32[2, 16]) {
    lo = x >> 4; hi = x << 4
}
"""
    y = value(source, name="user")
    assert tree(y) == ("add", ("call", "split", 0, "x"), ("call", "split", 1, "x"))
    assert (y.a.dtype, y.b.dtype) == ("int8", "int32")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("-128", -128),
        ("1 << 4", 16),
        ("(2 + 3) * -4", -20),
        ("1 << 31", -(2**31)),
        ("2147483647 + 1", -(2**31)),
        ("-2147483648", -(2**31)),
        ("0x7fffffff * 2", -2),
        ("-7 >> 1", -4),
        ("min(3, -3) + max(1, 2)", -1),
        ("clip(300, 0, 127)", 127),
        ("relu(-5)", 0),
        ("int8(200)", -56),
        ("int32(-(4))", -4),
    ],
)
def test_constant_folding(text, expected):
    source = f"kernel k(x: int8[4]) -> y: int32[4] {{\n y = x + ({text})\n}}"
    folded = value(source).b
    assert isinstance(folded, Const) and folded.value == expected and folded.shape == ()


def test_unary_minus_of_a_tensor_and_casts():
    source = "kernel k(x: int8[4], v: int32[4]) -> (a: int32[4], b: int8[4]) {\n a = -x\n b = int8(v) + int32(x)\n}"
    a, b = (x.value for x in kernel(source).assigns)
    assert tree(a) == ("sub", 0, "x")
    assert tree(b) == ("add", ("int8", "v"), ("int32", "x"))
    assert (b.a.dtype, b.a.shape, b.b.dtype) == ("int8", (4,), "int32")


def test_tensor_shift_amount_and_broadcasting_rules():
    source = """\
kernel k(x: int8[1, 8, 4, 4], s: int32[1, 8, 1, 1], c: int32[8], r: int32[4], m: int32[3, 1]) -> (
        a: int32[1, 8, 4, 4], b: int32[1, 8, 4, 4], d: int32[3, 4]) {
    a = x >> s
    b = x * c
    d = m + r
}
"""
    a, b, d = (x.value for x in kernel(source).assigns)
    assert (a.a_shape, a.b_shape) == ((1, 8, 4, 4), (1, 8, 1, 1))
    assert (b.a_shape, b.b_shape) == ((1, 8, 4, 4), (1, 8, 1, 1))
    assert (d.shape, d.a_shape, d.b_shape) == ((3, 4), (3, 1), (1, 4))


def test_per_channel_broadcast_mismatch_explains_the_rule():
    source = "kernel k(c: int8[1, 8, 4, 4], r: int32[4]) -> y: int32[1, 8, 4, 4] {\n y = c + r\n}\n"
    (error,) = errors(source)
    assert error.message == (
        "cannot broadcast int8[1, 8, 4, 4] with int32[4] in '+': dimension 1 is 8 against 4 "
        "(a 1-D operand against a 4-D value is per channel: [1, C, 1, 1])"
    )


def test_broadcast_and_fold_helpers():
    assert broadcast((4,), (1, 4, 3, 3)) == ((1, 4, 3, 3), (1, 4, 1, 1), (1, 4, 3, 3))
    assert broadcast((), (2, 3)) == ((2, 3), (1, 1), (2, 3))
    assert broadcast((2, 1), (5,)) == ((2, 5), (2, 1), (1, 5))
    assert isinstance(broadcast((3,), (1, 4, 3, 3)), str)
    assert fold("mul", 65536, 65536) == 0
    assert fold("shr", -1, 31) == -1


def test_file_level_api(tmp_path):
    path = tmp_path / "fc.vk"
    path.write_text(BLOCKED)
    checked = load_kernels(path)
    assert checked.path == str(path) and checked.source == BLOCKED
    assert checked.kernels[0].span.file == str(path)
    with pytest.raises(CompileError, match="cannot read"):
        load_kernels(tmp_path / "missing.vk")
    with pytest.raises(KeyError):
        checked.kernel("nope")


# -- errors ------------------------------------------------------------------------------------------------


def errors(source: str) -> list[CompileError]:
    with pytest.raises(CompileErrors) as info:
        check_source(source, "e.vk")
    return list(info.value.errors)


HEADER = (
    "kernel k(x: int8[1, 1024], w: int8[512, 1000], c: int8[1, 64, 8, 8], cw: int8[64, 64, 3, 3],\n"
    "         b: int32[64], v: int32[1, 1024]) -> y: int8[1, 1024] {\n"
)


def body_error(body: str) -> tuple[str, str]:
    """The single error of a kernel body (line 3 onwards) as ("line:col", message)."""
    (error,) = errors(HEADER + body + "\n}\n")
    return f"{error.span.line}:{error.span.column}", error.message


BODY_ERRORS = [
    # names
    ("    y = z + 1", "3:9", "unknown name 'z'"),
    ("    y = xx + 1", "3:9", "unknown name 'xx'; did you mean 'x'?"),
    ("    y = t + 1\n    t = x", "3:9", "local 't' is used before it is assigned (it is assigned at line 4)"),
    ("    t = y + 1\n    y = x", "3:9", "result 'y' is used before it is assigned (it is assigned at line 4)"),
    ("    y = x\n    y = x", "4:5", "result 'y' is assigned twice (first at line 3); each name is assigned once"),
    ("    t = x\n    t = x\n    y = t", "4:5",
     "local 't' is assigned twice (first at line 3); each name is assigned once"),
    ("    x = v\n    y = x", "3:5", "cannot assign to 'x': it is an input of kernel 'k'"),
    ("    y = relu", "3:9", "'relu' is a function: call it as relu(...)"),
    ("    y = x(1)", "3:9", "'x' is a tensor, not a function"),
    ("    y = mamtul(x, w)", "3:9", "unknown function 'mamtul'; did you mean 'matmul'?"),
    # matmul / dense
    (
        "    y = matmul(x, w)",
        "3:19",
        "shape mismatch: matmul(x, w) needs w as [O, 1024] (w[o, k] pairs with x[n, k]), got int8[512, 1000]",
    ),
    ("    y = dense(c, w)", "3:15", "dense(c, w) needs c as [N, K], got int8[1, 64, 8, 8]"),
    ("    y = matmul(x, c)", "3:19", "matmul(x, c) needs c as [O, K], got int8[1, 64, 8, 8]"),
    (
        "    y = matmul(v, w)",
        "3:16",
        "matmul needs 'v' as an int8 tensor (a parameter or the int8 result of a called kernel): VTA's GEMM "
        "reads int8 inputs and weights, and 'v' is an int32 tensor (int32[1, 1024])",
    ),
    (
        "    y = matmul(x >> 1, w)",
        "3:16",
        "matmul needs 'x >> 1' as an int8 tensor (a parameter or the int8 result of a called kernel): VTA's GEMM "
        "reads int8 inputs and weights, and 'x >> 1' is a value computed in this kernel (int32[1, 1024]); to use "
        "it, make it the int8 result of another kernel and call that kernel",
    ),
    (
        "    y = matmul(3, w)",
        "3:16",
        "matmul needs '3' as an int8 tensor (a parameter or the int8 result of a called kernel): VTA's GEMM "
        "reads int8 inputs and weights, and '3' is the constant 3",
    ),
    # conv2d
    ("    y = conv2d(c, cw, 1)", "3:23", "conv2d takes at most 2 positional arguments (x, w), got 3; give stride, "
     "pad and groups by keyword, as in stride=2"),
    ("    y = conv2d(c, cw, strid=1)", "3:23",
     "unknown keyword 'strid' for conv2d (it takes stride, pad, groups, pad_top, pad_left, pad_bottom, pad_right); "
     "did you mean 'stride'?"),
    ("    y = conv2d(c, cw, pad=1, pad=1)", "3:30", "'pad' is given twice"),
    ("    y = conv2d(c, cw, pad=1, 2)", "3:30", "a positional argument cannot follow a keyword argument"),
    ("    y = conv2d(c, cw, stride=0)", "3:30", "stride must be >= 1, got 0"),
    ("    y = conv2d(c, cw, pad=-1)", "3:27", "pad must be >= 0, got -1"),
    ("    y = conv2d(c, cw, pad=x)", "3:27", "pad must be an integer constant, got int8[1, 1024]"),
    ("    y = conv2d(c, cw, groups=3)", "3:30", "groups=3 must divide the 64 input channels of c"),
    ("    y = conv2d(c, cw, groups=2)", "3:19", "shape mismatch: conv2d(c, cw) needs cw as [OC, 32, KH, KW] "
     "(64 input channels / groups=2), got int8[64, 64, 3, 3]"),
    ("    y = conv2d(c, w)", "3:19", "conv2d(c, w) needs w as [OC, IC/groups, KH, KW], got int8[512, 1000]"),
    ("    y = conv2d(x, cw)", "3:16", "conv2d(x, cw) needs x as [N, IC, H, W], got int8[1, 1024]"),
    ("    y = conv2d(c, cw, stride=2, pad=0, groups=1) + conv2d(c, cw, pad=-3)", "3:70", "pad must be >= 0, got -3"),
    ("    t = conv2d(c, cw, pad=-1 + 0)\n    y = x", "3:27", "pad must be >= 0, got -1"),
    # pools
    ("    y = avg_pool(c, 3)", "3:9", "avg_pool with size=3 divides by 9, which is not a power of two (avg_pool is "
     "sum_pool >> log2(size*size)); use sum_pool and scale explicitly"),
    ("    y = max_pool(c, 2, pad=2)", "3:28", "pad must be in 0..1, got 2"),
    ("    y = max_pool(c, 0)", "3:21", "size must be >= 1, got 0"),
    ("    y = max_pool(c, stride=2)", "3:9", "max_pool needs a window size, as in max_pool(x, 2)"),
    ("    y = sum_pool(c, 9)", "3:9", "sum_pool has no output: a 9x9 window does not fit the 8x8 input with pad=0"),
    ("    y = sum_pool(x, 2)", "3:18", "sum_pool needs x as [N, C, H, W], got int8[1, 1024]"),
    ("    y = max_pool(c, 2, 2, 0, 1, 1)", "3:33", "max_pool takes at most 5 positional arguments (x, size, stride, "
     "pad, pad_end), got 6"),
    ("    y = max_pool(c, 3, 2, 0, 3)", "3:30", "pad_end must be in 0..2, got 3"),
    (
        "    y = max_pool(c + 1, 2)",
        "3:18",
        "max_pool needs 'c + 1' as a tensor (a parameter or the result of a called kernel): pooling reads its "
        "input from DRAM, and 'c + 1' is a value computed in this kernel (int32[1, 64, 8, 8]); to use it, make it "
        "the int8 result of another kernel and call that kernel; or a conv2d itself, pooled in the accumulator "
        "before the rest: max_pool(conv2d(x, w), ...) + b",
    ),
    # element-wise
    ("    y = x + c", "3:11", "cannot broadcast int8[1, 1024] with int8[1, 64, 8, 8] in '+': dimension 3 is 1024 "
     "against 8"),
    ("    t = c * v\n    y = x", "3:11", "cannot broadcast int8[1, 64, 8, 8] with int32[1, 1024] in '*': "
     "dimension 3 is 8 against 1024"),
    ("    y = min(x, c)", "3:9", "cannot broadcast int8[1, 1024] with int8[1, 64, 8, 8] in 'min': dimension 3 is "
     "1024 against 8"),
    ("    y = x >> 32", "3:14", "shift amount must be 0..31, got 32"),
    ("    y = x << -1", "3:14", "shift amount must be 0..31, got -1"),
    ("    y = x << (40 - 20) * 2", "3:14", "shift amount must be 0..31, got 40"),
    ("    y = x + 4294967296", "3:13", "integer 4294967296 does not fit in int32 (-2147483648..2147483647)"),
    ("    y = x + -2147483649", "3:13", "integer -2147483649 does not fit in int32 (-2147483648..2147483647)"),
    ("    y = relu(x, 1)", "3:17", "relu takes at most 1 positional argument (x), got 2"),
    ("    y = clip(x, 0)", "3:9", "clip needs 3 arguments (x, lo, hi), got 2"),
    ("    y = int8(x, a=1)", "3:17", "int8 takes no keyword arguments"),
    # results
    ("    y = 0", "3:9", "shape mismatch: result 'y' is declared int8[1, 1024] but its value is the constant 0 "
     "(shape [])"),
    ("    y = c >> 1", "3:9", "shape mismatch: result 'y' is declared int8[1, 1024] but its value is "
     "int32[1, 64, 8, 8]"),
    ("    t = x", "2:46", "result 'y' is never assigned"),
    # schedules
    ("    y = x\n    schedule { tile_x = 3 }", "4:16", "unknown schedule key 'tile_x'; did you mean 'tile_w'? (keys: "
     "tile_n, tile_k, tile_o, tile_oc, tile_ic, tile_h, tile_w, threads, order)"),
    ("    y = x\n    schedule { threads = 3 }", "4:26", "threads must be 1 or 2 (VTA runs one or two virtual threads), "
     "got 3"),
    ("    y = x\n    schedule { tile_h = 0 }", "4:25", "tile_h must be a positive integer, got 0"),
    ("    y = x\n    schedule { tile_h = x }", "4:16", "tile_h must be an integer constant, got int8[1, 1024]"),
    ("    y = x\n    schedule { tile_h = (n, k) }", "4:16", "tile_h must be an integer constant, got a list of names"),
    ("    y = x\n    schedule { tile_h = 2; tile_h = 4 }", "4:28", "'tile_h' is set twice in the schedule"),
    ("    y = x\n    schedule { order = (n, q) }", "4:28", "unknown axis 'q' in order (axes: n, k, o, oc, ic, h, w)"),
    ("    y = x\n    schedule { order = (oc, o, oc) }", "4:32", "axis 'oc' appears twice in order"),
    ("    y = x\n    schedule { order = 3 }", "4:16", "order must be a parenthesised list of axis names, as in "
     "order = (n, o, k)"),
    ("    schedule { tile_h = 2 }\n    y = x", "3:5", "the schedule block must be the last item of the kernel body"),
]


@pytest.mark.parametrize("body, where, message", BODY_ERRORS)
def test_error_messages(body, where, message):
    assert body_error(body) == (where, message)


def test_error_render_has_source_line_and_caret():
    (error,) = errors(HEADER + "    acc = matmul(x, w)\n    y = acc\n}\n")
    assert error.render() == (
        "e.vk:3:21: shape mismatch: matmul(x, w) needs w as [O, 1024] (w[o, k] pairs with x[n, k]), "
        "got int8[512, 1000]\n"
        "        acc = matmul(x, w)\n"
        "                        ^"
    )
    (error,) = errors(HEADER + "    y = x + c\n}\n")
    assert error.render().splitlines()[1:] == ["        y = x + c", "              ^"]
    (error,) = errors(HEADER + "    y = x + 4294967296\n}\n")
    assert error.render().splitlines()[2] == "                ^^^^^^^^^^"


HEADERS = [
    ("kernel k(x: int16[4]) -> y: int8[4] { y = 1 }", "1:13", "unknown dtype 'int16': tensors are int8 or int32; "
     "did you mean 'int8'?"),
    ("kernel k(x: int8[4, 0]) -> y: int8[4] { y = 1 }", "1:21", "a dimension must be a positive integer, got 0"),
    ("kernel k(x: int8[4], x: int8[4]) -> y: int8[4] { y = x }", "1:22", "'x' is declared twice (first at 1:10)"),
    ("kernel k(x: int8[4]) -> x: int8[4] { x = 1 }", "1:25", "'x' is declared twice (first at 1:10)"),
    ("kernel relu(x: int8[4]) -> y: int8[4] { y = x }", "1:8", "kernel 'relu' has the name of a built-in function"),
]


@pytest.mark.parametrize("source, where, message", HEADERS)
def test_header_errors(source, where, message):
    found = [(f"{e.span.line}:{e.span.column}", e.message) for e in errors(source + "\n")]
    assert (where, message) in found


def test_a_bad_parameter_is_not_reported_again_where_it_is_used():
    found = errors("kernel k(x: int16[4]) -> y: int8[4] {\n y = x + 1\n}\n")
    assert [e.message for e in found] == ["unknown dtype 'int16': tensors are int8 or int32; did you mean 'int8'?"]


CALLEE = "kernel g(a: int8[4, 16], s: int32[4, 16]) -> (p: int8[4, 16], q: int32[4, 16]) {\n p = a; q = s\n}\n"
CALLS = [
    ("    t = g(x, s)\n    y = x", "2:9", "kernel 'g' has 2 results: unpack them, as in `p, q = g(...)`"),
    ("    p, q, r = g(x, s)\n    y = x", "2:15", "kernel 'g' has 2 results, but 3 names are assigned"),
    ("    p, q = x + 1\n    y = x", "2:12", "only a call of a kernel with 2 results can be unpacked into 2 names"),
    ("    p, q = relu(x)\n    y = x", "2:12", "only a call of a kernel with 2 results can be unpacked into 2 names"),
    ("    p, q = g(x)\n    y = x", "2:12", "kernel 'g' takes 2 arguments (a, s), got 1"),
    ("    p, q = g(x, a=s)\n    y = x", "2:17", "kernel calls take positional arguments only ('a=' given)"),
    ("    p, q = g(s, s)\n    y = x", "2:14", "argument 1 of 'g' (a) must be int8[4, 16], got int32[4, 16]; "
     "int8(...) converts (int8 keeps the low 8 bits)"),
    ("    p, q = g(x, x)\n    y = x", "2:17", "argument 2 of 'g' (s) must be int32[4, 16], got int8[4, 16]; "
     "int32(...) converts (int8 keeps the low 8 bits)"),
    ("    p, q = g(x, 1)\n    y = x", "2:17", "argument 2 of 'g' (s) must be int32[4, 16], got the constant 1"),
    ("    p, q = g(x, s2)\n    y = x", "2:17", "argument 2 of 'g' (s) must be int32[4, 16], got int32[4, 8]"),
]


@pytest.mark.parametrize("body, where, message", CALLS)
def test_call_errors(body, where, message):
    source = "kernel k(x: int8[4, 16], s: int32[4, 16], s2: int32[4, 8]) -> y: int8[4, 16] {\n" + body + "\n}\n"
    (error,) = errors(source + CALLEE)
    assert (f"{error.span.line}:{error.span.column}", error.message) == (where, message)


def test_calls_with_conversions_are_accepted():
    source = "kernel k(x: int8[4, 16], s: int32[4, 16]) -> y: int8[4, 16] {\n p, q = g(int8(s), int32(x)); y = p\n}\n"
    (assign,) = kernel(source + CALLEE, "k").assigns
    assert tree(assign.value) == ("call", "g", 0, ("int8", "s"), ("int32", "x"))


def test_recursion_is_refused_with_the_cycle():
    source = """\
kernel a(x: int8[4]) -> y: int8[4] { y = b(x) }
kernel b(x: int8[4]) -> y: int8[4] { y = a(x) }
kernel c(x: int8[4]) -> y: int8[4] { y = c(x) }
kernel d(x: int8[4]) -> y: int8[4] { y = a(x) }
"""
    found = [(e.span.line, e.span.column, e.message) for e in errors(source)]
    suffix = " (a kernel cannot call itself, directly or indirectly)"
    assert found == [
        (1, 42, "recursive call: a -> b -> a" + suffix),
        (2, 42, "recursive call: b -> a -> b" + suffix),
        (3, 42, "recursive call: c -> c" + suffix),
    ]


def test_duplicate_kernels():
    source = "kernel a(x: int8[4]) -> y: int8[4] { y = x }\nkernel a(x: int8[4]) -> y: int8[4] { y = x }\n"
    (error,) = errors(source)
    assert (error.span.line, error.message) == (2, "kernel 'a' is defined twice (first at line 1)")


def test_every_error_is_collected_and_sorted_by_position():
    source = """\
kernel first(x: int8[4]) -> y: int8[4] {
    t = x >> 40
    y = nope + t
}
kernel second(x: int8[4], x: int8[4]) -> y: int8[4] {
    y = x
    z = 0
    z = 1
}
"""
    with pytest.raises(CompileErrors) as info:
        check_source(source, "e.vk")
    found = [(e.span.line, e.span.column, e.message) for e in info.value.errors]
    assert found == [
        (2, 14, "shift amount must be 0..31, got 40"),
        (3, 9, "unknown name 'nope'"),
        (5, 27, "'x' is declared twice (first at 5:15)"),
        (8, 5, "local 'z' is assigned twice (first at line 7); each name is assigned once"),
    ]
    rendered = info.value.render()
    assert rendered.count("e.vk:") == 4 and rendered.startswith("e.vk:2:14: shift amount")
    assert isinstance(info.value, CompileError) and info.value.span.line == 2


def test_format_checked_dump():
    from vtacc.frontend.printer import format_checked

    text = format_checked(check_source(RESIDUAL, "fc.vk"))
    lines = text.splitlines()
    assert lines[0] == (
        "kernel conv(x: int8[1, 64, 56, 56], w: int8[64, 64, 3, 3], b: int32[64]) -> y: int8[1, 64, 56, 56]  # fc.vk:1"
    )
    assert lines[1] == "  t1 = conv2d(x, w, stride=1, pad=1, groups=1) : int32[1, 64, 56, 56]  # fc.vk:2"
    assert lines[3] == "  t3 = t2 + b (b as [1, 64, 1, 1]) : int32[1, 64, 56, 56]  # fc.vk:2"
    assert lines[6] == "  y = t5 : int8[1, 64, 56, 56] (low 8 bits stored)  # fc.vk:2"
    assert lines[7] == "  schedule { tile_h = 7; tile_oc = 32; threads = 2 }"
    assert "  t1 = conv(x, w1, b) : int8[1, 64, 56, 56]  # fc.vk:8" in lines
    shared = format_checked(check_source("kernel k(x: int8[4]) -> y: int32[4] {\n t = x * 3\n y = t + t\n}", "s.vk"))
    assert shared.splitlines()[1:] == [
        "  t1 = x * 3 : int32[4]  # s.vk:2",
        "  t2 = t1 + t1 : int32[4]  # s.vk:3",
        "  y = t2 : int32[4]  # s.vk:3",
    ]


def test_a_bad_result_declaration_is_reported_once():
    found = errors("kernel k(x: int8[4]) -> y: int9[4] {\n y = x + 1\n z = y\n}\n")
    assert [e.message for e in found] == ["unknown dtype 'int9': tensors are int8 or int32; did you mean 'int8'?"]


def test_bad_input_never_raises_anything_but_compile_error():
    """Random cuts and insertions into valid sources give CompileError, never a traceback."""
    import random

    pieces = ["(", ")", ",", "=", "x", "1", "-", "{", "}", "\n", ";", "[", "]", "int32", "matmul(", "conv2d(", "y",
              "a, b", "schedule {", "order = (n)", "max_pool(", "g(", "0x", "99999999999", ">>", "kernel"]
    rng = random.Random(7)
    sources = [RESIDUAL, POOLING, ALU, GROUPED, BLOCKED, CALLEE]
    for _ in range(400):
        source = rng.choice(sources)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(source) + 1)
            if rng.random() < 0.4:
                source = source[:at] + source[at + rng.randint(1, 5):]
            else:
                source = source[:at] + rng.choice(pieces) + source[at:]
        try:
            check_source(source, "f.vk")
        except CompileError as error:
            assert error.render().startswith("f.vk:")


def test_an_entry_kernel_is_checked_with_only_the_kernels_it_calls():
    source = """kernel a(x: int8[4]) -> y: int8[4] { y = b(x) + 1 }
kernel b(x: int8[4]) -> y: int8[4] { y = c(x) >> 1 }
kernel c(x: int8[4]) -> y: int8[4] { y = x + 1 }
kernel broken(x: int8[4]) -> y: int8[4] { y = nope }
kernel c(x: int8[4]) -> y: int8[4] { y = x }
"""
    with pytest.raises(CompileErrors):
        check_source(source, "f.vk")
    assert [k.name for k in check_source(source.replace("kernel c(x: int8[4]) -> y: int8[4] { y = x }\n", ""), "f.vk",
                                         entry="a").kernels] == ["a", "b", "c"]
    with pytest.raises(CompileErrors) as info:  # the second definition of a needed kernel is still an error
        check_source(source, "f.vk", entry="b")
    found = [(e.span.line, e.message) for e in info.value.errors]
    assert found == [(5, "kernel 'c' is defined twice (first at line 3)")]
    with pytest.raises(CompileError, match="no kernel named d"):
        check_source(source, "f.vk", entry="d")

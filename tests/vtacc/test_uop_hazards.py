"""Compiled micro-op kernels keep both destination rules of isa.md section 7, bit-exact against numpy.

The runtime refuses a micro-op whose dst equals that of either of the two
before it in the list; the pipelined hardware loses one of two consecutive
executions on one accumulator element. Convolutions whose output tile is a
single element (a 1x1 output, or a dense layer written as a convolution over
the whole map) sum into partial-sum copies instead.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vtacc.schedule.kernels import Dim, Spare, build_kernel, keeps_rules
from vtacc.schedule.steps import Kernel

from .harness import CONFIGS, config, conv_ref, low8, rand8
from .linting import run_linted


def check(result, warnings, name, expected):
    assert warnings == []
    assert result.races == []
    np.testing.assert_array_equal(result.outputs[name], expected)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_one_by_one_output_of_a_three_by_three_kernel_over_three_channel_blocks(cfg):
    rng = np.random.default_rng(7)
    x, w = rand8(rng, 1, 48, 3, 3), rand8(rng, 16, 48, 3, 3)
    src = "kernel c3b(x: int8[1, 48, 3, 3], w: int8[16, 48, 3, 3]) -> y: int8[1, 16, 1, 1] { y = conv2d(x, w) }"
    result, warnings = run_linted(src, {"x": x, "w": w}, config(cfg))
    check(result, warnings, "y", low8(conv_ref(x, w, 1, 0)))


@pytest.mark.parametrize("cfg", CONFIGS)
def test_two_output_blocks_in_one_tile_do_not_alternate_in_the_list(cfg):
    rng = np.random.default_rng(8)
    x, w = rand8(rng, 1, 32, 2, 2), rand8(rng, 32, 32, 2, 2)
    src = """kernel k(x: int8[1, 32, 2, 2], w: int8[32, 32, 2, 2]) -> y: int8[1, 32, 1, 1] {
        y = conv2d(x, w) >> 8
        schedule { tile_oc = 32 }
    }"""
    result, warnings = run_linted(src, {"x": x, "w": w}, config(cfg))
    check(result, warnings, "y", low8(conv_ref(x, w, 1, 0) >> 8))


CNN = """
kernel conv1(x: int8[1, 16, 12, 12], w: int8[32, 16, 3, 3]) -> y: int8[1, 32, 12, 12] {
    y = clip(conv2d(x, w, pad=1) >> 7, 0, 127)
}
kernel pool1(x: int8[1, 32, 12, 12]) -> y: int8[1, 32, 6, 6] { y = max_pool(x, 2) }
kernel conv2(x: int8[1, 32, 6, 6], w: int8[48, 32, 3, 3]) -> y: int8[1, 48, 6, 6] {
    y = clip(conv2d(x, w, pad=1) >> 8, 0, 127)
}
kernel pool2(x: int8[1, 48, 6, 6]) -> y: int8[1, 48, 3, 3] { y = max_pool(x, 2) }
kernel main(x: int8[1, 16, 12, 12], w1: int8[32, 16, 3, 3], w2: int8[48, 32, 3, 3], w3: int8[10, 48, 3, 3])
    -> y: int8[1, 10, 1, 1] {
    y = conv2d(pool2(conv2(pool1(conv1(x, w1)), w2)), w3) >> 6    # the dense layer: a 3x3 map to 10 classes
}
"""


def max_pool2(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


@pytest.mark.parametrize("cfg", CONFIGS)
def test_conv_pool_conv_pool_dense_program(cfg):
    rng = np.random.default_rng(9)
    x, w1, w2, w3 = rand8(rng, 1, 16, 12, 12), rand8(rng, 32, 16, 3, 3), rand8(rng, 48, 32, 3, 3), \
        rand8(rng, 10, 48, 3, 3)
    result, warnings = run_linted(CNN, {"x": x, "w1": w1, "w2": w2, "w3": w3}, config(cfg))
    a = max_pool2(np.clip(conv_ref(x, w1, 1, 1) >> 7, 0, 127).astype(np.int8))
    b = max_pool2(np.clip(conv_ref(a, w2, 1, 1) >> 8, 0, 127).astype(np.int8))
    check(result, warnings, "y", low8(conv_ref(b, w3, 1, 0) >> 6))


# -- the kernel builder ---------------------------------------------------------------------------


def executions(k: Kernel) -> list[tuple[int, int, int]]:
    """Every execution's (dst, src, wgt), in execution order."""
    return [(u[0] + i * k.dst[0] + j * k.dst[1], u[1] + i * k.src[0] + j * k.src[1], u[2] + i * k.wgt[0] + j * k.wgt[1])
            for i in range(k.iter_out) for j in range(k.iter_in) for u in k.uops]


def space(dims: list[Dim], base: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """Every point of an iteration space as (dst, src, wgt)."""
    points = [base]
    for d in dims:
        points = [(p[0] + i * d.dst, p[1] + i * d.src, p[2] + i * d.wgt) for p in points for i in range(d.extent)]
    return points


def gemm_space(draw) -> list[Dim]:
    """The iteration space of a convolution tile, as convolution.gemm_chunks builds it."""
    nn, nc, nh, nw, nic, kh, kw, s = (draw(st.integers(1, hi)) for hi in (2, 3, 3, 3, 4, 3, 3, 2))
    tw_in, th_in = (nw - 1) * s + kw, (nh - 1) * s + kh
    plane, pix = th_in * tw_in, nh * nw
    return [Dim("n", nn, nc * pix, nic * plane), Dim("oc", nc, pix, 0, nic * kh * kw),
            Dim("ic", nic, 0, plane, kh * kw), Dim("kh", kh, 0, tw_in, kw), Dim("kw", kw, 0, 1, 1),
            Dim("oh", nh, nw, s * tw_in), Dim("ow", nw, 1, s)]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_convolution_tile_folds_into_a_kernel_that_keeps_the_rules(data):
    dims = gemm_space(data.draw)
    elems = dims[0].extent * dims[1].extent * dims[5].extent * dims[6].extent
    acc = 40
    room = Spare(acc, 200, elems, 6 // elems)
    kernel = build_kernel(dims, (acc, 0, 0), spare=room if elems <= 2 else None)
    assert keeps_rules(kernel)
    # the same terms, each into its element or a partial-sum copy of it
    got = [((d - room.base) % elems + acc if d >= room.base else d, s, w) for d, s, w in executions(kernel)]
    assert sorted(got) == sorted(space(dims, (acc, 0, 0)))


def test_a_single_element_sum_is_spread_over_partial_sums():
    kernel = build_kernel([Dim("k", 27, 0, 1, 1)], (5, 0, 0), spare=Spare(5, 100, 1, 3))
    assert [u[0] for u in kernel.uops] == [5, 100, 101] and (kernel.iter_out, kernel.iter_in) == (1, 9)
    assert Spare(5, 100, 1, 3).used(kernel) == 2
    with pytest.raises(ValueError, match="3 apart"):
        build_kernel([Dim("k", 27, 0, 1, 1)], (5, 0, 0))


@pytest.mark.parametrize("kernel, ok", [
    (Kernel(((0, 0, 0), (1, 0, 0)), 1, 4, (0, 0), (0, 0)), False),  # 0 1 0 1: two apart
    (Kernel(((0, 0, 0), (1, 0, 0), (2, 0, 0)), 1, 4, (0, 0), (0, 0)), True),  # 0 1 2 0 1 2: three apart
    (Kernel(((0, 0, 0), (1, 0, 0), (0, 0, 0)), 1, 1, (0, 0), (0, 0)), False),  # list distance 2
    (Kernel(((0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 0, 0)), 1, 1, (0, 0), (0, 0)), True),
    (Kernel(((0, 0, 0), (1, 0, 0)), 1, 2, (0, 1), (0, 0)), False),  # 1 then (next iteration) 0 + 1
    (Kernel(((0, 0, 0),), 3, 1, (0, 0), (0, 0)), False),  # the outer loop repeats one element
    (Kernel(((0, 0, 0),), 3, 2, (0, 1), (0, 0)), False),  # 0 1 0 1 0 1
    (Kernel(((0, 0, 0),), 3, 3, (0, 1), (0, 0)), True),  # 0 1 2 0 1 2 0 1 2
    (Kernel(((0, 0, 0),), 2, 3, (1, 1), (0, 0)), False),  # 0 1 2 1 2 3: 2 is written, then read two later
])
def test_keeps_rules(kernel, ok):
    assert keeps_rules(kernel) == ok

"""Convolutions, pooling, residual blocks and chained kernels, run bit-exact against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from vtacc.reports.explain import traffic
from vtasim.timing.profile import resolve_profile
from vtasm import isa

from .harness import compile_source, config, conv_ref, rand8, rand32, run
from .resnet import RESNET, layer_source


def run_layer(name: str, cfg_name: str = "default", schedule: str = "", profile=None):
    src, (h, ic, oc, k, pad, stride) = layer_source(name, schedule)
    rng = np.random.default_rng(hash(name) % 2**32)
    x, w = rand8(rng, 1, ic, h, h), rand8(rng, oc, ic, k, k)
    b = rand32(rng, oc, lo=-3000, hi=3000)
    result = run(src, {"x": x, "w": w, "b": b}, config(cfg_name), profile=profile)
    expected = np.clip((conv_ref(x, w, stride, pad) >> 8) + b[None, :, None, None], 0, 127).astype(np.int8)
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["y"], expected)
    return result


@pytest.mark.parametrize("name", list(RESNET))
def test_resnet18_layer_default_config(name):
    result = run_layer(name)
    compiled = result.compiled
    moved = sum(traffic(compiled).values()) - traffic(compiled).get("uop", 0)
    minimum = sum(t.nbytes for t in compiled.tensors if not t.constant)
    assert moved <= 1.5 * minimum, f"{name} moves {moved / minimum:.2f}x the compulsory minimum"
    assert all(p.tiling.threads == 2 for p in compiled.planned)


@pytest.mark.parametrize("name", ["C4", "C7", "C10", "C2", "C9"])
def test_resnet18_layer_tiled_for_chisel_2021(name):
    """Tiles chosen for the 2021 design (strided 1x1 windows that skip rows, the last tile's epilogue in parts)."""
    result = run_layer(name, profile=resolve_profile("chisel-2021", 16))
    compiled = result.compiled
    moved = sum(traffic(compiled).values()) - traffic(compiled).get("uop", 0)
    assert moved <= 1.5 * sum(t.nbytes for t in compiled.tensors if not t.constant)


@pytest.mark.parametrize("cfg", ["batch2", "block8", "block32"])
@pytest.mark.parametrize("name", ["C8", "C10", "C11"])
def test_resnet18_layers_other_configs(name, cfg):
    run_layer(name, cfg)


def test_conv_opt_tutorial_schedule():
    """The tutorial's C8 schedule: tiles of 7 rows and 128 output channels, two virtual threads."""
    result = run_layer("C8", schedule="schedule { tile_h = 7; tile_oc = 128; threads = 2 }")
    t = result.compiled.planned[0].tiling
    assert (t.th, t.toc * 16, t.threads) == (7, 128, 2)


@pytest.mark.slow
def test_resnet18_first_layer():
    rng = np.random.default_rng(1)
    x, w, b = rand8(rng, 1, 3, 224, 224), rand8(rng, 64, 3, 7, 7), rand32(rng, 64, lo=-1000, hi=1000)
    src = """kernel c1(x: int8[1, 3, 224, 224], w: int8[64, 3, 7, 7], b: int32[64]) -> y: int8[1, 64, 112, 112] {
        y = clip((conv2d(x, w, stride=2, pad=3) >> 8) + b, 0, 127)
    }"""
    result = run(src, {"x": x, "w": w, "b": b})
    expected = np.clip((conv_ref(x, w, 2, 3) >> 8) + b[None, :, None, None], 0, 127).astype(np.int8)
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["y"], expected)


def test_grouped_convolution():
    rng = np.random.default_rng(3)
    x, w = rand8(rng, 1, 128, 28, 28), rand8(rng, 128, 16, 3, 3)
    src = """kernel g(x: int8[1, 128, 28, 28], w: int8[128, 16, 3, 3]) -> y: int8[1, 128, 28, 28] {
        y = clip(conv2d(x, w, pad=1, groups=8) >> 8, 0, 127)
    }"""
    result = run(src, {"x": x, "w": w})
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["y"], np.clip(conv_ref(x, w, 1, 1, 8) >> 8, 0, 127).astype(np.int8))


@pytest.mark.parametrize("channels, groups", [(24, 24), (40, 20), (1000, 1000)])
def test_groups_narrower_than_a_block_over_an_odd_channel_count(channels, groups):
    """The last GEMM group is partly padding, as for the next multiple of BLOCK channels (not one tile as wide
    as all the channels)."""
    rng = np.random.default_rng(channels)
    x, w = rand8(rng, 1, channels, 6, 6), rand8(rng, channels, channels // groups, 3, 3)
    src = f"""kernel g(x: int8[1, {channels}, 6, 6], w: int8[{channels}, {channels // groups}, 3, 3])
        -> y: int8[1, {channels}, 6, 6] {{
        y = clip(conv2d(x, w, pad=1, groups={groups}) >> 6, -128, 127)
    }}"""
    result = run(src, {"x": x, "w": w})
    want = np.clip(conv_ref(x, w, 1, 1, groups) >> 6, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(result.outputs["y"], want)


@pytest.mark.parametrize("kind", ["depthwise", "global_avg_pool"])
def test_odd_channel_count_costs_what_the_next_block_multiple_does(kind):
    """1000 channels: the program and its predicted cycles are those of 1008 channels or less (they were C^2:
    a 172 MB program and 23.5 M cycles for the pool of SqueezeNet's last layer, against 2.9 MB and 0.39 M)."""
    def compiled(c: int):
        if kind == "depthwise":
            src = f"""kernel k(x: int8[1, {c}, 14, 14], w: int8[{c}, 1, 3, 3]) -> y: int8[1, {c}, 14, 14] {{
                y = conv2d(x, w, pad=1, groups={c}) >> 6
            }}"""
        else:
            src = f"kernel k(x: int8[1, {c}, 13, 13]) -> y: int8[1, {c}, 1, 1] {{ y = global_avg_pool(x) }}"
        return compile_source(src, config("default"))

    odd, even = compiled(1000), compiled(1008)
    assert sum(len(seg.data) for seg in odd.program.segments) <= sum(len(seg.data) for seg in even.program.segments)
    assert odd.timed.report.cycles <= even.timed.report.cycles


def test_global_average_over_an_odd_channel_count():
    rng = np.random.default_rng(5)
    x = rand8(rng, 1, 40, 7, 7)
    result = run("kernel p(x: int8[1, 40, 7, 7]) -> y: int8[1, 40, 1, 1] { y = global_avg_pool(x) }", {"x": x})
    want = (x.astype(np.int64).sum(axis=(2, 3), keepdims=True) * 84) >> 12  # docs/language.md: 7x7 is * 84 >> 12
    np.testing.assert_array_equal(result.outputs["y"], want.astype(np.int8))


def pool_ref(x: np.ndarray, k: int, s: int, p: int, kind: str, p_end: int | None = None) -> np.ndarray:
    n, c, h, w = x.shape
    fill = -128 if kind == "max" else 0
    e = p if p_end is None else p_end
    xp = np.full((n, c, h + p + e, w + p + e), fill, np.int64)
    xp[:, :, p:p + h, p:p + w] = x
    oh, ow = (h + p + e - k) // s + 1, (w + p + e - k) // s + 1
    windows = [xp[:, :, i:i + s * oh:s, j:j + s * ow:s] for i in range(k) for j in range(k)]
    return np.max(windows, axis=0) if kind == "max" else np.sum(windows, axis=0)


@pytest.mark.parametrize("size,stride,pad", [(2, 2, 0), (3, 2, 1), (3, 1, 1), (2, 1, 1)])
def test_max_pooling(size, stride, pad):
    rng = np.random.default_rng(size * 10 + pad)
    x = rand8(rng, 1, 32, 15, 15)
    oh = (15 + 2 * pad - size) // stride + 1
    src = f"""kernel p(x: int8[1, 32, 15, 15]) -> y: int8[1, 32, {oh}, {oh}] {{
        y = max_pool(x, {size}, stride={stride}, pad={pad})
    }}"""
    result = run(src, {"x": x})
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["y"], pool_ref(x, size, stride, pad, "max").astype(np.int8))


@pytest.mark.parametrize("size,stride,pad,pad_end,kind", [(3, 2, 0, 1, "max"), (3, 2, 0, 2, "max"),
                                                          (2, 1, 0, 1, "max"), (3, 2, 1, 0, "max"),
                                                          (2, 2, 0, 1, "sum")])
def test_pooling_with_other_padding_at_the_end(size, stride, pad, pad_end, kind):
    """Caffe's ceil-mode windows and darknet's [0, 0, 1, 1] pads: padding after the last row and column."""
    rng = np.random.default_rng(size * 10 + pad_end)
    x = rand8(rng, 1, 32, 13, 13)
    oh = (13 + pad + pad_end - size) // stride + 1
    src = f"""kernel p(x: int8[1, 32, 13, 13]) -> y: int8[1, 32, {oh}, {oh}] {{
        y = {kind}_pool(x, {size}, stride={stride}, pad={pad}, pad_end={pad_end}) >> 2
    }}"""
    result = run(src, {"x": x})
    assert result.races == []
    want = (pool_ref(x, size, stride, pad, kind, pad_end) >> 2).astype(np.int8)
    np.testing.assert_array_equal(result.outputs["y"], want)


def test_average_pooling_is_sum_then_shift():
    rng = np.random.default_rng(7)
    x = rand8(rng, 1, 48, 14, 14)
    src = "kernel p(x: int8[1, 48, 14, 14]) -> y: int8[1, 48, 7, 7] { y = avg_pool(x, 2) }"
    result = run(src, {"x": x})
    np.testing.assert_array_equal(result.outputs["y"], (pool_ref(x, 2, 2, 0, "sum") >> 2).astype(np.int8))


RESIDUAL = """
kernel conv_relu(x: int8[1, 64, 14, 14], w: int8[64, 64, 3, 3], b: int32[64]) -> y: int8[1, 64, 14, 14] {
    y = clip((conv2d(x, w, pad=1) >> 8) + b, 0, 127)
}
kernel block(x: int8[1, 64, 14, 14], w1: int8[64, 64, 3, 3], w2: int8[64, 64, 3, 3], b: int32[64])
    -> y: int8[1, 64, 14, 14] {
    t = conv_relu(x, w1, b)                          # through DRAM, in the same program
    y = clip(((conv2d(t, w2, pad=1) >> 8) + x) >> 1, 0, 127)
}
"""


@pytest.mark.parametrize("cfg", ["default", "batch2", "block8", "block32"])
def test_residual_block(cfg):
    rng = np.random.default_rng(11)
    x, w1, w2 = rand8(rng, 1, 64, 14, 14), rand8(rng, 64, 64, 3, 3), rand8(rng, 64, 64, 3, 3)
    b = rand32(rng, 64, lo=-1000, hi=1000)
    result = run(RESIDUAL, {"x": x, "w1": w1, "w2": w2, "b": b}, config(cfg))
    t = np.clip((conv_ref(x, w1, 1, 1) >> 8) + b[None, :, None, None], 0, 127).astype(np.int8)
    expected = np.clip(((conv_ref(t, w2, 1, 1) >> 8) + x) >> 1, 0, 127).astype(np.int8)
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["conv_relu_y"], t)
    np.testing.assert_array_equal(result.outputs["y"], expected)


def test_main_chains_several_kernels_into_one_program():
    rng = np.random.default_rng(5)
    src = RESIDUAL + """
kernel pool2(x: int8[1, 64, 14, 14]) -> y: int8[1, 64, 7, 7] { y = max_pool(x, 2) }
kernel main(x: int8[1, 64, 14, 14], w1: int8[64, 64, 3, 3], w2: int8[64, 64, 3, 3], b: int32[64])
    -> y: int8[1, 64, 7, 7] {
    y = pool2(block(x, w1, w2, b))
}
"""
    x, w1, w2 = rand8(rng, 1, 64, 14, 14), rand8(rng, 64, 64, 3, 3), rand8(rng, 64, 64, 3, 3)
    b = rand32(rng, 64, lo=-1000, hi=1000)
    result = run(src, {"x": x, "w1": w1, "w2": w2, "b": b})
    t = np.clip((conv_ref(x, w1, 1, 1) >> 8) + b[None, :, None, None], 0, 127).astype(np.int8)
    blk = np.clip(((conv_ref(t, w2, 1, 1) >> 8) + x) >> 1, 0, 127).astype(np.int8)
    assert result.races == []
    np.testing.assert_array_equal(result.outputs["y"], pool_ref(blk, 2, 2, 0, "max").astype(np.int8))
    assert result.compiled.kernel.name == "main"


def test_strided_one_by_one_window_loads_only_the_rows_it_reads():
    """C10 (1x1, stride 2, 14x14 -> 7x7): each 16-channel chunk's window is rows 0, 2, .., 12 of the image.

    By hand: one DMA per chunk of 7 rows x 14 columns, rows 28 elements apart; two channel groups each read
    every input channel once: 2 x 256 x 7 x 14 = 50,176 input bytes. The last of the two tiles runs its
    epilogue and store in four parts: 1 + 4 stores.
    """
    result = run_layer("C10", schedule="schedule { tile_oc = 256; tile_h = 7; tile_ic = 16; threads = 2 }")
    compiled = result.compiled
    assert traffic(compiled)["inp"] == 50_176
    program = compiled.program
    inp = [i for i in program.instructions if i.kind == "load" and i["memory_type"] == isa.MEM_TYPES["inp"]]
    assert len(inp) == 2 * 16
    assert {(i["y_size"], i["x_size"], i["x_stride"]) for i in inp} == {(7, 14, 28)}
    assert sum(1 for i in program.instructions if i.kind == "store") == 1 + 4

"""Layers the importer joins into one kernel: a residual add into the convolution that feeds it
(fuse.residual_fusions, emit.fused_kernel) and a max pooling into the convolution it pools
(fuse.pool_fusions, emit.pooled_kernel). Each fused kernel computes the two layers' bits exactly, checked
against the numpy int8 execution of the two layers (reference.run_int8, written from the quantiser's
definitions) on inputs that saturate every clip, for every way the add's scales can align, every kind of
window and on every golden configuration."""

from __future__ import annotations

import numpy as np
import pytest

from tests.vtacc.harness import CONFIGS, config, run
from vtacc.onnx.convert.layers import Layer, LayerKind, Network
from vtacc.onnx.emit import emit_vk
from vtacc.onnx.fuse import pool_fusions, residual_fusions
from vtacc.onnx.quantised import QLayer, QuantisedNetwork
from vtacc.onnx.reference import run_int8

C, H = 16, 6


def _network(lc: int, lr: int, k: int, conv_first: bool = True, per_channel: bool = True, relu_conv: bool = False,
             relu_add: bool = True, leaky: tuple[int, ...] = (), bias_scale: int = 4000, batch: int = 1,
             seed: int = 0) -> QuantisedNetwork:
    """x -> conv (3x3, pad 1) -> c; y = add(c, x) with the add's left shifts (lc for c, lr for x) and shift k."""
    rng = np.random.default_rng(seed)
    shape = (batch, C, H, H)
    conv = Layer(LayerKind.CONV, "conv", ["Conv_0"], ["x"], "c", shape, pad=1, leaky=leaky)
    ins = ["c", "x"] if conv_first else ["x", "c"]
    add = Layer(LayerKind.ADD, "add", ["Add_0"], ins, "y", shape)
    shift = rng.integers(8, 11, C).astype(np.int32) if per_channel else 9
    qconv = QLayer(conv, [0], 0, weight=rng.integers(-128, 128, (C, C, 3, 3)).astype(np.int8),
                   bias=rng.integers(-bias_scale, bias_scale + 1, C).astype(np.int32), shift=shift,
                   low=0 if relu_conv else -128)
    qadd = QLayer(add, [0, 0], 0, left=[lc, lr] if conv_first else [lr, lc], shift=k, low=0 if relu_add else -128)
    net = Network("residual", [conv, add], "x", ["y"], {"x": shape, "c": shape, "y": shape})
    return QuantisedNetwork(net, [qconv, qadd], {"x": 0, "c": 0, "y": 0}, {}, [])


def _check(qnet: QuantisedNetwork, cfg_name: str = "default", seed: int = 1) -> str:
    """Compile the emitted kernel, run it on inputs over the whole int8 range, compare with the two layers."""
    cfg = config(cfg_name)
    source, values = emit_vk(qnet)
    product, consumer = qnet.layers
    assert f"kernel {product.name}_{consumer.name}(" in source  # one kernel computes both layers
    x = np.random.default_rng(seed).integers(-128, 128, qnet.network.shapes["x"]).astype(np.int8)
    result = run(source, {"x": x, **values}, cfg)
    want = run_int8(qnet, x)
    assert np.array_equal(result.outputs["y"], want["y"])
    assert result.races == []
    assert len(result.compiled.planned) == 1
    return source


# (lc, lr, k): the finer input's scale is the add's base, so one of lc, lr is 0
ALIGNMENTS = [(0, 1, 1), (0, 2, 2), (0, 0, 0), (0, 0, 1), (0, 3, 1), (0, 1, 3), (1, 0, 1), (2, 0, 3), (3, 0, 1),
              (0, 2, 0)]


@pytest.mark.parametrize("lc, lr, k", ALIGNMENTS)
@pytest.mark.parametrize("conv_first", [True, False])
def test_every_alignment_of_the_add_gives_the_two_layers_bits(lc, lr, k, conv_first):
    qnet = _network(lc, lr, k, conv_first)
    _check(qnet)


@pytest.mark.parametrize("name", CONFIGS)
def test_fused_residual_on_every_golden_configuration(name):
    cfg = config(name)
    _check(_network(0, 1, 1, batch=cfg.batch, seed=3), name, seed=4)
    _check(_network(0, 0, 1, batch=cfg.batch, per_channel=False, relu_conv=True, seed=5), name, seed=6)


@pytest.mark.parametrize("relu_conv, relu_add", [(True, True), (False, False), (True, False)])
def test_clip_bounds_of_both_layers_are_kept(relu_conv, relu_add):
    _check(_network(0, 2, 2, relu_conv=relu_conv, relu_add=relu_add, seed=7))
    _check(_network(0, 0, 1, per_channel=False, relu_conv=relu_conv, relu_add=relu_add, seed=8))


def test_a_leaky_convolution_keeps_its_rounding_apart():
    """The slope's max sits between bias and shift: the add's rounding stays its own step."""
    source = _check(_network(0, 1, 1, leaky=(2, 3), seed=9))
    assert "+ 1) >> 1" in source


def test_a_bias_near_the_int32_edge_is_not_moved():
    """Moving the rounding into a bias whose accumulator could leave int32 would wrap differently: the
    add's rounding stays its own step, and the bits are still the two layers'."""
    qnet = _network(0, 1, 1, per_channel=False, seed=10)
    conv = qnet.layers[0]
    reach = 128 * np.abs(conv.weight.astype(np.int64)).reshape(C, -1).sum(axis=1)
    conv.bias[:] = 2**31 - 1 - reach - 10  # the largest accumulator plus the bias stays in int32, plus 2^9 not
    source = _check(qnet)
    assert "+ 1) >> 1" in source


def test_the_rounding_moves_into_the_bias_when_exact():
    source, values = emit_vk(_network(0, 1, 1, per_channel=False, seed=11))
    qnet = _network(0, 1, 1, per_channel=False, seed=11)
    assert "+ 1) >> 1" not in source and ">> 10" in source  # one shift of 9 + 1, no rounding step of its own
    assert np.array_equal(values["conv_b"], qnet.layers[0].bias + (1 << 9))


def test_what_is_not_fused():
    """A product read by two layers, one the part writes for later, or an add of a tensor to itself."""
    qnet = _network(0, 1, 1)
    assert set(residual_fusions(qnet.layers, ["y"])) == {"add"}
    assert residual_fusions(qnet.layers, ["y", "c"]) == {}
    qnet.layers[1].layer.inputs = ["c", "c"]
    assert residual_fusions(qnet.layers, ["y"]) == {}


def test_a_dense_layer_with_a_residual():
    """A fully connected layer and the skip around it (a transformer's MLP block): one kernel, the same bits."""
    rng = np.random.default_rng(12)
    shape = (1, 48)
    dense = Layer(LayerKind.DENSE, "fc", ["Gemm_0"], ["x"], "c", shape)
    add = Layer(LayerKind.ADD, "add", ["Add_0"], ["x", "c"], "y", shape)
    qdense = QLayer(dense, [0], 0, weight=rng.integers(-128, 128, (48, 48)).astype(np.int8),
                    bias=rng.integers(-3000, 3001, 48).astype(np.int32), shift=rng.integers(7, 10, 48).astype(np.int32))
    qadd = QLayer(add, [0, 0], 0, left=[2, 0], shift=2, low=-128)
    net = Network("mlp", [dense, add], "x", ["y"], {"x": shape, "c": shape, "y": shape})
    source = _check(QuantisedNetwork(net, [qdense, qadd], {"x": 0, "c": 0, "y": 0}, {}, []))
    assert "matmul(x, w)" in source


def test_the_fused_kernel_is_named_after_both_layers():
    qnet = _network(0, 1, 1)
    qnet.layers[0].layer.name, qnet.layers[1].layer.name = "layer1_0_conv2", "layer1_0_add"
    source, _ = emit_vk(qnet)
    assert "kernel layer1_0_conv2_add(" in source


def _pooled(size: int, stride: int, pad: int, pad_end: int | None = None, h: int = 9, relu: bool = True,
            leaky: tuple[int, ...] = (), per_channel: bool = True, batch: int = 1, seed: int = 0) -> QuantisedNetwork:
    """x -> conv (3x3, pad 1) -> c -> max pool -> y."""
    rng = np.random.default_rng(seed)
    pad_end = pad if pad_end is None else pad_end
    o = (h + pad + pad_end - size) // stride + 1
    conv = Layer(LayerKind.CONV, "conv", ["Conv_0"], ["x"], "c", (batch, C, h, h), pad=1, leaky=leaky)
    pool = Layer(LayerKind.MAXPOOL, "pool", ["MaxPool_0"], ["c"], "y", (batch, C, o, o), size=size, stride=stride,
                 pad=pad, pad_end=pad_end)
    shift = rng.integers(8, 11, C).astype(np.int32) if per_channel else 9
    qconv = QLayer(conv, [0], 0, weight=rng.integers(-128, 128, (C, C, 3, 3)).astype(np.int8),
                   bias=rng.integers(-4000, 4001, C).astype(np.int32), shift=shift, low=0 if relu else -128)
    qpool = QLayer(pool, [0], 0)
    shapes = {"x": (batch, C, h, h), "c": (batch, C, h, h), "y": (batch, C, o, o)}
    net = Network("pooled", [conv, pool], "x", ["y"], shapes)
    return QuantisedNetwork(net, [qconv, qpool], {"x": 0, "c": 0, "y": 0}, {}, [])


@pytest.mark.parametrize("size, stride, pad, pad_end", [(3, 2, 1, None), (2, 2, 0, None), (3, 2, 0, 1), (3, 1, 1, None),
                                                        (2, 1, 0, 1)])
@pytest.mark.parametrize("relu", [True, False])
def test_every_window_of_a_pooled_convolution_gives_the_two_layers_bits(size, stride, pad, pad_end, relu):
    source = _check(_pooled(size, stride, pad, pad_end, relu=relu, seed=size + stride))
    assert "max_pool(conv2d(" in source


@pytest.mark.parametrize("name", CONFIGS)
def test_pooled_convolution_on_every_golden_configuration(name):
    cfg = config(name)
    _check(_pooled(3, 2, 1, h=12, batch=cfg.batch, seed=13), name, seed=14)
    _check(_pooled(2, 2, 0, h=11, batch=cfg.batch, per_channel=False, relu=False, seed=15), name, seed=16)


def test_a_leaky_convolution_pools_before_its_slope():
    source = _check(_pooled(2, 2, 0, leaky=(2, 3), relu=False, seed=17))
    assert "a = (max_pool(conv2d(" in source


def test_what_is_not_pooled_in_the_accumulator():
    """A product read by another layer too, one the part writes for later, an image under 2 x 2, or an
    accumulator plus bias that could leave int32 (the max and the bias would no longer commute)."""
    qnet = _pooled(3, 2, 1)
    assert set(pool_fusions(qnet.layers, ["y"])) == {"pool"}
    assert pool_fusions(qnet.layers, ["y", "c"]) == {}
    assert pool_fusions(_pooled(1, 1, 0, h=1).layers, ["y"]) == {}
    conv = qnet.layers[0]
    conv.bias[0] = 2**31 - 1 - 128 * int(np.abs(conv.weight[0].astype(np.int64)).sum()) + 1
    assert pool_fusions(qnet.layers, ["y"]) == {}
    source, values = emit_vk(qnet)
    assert "kernel conv(" in source and "kernel pool(" in source


@pytest.mark.parametrize("lc, lr, k", [(0, 24, 1), (0, 25, 1), (0, 25, 9)])
def test_a_skip_shifted_out_of_int32_keeps_the_adds_own_sum(lc, lr, k):
    """r << lr leaves int32: the add's wrapping sum and the split one differ, so the add stays whole."""
    qnet = _network(lc, lr, k, seed=lr + k)
    source = _check(qnet)
    assert f"(r << {lr})" in source


@pytest.mark.parametrize("channels", [3, 7])
def test_a_residual_around_a_first_layer_keeps_the_plain_layout(tmp_path, channels):
    """y = Add(Conv(x), x) on a few-channel program input: the convolution would read x as patches, but its
    epilogue reads x too (one layout per tensor), so x stays plain; from an ONNX file, against run_int8."""
    from onnx import TensorProto, helper

    from vtacc.model import compile_model
    from vtasim.runs.session import run_arrays

    from .models import save_model, tensor

    rng = np.random.default_rng(channels)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "x"], ["y"], name="add")]
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", [1, channels, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      {"w": rng.normal(0, 0.3, (channels, channels, 3, 3)).astype(np.float32)})
    model = compile_model(path, config("default"), rng.normal(0, 1, (32, channels, 8, 8)))
    assert [p.op.kernel for p in model.compiled.planned] == ["conv_add"]
    assert model.compiled.planned[0].op.producer.x.patches is None
    qnet = model.imported.qnet
    x = qnet.quantise_input(rng.normal(0, 0.6, (1, channels, 8, 8)))
    got = run_arrays(model.compiled.program, {model.input_name: x}, [model.output_name])[0][model.output_name]
    assert np.array_equal(got, run_int8(qnet, x)[qnet.network.output])


def test_a_pooling_whose_windows_read_too_few_pixels_stays_apart():
    """pad 1 and no end padding over a 2 x 2 product: the one window reads one pixel, too few for a tile."""
    qnet = _pooled(2, 2, 1, pad_end=0, h=2)
    assert pool_fusions(qnet.layers, ["y"]) == {}

"""A max pooling of a convolution, `max_pool(conv2d(x, w), ...)`, folds the accumulator's windows in the
convolution's tiles before the epilogue (schedule/scheduler._product_tile, pooling.fold_steps): the results
equal numpy's pooling of the convolution's definition on every golden configuration, for separable and
per-position windows, padding before and after, a first layer read as patches, a leaky slope and more
tiles than threads; the product is never stored."""

from __future__ import annotations

import numpy as np
import pytest

from vtacc.reports.explain import explain
from vtasm.errors import CompileError

from .harness import CONFIGS, compile_source, config, conv_ref, rand8, rand32, run

INT64_MIN = np.iinfo(np.int64).min


def pool_ref(a: np.ndarray, k: int, s: int, pad: int, pad_end: int | None = None) -> np.ndarray:
    """Max pooling from its definition: padding never wins (it is below every value)."""
    pad_end = pad if pad_end is None else pad_end
    n, c, h, w = a.shape
    oh, ow = (h + pad + pad_end - k) // s + 1, (w + pad + pad_end - k) // s + 1
    padded = np.full((n, c, h + pad + pad_end + k, w + pad + pad_end + k), INT64_MIN, dtype=np.int64)
    padded[:, :, pad:pad + h, pad:pad + w] = a
    out = np.full((n, c, oh, ow), INT64_MIN, dtype=np.int64)
    for i in range(k):
        for j in range(k):
            out = np.maximum(out, padded[:, :, i:i + s * oh:s, j:j + s * ow:s][:, :, :oh, :ow])
    return out


def _source(n, c, h, oc, ck, cs, cp, pk, ps, pp, pad_end=None, body=None, schedule="") -> tuple[str, int]:
    ho = (h + 2 * cp - ck) // cs + 1
    end = "" if pad_end is None else f", pad_end={pad_end}"
    po = (ho + pp + (pp if pad_end is None else pad_end) - pk) // ps + 1
    pooled = f"max_pool(conv2d(x, w, stride={cs}, pad={cp}), {pk}, stride={ps}, pad={pp}{end})"
    body = body or f"    y = clip(({pooled} + b) >> 8, 0, 127)\n"
    return f"""
kernel main(x: int8[{n}, {c}, {h}, {h}], w: int8[{oc}, {c}, {ck}, {ck}], b: int32[{oc}])
    -> y: int8[{n}, {oc}, {po}, {po}] {{
{body.replace("POOLED", pooled)}{schedule}}}
""", po


# (input channels, size, output channels, conv k, stride, pad, pool k, stride, pad)
CASES = [(3, 30, 32, 7, 2, 3, 3, 2, 1),  # ResNet's stem and max pool (the input read as patches)
         (16, 13, 16, 3, 1, 1, 2, 2, 0),  # 2x2 stride 2 over an odd image: the last row and column dropped
         (16, 11, 32, 3, 1, 1, 3, 1, 1),  # stride 1: no separable tap, a fold per window position
         (32, 15, 32, 1, 1, 0, 3, 2, 0),
         (8, 40, 48, 3, 1, 1, 3, 2, 1)]


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("case", CASES)
def test_pooled_convolutions_equal_the_definition(name, case):
    cfg = config(name)
    c, h, oc, ck, cs, cp, pk, ps, pp = case
    rng = np.random.default_rng(sum(case))
    x, w, b = rand8(rng, cfg.batch, c, h, h), rand8(rng, oc, c, ck, ck), rand32(rng, oc, lo=-5000, hi=5000)
    source, _ = _source(cfg.batch, c, h, oc, ck, cs, cp, pk, ps, pp)
    result = run(source, {"x": x, "w": w, "b": b}, cfg)
    pooled = pool_ref(conv_ref(x, w, cs, cp), pk, ps, pp)
    want = np.clip((pooled + b[None, :, None, None]) >> 8, 0, 127).astype(np.int8)
    assert np.array_equal(result.outputs["y"], want)
    assert result.races == []
    producer = result.compiled.planned[0].op.producer
    assert producer.pool == (pk, ps, pp)
    assert [t.name for t in result.compiled.program.tensors] == ["x", "w", "b", "y"]  # no product in DRAM


def test_padding_after_only_and_a_leaky_slope():
    """Caffe's ceil-mode windows (padding after the last row only) and an epilogue that is not a plain clip:
    a leaky slope on the pooled accumulator (each step never decreases, so it commutes with the max)."""
    rng = np.random.default_rng(5)
    x, w, b = rand8(rng, 1, 16, 14, 14), rand8(rng, 32, 16, 3, 3), rand32(rng, 32, lo=-5000, hi=5000)
    body = "    a = POOLED + b\n    y = clip(max(a, (a >> 3) + (a >> 5)) >> 9, -128, 127)\n"
    source, po = _source(1, 16, 14, 32, 3, 1, 1, 3, 2, 0, pad_end=1, body=body)
    result = run(source, {"x": x, "w": w, "b": b})
    a = pool_ref(conv_ref(x, w, 1, 1), 3, 2, 0, 1) + b[None, :, None, None]
    want = np.clip(np.maximum(a, (a >> 3) + (a >> 5)) >> 9, -128, 127).astype(np.int8)
    assert result.outputs["y"].shape == (1, 32, po, po) == want.shape
    assert np.array_equal(result.outputs["y"], want)
    assert result.races == []


def test_small_tiles_cover_the_image():
    """Fixed tiles of 2 x 3 pooled pixels and one channel block: many tiles, windows overlapping between them."""
    rng = np.random.default_rng(6)
    x, w, b = rand8(rng, 1, 16, 20, 20), rand8(rng, 32, 16, 3, 3), rand32(rng, 32, lo=-5000, hi=5000)
    fixed = "    schedule { tile_h = 2; tile_w = 3; tile_oc = 16 }\n"
    source, _ = _source(1, 16, 20, 32, 3, 1, 1, 3, 2, 1, schedule=fixed)
    result = run(source, {"x": x, "w": w, "b": b})
    want = np.clip((pool_ref(conv_ref(x, w, 1, 1), 3, 2, 1) + b[None, :, None, None]) >> 8, 0, 127).astype(np.int8)
    assert np.array_equal(result.outputs["y"], want)
    assert result.races == []
    tiling = result.compiled.planned[0].tiling
    assert (tiling.th, tiling.tw, tiling.toc) == (2, 3, 1)


def test_explain_says_the_pooling_is_folded():
    source, _ = _source(1, 16, 12, 32, 3, 1, 1, 3, 2, 1)
    text = explain(compile_source(source, config("default")))
    assert "then max pooling 3x3 stride 2 pad 1 in the accumulator" in text and "-> 6x6" in text


def test_fewer_cycles_than_the_two_operators():
    """The product is not stored, loaded back and moved into the accumulator, and the epilogue runs on the
    pooled pixels only."""
    rng = np.random.default_rng(7)
    x, w, b = rand8(rng, 1, 16, 24, 24), rand8(rng, 32, 16, 3, 3), rand32(rng, 32, lo=-5000, hi=5000)
    fused, _ = _source(1, 16, 24, 32, 3, 1, 1, 3, 2, 1)
    apart = """
kernel main(x: int8[1, 16, 24, 24], w: int8[32, 16, 3, 3], b: int32[32]) -> y: int8[1, 32, 12, 12] {
    t = conv(x, w, b)
    y = max_pool(t, 3, stride=2, pad=1)
}
kernel conv(x: int8[1, 16, 24, 24], w: int8[32, 16, 3, 3], b: int32[32]) -> t: int8[1, 32, 24, 24] {
    t = clip((conv2d(x, w, pad=1) + b) >> 8, 0, 127)
}
"""
    one = run(fused, {"x": x, "w": w, "b": b})
    two = run(apart, {"x": x, "w": w, "b": b}, kernel="main")
    assert np.array_equal(one.outputs["y"], two.outputs["y"])
    assert one.compiled.timed.report.cycles < two.compiled.timed.report.cycles


def test_only_max_pooling_of_a_convolution_folds():
    source, _ = _source(1, 16, 12, 32, 3, 1, 1, 3, 2, 1)
    with pytest.raises(CompileError, match="sum_pool needs"):
        compile_source(source.replace("max_pool(", "sum_pool("), config("default"))


def test_a_pooling_of_a_computed_value_says_what_folds():
    source, _ = _source(1, 16, 12, 32, 3, 1, 1, 3, 2, 1)
    with pytest.raises(CompileError, match=r"or a conv2d itself, pooled in the accumulator"):
        compile_source(source.replace("max_pool(conv2d(x, w, stride=1, pad=1)", "max_pool(conv2d(x, w, pad=1) + b"),
                       config("default"))


def test_a_last_channel_tile_too_small_for_the_gemm_is_not_chosen():
    """80 channels pooled from a 2 x 2 product down to one pixel: a tile of 3 channel blocks would leave a
    last tile of 2 elements, whose GEMM could not keep writes to one element apart."""
    rng = np.random.default_rng(8)
    x, w, b = rand8(rng, 1, 16, 4, 4), rand8(rng, 80, 16, 3, 3), rand32(rng, 80, lo=-5000, hi=5000)
    source = """
kernel main(x: int8[1, 16, 4, 4], w: int8[80, 16, 3, 3], b: int32[80]) -> y: int8[1, 80, 1, 1] {
    y = clip((max_pool(conv2d(x, w), 2, stride=2, pad=1, pad_end=0) + b) >> 8, -128, 127)
}
"""
    result = run(source, {"x": x, "w": w, "b": b})
    want = np.clip((pool_ref(conv_ref(x, w, 1, 0), 2, 2, 1, 0) + b[None, :, None, None]) >> 8, -128, 127)
    assert np.array_equal(result.outputs["y"], want.astype(np.int8))
    with pytest.raises(CompileError, match="windows read fewer than 3 product elements"):
        compile_source(source.replace("-128, 127)\n", "-128, 127)\n    schedule { tile_oc = 48 }\n"),
                       config("default"))
    with pytest.raises(CompileError, match="pool the convolution's int8 result in a kernel of its own"):
        compile_source(source.replace("80", "16"), config("default"))


def test_explain_names_the_padding_after_and_the_patches():
    """A 5x5 pooled output needs the padding after the last row: --explain says it, and that the first
    layer's input is read as patches."""
    source, po = _source(1, 3, 17, 16, 3, 2, 1, 2, 2, 0, pad_end=1)
    text = explain(compile_source(source, config("default")))
    assert po == 5 and "max pooling 2x2 stride 2 pad 0 pad_end 1 in the accumulator" in text and "-> 5x5" in text
    assert "its input read as 3x3 patches: 27 channels" in text

"""flatten, concat, narrow grouped convolutions and global_avg_pool, against numpy written from the math."""

from __future__ import annotations

import numpy as np
import pytest

from vtacc.frontend.check import check_source
from vtacc.program_builder import compile_file
from vtacc.reports.explain import explain
from vtasim.runs.session import run_arrays
from vtasm.config import DEFAULT_CONFIG, config_from_dict, default_config

SOURCE = """
kernel fc(x: int8[1, 32, 2, 2], w: int8[10, 128]) -> y: int8[1, 10] {
    y = matmul(flatten(x), w) >> 4
}
kernel grouped(x: int8[1, 32, 6, 6], w: int8[32, G, 3, 3]) -> y: int8[1, 32, 6, 6] {
    y = clip(conv2d(x, w, pad=1, groups=GROUPS) >> 5, -128, 127)
}
kernel gap(x: int8[1, 32, 7, 7]) -> y: int8[1, 32, 1, 1] {
    y = global_avg_pool(x)
}
kernel half(x: int8[1, 32, 6, 6], w: int8[16, 32, 1, 1]) -> y: int8[1, 16, 6, 6] {
    y = clip(conv2d(x, w) >> 7, 0, 127)
}
kernel cat(x: int8[1, 32, 6, 6], w: int8[16, 32, 1, 1]) -> y: int8[1, 48, 6, 6] {
    y = concat(half(x, w), x)
}
kernel block(x: int8[1, 32, 6, 6], w: int8[16, 32, 1, 1], v: int8[16, 16, 1, 1]) -> y: int8[1, 32, 6, 6] {
    h = half(x, w)
    y = concat(h, grow(h, v))
}
kernel grow(x: int8[1, 16, 6, 6], v: int8[16, 16, 1, 1]) -> y: int8[1, 16, 6, 6] {
    y = clip(conv2d(x, v) >> 6, 0, 127)
}
"""
RNG = np.random.default_rng(3)


def _conv(x, w, pad, groups):
    x = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oc, icg, kh, kw = w.shape
    oh, ow = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    out = np.zeros((x.shape[0], oc, oh, ow), np.int64)
    for o in range(oc):
        g = o // (oc // groups)
        for i in range(kh):
            for j in range(kw):
                patch = x[:, g * icg:(g + 1) * icg, i:i + oh, j:j + ow]
                out[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, i, j].astype(np.int64))
    return out


def _run(kernel, inputs, groups=4, cfg=None):
    text = SOURCE.replace("GROUPS", str(groups)).replace("G,", f"{32 // groups},")
    compiled = compile_file(check_source(text, "features.vk"), cfg or default_config(), kernel)
    return run_arrays(compiled.program, inputs, ["y"])[0]["y"], compiled


def _int8(a):
    return ((a + 128) % 256 - 128).astype(np.int8)


def _ints(*shape):
    return RNG.integers(-128, 128, shape).astype(np.int8)


@pytest.mark.parametrize("config", ["default", "batch2"])
def test_flatten_reads_the_tiled_tensor_in_place(config):
    cfg = default_config() if config == "default" else config_from_dict({**DEFAULT_CONFIG,
                                                                         "LOG_BATCH": 1})
    x, w = _ints(1, 32, 2, 2), _ints(10, 128)
    got, _ = _run("fc", {"x": x, "w": w}, cfg=cfg)
    assert np.array_equal(got, _int8((x.reshape(1, -1).astype(np.int64) @ w.T.astype(np.int64)) >> 4))


@pytest.mark.parametrize("groups", [32, 8, 4, 2])
def test_grouped_convolution_with_narrow_groups(groups):
    x, w = _ints(1, 32, 6, 6), _ints(32, 32 // groups, 3, 3)
    got, compiled = _run("grouped", {"x": x, "w": w}, groups)
    assert np.array_equal(got, np.clip(_conv(x, w, 1, groups) >> 5, -128, 127).astype(np.int8))
    wasted = 1 - (32 // groups) / 16  # BLOCK_IN 16: each group's channels use that share of a tile's width
    if wasted > 0:
        assert f"({wasted:.1%} of the multiplies wasted on zeros)" in explain(compiled)


def test_global_average_of_49_values():
    x = _ints(1, 32, 7, 7)
    got, _ = _run("gap", {"x": x})
    sums = x.astype(np.int64).sum(axis=(2, 3), keepdims=True)
    assert np.array_equal(got, _int8((sums * 84) >> 12))  # round(4096 / 49) = 84


def test_concat_parts_written_in_place():
    x, w = _ints(1, 32, 6, 6), _ints(16, 32, 1, 1)
    got, compiled = _run("cat", {"x": x, "w": w})
    half = np.clip(_conv(x, w, 0, 1) >> 7, 0, 127)
    assert np.array_equal(got, np.concatenate([half, x], axis=1).astype(np.int8))
    names = {t.name for t in compiled.program.tensors}
    assert "half_y" not in names and not any(n.startswith("y_c") for n in names)  # no separate part tensor


def test_a_concat_part_read_again_is_computed_once():
    """DenseNet's block: a result is a part of the concatenation and the input of the next layer; it is
    computed once, into its own tensor, and copied into its slice (a slice cannot be read on its own)."""
    x, w, v = _ints(1, 32, 6, 6), _ints(16, 32, 1, 1), _ints(16, 16, 1, 1)
    got, compiled = _run("block", {"x": x, "w": w, "v": v})
    half = np.clip(_conv(x, w, 0, 1) >> 7, 0, 127)
    grown = np.clip(_conv(half, v, 0, 1) >> 6, 0, 127)
    assert np.array_equal(got, np.concatenate([half, grown], axis=1).astype(np.int8))
    assert [p.op.kernel for p in compiled.planned].count("half") == 1

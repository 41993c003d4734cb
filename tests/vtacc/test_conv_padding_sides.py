"""conv2d padded differently on each side, and with kernels that are not square (issue 38).

InceptionV3's 1x7 and 7x1 convolutions pad (0, 3, 0, 3) and (3, 0, 3, 0); TensorFlow's SAME padding with a
stride pads only after the image. The language takes ``pad_top``, ``pad_left``, ``pad_bottom`` and
``pad_right`` (each ``pad`` unless given); the compiler starts each input window at the padding before the
image and lets the output's size say how far the windows reach past it, the DMA's padding fields filling
both. Each shape is checked against numpy's definition on every golden configuration.
"""

from __future__ import annotations

import numpy as np
import pytest

from vtacc.frontend.check import check_source

from .harness import CONFIGS, config, low8, rand8, run, wrap32

# (input channels, image, output channels, kernel, stride, (top, left, bottom, right), groups, schedule)
SHAPES = {
    "1x7": (32, (9, 9), 16, (1, 7), 1, (0, 3, 0, 3), 1, ""),
    "7x1": (16, (9, 11), 32, (7, 1), 1, (3, 0, 3, 0), 1, ""),
    "7x1_rows": (16, (9, 11), 16, (7, 1), 1, (3, 0, 3, 0), 1, "tile_h = 2"),
    "same_stride2": (16, (8, 8), 16, (3, 3), 2, (0, 0, 1, 1), 1, ""),
    "same_stride2_cols": (16, (8, 8), 16, (3, 3), 2, (0, 0, 1, 1), 1, "tile_h = 1; tile_w = 2"),
    "2x3_uneven": (24, (7, 5), 16, (2, 3), 1, (1, 0, 0, 2), 1, ""),
    "1x5_depthwise": (32, (6, 6), 32, (1, 5), 1, (0, 2, 0, 2), 32, ""),
    "1x1_stride2_after": (16, (7, 7), 16, (1, 1), 2, (0, 0, 1, 1), 1, ""),
}


def conv_sides(x: np.ndarray, w: np.ndarray, stride: int, pads: tuple[int, int, int, int], groups: int) -> np.ndarray:
    """The convolution from its definition, zero padding (top, left, bottom, right), int64 sums wrapped."""
    top, left, bottom, right = pads
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    xp = np.zeros((n, c, h + top + bottom, wd + left + right), np.int64)
    xp[:, :, top:top + h, left:left + wd] = x
    oh, ow = (h + top + bottom - kh) // stride + 1, (wd + left + right - kw) // stride + 1
    out = np.zeros((n, oc, oh, ow), np.int64)
    ocg = oc // groups
    for g in range(groups):
        xs, ws = xp[:, g * icg:(g + 1) * icg], w[g * ocg:(g + 1) * ocg].astype(np.int64)
        for i in range(kh):
            for j in range(kw):
                tap = xs[:, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]
                out[:, g * ocg:(g + 1) * ocg] += np.einsum("nchw,oc->nohw", tap, ws[:, :, i, j])
    return wrap32(out)


def _source(ic, hw, oc, k, s, pads, groups, schedule) -> str:
    (h, w), (kh, kw), (top, left, bottom, right) = hw, k, pads
    oh, ow = (h + top + bottom - kh) // s + 1, (w + left + right - kw) // s + 1
    block = f"\n        schedule {{ {schedule} }}" if schedule else ""
    return f"""kernel c(x: int8[1, {ic}, {h}, {w}], w: int8[{oc}, {ic // groups}, {kh}, {kw}])
        -> y: int8[1, {oc}, {oh}, {ow}] {{
        y = conv2d(x, w, stride={s}, pad_top={top}, pad_left={left}, pad_bottom={bottom}, pad_right={right},
                   groups={groups}) >> 4{block}
    }}"""


@pytest.mark.parametrize("cfg_name", CONFIGS)
@pytest.mark.parametrize("shape", SHAPES)
def test_padding_per_side_and_oblong_kernels_compute_the_convolution(shape, cfg_name):
    ic, hw, oc, k, s, pads, groups, schedule = SHAPES[shape]
    rng = np.random.default_rng(len(shape) + len(cfg_name))
    x, w = rand8(rng, 1, ic, *hw), rand8(rng, oc, ic // groups, *k)
    result = run(_source(ic, hw, oc, k, s, pads, groups, schedule), {"x": x, "w": w}, config(cfg_name))
    assert np.array_equal(result.outputs["y"], low8(conv_sides(x, w, s, pads, groups) >> 4))
    assert result.races == []


def test_each_side_defaults_to_pad():
    src = """kernel c(x: int8[1, 16, 8, 8], w: int8[16, 16, 3, 3]) -> y: int8[1, 16, 9, 8] {
        y = conv2d(x, w, pad=1, pad_bottom=2) >> 4
    }"""
    conv = check_source(src, "t.vk").kernels[0].assigns[0].value.a
    assert conv.pads == (1, 1, 2, 1) and not conv.symmetric

"""global_avg_pool of an image larger than the buffers: summed in parts over its pixels (issue 38).

A global average's window is the whole image; as one depthwise window its tile needs every pixel of a
channel block in the input buffer and as many weight taps, so an image of more pixels than the buffers
hold had no tiling. The compiler now sums such an image as a grouped matrix product over its pixels, in
chunks the tiler chooses, and shifts once; checked against numpy's definition on every golden configuration.
"""

from __future__ import annotations

import numpy as np
import pytest

from vtacc.frontend.check_builtins import average_multiplier

from .harness import CONFIGS, config, rand8, run

# (batch, channels, height, width): more pixels than any configuration's input buffer, a non-power-of-two
# area, a batch of two, channels that are no multiple of a block
SHAPES = {"64x64": (1, 48, 64, 64), "45x50": (1, 40, 45, 50), "batch2_33x33": (2, 24, 33, 33)}


@pytest.mark.parametrize("cfg_name", CONFIGS)
@pytest.mark.parametrize("shape", SHAPES)
def test_a_global_average_of_any_size_compiles_and_is_exact(shape, cfg_name):
    n, c, h, w = SHAPES[shape]
    src = f"""kernel g(x: int8[{n}, {c}, {h}, {w}]) -> y: int8[{n}, {c}, 1, 1] {{
        y = global_avg_pool(x)
    }}"""
    x = rand8(np.random.default_rng(h * w + c), n, c, h, w)
    result = run(src, {"x": x}, config(cfg_name))
    multiplier, shift = average_multiplier(h * w)
    total = x.astype(np.int64).sum(axis=(2, 3), keepdims=True)
    want = ((total * multiplier) >> shift).astype(np.int32).astype(np.int8)
    assert np.array_equal(result.outputs["y"], want)
    assert result.races == []


@pytest.mark.parametrize("cfg_name", CONFIGS)
@pytest.mark.parametrize("shape", [(1, 32, 7, 7), (1, 48, 64, 64)])
def test_a_global_sum_times_a_multiplier_rounded_and_shifted(shape, cfg_name):
    """global_avg_pool's multiplier and shift given (what the ONNX importer writes to give the average a
    scale of its own): shift=0 is the sum times the multiplier, rounded here by a constant before a shift."""
    n, c, h, w = shape
    src = f"""kernel g(x: int8[{n}, {c}, {h}, {w}]) -> y: int8[{n}, {c}, 1, 1] {{
        y = clip((global_avg_pool(x, multiplier=93, shift=0) + 2048) >> 12, -128, 127)
    }}"""
    x = rand8(np.random.default_rng(h * w + 7), n, c, h, w)
    result = run(src, {"x": x}, config(cfg_name))
    total = x.astype(np.int64).sum(axis=(2, 3), keepdims=True)
    assert np.array_equal(result.outputs["y"], np.clip((total * 93 + 2048) >> 12, -128, 127).astype(np.int8))


@pytest.mark.parametrize("text, message", [("multiplier=128", "multiplier must be in 1..127, got 128"),
                                           ("shift=32", "shift must be in 0..31, got 32"),
                                           ("scale=2", "unknown keyword 'scale'")])
def test_global_avg_pool_options_out_of_range_are_refused(text, message):
    from vtacc.frontend.check import check_source
    from vtasm.errors import VtaError

    src = f"kernel g(x: int8[1, 16, 4, 4]) -> y: int8[1, 16, 1, 1] {{ y = global_avg_pool(x, {text}) }}"
    with pytest.raises(VtaError, match=message.replace(".", r"\.")):
        check_source(src, "g.vk")

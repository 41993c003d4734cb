"""A classifier after a pooling loads its first weight tiles ahead (compiler._preload_weights): into the free
top of the weight buffer, while the convolution before the pooling computes its last tiles; the results equal
numpy's, race-free and lint-clean, on every golden configuration."""

from __future__ import annotations

import numpy as np
import pytest

from vtacc.schedule.steps import WGT, Load

from .harness import CONFIGS, config, conv_ref, rand8, rand32, run

NETWORK = """
kernel body(x: int8[{n}, 32, 14, 14], w: int8[64, 32, 3, 3], b: int32[64]) -> y: int8[{n}, 64, 14, 14] {{
    y = clip((conv2d(x, w, stride=1, pad=1) >> 8) + b, 0, 127)
}}

kernel pool(x: int8[{n}, 64, 14, 14]) -> y: int8[{n}, 64, 1, 1] {{
    y = max_pool(x, 14)
}}

kernel main(x: int8[{n}, 32, 14, 14], w: int8[64, 32, 3, 3], b: int32[64], wf: int8[200, 64])
    -> y: int8[{n}, 200] {{
    y = clip(matmul(flatten(pool(body(x, w, b))), wf) >> 6, -128, 127)
}}
"""


@pytest.mark.parametrize("name", CONFIGS)
def test_the_classifier_after_a_pooling_loads_ahead_and_computes_the_same(name):
    cfg = config(name)
    rng = np.random.default_rng(21)
    n = cfg.batch
    x, w = rand8(rng, n, 32, 14, 14), rand8(rng, 64, 32, 3, 3)
    b, wf = rand32(rng, 64, lo=-3000, hi=3000), rand8(rng, 200, 64)
    result = run(NETWORK.format(n=n), {"x": x, "w": w, "b": b, "wf": wf}, cfg)
    body = np.clip((conv_ref(x, w, 1, 1) >> 8) + b[None, :, None, None], 0, 127).astype(np.int64)
    pooled = body.max(axis=(2, 3))  # [n, 64]
    want = np.clip((pooled @ wf.T.astype(np.int64)) >> 6, -128, 127).astype(np.int8)
    assert np.array_equal(result.outputs["y"], want)
    assert result.races == []
    ahead = [g for g in result.compiled.groups if g.title.endswith("its first weight tiles, loaded ahead")]
    if name == "default":
        assert ahead  # the path this test is for
    for group in ahead:  # only the classifier's weights, into the top of the buffer
        assert group.steps and all(isinstance(st, Load) and st.buffer == WGT and st.tensor == "wf"
                                   for st in group.steps)
        assert all(st.dma.sram > 1 and st.dma.sram + st.dma.sram_elems <= cfg.wgt_depth for st in group.steps)


WIDE = """
kernel body(x: int8[1, 64, 8, 8], w: int8[256, 64, 3, 3], b: int32[256]) -> y: int8[1, 256, 4, 4] {
    y = clip((conv2d(x, w, stride=2, pad=1) >> 8) + b, 0, 127)
}

kernel pool(x: int8[1, 256, 4, 4]) -> y: int8[1, 256, 2, 2] {
    y = max_pool(x, 2)
}

kernel main(x: int8[1, 64, 8, 8], w: int8[256, 64, 3, 3], b: int32[256], wf: int8[512, 1024]) -> y: int8[1, 512] {
    y = clip(matmul(flatten(pool(body(x, w, b))), wf) >> 7, -128, 127)
}
"""


def test_a_classifier_whose_tiles_fill_the_buffer_keeps_its_preloads_apart():
    """Large weight tiles (AlexNet's classifiers): the preloaded slots start above the rotating ones, and only
    the first tiles' loads move (a rotating slot's load moved ahead would overwrite a preloaded tile)."""
    rng = np.random.default_rng(5)
    x, w = rand8(rng, 1, 64, 8, 8), rand8(rng, 256, 64, 3, 3)
    b, wf = rand32(rng, 256, lo=-3000, hi=3000), rand8(rng, 512, 1024)
    result = run(WIDE, {"x": x, "w": w, "b": b, "wf": wf})
    body = np.clip((conv_ref(x, w, 2, 1) >> 8) + b[None, :, None, None], 0, 127).astype(np.int64)
    pooled = body.reshape(1, 256, 2, 2, 2, 2).max(axis=(3, 5)).reshape(1, 1024)
    want = np.clip((pooled @ wf.T.astype(np.int64)) >> 7, -128, 127).astype(np.int8)
    assert np.array_equal(result.outputs["y"], want)
    assert result.races == []


TAIL = """
kernel block(x: int8[1, 32, 14, 14], w: int8[64, 32, 3, 3], s: int8[1, 64, 14, 14]) -> y: int8[1, 64, 14, 14] {
    y = clip((conv2d(x, w, stride=1, pad=1) >> 8) + s, 0, 127)
}

kernel gap(x: int8[1, 64, 14, 14]) -> y: int8[1, 64, 1, 1] {
    y = clip(global_avg_pool(x), -128, 127)
}

kernel main(x: int8[1, 32, 14, 14], w: int8[64, 32, 3, 3], s: int8[1, 64, 14, 14], wf: int8[300, 64])
    -> y: int8[1, 300] {
    y = clip(matmul(flatten(gap(block(x, w, s))), wf) >> 6, -128, 127)
}
"""


def test_a_classifier_after_a_global_average_loads_ahead_of_it():
    """A network's usual tail (ResNet from ONNX): the global average's multiplier tiles are the compiler's, so
    the classifier's first weights load during the convolution before it."""
    rng = np.random.default_rng(9)
    x, w, skip, wf = rand8(rng, 1, 32, 14, 14), rand8(rng, 64, 32, 3, 3), rand8(rng, 1, 64, 14, 14), \
        rand8(rng, 300, 64)
    result = run(TAIL, {"x": x, "w": w, "s": skip, "wf": wf})
    body = np.clip((conv_ref(x, w, 1, 1) >> 8) + skip, 0, 127).astype(np.int64)
    pooled = np.clip((body.sum(axis=(2, 3)) * 84) >> 14, -128, 127)  # 196 values: * 84 >> 14 (docs/language.md)
    want = np.clip((pooled @ wf.T.astype(np.int64)) >> 6, -128, 127).astype(np.int8)
    assert np.array_equal(result.outputs["y"], want)
    assert result.races == []
    assert any(g.title.endswith("its first weight tiles, loaded ahead") for g in result.compiled.groups)

"""The ten model-zoo CNNs of examples/zoo, at small input sizes: built with random weights, compiled by
vtacc, run by vtasim on float images, bit-exact with the numpy reference and within 20 dB of onnxruntime."""

from __future__ import annotations

import pytest

from examples.zoo.run import SMALL, run_network

SIZES = {**SMALL, "resnet50": 64}  # at 32 x 32 the random ResNet-50's logits keep 19 dB; 22 dB at 224


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SIZES))
def test_zoo_network_end_to_end(tmp_path, name):
    result = run_network(name, SIZES[name], tmp_path, samples=8, tests=2)
    assert result.exact, result.line()
    assert min(result.sqnr.values()) >= 20, result.line()
    assert result.macs > 0 and all(c > 0 for c in result.cycles.values())

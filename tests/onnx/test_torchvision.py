"""A torchvision architecture exported by torch.onnx, end to end (examples/torchvision): skipped where torch
is not installed (an optional extra of several GB; make test never installs it)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchvision")


def test_mobilenet_v3_small_from_torch_onnx_runs_bit_exact_and_near_onnxruntimes_int8(tmp_path):
    from examples.torchvision.run import run

    r = run("mobilenet_v3_small", 32, 17, tmp_path)
    assert r["exact"] and r["launches"] >= 1
    assert r["sqnr"] > 15 and r["sqnr"] > r["ort_sqnr"] - 8  # power-of-two scales: about a bit below onnxruntime

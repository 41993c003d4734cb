"""A trained OCR recogniser from the rapidocr_onnxruntime wheel, end to end (examples/rapidocr): skipped where
the wheel is not installed (an optional extra; make test never installs it)."""

from __future__ import annotations

import pytest

pytest.importorskip("rapidocr_onnxruntime")
pytest.importorskip("cv2")  # a dependency of the wheel: its bilinear resize is rapidocr's preprocessing


def test_edit_distance_and_ctc_decoding():
    import numpy as np

    from examples.rapidocr.run import char_accuracy, decode, edit_distance

    assert edit_distance("kitten", "sitting") == 3 and edit_distance("", "ab") == 2 and edit_distance("ab", "ab") == 0
    probs = np.eye(4)[[0, 1, 1, 0, 1, 2, 2, 3, 0]]  # blank, a, a, blank, a, b, b, c, blank
    assert decode(probs, ["<blank>", "a", "b", "c"]) == "aabc"
    assert char_accuracy(["abc", "xy"], ["abc", "xyz"]) == pytest.approx(100 * (1 - 1 / 6))


@pytest.mark.slow
def test_the_recogniser_runs_bit_exact_and_reads_rendered_lines_near_float():
    """About 45 s (the compile of its launches is most of it). Issue 38's bar, within 1 point of float, is
    measured on 100 lines (docs/onnx.md: -0.3 points); on four lines one spurious character costs 2.5
    points, so this allows one."""
    from examples.rapidocr.run import recogniser

    r = recogniser(n_lines=4, n_calibration=8, seed=1, timing=False)
    assert r["exact"]
    assert r["float_acc"] > 90  # the trained model reads the example's rendered lines
    assert r["vta_acc"] >= r["float_acc"] - 3

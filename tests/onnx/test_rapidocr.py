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
    """About 45 s (the compile of its 43 launches is most of it). Issue 38's bar, within 1 point of float, is
    not met yet: docs/onnx.md gives the figure on 100 lines (-1.3 points); on few lines one spurious trailing
    space costs several points, so this guards against regressions only."""
    from examples.rapidocr.run import recogniser

    r = recogniser(n_lines=4, n_calibration=8, seed=1, timing=False)
    assert r["exact"]
    assert r["float_acc"] > 90  # the trained model reads the example's rendered lines
    assert r["vta_acc"] >= r["float_acc"] - 6

"""examples/digits end to end: trained, imported, quantised, compiled and run on vtasim over the held-out images."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.vtacc.test_cli import tool
from tests.vtasm.paths import REPO

DIGITS = REPO / "examples" / "digits"


def test_digits_int8_accuracy_on_vtasim(tmp_path):
    out = tmp_path / "digits"
    trained = subprocess.run([sys.executable, DIGITS / "train.py", out], capture_output=True, text=True, timeout=300)
    assert trained.returncode == 0, trained.stderr
    r = tool("vtacc", out / "digits.onnx", "--calibrate", out / "calibration.npy", "-o", out / "digits.vbin",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ran = subprocess.run([sys.executable, DIGITS / "run.py", out], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr  # every output bit-exact with the numpy int8 network
    found = re.search(r"float accuracy ([\d.]+)% .* int8 accuracy on vtasim ([\d.]+)%", ran.stdout)
    assert found, ran.stdout
    float_acc, int8_acc = map(float, found.groups())
    assert int8_acc >= 95.0 and abs(int8_acc - float_acc) <= 1.0, ran.stdout
    assert "360/360 int8 outputs bit-exact" in ran.stdout

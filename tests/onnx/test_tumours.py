"""A network trained on real data beyond digits (scikit-learn's bundled breast-cancer set): its int8 accuracy
on vtasim stays within one point of the float model's, every output bit-exact with numpy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_tumours_int8_within_a_point_of_float(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "examples/tumours/run.py"), str(tmp_path)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "114/114 outputs bit-exact" in r.stdout

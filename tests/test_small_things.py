"""Issue 23, item 6: the suite says why tests are skipped, and docs/language.md says what the compiler does
for matmul's weight layout and for rank-3 tensors (checked against the compiler, not only the text)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vtasm.errors import CompileError

from .vtacc.harness import compile_source, config, rand8, run

ROOT = Path(__file__).resolve().parents[1]


def test_the_suite_prints_each_skip_reason(tmp_path):
    (tmp_path / "test_skip.py").write_text("import pytest\n\n@pytest.mark.skip(reason='no board here')\n"
                                           "def test_board():\n    pass\n")
    r = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_skip.py"), "-c",
                        str(ROOT / "pyproject.toml"), "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert "SKIPPED [1]" in r.stdout and "no board here" in r.stdout, r.stdout


def test_matmul_is_x_times_w_transposed_as_the_language_says():
    text = (ROOT / "docs" / "language.md").read_text()
    assert "`x @ w.T`" in text
    rng = np.random.default_rng(4)
    x, w = rand8(rng, 16, 32), rand8(rng, 16, 32)
    result = run("kernel m(x: int8[16, 32], w: int8[16, 32]) -> y: int8[16, 16] { y = matmul(x, w) >> 8 }",
                 {"x": x, "w": w})
    want = (x.astype(np.int64) @ w.astype(np.int64).T) >> 8
    np.testing.assert_array_equal(result.outputs["y"], want.astype(np.int8))


def test_rank_three_tensors_are_refused_as_the_language_says():
    assert "rank-3 tensor is refused" in (ROOT / "docs" / "language.md").read_text()
    with pytest.raises(CompileError, match="rank 3"):
        compile_source("kernel k(a: int8[2, 3, 4]) -> b: int8[2, 3, 4] { b = a >> 1 }", config("default"))

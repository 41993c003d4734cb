"""`vtacc explore` refusals: one line, the right exit code, nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .specs import SMALL, write

BIN = Path(sys.executable).parent


def _run(*args, cwd=None):
    return subprocess.run([BIN / "vtacc", "explore", *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_a_bad_spec_is_one_line_with_exit_1_and_no_results(tmp_path):
    spec = write(tmp_path, SMALL.replace("kernel_size = 3", "kernel_size = 0"))
    result = _run(spec, "-o", tmp_path / "out")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    line = 1 + SMALL.splitlines().index("kernel_size = 3")  # the message points at the offending key's line
    assert result.stderr.startswith(f"error: {spec}:{line}: [[workload]] #1: kernel_size must be a positive integer")
    assert not (tmp_path / "out").exists()


def test_usage_errors_exit_2(tmp_path):
    spec = write(tmp_path, SMALL)
    both = _run(spec, "-o", tmp_path / "out", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1")
    assert both.returncode == 2 and "--workers sizes the local cluster" in both.stderr
    assert _run(spec).returncode == 2  # -o is required


def test_an_unreachable_scheduler_is_one_line(tmp_path):
    spec = write(tmp_path, SMALL)
    result = _run(spec, "-o", tmp_path / "out", "--scheduler", "tcp://127.0.0.1:9")
    assert result.returncode == 2, result.stderr
    assert "cannot reach a Dask scheduler" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_compiling_still_works_beside_the_subcommand(tmp_path):
    (tmp_path / "k.vk").write_text("kernel k(a: int32[1, 16]) -> b: int8[1, 16] {\n    b = a >> 1\n}\n")
    result = subprocess.run([BIN / "vtacc", "k.vk"], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0 and "ALU" in result.stdout.upper()


def test_no_pictures_says_that_pictures_of_an_earlier_run_are_left_as_they_were(tmp_path):
    spec = write(tmp_path, SMALL)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "pareto-memory.png").write_bytes(b"an earlier run's picture")
    result = _run(spec, "-o", tmp_path / "out", "--no-pictures")
    assert result.returncode == 0, result.stderr
    assert "pareto-memory.png" in result.stderr and "from an earlier run" in result.stderr

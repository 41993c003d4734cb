"""Issue 23, item 3: error paths of the command lines. A directory where a file belongs is one `error:` line with
exit 1, as a missing file is (it was click's four-line usage, exit 2); --params given an .npy, or names no input
takes, is one line (an internal error, and a silent compile); a sweep where no point finishes says there is no
picture instead of printing an empty list."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
VADD = ROOT / "examples" / "vadd.vk"


def _tool(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / args[0]), *map(str, args[1:])], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def _one_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.mark.parametrize("args", [
    ("vtacc", "{d}"),
    ("vtacc", VADD, "-o", "{d}"),
    ("vtacc", VADD, "--params", "{d}"),
    ("vtacc", VADD, "--roofline", "{d}"),
    ("vtacc", VADD, "--config", "{d}"),
    ("vtacc", "explore", "{d}", "-o", "out"),
    ("vtasm", "assemble", "{d}"),
    ("vtasm", "assemble", ROOT / "examples" / "vadd.vasm", "-o", "{d}"),
    ("vtasim", "run", "{p}", "--trace-file", "{d}"),
    ("vtasim", "run", "{p}", "--timing", "--timeline", "{d}"),
], ids=lambda a: " ".join(str(x) for x in a[:4]) if isinstance(a, tuple) else str(a))
def test_a_directory_where_a_file_belongs(tmp_path, args):
    folder = tmp_path / "folder"
    folder.mkdir()
    program = tmp_path / "v.vbin"
    if "{p}" in args:
        assert _tool("vtasm", "assemble", ROOT / "examples" / "vadd.vasm", "-o", program, cwd=tmp_path).returncode == 0
    line = _one_error(_tool(*[str(a).replace("{d}", str(folder)).replace("{p}", str(program)) for a in args],
                            cwd=tmp_path))
    assert f"{folder}: a directory, where a file is expected" in line


def test_params_given_one_array(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros(3))
    line = _one_error(_tool("vtacc", VADD, "--params", tmp_path / "a.npy", cwd=tmp_path))
    assert "a.npy: one array; --params takes an .npz" in line


def test_params_that_name_no_input(tmp_path):
    np.savez(tmp_path / "p.npz", weights=np.zeros(3))
    r = _tool("vtacc", VADD, "--params", tmp_path / "p.npz", "-o", tmp_path / "v.vbin", cwd=tmp_path)
    assert r.returncode == 1 and "the weights given (weights) are not inputs of kernel 'vadd' (its inputs: a, b)" \
        in r.stderr and not (tmp_path / "v.vbin").exists()


@pytest.mark.slow
def test_a_sweep_where_no_point_finishes_says_so(tmp_path):
    spec = tmp_path / "none.toml"
    spec.write_text('title = "nothing fits"\n[[workload]]\nname = "huge"\nlayer = "conv2d"\ninput = [1, 16, 40, 40]\n'
                    'out_channels = 16\nkernel_size = 33\n[config]\nLOG_BLOCK = [4]\n[[hardware]]\n'
                    'profile = "chisel-2019"\n')
    r = _tool("vtacc", "explore", spec, "-o", tmp_path / "out", "--no-progress", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "no pictures: no point finished" in r.stderr and "pictures: \n" not in r.stderr

"""The installed `vtacc` script: outputs of every stage, and errors with file:line:col."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.vtasm.paths import REPO

EXAMPLES = REPO / "examples"


def tool(name: str, *args, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which(name, path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", f"{name}.cli"]
    return subprocess.run([*cmd, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_assembly_output_assembles_to_the_same_program(tmp_path):
    r = tool("vtacc", EXAMPLES / "blocked_matmul.vk", "-o", tmp_path / "fc.vasm", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "fc.vasm").read_text()
    assert "; --- fc: y tile" in text and "from blocked_matmul.vk:12:" in text and '.loc "blocked_matmul.vk" 12' in text
    assert tool("vtasm", "assemble", tmp_path / "fc.vasm", "-o", tmp_path / "a.vbin", cwd=tmp_path).returncode == 0
    assert tool("vtacc", EXAMPLES / "blocked_matmul.vk", "-o", tmp_path / "b.vbin", cwd=tmp_path).returncode == 0
    assert (tmp_path / "a.vbin").read_bytes() == (tmp_path / "b.vbin").read_bytes()


def test_compiled_program_runs_race_free_and_correct(tmp_path):
    assert tool("vtacc", EXAMPLES / "vadd.vk", "-o", tmp_path / "v.vbin", cwd=tmp_path).returncode == 0
    rng = np.random.default_rng(0)
    a = rng.integers(-(2**31), 2**31, (1, 1024), dtype=np.int64).astype(np.int32)
    b = rng.integers(-(2**31), 2**31, (1, 1024), dtype=np.int64).astype(np.int32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    r = tool("vtasim", "run", tmp_path / "v.vbin", "--input", f"a={tmp_path / 'a.npy'}", "--input",
             f"b={tmp_path / 'b.npy'}", "--output", f"c={tmp_path / 'c.npy'}", "--check-races", "--lint", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "0 race(s) found" in r.stderr and "0 lint warnings" in r.stderr and "lint [" not in r.stderr
    expected = (a.astype(np.int64) + b).astype(np.int32).astype(np.int8)
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), expected)


@pytest.mark.parametrize("emit,marker", [("checked", "matmul(x, w)"), ("schedule", "gemm"), ("ir", "# tiled schedule"),
                                         ("dump", "INSTRUCTION 0:"), ("asm", ".text")])
def test_emit_stages(tmp_path, emit, marker):
    r = tool("vtacc", EXAMPLES / "matmul.vk", "--emit", emit, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert marker in r.stdout


def test_explain_reports_tiling_and_traffic(tmp_path):
    r = tool("vtacc", EXAMPLES / "blocked_matmul.vk", "--explain", "-o", tmp_path / "x.vbin", cwd=tmp_path)
    assert r.returncode == 0
    assert "tiling:" in r.stdout and "compulsory minimum: 1,050,624" in r.stdout and "wgt 1,048,576" in r.stdout



def test_a_report_alone_goes_to_stdout_and_writes_no_program(tmp_path):
    """--explain (or --roofline) without -o prints the report and nothing else; with -o or --emit the program
    or stage goes where asked, the report still on stdout."""
    r = tool("vtacc", EXAMPLES / "blocked_matmul.vk", "--explain", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == ""
    assert "tiling:" in r.stdout and ".text" not in r.stdout and "load.wgt" not in r.stdout
    r = tool("vtacc", EXAMPLES / "blocked_matmul.vk", "--explain", "-o", tmp_path / "b.vasm", cwd=tmp_path)
    assert "tiling:" in r.stdout and ".text" in (tmp_path / "b.vasm").read_text()
    r = tool("vtacc", EXAMPLES / "blocked_matmul.vk", "--explain", "--emit", "schedule", cwd=tmp_path)
    assert r.stdout.index("tiling:") < r.stdout.index("gemm") and r.stderr == ""
    r = tool("vtacc", EXAMPLES / "blocked_matmul.vk", "--roofline", tmp_path / "r.png", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "" and (tmp_path / "r.png").exists() and "r.png" in r.stderr
    r = tool("vtacc", EXAMPLES / "blocked_matmul.vk", "--emit", "checked", "--roofline", tmp_path / "c.png",
             cwd=tmp_path)
    assert r.returncode == 0 and "matmul(" in r.stdout and (tmp_path / "c.png").exists()


def test_explain_says_which_gemm_executions_only_move_data(tmp_path):
    """Pooling reaches the accumulator through GEMMs with +-identity weights: --explain counts them apart
    (their MACs compute nothing); a matrix product has none."""
    pool = tool("vtacc", EXAMPLES / "pooling.vk", "--explain", "-o", tmp_path / "p.vbin", cwd=tmp_path)
    line = next(x for x in pool.stdout.splitlines() if "micro-op executions" in x)
    gemm = int(line.split("GEMM ")[1].split(" ")[0].replace(",", ""))
    assert gemm > 0 and f"{gemm:,} of them move int8 data through +-identity weights" in line
    mm = tool("vtacc", EXAMPLES / "blocked_matmul.vk", "--explain", "-o", tmp_path / "m.vbin", cwd=tmp_path)
    assert "identity" not in next(x for x in mm.stdout.splitlines() if "micro-op executions" in x)


BAD = {
    "sub": ("kernel k(a: int32[1, 64], b: int32[1, 64]) -> y: int8[1, 64] {\n    y = a - b\n}\n",
            "2:9", "cannot subtract tensors"),
    "mul": ("kernel k(a: int32[1, 64]) -> y: int8[1, 64] {\n    y = a * 3\n}\n", "2:9", "needs MUL"),
    "out32": ("kernel k(a: int32[1, 64]) -> y: int32[1, 64] {\n    y = a + 1\n}\n", "1:30", "8-bit values"),
    "fit": ("kernel c(x: int8[1, 256, 14, 14], w: int8[256, 256, 3, 3]) -> y: int8[1, 256, 14, 14] {\n"
            "    y = conv2d(x, w, pad=1) >> 8\n    schedule { tile_h = 14; tile_oc = 256; threads = 2 }\n}\n",
            "3:5", "6272 acc elements, 4224 more than the 2048 the acc buffer holds"),
    "syntax": ("kernel k(a: int32[1, 64]) -> y: int8[1, 64] {\n    y = a +\n}\n", "2:12", "expected an expression"),
    "name": ("kernel k(a: int32[1, 64]) -> y: int8[1, 64] {\n    y = aa + 1\n}\n", "2:9", "did you mean 'a'"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_errors_are_located_with_a_caret_and_write_nothing(tmp_path, case):
    source, where, words = BAD[case]
    (tmp_path / "k.vk").write_text(source)
    r = tool("vtacc", tmp_path / "k.vk", "-o", tmp_path / "k.vasm", cwd=tmp_path)
    assert r.returncode == 1
    assert f"k.vk:{where}:" in r.stderr.splitlines()[0] and words in r.stderr
    assert "^" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "k.vasm").exists()


def test_usage_error(tmp_path):
    assert tool("vtacc", cwd=tmp_path).returncode == 2
    assert tool("vtacc", EXAMPLES / "vadd.vk", "--emit", "nonsense", cwd=tmp_path).returncode == 2


MIXED = """kernel good(x: int8[2, 16]) -> y: int8[2, 16] {
    y = helper(x) + 1
}
kernel helper(x: int8[2, 16]) -> y: int8[2, 16] { y = x >> 1 }
kernel bad(x: int8[2, 16]) -> y: int8[2, 16] {
    t = x >> 40
    y = nope + 1
}
kernel calls_bad(x: int8[2, 16]) -> y: int8[2, 16] { y = bad(x) }
kernel refused(x: int8[2, 16]) -> y: int32[2, 16] { y = x }
"""


def test_kernel_option_checks_and_compiles_only_what_the_kernel_needs(tmp_path):
    (tmp_path / "m.vk").write_text(MIXED)
    for emit in ("asm", "checked"):
        r = tool("vtacc", tmp_path / "m.vk", "--kernel", "good", "--emit", emit, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("kernel good(") and r.stdout.endswith("\n")
    r = tool("vtacc", tmp_path / "m.vk", "--kernel", "helper", "-o", tmp_path / "h.vbin", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for kernel, where in (("calls_bad", "m.vk:6:14:"), ("bad", "m.vk:6:14:"), ("refused", "m.vk:10:35:")):
        r = tool("vtacc", tmp_path / "m.vk", "--kernel", kernel, cwd=tmp_path)
        assert r.returncode == 1 and where in r.stderr.splitlines()[0], (kernel, r.stderr)
    r = tool("vtacc", tmp_path / "m.vk", "--kernel", "nothing", cwd=tmp_path)
    assert r.returncode == 1 and "no kernel named nothing (kernels: good, helper, bad" in r.stderr


def test_every_error_of_a_report_starts_with_error(tmp_path):
    (tmp_path / "m.vk").write_text(MIXED)
    r = tool("vtacc", tmp_path / "m.vk", cwd=tmp_path)  # the whole file is checked: both errors of 'bad'
    assert r.returncode == 1 and "Traceback" not in r.stderr
    heads = [line for line in r.stderr.splitlines() if not line.startswith(" ")]
    assert heads == [
        f"error: {tmp_path / 'm.vk'}:6:14: shift amount must be 0..31, got 40",
        f"error: {tmp_path / 'm.vk'}:7:9: unknown name 'nope'",
    ]


@pytest.mark.parametrize("name, hint", [("k.vasm", "vtasm assemble k.vasm"), ("k.vbin", "vtasim run k.vbin")])
def test_a_program_given_to_the_compiler_names_the_tool_it_needs(tmp_path, name, hint):
    (tmp_path / name).write_text("; a program, not kernel language\n")
    done = tool("vtacc", name, cwd=tmp_path)
    assert done.returncode == 1 and hint in done.stderr and done.stderr.count("\n") == 1


def test_tensors_larger_than_vta_dram_are_refused_before_any_tiling(tmp_path):
    """int8[1, 4096, 4096, 4096] twice is 128 GiB: refused at once, at the declaration (it used to run on
    for minutes looking for tiles)."""
    (tmp_path / "huge.vk").write_text("kernel huge(x: int8[1, 4096, 4096, 4096]) -> y: int8[1, 4096, 4096, 4096] {\n"
                                      "    y = x >> 1\n}\n")
    done = tool("vtacc", "huge.vk", "--emit", "schedule", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("error: huge.vk:1:13: the tensors need 137,438,953,472 bytes of DRAM")


def test_a_roofline_picture_in_a_missing_directory_is_a_one_line_error(tmp_path):
    done = tool("vtacc", EXAMPLES / "matmul.vk", "--roofline", tmp_path / "nodir" / "r.png", "-o",
                tmp_path / "m.vasm", cwd=tmp_path)
    assert done.returncode == 1 and "cannot write" in done.stderr and done.stderr.count("\n") == 1

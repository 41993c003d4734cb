"""The installed `vtasm` console script, run as a user would: outputs, exit codes, messages."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .paths import GOLDEN, REPO, require

VADD = REPO / "examples" / "vadd.vasm"


def vtasm(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("vtasm", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "vtasm.cli"]
    return subprocess.run([*cmd, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_assemble_dump_disasm_round_trip(tmp_path):
    r = vtasm("assemble", VADD, "-o", tmp_path / "vadd.vbin", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    dump = vtasm("dump", tmp_path / "vadd.vbin", "--uops", cwd=tmp_path)
    assert dump.returncode == 0
    lines = dump.stdout.splitlines()
    # the listing of examples/vadd.vasm, written from its source: six instructions, the ALU add over 64 elements
    assert lines[0] == "There are 6 instructions"
    assert lines[1] == "INSTRUCTION 0: LOAD UOP"
    assert "INSTRUCTION 3: ALU - add" in lines
    alu = lines.index("INSTRUCTION 3: ALU - add")
    assert lines[alu + 1] == "\tdep - pop prev: 0, pop next: 0, push prev: 0, push next: 1"
    assert lines[alu + 3] == "\trange (0, 1)"
    assert lines[alu + 5] == "\tinner loop - iter: 64, dst: 1, src: 1"
    assert lines[-3:] == ["There are 1 uops", "[0000]\t acc=0, inp=64, wgt=0", ""]
    text = vtasm("disasm", tmp_path / "vadd.vbin", "-o", tmp_path / "again.vasm", cwd=tmp_path)
    assert text.returncode == 0
    again = vtasm("assemble", tmp_path / "again.vasm", "-o", tmp_path / "again.vbin", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.vbin").read_bytes() == (tmp_path / "vadd.vbin").read_bytes()


def test_export_import_raw(tmp_path):
    vtasm("assemble", VADD, "-o", tmp_path / "vadd.vbin", cwd=tmp_path)
    r = vtasm("export", tmp_path / "vadd.vbin", "--raw", tmp_path / "raw", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "raw" / "insn.bin").stat().st_size == 6 * 16
    assert (tmp_path / "raw" / "uop.bin").stat().st_size == 4
    layout = json.loads((tmp_path / "raw" / "layout.json").read_text())
    assert [s["file"] for s in layout["segments"]] == ["A.bin", "B.bin", "C.bin"]
    assert layout["dump"][0]["file"] == "C.bin" and layout["dump"][0]["nbytes"] == 1024
    r = vtasm("import", tmp_path / "raw", "-o", tmp_path / "back.vbin", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    back = vtasm("dump", tmp_path / "back.vbin", cwd=tmp_path).stdout
    assert back == vtasm("dump", tmp_path / "vadd.vbin", cwd=tmp_path).stdout


def test_syntax_error_is_one_located_message_and_writes_nothing(tmp_path):
    src = tmp_path / "bad.vasm"
    src.write_text(".text\n        lod.inp sram=0\n        finish\n")
    r = vtasm("assemble", src, "-o", tmp_path / "bad.vbin", cwd=tmp_path)
    assert r.returncode == 1
    first = r.stderr.splitlines()[0]
    assert first.startswith("error: ") and "bad.vasm:2:9:" in first and "load.inp" in first
    assert "^" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "bad.vbin").exists()


def test_usage_error_exit_code(tmp_path):
    assert vtasm("assemble", cwd=tmp_path).returncode == 2
    assert vtasm("frobnicate", cwd=tmp_path).returncode == 2


def test_corrupt_vbin_is_one_line(tmp_path):
    vtasm("assemble", VADD, "-o", tmp_path / "vadd.vbin", cwd=tmp_path)
    data = bytearray((tmp_path / "vadd.vbin").read_bytes())
    data[40] ^= 0xFF
    (tmp_path / "bad.vbin").write_bytes(bytes(data))
    r = vtasm("dump", tmp_path / "bad.vbin", cwd=tmp_path)
    assert r.returncode == 1
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize("name", ["bad_acc18", "bad_block8", "bad_uop16"])
def test_bad_configurations_are_refused(tmp_path, name):
    cfg = require(GOLDEN / f"{name}.config.json")
    r = vtasm("assemble", VADD, "-o", tmp_path / "x.vbin", "--config", cfg, cwd=tmp_path)
    assert r.returncode == 1
    assert "bits" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x.vbin").exists()


@pytest.mark.parametrize("name", ["batch2", "block8", "block32", "uop14"])
def test_vadd_assembles_for_other_configurations(tmp_path, name):
    cfg = require(GOLDEN / f"{name}.config.json")
    r = vtasm("assemble", VADD, "-o", tmp_path / "x.vbin", "--config", cfg, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    mismatch = vtasm("dump", tmp_path / "x.vbin", cwd=tmp_path)
    assert mismatch.returncode == 0  # the program carries its configuration
    other = "default" if name != "default" else "block8"
    r = vtasm("dump", tmp_path / "x.vbin", "--config", GOLDEN / f"{other}.config.json", cwd=tmp_path)
    assert r.returncode == 1 and "--config" in r.stderr


def test_local_vta_config_json_is_the_default(tmp_path):
    shutil.copy(require(GOLDEN / "block8.config.json"), tmp_path / "vta_config.json")
    r = vtasm("assemble", VADD, "-o", tmp_path / "x.vbin", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = vtasm("disasm", tmp_path / "x.vbin", cwd=tmp_path).stdout
    assert "LOG_BLOCK=3" in text


def test_outputs_never_replace_the_input(tmp_path):
    src = tmp_path / "v.vasm"
    src.write_text(VADD.read_text())
    r = vtasm("assemble", src, "-o", src, cwd=tmp_path)
    assert r.returncode == 2 and "is the input file" in r.stderr
    assert src.read_text() == VADD.read_text()


def test_export_refuses_a_non_empty_directory_without_force(tmp_path):
    vtasm("assemble", VADD, "-o", tmp_path / "v.vbin", cwd=tmp_path)
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "old.bin").write_bytes(b"x")
    r = vtasm("export", tmp_path / "v.vbin", "--raw", tmp_path / "raw", cwd=tmp_path)
    assert r.returncode == 1 and "not empty" in r.stderr
    r = vtasm("export", tmp_path / "v.vbin", "--raw", tmp_path / "raw", "--force", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "raw" / "layout.json").exists()


def test_binary_config_file_is_one_line(tmp_path):
    vtasm("assemble", VADD, "-o", tmp_path / "v.vbin", cwd=tmp_path)
    r = vtasm("assemble", VADD, "-o", tmp_path / "x.vbin", "--config", tmp_path / "v.vbin", cwd=tmp_path)
    assert r.returncode == 1 and "not a JSON text file" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("layout,words", [(".layout dram=16\n", "does not fit"),
                                          ("", "4 GiB")])
def test_dram_too_small_or_too_large_is_refused(tmp_path, layout, words):
    at = "" if layout else " @ 0x10000000000"
    (tmp_path / "p.vasm").write_text(f"{layout}.data a{at}\n    .zero 4\n.text\n    finish\n")
    assert vtasm("assemble", tmp_path / "p.vasm", "-o", tmp_path / "p.vbin", cwd=tmp_path).returncode == 0
    exe = shutil.which("vtasim", path=str(Path(sys.executable).parent))
    r = subprocess.run([exe, "run", str(tmp_path / "p.vbin")], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1 and words in r.stderr and "internal error" not in r.stderr

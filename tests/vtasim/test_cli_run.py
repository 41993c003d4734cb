"""`vtasim run` on a .vbin with tensors: inputs, outputs, profile, traces, dumps, race checking."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from vtasim.cli import main
from vtasm.formats.raw import export_raw
from vtasm.formats.vbin import save_vbin
from vtasm.locate import Locator
from vtasm.program import SourceLoc

from .builders import MATMUL_SHIFT, REPO, matmul_program
from .reference import COUNTERS

RNG = np.random.default_rng(7)
X = RNG.integers(-128, 128, size=(1, 32), dtype=np.int8)
W = RNG.integers(-128, 128, size=(16, 32), dtype=np.int8)
# the program's math: y = clip((x @ w^T) >> 4, -128, 127)
Y = np.clip((X.astype(np.int64) @ W.T.astype(np.int64)) >> MATMUL_SHIFT, -128, 127).astype(np.int8)
# execution order: the GEMM (2) waits for the loads (3, 4) that follow it in program order
ORDER = [0, 1, 3, 4, 2, 5, 6, 7, 8, 9]
HEADERS = {0: "LOAD UOP", 1: "GEMM", 2: "GEMM", 3: "LOAD INP", 4: "LOAD WGT", 5: "ALU - shr", 6: "ALU - min imm",
           7: "ALU - max imm", 8: "STORE:", 9: "FINISH"}
# (l2g, g2l, s2g, g2s) after each executed instruction
QUEUES = {0: (0, 0, 0, 0), 1: (0, 0, 0, 0), 3: (0, 0, 0, 0), 4: (1, 0, 0, 0), 2: (0, 0, 0, 0), 5: (0, 0, 0, 0),
          6: (0, 0, 0, 0), 7: (0, 0, 0, 1), 8: (0, 0, 1, 0), 9: (0, 0, 0, 0)}


@pytest.fixture
def files(tmp_path):
    program = matmul_program()
    save_vbin(program, tmp_path / "mm.vbin")
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "w.npy", W)
    return tmp_path, program


def run(tmp_path, *args, program="mm.vbin"):
    return CliRunner().invoke(main, ["run", str(tmp_path / program), *args])


def with_inputs(d):
    return ["--input", f"x={d / 'x.npy'}", "--input", f"w={d / 'w.npy'}"]


def test_tensor_round_trip_in_logical_layout(files):
    d, _ = files
    assert Y.any() and (Y != Y[0, 0]).any()
    result = run(d, *with_inputs(d), "--output", f"y={d / 'y.npy'}")
    assert result.exit_code == 0, result.stderr
    y = np.load(d / "y.npy")
    assert y.dtype == np.int8 and y.shape == (1, 16)
    assert np.array_equal(y, Y)


def test_int64_inputs_that_fit_are_accepted(files):
    d, _ = files
    np.save(d / "x64.npy", X.astype(np.int64))
    np.save(d / "w64.npy", W.astype(np.int64))
    result = run(d, "--input", f"x={d / 'x64.npy'}", "--input", f"w={d / 'w64.npy'}", "--output", f"y={d / 'y.npy'}")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(np.load(d / "y.npy"), Y)


@pytest.mark.parametrize("bad", [128, -129, 1 << 40])
def test_int64_inputs_that_do_not_fit_are_refused(files, bad):
    d, _ = files
    x = X.astype(np.int64)
    x[0, 5] = bad
    np.save(d / "x64.npy", x)
    result = run(d, "--input", f"x={d / 'x64.npy'}", "--output", f"y={d / 'y.npy'}")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "x" in lines[0] and str(bad) in lines[0]
    assert not (d / "y.npy").exists()


def test_profile_lists_the_seven_counters_first_in_reference_order(files):
    d, _ = files
    result = run(d, *with_inputs(d), "--profile")
    assert result.exit_code == 0, result.stderr
    profile = json.loads(result.stdout)
    assert list(profile)[:7] == list(COUNTERS)
    # 2 inp + 2 wgt elements, 1 micro-op, 1 out element; 2 GEMM executions (reset not counted), 3 ALU
    assert [profile[k] for k in COUNTERS] == [32, 512, 0, 4, 16, 2, 3]


def parse_trace(text: str) -> list[tuple[int, str, tuple[int, ...]]]:
    blocks = re.findall(r"INSTRUCTION (\d+): (.*)\n(?:\t.*\n)*?\tl2g_queue = (\d+), g2l_queue = (\d+)\n"
                        r"\ts2g_queue = (\d+), g2s_queue = (\d+)\n", text)
    return [(int(i), head, tuple(map(int, q))) for i, head, *q in blocks]


def test_text_trace_shows_execution_order_and_real_token_counts(files):
    d, _ = files
    result = run(d, *with_inputs(d), "--trace")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("There are 10 instructions\n")
    blocks = parse_trace(result.stdout)
    assert [b[0] for b in blocks] == ORDER
    assert {i: head for i, head, _ in blocks} == HEADERS
    assert {i: q for i, _, q in blocks} == QUEUES
    assert result.stdout.count("INSTRUCTION") == 10
    assert "\tdep - pop prev: 1, pop next: 0, push prev: 0, push next: 0\n" in result.stdout


def test_jsonl_trace_gives_one_object_per_executed_instruction(files):
    d, _ = files
    result = run(d, *with_inputs(d), "--trace", "--trace-format", "jsonl")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["index"] for r in records] == ORDER
    for r in records:
        assert tuple(r["queues"][q] for q in ("l2g", "g2l", "s2g", "g2s")) == QUEUES[r["index"]]


def test_dump_dram_and_out_dir(files):
    d, program = files
    y_addr = program.segment("y").addr
    result = run(d, *with_inputs(d), "--dump-dram", f"{y_addr:#x}:16:{d / 'dump.bin'}", "--out-dir",
                 str(d / "results"))
    assert result.exit_code == 0, result.stderr
    assert (d / "dump.bin").read_bytes() == Y.tobytes()
    assert (d / "results" / "y.bin").read_bytes() == Y.tobytes()


def test_check_races(files):
    d, _ = files
    clean = run(d, *with_inputs(d), "--check-races")
    assert clean.exit_code == 0, clean.stderr
    assert "0 race(s) found" in clean.stderr
    save_vbin(matmul_program(racy=True), d / "racy.vbin")
    racy = run(d, *with_inputs(d), "--check-races", program="racy.vbin")
    assert racy.exit_code == 4
    lines = racy.stderr.strip().splitlines()
    assert lines[-1] == "2 race(s) found"
    assert any("instruction 2" in line and "instruction 3" in line for line in lines)


def test_installed_entry_point(files):
    d, _ = files
    exe = REPO / ".venv" / "bin" / "vtasim"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "vtasim.cli"]
    done = subprocess.run([*cmd, "run", str(d / "mm.vbin"), *with_inputs(d), "--output", f"y={d / 'y.npy'}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert np.array_equal(np.load(d / "y.npy"), Y)
    # the installed command ends the process itself (vtasm/entry.py): what it printed still arrives whole,
    # and its exit codes are the CLI's
    profiled = subprocess.run([*cmd, "run", str(d / "mm.vbin"), *with_inputs(d), "--profile"], capture_output=True,
                              text=True, timeout=60)
    assert profiled.returncode == 0 and json.loads(profiled.stdout)["gemm_counter"] > 0
    assert "FINISH after" in profiled.stderr
    missing = subprocess.run([*cmd, "run", str(d / "absent.vbin")], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "absent.vbin" in missing.stderr
    usage = subprocess.run([*cmd, "run", str(d / "mm.vbin"), "--max-ops", "0"], capture_output=True, text=True,
                           timeout=60)
    assert usage.returncode == 2 and "--max-ops" in usage.stderr


def with_source_map(d):
    program = dataclasses.replace(matmul_program(), source_map={3: SourceLoc("mm.vk", 7), 8: SourceLoc("mm.vk", 9)})
    save_vbin(program, d / "src.vbin")
    return program


def test_jsonl_trace_maps_events_to_source_lines_and_tensors(files):
    d, _ = files
    with_source_map(d)
    result = run(d, *with_inputs(d), "--trace-format", "jsonl", program="src.vbin")
    assert result.exit_code == 0, result.stderr
    records = {r["index"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert {i: r["source"] for i, r in records.items() if r["source"]} == {3: "mm.vk:7", 8: "mm.vk:9"}
    assert {i: r["dram"] for i, r in records.items() if r["dram"]} == {
        0: "uops+0x0", 3: "x+0x0", 4: "w+0x0", 8: "y+0x0"}


def test_locator_names_byte_offsets_inside_segments(files):
    _, program = files
    locator = Locator(program)
    x = program.segment("x").addr
    assert locator.address(x + 0x10) == "x+0x10"
    assert locator.address(program.segment("w").end - 1) == "w+0x1ff"
    assert locator.address(x - 1) == f"0x{x - 1:x}"


def test_text_trace_source_lines_only_on_request(files):
    d, _ = files
    with_source_map(d)
    plain = run(d, *with_inputs(d), "--trace", program="src.vbin")
    located = run(d, *with_inputs(d), "--trace-source", program="src.vbin")
    assert plain.exit_code == located.exit_code == 0, located.stderr
    assert "source:" not in plain.stdout and "dram:" not in plain.stdout
    assert "INSTRUCTION 3: LOAD INP\n\tsource: mm.vk:7\n\tdep - " in located.stdout
    assert re.search(r"\tDRAM: 0x[0-9a-f]{8}, SRAM:0x0000\n\tdram: y\+0x0\n", located.stdout)
    assert located.stdout.count("\tdram: ") == 4 and located.stdout.count("\tsource: ") == 2
    assert parse_trace(located.stdout) == parse_trace(plain.stdout)
    stripped = re.sub(r"\t(source|dram): .*\n", "", located.stdout)
    assert stripped == plain.stdout


def test_raw_directory_keeps_tensor_names_for_inputs_and_outputs(files):
    d, program = files
    export_raw(program, d / "mm.raw")
    result = run(d, *with_inputs(d), "--output", f"y={d / 'y.npy'}", "--out-dir", str(d / "res"), program="mm.raw")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(np.load(d / "y.npy"), Y)
    missing = run(d, "--input", f"x={d / 'x.npy'}", program="mm.raw")
    assert missing.exit_code == 1 and "tensor w " in missing.stderr


def test_a_trace_reader_that_goes_away_stops_the_trace_not_the_run(files):
    """`vtasim run ... --trace | head -1`: the pipe closes under the trace; the run still finishes, writes
    the outputs it was asked for, and exits 0 (before, it stopped quietly with nothing written)."""
    import os

    d, _ = files
    exe = REPO / ".venv" / "bin" / "vtasim"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "vtasim.cli"]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: every write to stdout fails
    try:
        done = subprocess.run([*cmd, "run", str(d / "mm.vbin"), *with_inputs(d), "--output", f"y={d / 'y.npy'}",
                               "--trace"], stdout=write, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert done.returncode == 0, done.stderr
    assert "FINISH after" in done.stderr
    assert np.array_equal(np.load(d / "y.npy"), Y)


@pytest.mark.parametrize("name, hint", [("k.vasm", "vtasm assemble"), ("k.vk", "vtacc"), ("k.onnx", "vtacc")])
def test_a_source_file_given_as_the_program_names_the_tool_to_run_first(tmp_path, name, hint):
    (tmp_path / name).write_text("; not a program\n")
    result = CliRunner().invoke(main, ["run", str(tmp_path / name)])
    assert result.exit_code == 1 and hint in result.stderr and result.stderr.count("\n") == 1


def test_a_directory_without_a_layout_is_not_a_raw_program(tmp_path):
    result = CliRunner().invoke(main, ["run", str(tmp_path)])
    assert result.exit_code == 1 and "not a raw program directory" in result.stderr

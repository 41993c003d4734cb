"""`vtasim run --timing` / `--timing-only`: the same cycles either way, the options, the refusals."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest
from click.testing import CliRunner

from tests.vtasm.paths import SHARED, require
from vtasim.cli import main
from vtasim.timing.names import DEFAULT, MEASURED
from vtasm.formats.vbin import save_vbin

from .builders import matmul_program


@pytest.fixture
def prog(tmp_path):
    path = tmp_path / "mm.vbin"
    save_vbin(matmul_program(), path)
    return path


def _run(*args: str):
    return CliRunner().invoke(main, ["run", *map(str, args)])


def _json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_timing_only_gives_the_cycles_of_a_full_run(prog):
    full = _json(_run(prog, "--zero-inputs", "--timing", "--profile"))
    only = _json(_run(prog, "--timing-only", "--profile"))
    assert isinstance(full["cycles"], int) and full["cycles"] > 0
    assert full["cycles"] == only["cycles"] == full["timing"]["cycles"]
    assert "gemm_counter" in full and "gemm_counter" not in only  # the functional counters stay


def test_conformance_program_runs_with_timing():
    directory = require(SHARED / "timing" / "conf_smm")
    measured = json.loads((directory / MEASURED[DEFAULT]).read_text())["mem_latency_16"]  # the default design's
    out = _json(_run(directory, "--timing-only", "--mem-latency", "16", "--profile"))
    assert abs(out["cycles"] - measured) / measured < 0.03


def test_what_if_overrides_change_the_cycles(prog):
    on = ("--timing-only", "--timing=chisel-2019", "--profile")  # four cycles per GEMM execution
    base = _json(_run(prog, *on))["cycles"]
    slow = _json(_run(prog, *on, "--mem-latency", "200"))["cycles"]
    wide = _json(_run(prog, *on, "--set", "gemm.per_execution=1"))["cycles"]
    fast = _json(_run(prog, *on, "--set", "clock_mhz=200"))
    assert slow > base > wide
    assert fast["cycles"] == base and fast["timing"]["clock_mhz"] == 200.0


def test_profiles_by_name_and_file(prog, tmp_path):
    cycles = {name: _json(_run(prog, "--timing-only", "--profile", f"--timing={name}"))["cycles"]
              for name in ("chisel-2019", "chisel-2021", "hls")}
    assert len(set(cycles.values())) == 3
    text = resources.files("vtasim.timing").joinpath("profiles/chisel-2019.toml").read_text()
    mine = tmp_path / "mine.toml"
    mine.write_text(text.replace('name = "chisel-2019"', 'name = "mine"'))
    out = _json(_run(prog, "--timing-only", "--profile", "--timing", mine))
    assert out["cycles"] == cycles["chisel-2019"] and out["timing"]["profile"] == "mine"


def test_text_report(prog):
    result = _run(prog, "--timing-only")
    assert result.exit_code == 0
    assert result.stdout.startswith(f"timing ({DEFAULT}): ")
    for module in ("fetch", "load", "compute", "store"):
        assert f"  {module}" in result.stdout


def test_timelines_are_written(prog, tmp_path):
    trace, picture = tmp_path / "t.json", tmp_path / "t.png"
    assert _run(prog, "--timing-only", "--timeline", trace).exit_code == 0
    assert _run(prog, "--timing-only", "--timeline", picture).exit_code == 0
    assert json.loads(trace.read_text())["traceEvents"]
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, code, message", [
    (["--timing-only", "--output", "y=y.npy"], 2, "--timing-only computes no data, so --output"),
    (["--timing-only", "--trace"], 2, "--trace cannot be used"),
    (["--timing-only", "--timeline", "t.svg"], 2, "must end in .json"),
    (["--timing-only", "--set", "memory.speed=3"], 1, "unknown profile key memory.speed"),
    (["--timing-only", "--set", "latency"], 1, "expected KEY=VALUE"),
    (["--timing=nosuch"], 1, "no such profile"),
    (["--timing-only", "--mem-latency", "-1"], 2, "-1"),
])
def test_refusals(prog, args, code, message, tmp_path):
    result = _run(prog, *args)
    assert result.exit_code == code, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "t.svg").exists() and not np.any([p.suffix == ".out" for p in tmp_path.iterdir()])


@pytest.mark.parametrize("bad", [
    {"kind": "load", "sram_base": 2040, "memory_type": 3},  # LOAD ACC of 16 elements past the accumulator
    {"kind": "store", "dram_base": 1 << 20},  # STORE past the end of DRAM
])
def test_timing_only_faults_as_a_run_does_on_a_dma_whose_fields_leave_its_buffer(tmp_path, bad):
    """--timing-only computes no data, but a LOAD or STORE that leaves its buffer or DRAM (known from its
    fields) faults with the run's message and exit code 3 instead of getting cycles."""
    import dataclasses

    from vtasm.encoding import Instruction

    program = matmul_program()
    insns = list(program.instructions)
    index = next(i for i, insn in enumerate(insns) if insn.kind == bad["kind"] and insn["x_size"])
    fields = {**insns[index].fields, **{k: v for k, v in bad.items() if k != "kind"}}
    insns[index] = Instruction(insns[index].kind, fields)
    path = tmp_path / "bad.vbin"
    save_vbin(dataclasses.replace(program, instructions=insns), path)
    run = _run(path, "--zero-inputs")
    only = _run(path, "--timing-only")
    assert run.exit_code == only.exit_code == 3
    assert only.stderr == run.stderr and f"instruction {index} " in only.stderr


def test_fetch_stalls_are_called_queue_full_in_the_text_report(prog):
    """The fetch module pops no token: the cycles it waits on a full command queue are labelled as such."""
    text = _run(prog, "--timing-only").stdout
    fetch = next(line for line in text.splitlines() if line.strip().startswith("fetch"))
    assert "queue full" in fetch and "token" not in fetch


def test_a_program_taken_as_the_timing_profile_is_explained(prog):
    """`vtasim run --timing k.vbin` reads k.vbin as the profile (documented); the usage error says so."""
    result = _run("--timing", prog)
    assert result.exit_code == 2
    assert f"--timing read {prog} as its profile; put the program first" in result.stderr
    bare = _run()
    assert bare.exit_code == 2 and "missing argument PROGRAM" in bare.stderr

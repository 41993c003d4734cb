"""`vtasim run --board`: the same results as the simulator, and bad input refused in one line with a non-zero
exit, nothing written to the device."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from tests.vtacc.harness import GOLDEN
from tests.vtasm.paths import REPO
from vtacc.frontend.check import check_source
from vtacc.program_builder import compile_file
from vtasim.board.emulated import board, reset
from vtasim.cli import main
from vtasm.config import default_config, load_config
from vtasm.formats.vbin import save_vbin

from .harness import DESIGNS


def _vadd(tmp_path, cfg=None):
    path = REPO / "examples" / "vadd.vk"
    program = compile_file(check_source(path.read_text(), str(path)), cfg or default_config()).program
    out = tmp_path / "vadd.vbin"
    save_vbin(program, out)
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        np.save(tmp_path / f"{name}.npy", rng.integers(-50, 50, program.tensor(name).shape).astype(np.int32))
    return out


def _run(*args, cwd):
    return CliRunner().invoke(main, ["run", *map(str, args)], catch_exceptions=False)


def _nothing_ran():
    fabric = board().fabric
    return not board().dram.blocks and (fabric is None or fabric.program is None)


@pytest.mark.parametrize("design", DESIGNS)
def test_the_board_writes_what_the_simulator_writes(design, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prog = _vadd(tmp_path)
    ins = ["--input", f"a={tmp_path / 'a.npy'}", "--input", f"b={tmp_path / 'b.npy'}"]
    sim = _run(prog, *ins, "--output", f"c={tmp_path / 'sim.npy'}", cwd=tmp_path)
    assert sim.exit_code == 0, sim.output
    reset()
    r = _run(prog, *ins, "--output", f"c={tmp_path / 'board.npy'}", "--board", design, "--platform", "emulated",
             "--timing", cwd=tmp_path)
    assert r.exit_code == 0, r.output
    assert np.array_equal(np.load(tmp_path / "sim.npy"), np.load(tmp_path / "board.npy"))
    assert f"beside the {design} timing model" in r.output and "model cycles" in r.output
    if design == "chisel-2021":  # the device's own counter is read and reported
        assert "vadd.vbin" in r.output and " - " not in r.output.splitlines()[2]


def test_a_configuration_other_than_the_bitstreams_is_refused_before_the_device(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prog = _vadd(tmp_path, load_config(GOLDEN / "block8.config.json"))
    reset()
    r = _run(prog, "--zero-inputs", "--board", "hls", "--platform", "emulated", cwd=tmp_path)
    assert r.exit_code == 1 and len(r.output.strip().splitlines()) == 1, r.output
    assert "but the bitstream is" in r.output
    assert _nothing_ran()


def test_a_program_larger_than_the_boards_memory_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prog = _vadd(tmp_path)
    reset(size=4096)
    r = _run(prog, "--zero-inputs", "--board", "hls", "--platform", "emulated", cwd=tmp_path)
    reset()
    assert r.exit_code == 6 and len(r.output.strip().splitlines()) == 1, r.output
    assert "cannot allocate" in r.output


def test_a_buffer_above_4_gib_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prog = _vadd(tmp_path)
    reset(base=1 << 32)  # memory above 4 GiB, as a ZCU104 has it
    r = _run(prog, "--zero-inputs", "--board", "chisel-2021", "--platform", "emulated", cwd=tmp_path)
    fabric = board().fabric
    assert r.exit_code == 1 and len(r.output.strip().splitlines()) == 1, r.output
    assert "above 4 GiB" in r.output
    assert fabric.program is None and not board().dram.blocks
    reset()


def test_without_pynq_the_command_says_what_to_install(tmp_path, monkeypatch):
    if importlib.util.find_spec("pynq") is not None:
        pytest.skip("pynq is installed here")
    monkeypatch.chdir(tmp_path)
    r = _run(_vadd(tmp_path), "--zero-inputs", "--board", "hls", cwd=tmp_path)
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert "pip install" in r.output and "pynq" in r.output


def test_an_unknown_design_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = _run(_vadd(tmp_path), "--zero-inputs", "--board", "de10", "--platform", "emulated", cwd=tmp_path)
    assert r.exit_code == 2 and "de10" in r.output


def test_a_device_that_never_finishes_times_out_with_its_own_exit_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prog = _vadd(tmp_path)
    reset().never_finish = True
    r = _run(prog, "--zero-inputs", "--board", "hls", "--platform", "emulated", "--board-timeout", "0.2",
             "--out-dir", tmp_path / "out", cwd=tmp_path)
    assert r.exit_code == 5 and len(r.output.strip().splitlines()) == 1, r.output
    assert "did not finish within 0.2 s" in r.output
    assert not board().dram.blocks  # its buffers were freed
    assert not (tmp_path / "out").exists()  # no partial results
    reset()


def test_options_that_watch_the_simulator_are_refused_on_a_board(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = _run(_vadd(tmp_path), "--zero-inputs", "--board", "hls", "--platform", "emulated", "--trace", cwd=tmp_path)
    assert r.exit_code == 2 and "--trace" in r.output
    r = _run(_vadd(tmp_path), "--zero-inputs", "--bitstream", "x.bit", cwd=tmp_path)
    assert r.exit_code == 2 and "go with --board" in r.output


def test_a_platform_without_the_pynq_api_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = _run(_vadd(tmp_path), "--zero-inputs", "--board", "hls", "--platform", "json", cwd=tmp_path)
    assert r.exit_code == 2 and "does not provide the pynq API" in r.output


def test_the_device_layer_imports_neither_the_compiler_nor_pynq():
    code = ("import sys, vtasim.board.device, vtasim.board.launch, vtasim.board.emulated, vtasim.board_cli;"
            "import json; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('vtacc', 'pynq'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert json.loads(out.stdout) == []

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


def test_a_program_reaching_outside_its_dram_is_refused_before_it_runs(tmp_path, monkeypatch):
    import dataclasses

    from vtasm.encoding import Instruction
    from vtasm.formats.vbin import load_vbin

    monkeypatch.chdir(tmp_path)
    program = load_vbin(_vadd(tmp_path))
    k = next(i for i, insn in enumerate(program.instructions) if insn.kind == "load" and insn["x_size"])
    insns = list(program.instructions)
    insns[k] = Instruction("load", {**insns[k].fields, "dram_base": 1 << 20})  # far beyond its DRAM
    save_vbin(dataclasses.replace(program, instructions=insns), tmp_path / "wild.vbin")
    reset()
    r = _run(tmp_path / "wild.vbin", "--zero-inputs", "--board", "hls", "--platform", "emulated", cwd=tmp_path)
    assert r.exit_code == 3 and len(r.output.strip().splitlines()) == 1, r.output
    assert f"instruction {k}" in r.output
    assert _nothing_ran()


def test_a_platform_that_fails_is_one_line_never_an_internal_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prog = _vadd(tmp_path)
    (tmp_path / "boom_at_import.py").write_text("raise RuntimeError('no XRT here')\n")
    (tmp_path / "no_address.py").write_text(
        "import numpy\nfrom vtasim.board.emulated import MMIO, Overlay\n"
        "def allocate(shape, dtype):\n    return numpy.zeros(shape, dtype)  # a buffer without physical_address\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for module, code, words in (("boom_at_import", 2, "RuntimeError: no XRT here"),
                                ("no_address", 6, "reading the buffer's physical address"),
                                ("./no_address.py", 2, "not a module name")):
        reset()
        r = _run(prog, "--zero-inputs", "--board", "hls", "--platform", module, cwd=tmp_path)
        assert r.exit_code == code and len(r.output.strip().splitlines()) == 1 and words in r.output, r.output
    for timeout in ("nan", "inf", "0", "-1"):
        r = _run(prog, "--zero-inputs", "--board", "hls", "--platform", "emulated", "--board-timeout", timeout,
                 cwd=tmp_path)
        assert r.exit_code == 2 and "finite number of seconds" in r.output, (timeout, r.output)


def test_a_deadlocked_program_hangs_the_emulated_device_as_it_would_the_hardware(tmp_path, monkeypatch):
    import dataclasses

    from vtasm.encoding import Instruction
    from vtasm.formats.vbin import load_vbin

    monkeypatch.chdir(tmp_path)
    program = load_vbin(_vadd(tmp_path))
    first = program.instructions[0]  # a compute instruction waiting for a token of the load stage, which has none
    insns = [Instruction(first.kind, {**first.fields, "pop_prev": 1})] + list(program.instructions[1:])
    save_vbin(dataclasses.replace(program, instructions=insns), tmp_path / "stuck.vbin")
    reset()
    r = _run(tmp_path / "stuck.vbin", "--zero-inputs", "--board", "hls", "--platform", "emulated",
             "--board-timeout", "0.3", cwd=tmp_path)
    assert r.exit_code == 5 and "did not finish within 0.3 s" in r.output, r.output

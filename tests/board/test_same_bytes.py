"""Every example program, the perf yardsticks and a network with host steps give, on the emulated board of
either design, the bytes (and float outputs) `vtasim run` gives, on every golden configuration."""

from __future__ import annotations

import numpy as np
import pytest

from tests.vtacc.harness import CONFIGS, GOLDEN, config
from tests.vtasm.paths import REPO, SHARED, require
from vtacc.frontend.check import check_source
from vtacc.program_builder import compile_file
from vtasm.formats.raw import load_program

from .harness import DESIGNS, bitstream, board_and_simulator, random_inputs

EXAMPLES = sorted((REPO / "examples").glob("*.vk"))
GOLDEN_CONFIGS = CONFIGS + ("batch4", "uop14")  # every valid golden configuration
FIXED_TILES = {"resnet_c8.vk"}  # fixes tiles only some configurations' buffers hold (test_portability.py)


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("cfg", GOLDEN_CONFIGS)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_gives_the_simulators_bytes(path, cfg, design, tmp_path):
    if path.name in FIXED_TILES and cfg in ("batch2", "batch4", "block8"):
        pytest.skip(f"{path.name} fixes its tiles for the default configuration")
    program = compile_file(check_source(path.read_text(), str(path)), config(cfg)).program
    golden = None if cfg == "default" else GOLDEN / f"{cfg}.config.json"
    pairs = board_and_simulator(program, design, bitstream(tmp_path, design, golden), random_inputs(program))
    assert pairs and all(sim == got for sim, got in pairs.values()), [n for n, (a, b) in pairs.items() if a != b]


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("name", ["eltwise", "pooling", "gemm_stream", "resnet18_full"])
def test_the_perf_yardsticks_give_the_simulators_bytes(name, design, tmp_path):
    program = load_program(require(SHARED / "perf" / "raw" / name))
    pairs = board_and_simulator(program, design, bitstream(tmp_path, design), random_inputs(program, 1))
    assert pairs and all(sim == got for sim, got in pairs.values()), [n for n, (a, b) in pairs.items() if a != b]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemm_big", "pooling_big", "eltwise_big"])
def test_the_large_yardsticks_give_the_simulators_bytes(name, tmp_path):
    """In a process of their own: their DRAM (up to 175 MB) held by the simulator, the board's buffer, its
    cache's record and the emulated memory would raise this process's peak memory for the tests after it
    (a child's peak memory as wait4 reports it starts at its parent's)."""
    import json
    import subprocess
    import sys

    code = ("import json, sys; from tests.board.harness import bitstream, board_and_simulator, random_inputs; "
            "from vtasm.formats.raw import load_program; from pathlib import Path; "
            "p = load_program(sys.argv[1]); "
            "print(json.dumps({d: sorted(n for n, (a, b) in board_and_simulator(p, d, bitstream(Path(sys.argv[2]), "
            "d), random_inputs(p, 1)).items() if a != b) for d in ('hls', 'chisel-2021')}))")
    out = subprocess.run([sys.executable, "-c", code, str(require(SHARED / "perf" / "raw" / name)), str(tmp_path)],
                         capture_output=True, text=True, cwd=REPO, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == {"hls": [], "chisel-2021": []}


@pytest.mark.parametrize("design", DESIGNS)
def test_a_network_with_host_steps_gives_the_simulators_outputs(design, tmp_path):
    from tests.onnx.test_host_network import _model
    from vtacc.model import compile_model
    from vtasim import api
    from vtasim.board.emulated import reset
    from vtasm.config import default_config

    path, cal = _model(tmp_path)
    net = compile_model(path, default_config(), cal).network
    assert {s.kind for s in net.steps} == {"vta", "host"}
    x = np.random.default_rng(5).normal(0, 1, (3, 3, 8, 8)).astype(np.float32)
    reset()
    on_board = api.run(net, x, board=design, platform="emulated", bitstream=bitstream(tmp_path, design))
    simulated = api.run(net, x)
    for name in net.outputs:
        assert on_board[name].dtype == np.float32
        assert np.array_equal(on_board[name], simulated[name]), name

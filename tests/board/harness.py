"""Running programs on the emulated board beside the simulator, for the board's tests."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np

from vtasim.board.device import Board
from vtasim.board.emulated import reset
from vtasim.board.launch import BoardLauncher
from vtasim.outputs.inputs import missing_inputs
from vtasim.runs.session import run_arrays
from vtasm.config import VTAConfig
from vtasm.program import Program

DESIGNS = ("hls", "chisel-2021")


def bitstream(tmp_path: Path, design: str, config_file: Path | None = None) -> str:
    """An emulated bitstream of ``design``, with the golden configuration ``config_file`` beside it."""
    path = tmp_path / f"vta-{design}.bit"
    if config_file is not None:
        shutil.copy(config_file, path.with_suffix(".json"))
    return str(path)


def random_inputs(program: Program, seed: int = 0) -> dict[str, np.ndarray]:
    """Random values for every tensor the program reads (in its dtype's whole range, small for int32)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in missing_inputs(program, set()):
        t = program.tensor(name)
        dtype = np.dtype(t.np_dtype)
        high = 1 << 10 if dtype.itemsize > 1 else np.iinfo(dtype).max
        out[name] = rng.integers(-high, high, t.shape).astype(dtype)
    return out


def _digests(program: Program, dram: np.ndarray) -> dict[str, str]:
    """A digest of every segment and result range of ``program`` in ``dram`` (no copies of the bytes)."""
    ranges = [(s.name, s.addr, s.end) for s in program.segments]
    ranges += [(d.file, d.addr, d.addr + d.nbytes) for d in program.dumps]
    return {name: hashlib.sha256(memoryview(dram[lo:hi])).hexdigest() for name, lo, hi in ranges}


def board_and_simulator(program: Program, design: str, bit: str, inputs: dict[str, np.ndarray]):
    """Every segment and result range of ``program`` after a run on the simulator and on a fresh emulated
    board (pairs of digests, by name; the simulator's DRAM is let go before the board runs)."""
    reset()
    names = [t.name for t in program.tensors]
    _, result = run_arrays(program, inputs, names)
    sim = _digests(program, result.state.dram)
    del result
    with Board(design, "emulated", bit) as board:
        launcher = BoardLauncher(board)
        launcher(program, inputs, names)
        got = _digests(program, launcher.loaded[id(program)].dram)
    reset()  # the emulated board's memory goes with it
    return {name: (sim[name], got[name]) for name in sim}


def same_config(a: VTAConfig, b: VTAConfig) -> bool:
    return a == b

"""Runs on a board as the simulator's runs are made: one program with the CLI's options, or the VTA launches
of a network file (its host steps stay on this CPU, as `vtasim run` runs them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vtasim.runs.runner import RunOptions, prepare, write_results
from vtasm.program import Program

from .device import Board, Launch, Loaded


@dataclass
class BoardSpec:
    """Which board: its design, the module that provides the pynq API, the bitstream, the timeout."""

    design: str
    platform: str = "pynq"
    bitstream: str | None = None
    timeout: float = 10.0
    read_cycles: bool = False  # read the device's cycle counter after each run (asked by --timing)

    def open(self) -> Board:
        return Board(self.design, self.platform, self.bitstream, self.timeout, self.read_cycles)


@dataclass
class Measured:
    """One launch on the device: its name, its program and what was measured."""

    name: str
    program: Program
    launch: Launch


@dataclass
class BoardRun:
    """A program's run on the board: the launch measured and the files written."""

    measured: list[Measured]
    written: list[Path] = field(default_factory=list)


def run_program(program: Program, opts: RunOptions, spec: BoardSpec) -> BoardRun:
    """Run one program on the board with `vtasim run`'s inputs and outputs (checked before the device runs,
    written only after it finished)."""
    with spec.open() as board:
        loaded = board.load(program, opts.origin)
        prepare(program, opts, loaded.dram)
        launch = board.execute(loaded)
        written = write_results(program, opts, loaded.dram)
    return BoardRun([Measured(Path(opts.origin).name, program, launch)], written)


@dataclass
class _Result:
    """What a launch on the board reports in place of the simulator's counters."""

    launch: Launch

    def profile(self) -> dict:
        return {"device_seconds": round(self.launch.seconds, 6), "device_cycles": self.launch.cycles}


class BoardLauncher:
    """A network's VTA launches on an opened board (launches.run_network's ``launch``): each program is
    loaded once, its DRAM image restored before each run, its inputs written and its outputs read back."""

    def __init__(self, board: Board, origin: str = "network"):
        self.board, self.origin = board, origin
        self.loaded: dict[int, Loaded] = {}

    def __call__(self, program: Program, inputs: dict[str, np.ndarray], outputs: list[str], max_ops: int = 0,
                 before_run=None):
        loaded = self.loaded.get(id(program))
        if loaded is None:
            loaded = self.loaded[id(program)] = self.board.load(program, self.origin)
        else:
            loaded.dram[:] = loaded.placed.image  # every run starts from the program's own DRAM image
        for name, array in inputs.items():
            tensor, segment = program.tensor(name), program.segment(name)
            data = np.frombuffer(tensor.pack(tensor.conform(np.asarray(array), f"input {name}")), dtype=np.uint8)
            loaded.dram[segment.addr:segment.addr + len(data)] = data
        launch = self.board.execute(loaded)
        got = {}
        for name in outputs:
            tensor, segment = program.tensor(name), program.segment(name)
            got[name] = tensor.unpack(loaded.dram[segment.addr:segment.addr + tensor.nbytes].tobytes())
        return got, _Result(launch)

"""Compile and run kernel sources with the portability lint watching (isa.md section 7)."""

from __future__ import annotations

import numpy as np

from tests.portable import portability_warnings
from vtasim.checks.lint import Linter
from vtasim.checks.races import RaceChecker
from vtasim.core.machine import Machine
from vtasm.config import VTAConfig, default_config

from .harness import Result, compile_source


def run_linted(source: str, inputs: dict[str, np.ndarray], cfg: VTAConfig | None = None,
               kernel: str | None = None) -> tuple[Result, list[str]]:
    """Like harness.run, with the race checker and the lint; also returns the lint's warnings as text."""
    compiled = compile_source(source, cfg or default_config(), kernel)
    program = compiled.program
    machine = Machine(program)
    checker = RaceChecker(machine)
    linter = Linter(machine)
    for name, array in inputs.items():
        seg, info = program.segment(name), program.tensor(name)
        data = info.pack(array)
        machine.state.dram[seg.addr : seg.addr + len(data)] = np.frombuffer(data, dtype=np.uint8)
    state = machine.run().state
    outputs = {}
    for info in program.tensors:
        seg = program.segment(info.name)
        outputs[info.name] = info.unpack(state.dram[seg.addr : seg.addr + info.nbytes].tobytes())
    return Result(outputs, compiled, {}, checker.report()), portability_warnings(program, linter)

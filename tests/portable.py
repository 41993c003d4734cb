"""The portability lint as the suite applies it to compiled code (isa.md section 7, vtasm.portability)."""

from __future__ import annotations

import numpy as np

from vtasim.checks.lint import Linter
from vtasim.core.machine import Machine
from vtasm import isa
from vtasm.program import Program


def data_shift(program: Program, warning) -> bool:
    """The one warning compiled code may draw: a shift by a tensor, whose amounts are the program's data."""
    if warning.rule not in ("shift-range", "shift-negative-tensor") or warning.index is None:
        return False
    insn = program.instructions[warning.index]
    return insn.kind == "alu" and insn["alu_opcode"] == isa.ALU_OPS["shr"] and not insn["use_imm"]


def portability_warnings(program: Program, linter: Linter) -> list[str]:
    """The lint's warnings after a run, as text: notes and data-dependent shifts left out."""
    return [w.describe(program) for w in linter.report() if not w.note and not data_shift(program, w)]


def lint_run(program: Program, seed: int = 0) -> list[str]:
    """Run ``program`` on random values in every tensor it declares, with the lint watching."""
    machine = Machine(program)
    linter = Linter(machine)
    rng = np.random.default_rng(seed)
    dram = machine.state.dram
    for info in program.tensors:
        segment = program.segment(info.name)
        if any(segment.data):  # constants the compiler placed (weights of a network, wide immediates) stay
            continue
        data = rng.integers(0, 256, info.nbytes, dtype=np.uint8)
        dram[segment.addr:segment.addr + info.nbytes] = data
    machine.run()
    return portability_warnings(program, linter)

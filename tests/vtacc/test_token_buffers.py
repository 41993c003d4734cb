"""The token pass leaves the micro-op buffer untracked: only the compute stage loads and reads it."""

from __future__ import annotations

from vtasm import isa


def test_micro_op_loads_run_on_the_compute_stage():
    assert isa.stage_of(isa.OPCODES["load"], isa.MEM_TYPES["uop"]) == isa.COMPUTE_STAGE
    assert isa.stage_of(isa.OPCODES["gemm"]) == isa.stage_of(isa.OPCODES["alu"]) == isa.COMPUTE_STAGE

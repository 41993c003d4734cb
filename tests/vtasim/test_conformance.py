"""The conformance programs: dumps byte for byte, counters exactly, and no races."""

from __future__ import annotations

import json

import pytest

from vtasim.checks.races import RaceChecker
from vtasim.core.machine import Machine
from vtasm.formats.raw import load_program

from .builders import CONFORMANCE
from .reference import COUNTERS, run_reference

CASES = sorted(p.parent.name for p in CONFORMANCE.glob("*/layout.json")) if CONFORMANCE.is_dir() else []


def test_conformance_set_is_present():
    if not CONFORMANCE.is_dir():
        pytest.skip(f"{CONFORMANCE} not found (set VTA_SHARED)")
    assert len(CASES) == 30


def check_against_expected(directory, program, dram: bytes, counters: dict) -> None:
    assert program.dumps, "every case names its result ranges"
    for dump in program.dumps:
        expected = (directory / "expected" / dump.file).read_bytes()
        assert len(expected) == dump.nbytes
        got = dram[dump.addr : dump.addr + dump.nbytes]
        if got != expected:
            first = next(i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b)
            pytest.fail(f"{dump.file}: first difference at byte {first}")
    profile = json.loads((directory / "profile.json").read_text())
    assert list(profile) == list(COUNTERS)
    assert {k: counters[k] for k in COUNTERS} == profile


@pytest.mark.parametrize("case", CASES)
def test_simulator_conforms(case):
    directory = CONFORMANCE / case
    program = load_program(directory)
    machine = Machine(program)
    checker = RaceChecker(machine)
    result = machine.run()
    check_against_expected(directory, program, result.state.dram.tobytes(), result.counters)
    assert [r.describe(program) for r in checker.report()] == []


@pytest.mark.parametrize("case", CASES)
def test_reference_interpreter_conforms(case):
    """The reference the random tests trust reproduces the reference simulator's results too."""
    directory = CONFORMANCE / case
    program = load_program(directory)
    ref = run_reference(program)
    check_against_expected(directory, program, bytes(ref.dram), ref.counters)

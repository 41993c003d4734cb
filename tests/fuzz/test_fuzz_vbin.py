"""Mutated .vbin programs: the reader's API on every case, then vtasm dump/disasm and vtasim run on a
sample: the cases the reader accepted (they reach the disassembler, the simulator and the timing model),
the cases where the reader broke its contract, and a few it refused."""

from __future__ import annotations

import pytest

from .contract import ALLOWED, ALLOWED_SIM
from .harness import api_run, make_cases, sample, seed_keeps_the_contract, tools_run
from .mutators import mutate_vbin, mutate_vbin_targeted, vbin_targeted_count

API_CASES, TOOL_CASES = 250, 10
LONG_API_CASES, LONG_TOOL_CASES = 5000, 240


def vbin_commands(path, out):
    """The commands a mutated program goes through, each with an empty folder of its own (created here) for
    the outputs it is asked to write, and the exit codes it may end with."""
    folders = [out / f"cmd{j}" for j in range(5)]
    for folder in folders:
        folder.mkdir(parents=True)
    a, b, c, d, e = folders
    return [
        (["vtasm", "dump", path, "--uops"], [a], ALLOWED),
        (["vtasm", "disasm", path, "-o", b / "p.vasm"], [b], ALLOWED),
        (["vtasim", "run", path, "--zero-inputs", "--out-dir", c / "res", "--output", f"c={c / 'c.npy'}",
          "--max-ops", "5000000"], [c], ALLOWED_SIM),
        (["vtasim", "run", path, "--timing-only", "--timeline", d / "t.json"], [d], ALLOWED_SIM),
        (["vtasm", "export", path, "--raw", e / "raw"], [e], ALLOWED),
    ]


SNIPPET = "python -c \"from vtasm.formats.vbin import read_vbin; read_vbin(open('{path}', 'rb').read())\""


@pytest.fixture(scope="module")
def vbin_api(seeds, tmp_path_factory):
    data = seeds.vbin_bytes()
    cases = make_cases(data, "vbin", mutate_vbin, tmp_path_factory.mktemp("vbin-cases"), API_CASES, ".vbin",
                       targeted=(lambda rng, k: mutate_vbin_targeted(rng, data, k), vbin_targeted_count(data)))
    return cases, *api_run("vbin", "vbin", cases, SNIPPET)


def test_the_seed_program_passes_every_command(seeds, tmp_path):
    seed_keeps_the_contract("vbin seed", vbin_commands(seeds.vbin, tmp_path / "out"), tmp_path)


def test_mutated_vbin_files_are_refused_by_the_reader_with_a_format_error(vbin_api):
    _, failures, _ = vbin_api
    failures.check()


def test_mutated_vbin_files_keep_the_contract_of_every_command(vbin_api, tmp_path):
    cases, _, results = vbin_api
    tools_run("vbin through vtasm and vtasim", "vbin", sample(cases, results, TOOL_CASES), vbin_commands,
              tmp_path).check()


@pytest.mark.fuzz_long
def test_long_vbin_sweep(seeds, tmp_path):
    data = seeds.vbin_bytes()
    cases = make_cases(data, "vbin", mutate_vbin, tmp_path / "cases", LONG_API_CASES, ".vbin", first=API_CASES)
    api_failures, results = api_run("vbin", "vbin", cases, SNIPPET)
    tools = tools_run("vbin through vtasm and vtasim (long)", "vbin", sample(cases, results, LONG_TOOL_CASES),
                      vbin_commands, tmp_path)
    api_failures.log()
    tools.check()
    api_failures.check()

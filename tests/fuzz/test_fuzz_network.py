"""Mutated network files (VTA launches with host steps: LRN, Transpose, Mul by a constant, Elu, Softmax):
the reader's API on every case, then ``vtasim run`` on a sample, on zero inputs and on a float input of
the right shape."""

from __future__ import annotations

import pytest

from .contract import ALLOWED_SIM
from .harness import api_run, make_cases, sample, seed_keeps_the_contract, tools_run
from .mutators import mutate_network, mutate_network_targeted, network_targeted_count

API_CASES, TOOL_CASES = 150, 20
LONG_API_CASES, LONG_TOOL_CASES = 3000, 200
SNIPPET = ("python -c \"from vtasm.formats.network import read_network; "
           "read_network(open('{path}', 'rb').read())\"")


def network_commands(seeds):
    def commands(path, out):
        a, b = out / "zero", out / "float"
        a.mkdir(parents=True)
        b.mkdir(parents=True)
        return [
            (["vtasim", "run", path, "--zero-inputs", "--out-dir", a / "res", "--max-ops", "5000000"], [a],
             ALLOWED_SIM),
            (["vtasim", "run", path, "--input", f"x={seeds.x}", "--output", f"prob={b / 'p.npy'}", "--timing",
              "--trace-file", b / "trace.txt"], [b], ALLOWED_SIM),
        ]
    return commands


@pytest.fixture(scope="module")
def network_api(seeds, tmp_path_factory):
    data = seeds.network_bytes()
    cases = make_cases(data, "network", mutate_network, tmp_path_factory.mktemp("network-cases"), API_CASES,
                       ".vbin", targeted=(lambda rng, k: mutate_network_targeted(rng, data, k),
                                          network_targeted_count(data)))
    return cases, *api_run("network", "network", cases, SNIPPET)


def test_the_seed_network_passes_every_command(seeds, tmp_path):
    seeds.network_bytes()  # compiled on first use
    seed_keeps_the_contract("network seed", network_commands(seeds)(seeds.network, tmp_path / "out"), tmp_path)


def test_mutated_network_files_are_refused_by_the_reader_with_a_format_error(network_api):
    _, failures, _ = network_api
    failures.check()


def test_mutated_network_files_keep_the_contract_of_vtasim_run(seeds, network_api, tmp_path):
    cases, _, results = network_api
    tools_run("network files through vtasim run", "network", sample(cases, results, TOOL_CASES),
              network_commands(seeds), tmp_path).check()


@pytest.mark.fuzz_long
def test_long_network_sweep(seeds, tmp_path):
    data = seeds.network_bytes()
    cases = make_cases(data, "network", mutate_network, tmp_path / "cases", LONG_API_CASES, ".vbin",
                       first=API_CASES)
    api_failures, results = api_run("network", "network", cases, SNIPPET)
    tools = tools_run("network files through vtasim run (long)", "network", sample(cases, results, LONG_TOOL_CASES),
                      network_commands(seeds), tmp_path)
    api_failures.log()
    tools.check()
    api_failures.check()

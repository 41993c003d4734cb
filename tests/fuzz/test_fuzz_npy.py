"""Hostile .npy inputs: ``vtasm.fileio.read_npy`` (the reader every tool uses) on every case, and
``vtasim run --input`` with them, for a program's int32 tensor and for a network's float input."""

from __future__ import annotations

import pytest

from .contract import ALLOWED_SIM, Failures, run_api_cases, run_many
from .mutators import NPY_KINDS, case_rng, mutate_npy

RANDOM_CASES = 60  # random kinds with a header byte replaced, besides every kind for both targets
LONG_RANDOM_CASES = 2000
SNIPPET = "python -c \"from vtasm.fileio import read_npy; read_npy('{path}')\""
TARGETS = {"program": ((1, 1024), "<i4"), "network": ((1, 3, 8, 8), "<f4")}


def npy_cases(folder, random_cases: int, first: int = 0) -> list[tuple[str, str, str, object]]:
    """(case id, target, description, path): every kind for both targets, then random ones."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for target, (shape, dtype) in TARGETS.items():
        for k in range(NPY_KINDS):
            made.append((f"{target}-{k}", target, *mutate_npy(case_rng(f"npy-{target}", k), shape, dtype, k, 0)))
    for k in range(first, first + random_cases):
        target = "program" if k % 2 else "network"
        shape, dtype = TARGETS[target]
        made.append((f"{target}-r{k}", target, *mutate_npy(case_rng(f"npy-{target}", k), shape, dtype, None, 0.5)))
    cases = []
    for case_id, target, data, what in made:
        path = folder / f"{case_id}.npy"
        path.write_bytes(data)
        cases.append((case_id, target, what, path))
    return cases


def api(cases) -> Failures:
    failures = Failures("npy reader API")
    for (case_id, _, what, path), result in zip(cases, run_api_cases("npy", [c[3] for c in cases]), strict=True):
        failures.api("npy:read_npy", f"npy case {case_id}: {what}", result, SNIPPET.format(path=path))
    return failures


def commands(seeds, target, path, out):
    out.mkdir(parents=True)
    if target == "program":
        return ["vtasim", "run", seeds.vbin, "--input", f"a={path}", "--zero-inputs", "--out-dir", out / "res",
                "--output", f"c={out / 'c.npy'}"]
    return ["vtasim", "run", seeds.network, "--input", f"x={path}", "--output", f"prob={out / 'p.npy'}"]


def tools(seeds, cases, tmp_path, title) -> Failures:
    seeds.network_bytes()  # compiled on first use
    failures = Failures(title)
    jobs = [dict(args=commands(seeds, target, path, tmp_path / case_id), cwd=tmp_path)
            for case_id, target, _, path in cases]
    for (case_id, target, what, _), outcome in zip(cases, run_many(jobs), strict=True):
        failures.tool(f"npy:vtasim run ({target} input)", f"npy case {case_id}: {what}", outcome,
                      [tmp_path / case_id], ALLOWED_SIM)
    return failures


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return npy_cases(tmp_path_factory.mktemp("npy-cases"), RANDOM_CASES)


def test_the_seed_inputs_pass(seeds, tmp_path):
    seeds.network_bytes()
    for target, path in (("program", seeds.a), ("network", seeds.x)):
        [outcome] = run_many([dict(args=commands(seeds, target, path, tmp_path / target), cwd=tmp_path)])
        assert outcome.returncode == 0, outcome.err


def test_hostile_npy_files_are_refused_by_the_reader_with_a_format_error(cases):
    api(cases).check()


def test_hostile_npy_inputs_keep_the_contract_of_vtasim_run(seeds, cases, tmp_path):
    # every kind once, alternating the two targets; the random ones in the long sweep
    chosen = [c for c in cases if "-r" not in c[0] and int(c[0].split("-")[1]) % 2 == (c[1] == "program")]
    tools(seeds, chosen, tmp_path, "npy inputs through vtasim run").check()


@pytest.mark.fuzz_long
def test_long_npy_sweep(seeds, tmp_path):
    every = npy_cases(tmp_path / "cases", LONG_RANDOM_CASES, first=RANDOM_CASES)
    api_failures = api(every)
    api_failures.log()
    tools(seeds, every[: 2 * NPY_KINDS] + every[2 * NPY_KINDS :: 10], tmp_path, "npy inputs (long)").check()
    api_failures.check()

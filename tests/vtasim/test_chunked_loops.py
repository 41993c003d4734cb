"""Large GEMM/ALU instructions run in chunks: bounded memory, and the same results as running them whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vtasim.checks.races import RaceChecker
from vtasim.core import loops
from vtasim.core.machine import Machine, run_program
from vtasm.errors import SimFault

from . import randprog
from .builders import ACC, ADD, INP, MAX, REPO, UOP, WGT, Image, alu, chain, config, finish, gemm, load, store, uops
from .test_reference_equivalence import assert_same

WRAP = 1 << 32
PEAK_MB = 600  # the chunked simulator stays far below; running these instructions whole took gigabytes


def wrap32(values: np.ndarray) -> np.ndarray:
    return ((values + (1 << 31)) % WRAP - (1 << 31)).astype(np.int64)


# -- the large instructions and their expected results, computed from the math ---------------------------


def large_data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2048)
    return {
        "inp": rng.integers(-128, 128, (2048, 16), dtype=np.int8),
        "wgt": rng.integers(-128, 128, (2, 16, 16), dtype=np.int8),
        "acc": rng.integers(-(1 << 31), 1 << 31, (2048, 16), dtype=np.int64).astype(np.int32),
    }


def large_program():
    """Three 2048 x 2048 GEMMs and a 2048 x 1023 x 2 ALU fold over loaded accumulators."""
    cfg = config("default")
    data = large_data()
    img = Image(cfg)
    for name in ("inp", "wgt", "acc"):
        img.add(name, data[name].tobytes())
    body = [
        load(UOP, 0, img.uop_elem(), 4),
        load(INP, 0, img.elem("inp", INP), 2048),
        load(WGT, 0, img.elem("wgt", WGT), 2),
        load(ACC, 0, img.elem("acc", ACC), 2048),
        # acc[0] += inp[j] @ wgt[0]^T for every (i, j): one destination, 4 M executions (uop 0)
        gemm(0, 1, (2048, 2048), src=(0, 1)),
        # acc[j] += inp[i] @ wgt[1]^T: 2048 destinations of 2048 taps each (uop 1)
        gemm(1, 2, (2048, 2048), dst=(0, 1), src=(1, 0)),
        # acc[u] += acc[1024 + u + j] for every (i, j) and micro-ops u = 0, 1 (uops 2, 3): a 4 M-execution fold
        alu(ADD, 2, 4, (2048, 1023), src=(0, 1)),
        # acc[i] = max(acc[i], 5) repeated 2048 times (uop 0 once more)
        alu(MAX, 0, 1, (2048, 2048), dst=(1, 0), imm=5),
    ]
    table = uops((0, 0, 0), (0, 0, 1), (0, 1024, 0), (1, 1025, 0))
    return img.program(chain(body), table)


def large_expected() -> np.ndarray:
    data = large_data()
    inp = data["inp"].astype(np.int64)
    wgt = data["wgt"].astype(np.int64)
    acc = data["acc"].astype(np.int64)
    acc[0] = wrap32(acc[0] + 2048 * inp.sum(axis=0) @ wgt[0].T)
    acc = wrap32(acc + inp.sum(axis=0) @ wgt[1].T)
    for u in (0, 1):
        acc[u] = wrap32(acc[u] + 2048 * acc[1024 + u : 2047 + u].sum(axis=0))
    return np.maximum(acc, 5)


CHILD = """
import json, resource, sys
import numpy as np
from tests.vtasim.test_chunked_loops import large_program
from vtasim.core.machine import run_program
result = run_program(large_program())
np.save(sys.argv[1], result.state.acc.reshape(2048, 16))
# this process's own high-water mark (ru_maxrss would keep the parent's peak across fork and exec on Linux)
status = open("/proc/self/status").read().split("VmHWM:")
fallback = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
peak = (int(status[1].split()[0]) if len(status) > 1 else fallback) // 1024
print(json.dumps({"peak_mb": peak, "counters": result.counters}))
"""


@pytest.mark.slow
def test_huge_loop_counts_run_in_bounded_memory(tmp_path):
    out = tmp_path / "acc.npy"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    # a safety net: a regression fails with MemoryError instead of taking the machine's memory
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))\n"
    proc = subprocess.run([sys.executable, "-c", limit + CHILD, str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["peak_mb"] < PEAK_MB, report
    assert report["counters"]["gemm_counter"] == 2 * 2048 * 2048
    assert report["counters"]["alu_counter"] == 2048 * 1023 * 2 + 2048 * 2048
    assert np.array_equal(np.load(out).astype(np.int64), large_expected())


# -- chunks against whole instructions -----------------------------------------------------------------


def chunk_lanes(cfg, executions: int) -> int:
    """CHUNK_LANES giving chunks of ``executions`` executions on this configuration."""
    return executions * cfg.batch * max(cfg.block_in, cfg.block_out)


@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5), st.integers(1, 40))
def test_boxes_cover_the_executions_in_order(iter_out, iter_in, n_uops, limit):
    order = []
    for i0, i1, j0, j1, u0, u1 in loops.boxes(iter_out, iter_in, n_uops, limit):
        assert 0 < (i1 - i0) * (j1 - j0) * (u1 - u0) <= limit
        order += [(i, j, u) for i in range(i0, i1) for j in range(j0, j1) for u in range(u0, u1)]
    assert order == [(i, j, u) for i in range(iter_out) for j in range(iter_in) for u in range(n_uops)]


@pytest.mark.parametrize("name", ["default", "batch2"])
@pytest.mark.parametrize("executions", [1, 3, 7])
def test_random_programs_in_tiny_chunks_match_whole_runs_and_the_reference(name, executions, monkeypatch):
    cfg = config(name)

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(randprog.bodies(), randprog.seeds)
    def check(body, seed):
        program = randprog.build(cfg, body, seed)
        whole = run_program(program)
        monkeypatch.setattr(loops, "CHUNK_LANES", chunk_lanes(cfg, executions))
        try:
            chunked = run_program(program)
        finally:
            monkeypatch.undo()
        assert np.array_equal(chunked.state.dram, whole.state.dram)
        assert np.array_equal(chunked.state.acc, whole.state.acc)
        assert chunked.counters == whole.counters
        assert_same(program, chunked)

    check()


def chain_program(cfg):
    """A prefix sum over 3 x 4 x 2 executions that each read the previous one's result."""
    values = list(range(1, 26))
    lanes = cfg.batch * cfg.block_out
    img = Image(cfg)
    img.add("acc", b"".join(v.to_bytes(4, "little", signed=True) for v in values for _ in range(lanes)))
    # execution (i, j, u) does acc[8i + 2j + u + 1] += acc[8i + 2j + u]
    body = [load(UOP, 0, img.uop_elem(), 2), load(ACC, 0, img.elem("acc", ACC), len(values)),
            alu(ADD, 0, 2, (3, 4), dst=(8, 2), src=(8, 2))]
    return img.program(chain(body), uops((1, 0, 0), (2, 1, 0))), values


@pytest.mark.parametrize("executions", [1, 2, 3, 5, 8, 9, 24])
def test_strict_order_holds_across_chunks(executions, monkeypatch):
    cfg = config("default")
    program, values = chain_program(cfg)
    monkeypatch.setattr(loops, "CHUNK_LANES", chunk_lanes(cfg, executions))
    result, _ = assert_same(program)
    assert result.state.acc[: len(values), 0, 0].tolist() == np.cumsum(values).tolist()


def faulting_program(cfg):
    img = Image(cfg)
    img.add("acc", bytes(64 * 4 * cfg.batch * cfg.block_out))
    # executions (i, j) write acc[100 i + j]: (20, 48) is the first one past 2047
    body = [load(UOP, 0, img.uop_elem(), 1), load(ACC, 0, img.elem("acc", ACC), 64),
            alu(ADD, 0, 1, (30, 50), dst=(100, 1), imm=1)]
    return img.program(chain(body), uops((0, 0, 0)))


@pytest.mark.parametrize("executions", [1, 7, 50, 120])
def test_a_fault_in_a_later_chunk_names_the_same_execution_and_changes_nothing(executions, monkeypatch):
    cfg = config("default")
    program = faulting_program(cfg)
    with pytest.raises(SimFault) as whole:
        run_program(program)
    monkeypatch.setattr(loops, "CHUNK_LANES", chunk_lanes(cfg, executions))
    machine = Machine(program)
    with pytest.raises(SimFault) as chunked:
        machine.run()
    assert str(chunked.value) == str(whole.value)
    assert not machine.state.acc.any()
    assert "acc dst index 2048" in str(whole.value) and "iteration (20, 48), micro-op 0" in str(whole.value)


def test_plan_cache_is_bounded(monkeypatch):
    """Cached plans are dropped when they would hold more than CACHE_LANES values (the Python units' cache:
    the compiled loop, which would run these ALU instructions itself, is off)."""
    monkeypatch.setenv("VTASIM_NATIVE", "0")
    cfg = config("default")
    monkeypatch.setattr(loops, "CACHE_LANES", 40 * loops.PLAN_LANES)
    img = Image(cfg)
    body = [load(UOP, 0, img.uop_elem(), 1)] + [alu(ADD, 0, 1, (1, n), dst=(0, 1), imm=1) for n in range(1, 30)]
    program = img.program(chain(body), uops((0, 0, 0)))
    machine = Machine(program)
    machine.run()
    held = sum(p.lanes for p in machine.plans._plans.values())
    assert 0 < held <= 40 * loops.PLAN_LANES
    assert machine.state.acc[:29, 0, 0].tolist() == list(range(29, 0, -1))


def racy_program(cfg):
    """GEMM and ALU instructions of several executions that no token orders against a LOAD and a STORE."""
    img = Image(cfg)
    inp = img.add("inp", bytes(8 * cfg.inp_elem_bytes))
    out = img.add("out", bytes(8 * cfg.out_elem_bytes))
    insns = [
        load(UOP, 0, img.uop_elem(), 2),
        gemm(0, 2, (2, 3), dst=(2, 0), src=(3, 1), wgt=(1, 0)),  # reads inp 0..6, writes acc 0..3
        load(INP, 0, inp // cfg.inp_elem_bytes, 8),
        alu(ADD, 0, 2, (2, 2), dst=(1, 2), src=(2, 1)),  # reads acc 0..7, writes acc 0..4
        store(0, out // cfg.out_elem_bytes, 8),
        finish(),
    ]
    return img.program(insns, uops((0, 0, 0), (1, 1, 1)))


@pytest.mark.parametrize("executions", [1, 2, 5])
def test_races_of_chunked_instructions_are_the_same(executions, monkeypatch):
    cfg = config("default")
    program = racy_program(cfg)

    def reports():
        machine = Machine(program)
        checker = RaceChecker(machine)
        machine.run()
        return [r.describe(program) for r in checker.report()]

    whole = reports()
    monkeypatch.setattr(loops, "CHUNK_LANES", chunk_lanes(cfg, executions))
    assert reports() == whole
    assert len(whole) == 3 and "race on inp[0..6]" in whole[0] and "race on acc[0..4]" in whole[1]
    assert "(FINISH, compute stage) ends the program" in whole[2]  # the FINISH pops no token from the STORE

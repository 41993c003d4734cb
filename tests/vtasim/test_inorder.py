"""The in-order run (schedule.py, inorder.py) against the pipeline, the conformance set and the reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from vtasim.core.machine import Machine
from vtasim.core.order import in_order
from vtasm.columns import stream_columns
from vtasm.encoding import Instruction

from . import randprog
from .builders import (
    ACC,
    CONFIGS,
    CONFORMANCE,
    INP,
    MAX,
    UOP,
    WGT,
    Image,
    alu,
    chain,
    config,
    finish,
    gemm,
    load,
    nop,
    store,
    uops,
)
from .reference import COUNTERS
from .test_conformance import CASES, check_against_expected, load_program
from .test_reference_equivalence import assert_same


def _through_pipeline(program):
    return Machine(program).run(through_pipeline=True)


def _takes_the_in_order_run(program) -> bool:
    return in_order(stream_columns(program.instructions, program.config), 10**12) is not None


def assert_same_runs(program) -> None:
    fast, slow = Machine(program).run(), _through_pipeline(program)
    assert fast.state.dram.tobytes() == slow.state.dram.tobytes()
    for buf in ("inp_bytes", "wgt_bytes", "acc_bytes", "uop_words"):
        assert np.array_equal(getattr(fast.state, buf), getattr(slow.state, buf)), buf
    assert fast.counters == slow.counters
    assert fast.extras == slow.extras


@pytest.mark.parametrize("case", CASES)
def test_conformance_programs_run_in_order_and_conform(case):
    directory = CONFORMANCE / case
    program = load_program(directory)
    assert _takes_the_in_order_run(program)
    result = Machine(program).run()
    check_against_expected(directory, program, result.state.dram.tobytes(), result.counters)
    assert_same_runs(program)


@pytest.mark.parametrize("name", CONFIGS)
def test_random_programs_give_the_pipelines_results(name):
    cfg = config(name)

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(randprog.bodies(), randprog.seeds)
    def check(body, seed):
        program = randprog.build(cfg, body, seed)
        assert _takes_the_in_order_run(program)
        assert_same_runs(program)
        assert_same(program)

    check()


def _kernel_program(reload_weights: bool):
    """One GEMM and one ALU kernel run twice, with new inputs, weights and micro-ops in between."""
    cfg = config("default")
    img = Image(cfg)
    rng = np.random.default_rng(3)
    img.add("inp", rng.integers(-128, 128, 64 * cfg.inp_elem_bytes, dtype=np.int8).tobytes())
    img.add("wgt", rng.integers(-128, 128, 4 * cfg.wgt_elem_bytes, dtype=np.int8).tobytes())
    img.add("acc", rng.integers(-2**31, 2**31, 64 * cfg.batch * cfg.block_out, dtype=np.int32).tobytes())
    img.add("out", bytes(64 * cfg.out_elem_bytes))
    body = [
        load(UOP, 0, img.uop_elem(), 4),
        load(INP, 0, img.elem("inp", INP), 32),
        load(WGT, 0, img.elem("wgt", WGT), 2),
        load(ACC, 0, img.elem("acc", ACC), 64),
        gemm(0, 1, (4, 8), dst=(8, 1), src=(8, 1)),
        alu(MAX, 1, 2, (2, 16), dst=(16, 1), src=(16, 1)),
        load(INP, 0, img.elem("inp", INP) + 32, 32),
        load(WGT, 0, img.elem("wgt", WGT) + (2 if reload_weights else 0), 2),
        gemm(0, 1, (4, 8), dst=(8, 1), src=(8, 1)),  # the same kernels, prepared already, on new data
        alu(MAX, 1, 2, (2, 16), dst=(16, 1), src=(16, 1)),
        gemm(0, 1, (4, 8), dst=(8, 1), src=(8, 1), reset=1),
        alu(MAX, 2, 4, (1, 4), dst=(16, 1), src=(16, 1)),
        load(UOP, 2, img.uop_elem(), 2),  # micro-ops 2 and 3 become 0 and 1: kernels over 0..1 keep theirs
        gemm(0, 1, (4, 8), dst=(8, 1), src=(8, 1)),
        alu(MAX, 1, 2, (2, 16), dst=(16, 1), src=(16, 1)),
        alu(MAX, 1, 2, (2, 16), dst=(16, 1), imm=-7),
        alu(MAX, 2, 4, (1, 4), dst=(16, 1), src=(16, 1)),  # the same fields over new micro-ops
        store(0, img.elem("out", 4), 64),
    ]

    return img.program(chain(body), uops((0, 0, 0), (32, 0, 0), (1, 1, 1), (5, 3, 1)))


@pytest.mark.parametrize("reload_weights", [False, True])
def test_a_kernel_run_again_sees_new_data(reload_weights):
    program = _kernel_program(reload_weights)
    assert _takes_the_in_order_run(program)
    assert_same_runs(program)
    assert_same(program)


def test_tokens_that_reorder_the_stages_go_through_the_pipeline():
    """A compute instruction that waits for a later load cannot run in program order."""
    cfg = config("default")
    img = Image(cfg)
    img.add("inp", bytes(16 * cfg.inp_elem_bytes))
    waiting = nop("compute", pop_prev=1)
    loading = Instruction("load", {**load(INP, 0, img.elem("inp", INP), 16).fields, "push_next": 1})
    program = img.program([waiting, loading, finish()], uops((0, 0, 0)))
    assert not _takes_the_in_order_run(program)
    result = Machine(program).run()
    assert result.extras["instructions"] == 3
    assert {k: result.counters[k] for k in COUNTERS}["inp_load_nbytes"] == 16 * cfg.inp_elem_bytes


@pytest.mark.parametrize("name", ["default", "batch2", "block32"])
def test_identity_weights_move_inputs_into_the_accumulator(name):
    """vtacc moves int8 data with +-identity weight tiles: the in-order run adds or subtracts instead."""
    cfg = config(name)
    img = Image(cfg)
    rng = np.random.default_rng(5)
    eye = np.eye(cfg.block_out, cfg.block_in, dtype=np.int8)
    odd = eye.copy()
    odd[0, -1] = 3  # almost the identity: a real product
    img.add("inp", rng.integers(-128, 128, 40 * cfg.inp_elem_bytes, dtype=np.int8).tobytes())
    img.add("wgt", np.stack([eye, -eye, odd]).tobytes())
    img.add("acc", rng.integers(-2**31, 2**31, 40 * cfg.batch * cfg.block_out, dtype=np.int32).tobytes())
    img.add("out", bytes(40 * cfg.out_elem_bytes))
    body = [load(UOP, 0, img.uop_elem(), 3), load(INP, 0, img.elem("inp", INP), 40),
            load(WGT, 0, img.elem("wgt", WGT), 3), load(ACC, 0, img.elem("acc", ACC), 40)]
    for _ in range(2):  # the second time from the prepared kernels
        body += [gemm(0, 1, (1, 20), dst=(0, 1), src=(0, 1)), gemm(1, 2, (1, 20), dst=(0, 1), src=(0, 1)),
                 gemm(2, 3, (1, 20), dst=(0, 1), src=(0, 1))]
    body.append(store(0, img.elem("out", 4), 40))
    program = img.program(chain(body), uops((0, 0, 0), (20, 20, 1), (0, 20, 2)))
    assert _takes_the_in_order_run(program)
    assert_same_runs(program)
    assert_same(program)

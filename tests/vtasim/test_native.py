"""The in-order run's compiled loop (vtasim/core/native.py): built where a C compiler is, the same bits as the
Python units on real and random programs, and the Python units still right on their own.

The in-order tests of test_inorder*.py run the compiled loop wherever it is built (it is the default);
here the same programs also run without it, and the two runs are compared with each other."""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from vtacc.frontend.check import check_source
from vtacc.program_builder import compile_file
from vtasim.core import native
from vtasim.core.inorder import InOrderRun
from vtasim.core.machine import Machine
from vtasm.config import default_config

from .builders import (
    ACC,
    ADD,
    CONFIGS,
    CONFORMANCE,
    INP,
    MAX,
    MIN,
    MUL,
    OUT,
    SHR,
    UOP,
    WGT,
    alu,
    chain,
    config,
    gemm,
    load,
    store,
    uops,
)
from .test_conformance import CASES, check_against_expected, load_program
from .test_inorder_adversarial import _image, _kernel_program, _random_program, check

REPO = Path(__file__).resolve().parents[2]
HAS_COMPILER = shutil.which(os.environ.get("CC") or "cc") is not None


@pytest.fixture
def python_only(monkeypatch):
    monkeypatch.setenv("VTASIM_NATIVE", "0")


def _runs(program, compiled: bool, inputs: dict[str, bytes] | None = None) -> Machine:
    """The program run in order, with the compiled loop or with the Python units alone (``inputs``: bytes
    for tensors' DRAM segments)."""
    machine = Machine(program)
    for name, data in (inputs or {}).items():
        seg = program.segment(name)
        machine.state.dram[seg.addr : seg.addr + len(data)] = np.frombuffer(data, dtype=np.uint8)
    calls = []
    original = InOrderRun.run

    def run(self, native: bool = True):
        calls.append(self)
        return original(self, native=compiled)

    python_steps = []
    one = InOrderRun._one

    def step(self, i, *args):
        python_steps.append(i)
        return one(self, i, *args)

    InOrderRun.run, InOrderRun._one = run, step
    try:
        machine.run()
    finally:
        InOrderRun.run, InOrderRun._one = original, one
    assert calls, "the program did not take the in-order run"
    machine.python_steps = python_steps  # the instructions the Python units ran
    return machine


def _same_state(a: Machine, b: Machine) -> None:
    for buf in ("dram", "inp_bytes", "wgt_bytes", "acc_bytes", "uop_words"):
        assert np.array_equal(getattr(a.state, buf), getattr(b.state, buf)), buf
    assert (a.state.inp_generation, a.state.wgt_generation) == (b.state.inp_generation, b.state.wgt_generation)


@pytest.mark.skipif(not HAS_COMPILER, reason="no C compiler on this machine")
def test_the_loop_is_built_where_a_compiler_is():
    assert native.library() is not None


@pytest.mark.skipif(not HAS_COMPILER, reason="no C compiler on this machine")
def test_the_c_struct_and_codes_come_from_one_declaration_each():
    """The library reports its struct's layout; the ctypes mirror agrees (a drift would corrupt memory, and
    the loader then falls back to Python); the C source's codes are -D flags made from the ISA tables."""
    import ctypes

    from vtasim.core.native import PADDED
    from vtasm import isa

    lib = native.library()
    assert native.layout_mismatch(lib, ctypes) is None
    flags = native._codes()
    assert f"-DVTA_OP_ALU={isa.OPCODES['alu']}" in flags and f"-DVTA_ALU_SHR={isa.ALU_OPS['shr']}" in flags
    assert f"-DVTA_MEM_ACC={isa.MEM_TYPES['acc']}" in flags and f"-DVTA_HOW_PADDED={PADDED}" in flags
    source = native.SOURCE.read_text()
    assert "OP_ALU = 4" not in source and "OP_ALU = VTA_OP_ALU" in source

    class Drifted(ctypes.Structure):  # a mirror with one field too few: caught
        _fields_ = [(name, ctypes.c_int64) for name, _ in native._FIELDS[:-1]]

    class Fake:
        context_type = Drifted
        vta_ctx_layout = lib.vta_ctx_layout

    assert "struct vta_ctx" in native.layout_mismatch(Fake, ctypes)


def test_no_compiler_means_the_python_units(tmp_path, monkeypatch):
    monkeypatch.setattr(native, "_loaded", native._MISSING)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CC", "false")  # a compiler that always fails
    assert native.library() is None
    check(_kernel_program(config("default"), random.Random("no-compiler")), reference=False)
    assert list(tmp_path.glob("vta-toolchain/*.failed"))  # the failure is remembered, not retried every run


@pytest.mark.parametrize("case", CASES)
def test_conformance_programs_with_the_python_units_alone(case, python_only):
    directory = CONFORMANCE / case
    program = load_program(directory)
    result = Machine(program).run()
    check_against_expected(directory, program, result.state.dram.tobytes(), result.counters)


@pytest.mark.parametrize("name", CONFIGS)
def test_seeded_programs_with_the_python_units_alone(name, python_only):
    cfg = config(name)
    for seed in range(40):
        check(_random_program(cfg, random.Random(f"python-{name}-{seed}")), reference=False)
        check(_kernel_program(cfg, random.Random(f"python-{name}-{seed}")), reference=seed < 4)


@pytest.mark.skipif(not HAS_COMPILER, reason="no C compiler on this machine")
@pytest.mark.parametrize("name", CONFIGS)
def test_compiled_loop_and_python_units_agree_on_seeded_programs(name):
    cfg = config(name)
    for seed in range(40):
        for make in (_random_program, _kernel_program):
            program = make(cfg, random.Random(f"both-{name}-{seed}"))
            try:
                python = _runs(program, compiled=False)
            except Exception as exc:  # a fault: the compiled loop leaves that instruction to the same unit
                with pytest.raises(type(exc), match="^" + re.escape(str(exc)) + "$"):
                    _runs(program, compiled=True)
                continue
            _same_state(_runs(program, compiled=True), python)


POOL_AND_ADD = """
kernel k(x: int8[1, 32, 18, 18], b: int8[1, 32, 8, 8]) -> (y: int8[1, 32, 8, 8]) {
  m = max_pool(x, 3, stride=2)
  y = clip((m >> 1) + (b >> 2) - 3, -128, 127)
}
"""


@pytest.mark.skipif(not HAS_COMPILER, reason="no C compiler on this machine")
@pytest.mark.parametrize("source", ["pooling.vk", "vadd.vk", "resnet_c8.vk", "pool_and_add"])
def test_compiled_programs_on_random_data_agree(source):
    """vtacc's programs (identity-weight moves into the accumulator, padded loads, ALU chains, stores) on
    random inputs: every byte of DRAM and the buffers alike with and without the compiled loop."""
    text = POOL_AND_ADD if source == "pool_and_add" else (REPO / "examples" / source).read_text()
    compiled = compile_file(check_source(text, source), default_config())
    rng = np.random.default_rng(11)
    inputs = {d.name: rng.integers(0, 256, compiled.program.tensor(d.name).nbytes, dtype=np.uint8).tobytes()
              for d in compiled.kernel.inputs}
    fast = _runs(compiled.program, True, inputs)
    _same_state(fast, _runs(compiled.program, False, inputs))
    if source != "resnet_c8.vk":  # its GEMMs multiply by real weights: the Python units (BLAS) run those
        assert len(fast.python_steps) <= 2  # the micro-op load, and nothing else


@pytest.mark.parametrize("name", ["default", "batch2", "block8"])
def test_runs_of_consecutive_rows_with_sources_around_their_destinations(name):
    """One micro-op whose inner loop walks consecutive rows runs as one pass over their lanes: sources a
    few rows before their destinations (a chain through the executions), on them, after them (old values),
    in another place; resets and identity moves the same way; each against the Python units, the pipeline
    and the reference."""
    cfg = config(name)
    img = _image(cfg)
    eye = np.eye(cfg.block_out, cfg.block_in, dtype=np.int8)
    img.add("eye", np.stack([eye, -eye]).tobytes())
    table = [(20, 20 + d, k % 2) for k, d in enumerate((-3, -1, 0, 1, 2, 30))]
    body = [load(UOP, 0, img.uop_elem(), len(table)), load(ACC, 0, img.elem("acc", ACC), 64),
            load(INP, 0, img.elem("inp", INP), 64), load(WGT, 0, img.elem("eye", WGT), 2)]
    for op in (MIN, MAX, ADD, SHR, MUL):
        for u in range(len(table)):
            body += [alu(op, u, u + 1, (2, 5), dst=(6, 1), src=(6, 1)), alu(op, u, u + 1, (1, 7), dst=(0, 1), imm=-3)]
    for u in range(len(table)):
        body += [gemm(u, u + 1, (2, 6), dst=(7, 1), src=(7, 1)),
                 gemm(u, u + 1, (1, 4), dst=(0, 1), reset=1)]
    body.append(store(0, img.elem("out", OUT), 64))
    program = img.program(chain(body), uops(*table))
    check(program)
    if HAS_COMPILER:
        fast = _runs(program, compiled=True)
        _same_state(fast, _runs(program, compiled=False))
        assert len(fast.python_steps) == 1  # the micro-op load: every run of rows went through the loop

"""Compile kernel sources and run them on the simulator, for end-to-end tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tests.portable import portability_warnings
from tests.vtasm.paths import GOLDEN, require
from vtacc.compiler import Compiled
from vtacc.frontend.check import check_source
from vtacc.program_builder import compile_file
from vtasim.checks.lint import Linter
from vtasim.checks.races import RaceChecker
from vtasim.core.machine import Machine
from vtasm.config import VTAConfig, default_config, load_config

CONFIGS = ("default", "batch2", "block8", "block32")


def config(name: str) -> VTAConfig:
    if name == "default":
        return default_config()
    return load_config(require(GOLDEN / f"{name}.config.json"))


@dataclass
class Result:
    outputs: dict[str, np.ndarray]
    compiled: Compiled
    counters: dict[str, int]
    races: list


def compile_source(source: str, cfg: VTAConfig, kernel: str | None = None, profile=None) -> Compiled:
    return compile_file(check_source(source, "test.vk"), cfg, kernel, profile=profile)


def run(source: str, inputs: dict[str, np.ndarray], cfg: VTAConfig | None = None, kernel: str | None = None,
        check_races: bool = True, profile=None) -> Result:
    """Compile (tiles chosen for ``profile``), load the inputs through the tensor table, run to FINISH, unpack.

    The portability lint watches every run: compiled code must keep every rule of isa.md section 7 (a shift by a
    tensor, whose amounts are data, is the user's to keep in range).
    """
    compiled = compile_source(source, cfg or default_config(), kernel, profile)
    program = compiled.program
    assert program.instructions[-1].kind == "finish"
    machine = Machine(program)
    checker = RaceChecker(machine) if check_races else None
    linter = Linter(machine)
    for name, array in inputs.items():
        seg, info = program.segment(name), program.tensor(name)
        data = info.pack(array)
        machine.state.dram[seg.addr : seg.addr + len(data)] = np.frombuffer(data, dtype=np.uint8)
    result = machine.run()
    outputs = {}
    for info in program.tensors:
        seg = program.segment(info.name)
        outputs[info.name] = info.unpack(result.state.dram[seg.addr : seg.addr + info.nbytes].tobytes())
    warnings = portability_warnings(program, linter)
    assert warnings == [], "compiled code breaks a rule of isa.md section 7:\n" + "\n".join(warnings)
    return Result(outputs, compiled, result.counters, checker.report() if checker else [])


def rand8(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-128, 128, shape, dtype=np.int8)


def rand32(rng: np.random.Generator, *shape: int, lo: int = -(2**31), hi: int = 2**31) -> np.ndarray:
    return rng.integers(lo, hi, shape, dtype=np.int64).astype(np.int32)


def wrap32(a: np.ndarray) -> np.ndarray:
    """int64 values wrapped to int32 (two's complement), as the accumulator does."""
    return a.astype(np.int64).astype(np.int32)


def low8(a: np.ndarray) -> np.ndarray:
    """The low 8 bits of int32 values, as STORE writes them."""
    return a.astype(np.int32).astype(np.int8)


def matmul_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return wrap32(x.astype(np.int64) @ w.T.astype(np.int64))


def conv_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: int, groups: int = 1) -> np.ndarray:
    """Direct convolution, NCHW x OIHW, zero padding, int64 sums wrapped to int32."""
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad), np.int64)
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, oc, oh, ow), np.int64)
    ocg = oc // groups
    for g in range(groups):
        xs = xp[:, g * icg:(g + 1) * icg]
        ws = w[g * ocg:(g + 1) * ocg].astype(np.int64)
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                out[:, g * ocg:(g + 1) * ocg] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return wrap32(out)

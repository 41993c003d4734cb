"""The instruction-level checks of workloads.md as hand-written assembly (tests/vtasim/programs/*.vasm).

Each program is written with the configuration's constants, so the same file is
assembled and run for the default, batch2 and block8 configurations. Inputs
are random logical arrays; every result is compared with a numpy reference
written from the math in workloads.md (and each program's header comment), not
from the simulator. Every run also checks races (none) and lint (no warning).
Most runs use the Python API; one run per program goes through the installed
`vtasm` and `vtasim` scripts.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from vtasim.runs.runner import RunOptions, RunReport, simulate
from vtasm.asm.assembler import assemble, assemble_file
from vtasm.config import VTAConfig
from vtasm.program import Program

from .builders import REPO, config, config_path

PROGRAMS = Path(__file__).resolve().parent / "programs"
CONFIGS = ("default", "batch2", "block8")
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# values every int32 input contains somewhere: the extremes and the int8 wrap-around points
INT32_EDGES = (INT32_MIN, INT32_MIN + 1, INT32_MAX, INT32_MAX - 1, -129, -128, -1, 0, 1, 127, 128, 255, 256)

# constants mirrored from the header comments of alu.vasm and shift_and_scale.vasm
ALU_SHL_BY, ALU_MAX_IMM, ALU_ADD_IMM, ALU_SHR_BY = 1, 2, 3, 4
SS_ADD_IMM, SS_SHR_BY = 16, 5
GEMM_SHIFT = 8
# padded_load: A is 3 x 5 tiles; the .vasm file's own padding (y0, y1, x0, x1)
PAD_ROWS, PAD_COLS = 3, 5
PAD_IN_FILE = (1, 2, 2, 1)


# -- numpy arithmetic of the accumulator -------------------------------------------


def wrap32(v: np.ndarray) -> np.ndarray:
    """Wrap int64 values to int32 (two's complement), kept as int64."""
    return (v.astype(np.int64) + 2**31) % 2**32 - 2**31


def low8(v: np.ndarray) -> np.ndarray:
    """The low 8 bits as int8, what STORE keeps."""
    return (v.astype(np.int64) & 0xFF).astype(np.uint8).view(np.int8)


def int32_data(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Half full-range int32, half small values (so clamps and shifts see both), plus INT32_EDGES."""
    full = rng.integers(INT32_MIN, INT32_MAX, size=shape, endpoint=True, dtype=np.int64)
    small = rng.integers(-300, 300, size=shape, endpoint=True, dtype=np.int64)
    data = np.where(rng.random(shape) < 0.5, full, small).reshape(-1)
    data[rng.choice(data.size, len(INT32_EDGES), replace=False)] = INT32_EDGES
    return data.reshape(shape).astype(np.int32)


def int8_data(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    data = rng.integers(-128, 127, size=shape, endpoint=True, dtype=np.int64).reshape(-1)
    data[rng.choice(data.size, 2, replace=False)] = (-128, 127)
    return data.reshape(shape).astype(np.int8)


# -- the workloads: inputs and references ------------------------------------------


@dataclass(frozen=True)
class Workload:
    name: str
    inputs: Callable[[np.random.Generator, VTAConfig], dict[str, np.ndarray]]
    reference: Callable[[dict[str, np.ndarray]], np.ndarray]
    output: str = "C"

    @property
    def path(self) -> Path:
        return PROGRAMS / f"{self.name}.vasm"


def tiles(cfg: VTAConfig, rows: int, cols: int) -> tuple[int, int]:
    """Logical shape of rows x cols tiles of BATCH x BLOCK_OUT."""
    return rows * cfg.batch, cols * cfg.block_out


def padded_reference(a: np.ndarray, pads: tuple[int, int, int, int]) -> np.ndarray:
    """A placed at tile (y0, x0) of a zero block of (y0 + 3 + y1) x (x0 + 5 + x1) tiles, as int8."""
    y0, y1, x0, x1 = pads
    b, bo = a.shape[0] // PAD_ROWS, a.shape[1] // PAD_COLS
    out = np.zeros(((y0 + PAD_ROWS + y1) * b, (x0 + PAD_COLS + x1) * bo), dtype=np.int64)
    out[y0 * b : (y0 + PAD_ROWS) * b, x0 * bo : (x0 + PAD_COLS) * bo] = a
    return low8(out)


def padded_inputs(pads: tuple[int, int, int, int]):
    y0, y1, x0, x1 = pads

    def make(rng: np.random.Generator, cfg: VTAConfig) -> dict[str, np.ndarray]:
        fill = int32_data(rng, tiles(cfg, y0 + PAD_ROWS + y1, x0 + PAD_COLS + x1))
        fill[low8(fill) == 0] = 1  # every accumulator entry visibly non-zero before the padded load
        return {"A": int32_data(rng, tiles(cfg, PAD_ROWS, PAD_COLS)), "FILL": fill}

    return make


def gemm_inputs(rng: np.random.Generator, cfg: VTAConfig) -> dict[str, np.ndarray]:
    return {"x": int8_data(rng, (4 * cfg.batch, cfg.block_in)), "w": int8_data(rng, (4 * cfg.block_out, cfg.block_in))}


def gemm_reference(d: dict[str, np.ndarray]) -> np.ndarray:
    acc = wrap32(d["x"].astype(np.int64) @ d["w"].astype(np.int64).T)
    return np.clip(acc >> GEMM_SHIFT, 0, 127).astype(np.int8)


def alu_reference(d: dict[str, np.ndarray]) -> np.ndarray:
    a, b = d["A"].astype(np.int64), d["B"].astype(np.int64)
    t = wrap32(a << ALU_SHL_BY)  # shift left by imm
    t = np.maximum(t, ALU_MAX_IMM)  # max with imm
    t = np.maximum(t, b)  # max of two tensors
    t = wrap32(t + ALU_ADD_IMM)  # add imm
    t = wrap32(t + b)  # add two tensors
    t = t >> ALU_SHR_BY  # shift right by imm (arithmetic)
    return low8(t)


WORKLOADS = {
    w.name: w
    for w in (
        Workload("load_store", lambda rng, cfg: {"A": int32_data(rng, tiles(cfg, 6, 6))}, lambda d: low8(d["A"])),
        Workload("padded_load", padded_inputs(PAD_IN_FILE), lambda d: padded_reference(d["A"], PAD_IN_FILE)),
        Workload("gemm", gemm_inputs, gemm_reference, output="y"),
        Workload(
            "alu",
            lambda rng, cfg: {"A": int32_data(rng, tiles(cfg, 8, 8)), "B": int32_data(rng, tiles(cfg, 8, 8))},
            alu_reference,
        ),
        Workload(
            "relu",
            lambda rng, cfg: {"A": int32_data(rng, tiles(cfg, 8, 10))},
            lambda d: np.minimum(np.maximum(d["A"].astype(np.int64), 0), 127).astype(np.int8),
        ),
        Workload(
            "shift_and_scale",
            lambda rng, cfg: {"A": int32_data(rng, tiles(cfg, 2, 8))},
            lambda d: low8(wrap32(d["A"].astype(np.int64) + SS_ADD_IMM) >> SS_SHR_BY),
        ),
    )
}


# -- running ------------------------------------------------------------------------


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def save_inputs(tmp_path: Path, inputs: dict[str, np.ndarray]) -> list[tuple[str, str]]:
    pairs = []
    for name, array in inputs.items():
        path = tmp_path / f"{name}.npy"
        np.save(path, array)
        pairs.append((name, str(path)))
    return pairs


def run_api(program: Program, tmp_path: Path, inputs: dict[str, np.ndarray],
            output: str) -> tuple[np.ndarray, RunReport]:
    """Run through vtasim.runs.runner.simulate with races and lint checked, as `vtasim run` does."""
    out = tmp_path / f"{output}.out.npy"
    opts = RunOptions(inputs=save_inputs(tmp_path, inputs), outputs=[(output, str(out))], check_races=True, lint=True)
    report = simulate(program, opts)
    return np.load(out), report


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == np.int8 and got.shape == want.shape, f"{what}: {got.dtype}{got.shape} != int8{want.shape}"
    bad = [tuple(int(i) for i in at) for at in np.argwhere(got != want)]
    assert not bad, (f"{what}: {len(bad)} of {want.size} values differ, first at {bad[0]}: "
                     f"got {got[bad[0]]}, want {want[bad[0]]}")


def check_workload(w: Workload, program: Program, cfg_name: str, tmp_path: Path) -> None:
    inputs = w.inputs(rng_for(w.name, cfg_name), program.config)
    want = w.reference(inputs)
    got, report = run_api(program, tmp_path, inputs, w.output)
    assert report.races == []
    assert report.warnings == []
    assert_same(got, want, f"{w.name} [{cfg_name}]")


@pytest.mark.parametrize("cfg_name", CONFIGS)
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_program_matches_numpy_reference(name, cfg_name, tmp_path):
    w = WORKLOADS[name]
    program = assemble_file(w.path, config(cfg_name))
    check_workload(w, program, cfg_name, tmp_path)


def padded_source(pads: tuple[int, int, int, int]) -> str:
    """padded_load.vasm with its four padding .equ lines set to ``pads`` (y0, y1, x0, x1)."""
    text = (PROGRAMS / "padded_load.vasm").read_text()
    for key, value in zip(("YPAD0", "YPAD1", "XPAD0", "XPAD1"), pads, strict=True):
        text, n = re.subn(rf"^\.equ {key}, \d+", f".equ {key}, {value}", text, flags=re.M)
        assert n == 1, f"padded_load.vasm has no single '.equ {key}, N' line"
    return text


PAD_CASES = [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1), (2, 2, 2, 2), (0, 2, 2, 0),
             (2, 0, 0, 2), (1, 1, 1, 1), (2, 1, 0, 2)]


@pytest.mark.parametrize("cfg_name", CONFIGS)
@pytest.mark.parametrize("pads", PAD_CASES, ids=lambda p: "y{}-{}_x{}-{}".format(*p))
def test_padded_load_combinations(pads, cfg_name, tmp_path):
    path = PROGRAMS / "padded_load.vasm"
    program = assemble(padded_source(pads), str(path), config(cfg_name), path.parent)
    w = Workload("padded_load", padded_inputs(pads), lambda d: padded_reference(d["A"], pads))
    check_workload(w, program, cfg_name, tmp_path)


def test_padded_load_every_combination_default_config(tmp_path):
    """All 81 paddings (each 0..2) once, for the default configuration."""
    path = PROGRAMS / "padded_load.vasm"
    cfg = config("default")
    for pads in itertools.product(range(3), repeat=4):
        program = assemble(padded_source(pads), str(path), cfg, path.parent)
        w = Workload("padded_load", padded_inputs(pads), lambda d, pads=pads: padded_reference(d["A"], pads))
        check_workload(w, program, f"default {pads}", tmp_path)


def test_file_padding_is_the_one_the_reference_assumes():
    assert padded_source(PAD_IN_FILE) == (PROGRAMS / "padded_load.vasm").read_text()


def equ_values(name: str) -> dict[str, int]:
    text = (PROGRAMS / f"{name}.vasm").read_text()
    return {k: int(v) for k, v in re.findall(r"^\.equ (\w+),\s*(-?\d+)\s", text, flags=re.M)}


def test_references_mirror_the_programs_constants():
    alu = equ_values("alu")
    assert (alu["SHL_BY"], alu["MAX_IMM"], alu["ADD_IMM"], alu["SHR_BY"]) == (
        ALU_SHL_BY, ALU_MAX_IMM, ALU_ADD_IMM, ALU_SHR_BY)
    assert all(1 <= v <= 4 for v in (ALU_SHL_BY, ALU_MAX_IMM, ALU_ADD_IMM, ALU_SHR_BY))  # workloads.md: imm in 1..4
    ss = equ_values("shift_and_scale")
    assert (ss["ADD_IMM"], ss["SHR_BY"]) == (SS_ADD_IMM, SS_SHR_BY)
    assert equ_values("gemm")["SHIFT"] == GEMM_SHIFT


def test_random_data_covers_what_the_references_distinguish():
    """The inputs exercise clamping at both ends and int8 wrap-around, for every configuration."""
    for cfg_name in CONFIGS:
        cfg = config(cfg_name)
        for w in WORKLOADS.values():
            out = w.reference(w.inputs(rng_for(w.name, cfg_name), cfg))
            if w.name in ("gemm", "relu"):  # clamped to 0..127: both ends and the middle
                assert (out == 0).any() and (out == 127).any() and ((out > 0) & (out < 127)).any(), (w.name, cfg_name)
            else:  # wrapped to int8: negative and positive results
                assert out.min() < -64 and out.max() > 64, (w.name, cfg_name)


# -- the installed command-line tools ------------------------------------------------


def script(name: str) -> list[str]:
    exe = REPO / ".venv" / "bin" / name
    return [str(exe)] if exe.exists() else [sys.executable, "-m", f"{name}.cli"]


# each program once through the CLI, each configuration twice
CLI_CASES = list(zip(WORKLOADS, itertools.cycle(CONFIGS)))


@pytest.mark.parametrize(("name", "cfg_name"), CLI_CASES)
def test_installed_scripts_end_to_end(name, cfg_name, tmp_path):
    w = WORKLOADS[name]
    cfg_path = config_path(cfg_name)
    cfg = config(cfg_name)
    vbin = tmp_path / f"{name}.vbin"
    done = subprocess.run([*script("vtasm"), "assemble", str(w.path), "--config", str(cfg_path), "-o", str(vbin)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    inputs = w.inputs(rng_for(name, cfg_name, "cli"), cfg)
    args = [f"--input={n}={p}" for n, p in save_inputs(tmp_path, inputs)]
    out = tmp_path / "out.npy"
    done = subprocess.run([*script("vtasim"), "run", str(vbin), *args, "--output", f"{w.output}={out}",
                           "--check-races", "--lint", "--out-dir", str(tmp_path / "results")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("vtasim: FINISH after") and lines[1:] == ["0 lint warnings", "0 race(s) found"]
    got = np.load(out)
    assert_same(got, w.reference(inputs), f"{name} [{cfg_name}] via the CLI")
    # the .dump result file holds the same bytes, packed
    program = assemble_file(w.path, cfg)
    assert (tmp_path / "results" / f"{w.output}.bin").read_bytes() == program.tensor(w.output).pack(got)


# -- the tokens and the `>> 0` copies are load-bearing --------------------------------


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_without_tokens_the_race_checker_objects(name, tmp_path):
    """Stripping every pop=/push= leaves accesses unordered: the clean race reports above are not vacuous."""
    w = WORKLOADS[name]
    text = re.sub(r"\s(pop|push)=\w+", "", w.path.read_text())
    program = assemble(text, str(w.path), config("default"), PROGRAMS)
    inputs = w.inputs(rng_for(name, "default"), program.config)
    _, report = run_api(program, tmp_path, inputs, w.output)
    assert report.races, "expected races once the dependency tokens are gone"


def test_without_the_alu_copy_lint_warns_of_a_stale_store(tmp_path):
    w = WORKLOADS["load_store"]
    text, n = re.subn(r"^\s*alu\.shr .*imm=0\s+push=g2s$", "        nop.compute push=g2s", w.path.read_text(),
                      flags=re.M)
    assert n == 1
    program = assemble(text, str(w.path), config("default"), PROGRAMS)
    inputs = w.inputs(rng_for("load_store", "default"), program.config)
    got, report = run_api(program, tmp_path, inputs, w.output)
    assert_same(got, w.reference(inputs), "load_store without the copy (the simulator stores from ACC)")
    assert report.races == []
    assert len(report.warnings) == 1 and report.warnings[0].startswith("lint [stale-store]: instruction 3 (STORE")

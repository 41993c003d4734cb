"""vtasim against the reference behavioral simulator's times, on the four yardstick programs.

Builds the programs with our own tools: the tiled GEMM stream of streams.py
(1024 GEMMs x 4096 executions, assembled by vtasm) and the kernel-language
programs of the shared ground truth's perf/ folder (ResNet-18 as one program,
pooling, element-wise; compiled by vtacc), found through VTA_SHARED or
../shared. For each it prints:

- whole process: the median wall time of `vtasim run PROGRAM --zero-inputs`
  (Python start-up, reading the program, the run and writing the results),
  with the reference's time and the ratio. The reference's time is the one
  perf/README.md quotes (VTA's behavioral simulator built from its sources
  by GCC 12 at -O2, which vectorises it; a quiet machine of this kind)
  unless ``--reference BINARY`` names a build of it that runs a raw
  directory (``BINARY RAW_DIR``): then each program is exported with
  `vtasm export` and the reference runs in the same rounds, alternating
  with vtasim, and the ratio is of the two medians;
- in process: start-up (importing vtasim, reading the program, building the
  machine: everything before the first instruction, measured in a fresh
  interpreter) and the run alone, with micro-op executions per second;
- peak memory of the whole process against the program's DRAM.

Each round runs every program once, and `python -c "import numpy"` (the floor
any numpy program pays) too, so all figures of a round see the same machine.

    python benchmarks/sim_speed.py [--runs 5] [--only NAME] [--reference BINARY]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from streams import tiled_gemm_stream  # noqa: E402

from vtacc.frontend.check import check_source  # noqa: E402
from vtacc.program_builder import compile_file  # noqa: E402
from vtasim.timing.profile import load_profile  # noqa: E402
from vtasm.config import default_config  # noqa: E402
from vtasm.formats.vbin import save_vbin  # noqa: E402

SHARED = Path(os.environ.get("VTA_SHARED", REPO.parent / "shared"))
# The reference simulator's whole-process times on a quiet machine of this kind (perf/README.md: built with
# a vectorising -O2), when no --reference binary is given to time side by side.
REFERENCE = {"gemm_stream": 0.14, "resnet18_full": 0.29, "pooling": 0.14, "eltwise": 0.11}
GOAL = {"gemm_stream": 1.0, "resnet18_full": 0.75, "pooling": 1.0, "eltwise": 1.0}

# Run in a fresh interpreter: start-up (imports, reading, machine) and the run, as JSON.
_PROBE = """
import json, sys, time
t0 = time.perf_counter()
from vtasm.cli_support import open_program
from vtasim.core.machine import Machine
program = open_program(sys.argv[1], None, lazy_source_map=True)  # as `vtasim run` opens it
machine = Machine(program)
t1 = time.perf_counter()
result = machine.run()
t2 = time.perf_counter()
print(json.dumps({"startup": t1 - t0, "run": t2 - t1, "executions": result.extras["uop_executions"],
                  "instructions": result.extras["instructions"], "dram": int(result.state.dram.size)}))
"""


def _vtasim() -> list[str]:
    exe = shutil.which("vtasim", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "vtasim.cli"]


def build(work: Path, only: str | None) -> dict[str, Path]:
    """Every yardstick program as a .vbin in ``work``."""
    paths = {}
    names = ["gemm_stream", "resnet18_full", "pooling", "eltwise"]
    for name in names:
        if only and name != only:
            continue
        path = work / f"{name}.vbin"
        t0 = time.perf_counter()
        if name == "gemm_stream":
            program = tiled_gemm_stream()
            how = "vtasm (benchmarks/streams.py)"
        else:
            source = SHARED / "perf" / f"{name}.vk"
            if not source.exists():
                sys.exit(f"error: {source} not found (set VTA_SHARED)")
            program = compile_file(check_source(source.read_text(), str(source)), default_config(),
                                   profile=load_profile("chisel-2019")).program  # the yardsticks' tiles
            how = f"vtacc {source.name}"
        save_vbin(program, path)
        print(f"built {name}: {len(program.instructions):,} instructions with {how} "
              f"in {time.perf_counter() - t0:.1f} s")
        paths[name] = path
    return paths


def _wall(cmd: list[str]) -> float:
    """Wall seconds of one child process."""
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=sorted(REFERENCE), help="Measure one program only.")
    parser.add_argument("--reference", metavar="BINARY",
                        help="The reference simulator built to run a raw directory (BINARY RAW_DIR): timed in the "
                             "same rounds instead of quoting perf/README.md.")
    args = parser.parse_args()
    if args.reference and not shutil.which(args.reference):
        parser.error(f"--reference {args.reference}: no such program")
    # the sources byte-compiled as for an installed package (make does it too): start-up does not recompile them
    subprocess.run([sys.executable, "-m", "compileall", "-q", "vtasm", "vtasim", "vtacc"], cwd=REPO, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        paths = build(work, args.only)
        raws = {name: _export(path, work / f"{name}.raw") for name, path in paths.items()} if args.reference else {}
        walls: dict[str, list[float]] = {name: [] for name in paths}
        theirs: dict[str, list[float]] = {name: [] for name in raws}
        probes: dict[str, list[dict]] = {name: [] for name in paths}
        floor: list[float] = []
        peaks: dict[str, float] = {}
        for _ in range(args.runs):  # rounds: every program once, so all see the same machine
            floor.append(_wall([sys.executable, "-c", "import numpy"]))
            for name, path in paths.items():
                if name in raws:  # alternating with vtasim on the same program
                    theirs[name].append(_wall([args.reference, str(raws[name])]))
                walls[name].append(_wall([*_vtasim(), "run", str(path), "--zero-inputs", "--out-dir",
                                          str(work / "out")]))
                out = subprocess.run([sys.executable, "-c", _PROBE, str(path)], check=True, capture_output=True,
                                     text=True).stdout
                probes[name].append(json.loads(out))
        for name, path in paths.items():  # peak memory: one run alone, measured by the OS for that child
            peaks[name] = _peak_of([*_vtasim(), "run", str(path), "--zero-inputs", "--out-dir", str(work / "out")])
    print(f"\nmedians of {args.runs} rounds; `python -c 'import numpy'` took {statistics.median(floor):.3f} s "
          "(the floor of any numpy program on this machine now)\n")
    print("| program | instructions | micro-op executions | reference | vtasim whole process | ratio | goal |"
          " start-up | run | executions/s | peak memory (DRAM) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in paths:
        wall = statistics.median(walls[name])
        reference = statistics.median(theirs[name]) if name in theirs else REFERENCE[name]
        ref = f"{reference:.3f} s" + ("" if name in theirs else " (quoted)")
        ratio = f"{wall / reference:.2f}x"
        startup = statistics.median(p["startup"] for p in probes[name])
        run = statistics.median(p["run"] for p in probes[name])
        p0 = probes[name][0]
        print(f"| {name} | {p0['instructions']:,} | {p0['executions']:,} | {ref} | {wall:.3f} s | {ratio} | "
              f"<= {GOAL[name]:.2f}x | {startup:.3f} s | {run:.3f} s | {p0['executions'] / run / 1e6:.1f} M | "
              f"{peaks[name]:.0f} MiB ({p0['dram'] / 2**20:.0f} MiB) |")


def _export(path: Path, raw: Path) -> Path:
    """The program as the raw interchange directory the reference reads (`vtasm export`)."""
    vtasm = shutil.which("vtasm", path=str(Path(sys.executable).parent))
    cmd = [vtasm] if vtasm else [sys.executable, "-m", "vtasm.cli"]
    subprocess.run([*cmd, "export", str(path), "--raw", str(raw)], check=True, stdout=subprocess.DEVNULL)
    return raw


def _peak_of(cmd: list[str]) -> float:
    """Peak resident MiB of one run of ``cmd``, measured in a child that runs nothing else."""
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
             "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, *cmd], check=True, capture_output=True, text=True).stdout
    return int(out) / 1024


if __name__ == "__main__":
    main()

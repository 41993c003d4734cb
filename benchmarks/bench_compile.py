"""Compile times as whole `vtacc` processes: seconds, microseconds per emitted instruction, peak memory.

    python benchmarks/bench_compile.py [--runs 3] [--onnx] [--only NAME]

Programs: the kernel-language examples, the yardsticks of the shared ground
truth's perf/ folder (ResNet-18 as one program, pooling, element-wise; found
through VTA_SHARED or ../shared) and the ResNet-18 layers C2-C11, each
compiled for the default profile. With ``--onnx``, also ResNet-50 and VGG-19
at 224 x 224 from the model zoo (examples/zoo: built with random weights,
nothing downloaded), imported with two random calibration images and
compiled (import, calibration, quantisation, the SQNR report and the
compilation of every VTA launch).

Each line: the median wall time of ``--runs`` whole processes (min, max),
the instructions the program has, the microseconds of that median per
instruction, and the largest peak memory of the runs as the OS counts it.
For kernel-language programs, also the phases of one compile in this
process (Compiled.extras["seconds"]): the tiling searches (wall time, on
every core the searches may use), and scheduling plus code generation
(the work done per emitted instruction) in microseconds per instruction.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.vtacc.resnet import RESNET, layer_source  # noqa: E402

SHARED = Path(os.environ.get("VTA_SHARED", ROOT.parent / "shared"))
NETWORKS = ("resnet50", "vgg19")


def _vtacc() -> list[str]:
    exe = shutil.which("vtacc", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "vtacc.cli"]


def timed(args: list[str], runs: int) -> tuple[list[float], float]:
    """Wall seconds of each run and the largest peak resident MiB among them (each run in a child that
    runs nothing else, so the OS's figure is that run's)."""
    walls, peak = [], 0.0
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
             "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    for _ in range(runs):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", probe, *args], check=True, capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        peak = max(peak, int(out.stdout) / 1024)
    return walls, peak


def instructions(path: Path) -> int:
    """Instructions in a compiled .vbin (every VTA launch of a network file)."""
    from vtasm.formats.network import load_network, network_file
    from vtasm.formats.vbin import load_vbin

    programs = load_network(path).programs if network_file(path) else [load_vbin(path)]
    return sum(len(p.instructions) for p in programs)


def phases(source: str, n: int) -> str:
    """The search time and the scheduling and code generation per instruction of one in-process compile of
    a kernel-language file (an empty pair of cells for a model)."""
    if not source.endswith(".vk"):
        return " | "
    from vtacc.frontend.check import check_source
    from vtacc.program_builder import compile_file
    from vtasm.config import default_config

    compiled = compile_file(check_source(Path(source).read_text(), Path(source).name), default_config())
    seconds = compiled.extras["seconds"]
    return f"{seconds['search']:.2f} s | {(seconds['schedule'] + seconds['generate']) / n * 1e6:.1f} us"


def cases(work: Path, onnx: bool) -> list[tuple[str, list[str]]]:
    """(name, vtacc arguments before -o) of every program measured."""
    out = [(p.stem, [str(p)]) for p in sorted((ROOT / "examples").glob("*.vk"))]
    for name in ("pooling", "eltwise", "resnet18_full"):
        source = SHARED / "perf" / f"{name}.vk"
        if source.exists():
            out.append((f"perf/{name}", [str(source)]))
        else:
            print(f"({source} not found: set VTA_SHARED to measure it)")
    for name in RESNET:
        path = work / f"{name}.vk"
        path.write_text(layer_source(name)[0])
        out.append((f"resnet18 {name}", [str(path)]))
    if onnx:
        import numpy as np
        import onnx as onnx_lib

        from examples.zoo.networks import build

        for name in NETWORKS:
            model = work / f"{name}.onnx"
            onnx_lib.save(build(name, 224, seed=0), model)
            data = work / f"{name}_cal.npy"
            np.save(data, np.random.default_rng(0).standard_normal((2, 1, 3, 224, 224)).astype(np.float32))
            out.append((f"{name} (ONNX, 224)", [str(model), "--calibrate", str(data)]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--onnx", action="store_true", help="also ResNet-50 and VGG-19 from ONNX (about a minute)")
    parser.add_argument("--only", help="measure the programs whose name contains this")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", "vtasm", "vtasim", "vtacc"], cwd=ROOT, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        output = work / "out.vbin"
        print(f"whole-process `vtacc ... -o out.vbin` (default profile), median of {args.runs} (min, max)\n")
        print("| program | compile | instructions | us per instruction | peak memory | searches | "
              "scheduling and code generation |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, source in cases(work, args.onnx):
            if args.only and args.only not in name:
                continue
            walls, peak = timed([*_vtacc(), *source, "-o", str(output)], args.runs)
            med = statistics.median(walls)
            n = instructions(output)
            print(f"| {name} | {med:.2f} s ({min(walls):.2f}, {max(walls):.2f}) | {n:,} | {med / n * 1e6:,.0f} | "
                  f"{peak:.0f} MiB | {phases(source[0], n)} |", flush=True)


if __name__ == "__main__":
    main()

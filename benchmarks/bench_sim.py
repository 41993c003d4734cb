"""Simulator speed: micro-op executions per second, MAC/s and whole-process time.

Builds instruction streams with vtasm, saves them as .vbin files, and runs
`vtasim run` on each as a separate process (Python start-up included), several
times; prints the median wall time, the peak memory of the runs, and the rates.

    python benchmarks/bench_sim.py [--runs 5]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from streams import conv_stream, resnet_stream, tiled_gemm_stream  # noqa: E402

from vtasim.core.machine import run_program  # noqa: E402
from vtasm.formats.vbin import save_vbin  # noqa: E402


def _vtasim() -> list[str]:
    exe = shutil.which("vtasim", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "vtasim.cli"]


def bench(name: str, program, runs: int, workdir: Path) -> None:
    path = workdir / f"{name}.vbin"
    save_vbin(program, path)
    t0 = time.perf_counter()
    result = run_program(program)
    inproc = time.perf_counter() - t0
    executions = result.counters["gemm_counter"] + result.counters["alu_counter"]
    cfg = program.config
    macs = result.counters["gemm_counter"] * cfg.batch * cfg.block_in * cfg.block_out
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([*_vtasim(), "run", str(path), "--out-dir", str(workdir / "out"), "--zero-inputs"], check=True)
        walls.append(time.perf_counter() - t0)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    wall = statistics.median(walls)
    print(f"{name}: {len(program.instructions)} instructions, {executions:,} micro-op executions, "
          f"{macs / 1e9:.2f} G MACs ({cfg.describe()})")
    print(f"  in-process simulation: {inproc:.3f} s = {executions / inproc / 1e6:.1f} M micro-op executions/s, "
          f"{macs / inproc / 1e9:.1f} G MAC/s")
    print(f"  whole process (`vtasim run`, median of {runs}): {wall:.3f} s "
          f"(min {min(walls):.3f}, max {max(walls):.3f}); peak memory of any run {peak_mb:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bench("tiled_gemm_1024x4096", tiled_gemm_stream(), args.runs, work)
        bench("conv3x3_c8_like", conv_stream(), args.runs, work)
        bench("conv3x3_c8_like_2304_channels", conv_stream(out_tiles=144), args.runs, work)
        bench("resnet18_c2_to_c11_compiled", resnet_stream(), args.runs, work)


if __name__ == "__main__":
    main()

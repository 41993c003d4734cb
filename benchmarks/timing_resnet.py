"""ResNet-18 C2-C11 under the timing model: cycles, utilisation and bound per profile, 1 against 2 threads.

Each layer is compiled by vtacc twice (schedule `threads = 1` and `threads = 2`,
tiles chosen by the compiler) and timed with `--timing-only` semantics (no data
is computed) under each built-in profile. The bound column says what limits the
layer: "compute" when the GEMM core is busy most of the run, else "memory".

    python benchmarks/timing_resnet.py [--profiles chisel-2019,chisel-2021,hls]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.vtacc.resnet import RESNET, layer_source  # noqa: E402
from vtacc.frontend.check import check_source  # noqa: E402
from vtacc.program_builder import compile_file  # noqa: E402
from vtasim.timing.profile import BUILTIN, load_profile  # noqa: E402
from vtasim.timing.run import time_program  # noqa: E402
from vtasm.config import default_config  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default=",".join(BUILTIN))
    args = parser.parse_args()
    cfg = default_config()
    profiles = [load_profile(name) for name in args.profiles.split(",")]
    programs = {}
    for name in RESNET:
        for threads in (1, 2):
            src, _ = layer_source(name, f"schedule {{ threads = {threads} }}")
            programs[name, threads] = compile_file(check_source(src, f"{name}.vk"), cfg).program
    for profile in profiles:
        print(f"\n{profile.name} ({profile.description}), {profile.clock_mhz:g} MHz, memory latency "
              f"{profile.latency}\n")
        print("| layer | cycles (1 thread) | cycles (2 threads) | speedup | time (2 threads) | GEMM utilisation | "
              "compute busy | load busy | bound |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
        elapsed = 0.0
        for name in RESNET:
            one = time_program(programs[name, 1], profile, record=False).report
            t0 = time.perf_counter()
            two = time_program(programs[name, 2], profile, record=False).report
            elapsed += time.perf_counter() - t0
            compute = two.modules["compute"]["busy"] / two.cycles
            load = (two.modules["load"]["busy"] + two.modules["load"]["memory"]) / two.cycles
            bound = "compute" if compute >= load else "memory"
            print(f"| {name} | {one.cycles:,} | {two.cycles:,} | {one.cycles / two.cycles:.2f}x | "
                  f"{two.seconds * 1e3:.2f} ms | {two.gemm_utilisation:.1%} | {compute:.0%} | {load:.0%} | {bound} |")
        print(f"\ntiming model time for the ten two-thread layers: {elapsed:.2f} s")


if __name__ == "__main__":
    main()

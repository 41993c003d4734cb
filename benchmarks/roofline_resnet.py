"""ResNet-18 C2-C11 against their rooflines: cycles, bound, fraction reached, one- against two-thread speedup.

Each layer is compiled by vtacc for the profile it is timed on (tiles chosen
by predicted cycles), once with one virtual thread and once with two, and
timed by the full timing model. The compute bound is the layer's MACs at the
GEMM core's peak plus its ALU executions at the ALU's rate; the memory bound
its compulsory bytes over the bus (vtacc/reports/roofline.py). With ``--pictures DIR``
it also draws each profile's roofline, one and two threads side by side.

    python benchmarks/roofline_resnet.py [--profiles chisel-2019,chisel-2021,hls] [--mem-latency 16] [--pictures DIR]
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
from vtacc.reports.roofline import draw_roofline, roofline_points  # noqa: E402
from vtacc.schedule.tiling import compulsory_traffic  # noqa: E402
from vtasim.timing.names import BUILTIN  # noqa: E402
from vtasim.timing.profile import resolve_profile  # noqa: E402
from vtasm.config import default_config  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default=",".join(BUILTIN))
    parser.add_argument("--mem-latency", type=int, default=16)
    parser.add_argument("--pictures", type=Path, default=None, help="write roofline-PROFILE.png here")
    args = parser.parse_args()
    cfg = default_config()
    for name in args.profiles.split(","):
        profile = resolve_profile(name, args.mem_latency)
        print(f"\n{profile.name}, memory latency {profile.latency}, {profile.clock_mhz:g} MHz\n")
        print("| layer | cycles | time | compute bound | memory bound | binds | fraction of bound | "
              "DRAM / compulsory | 1 thread | speedup |")
        print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
        series: dict[str, list] = {"1 thread": [], "2 threads": []}
        started = time.perf_counter()
        for layer in RESNET:
            checked = check_source(layer_source(layer)[0], f"{layer}.vk")
            one = roofline_points(compile_file(checked, cfg, profile=profile, threads=1))[0]
            compiled = compile_file(checked, cfg, profile=profile, threads=2)
            two = roofline_points(compiled)[0]
            planned = compiled.planned[0]
            ratio = planned.tiling.dram_bytes / sum(compulsory_traffic(planned.op, planned.needs, cfg))
            one.name = two.name = one.label = two.label = layer
            series["1 thread"].append(one)
            series["2 threads"].append(two)
            print(f"| {layer} | {two.cycles:,} | {two.seconds * 1e3:.2f} ms | {two.compute_bound:,.0f} | "
                  f"{two.memory_bound:,.0f} | {two.binds} | {two.fraction:.1%} | {ratio:.2f}x | {one.cycles:,} | "
                  f"{one.cycles / two.cycles:.2f}x |")
        print(f"\ncompiled and timed 20 programs in {time.perf_counter() - started:.1f} s")
        if args.pictures:
            args.pictures.mkdir(parents=True, exist_ok=True)
            path = args.pictures / f"roofline-{profile.name}.png"
            draw_roofline(series, profile, cfg, path,
                          f"ResNet-18 C2-C11 on {profile.name} (memory latency {profile.latency}): "
                          "one and two virtual threads")
            print(f"picture: {path}")


if __name__ == "__main__":
    main()

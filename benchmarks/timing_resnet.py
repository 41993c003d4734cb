"""ResNet-18 under the three measured profiles: C2-C11 and the whole network, each compiled for the design.

Each layer is compiled by vtacc for each profile (`--timing PROFILE` semantics: the tiles are chosen by
the cycles predicted under that design) twice, with schedule `threads = 1` and `threads = 2`, and timed
under the same profile with `--timing-only` semantics (no data is computed). The column "tiled for
chisel-2019" times the program compiled for the 2019 core on this design: what choosing the tiles for
the design itself gains. The bound column says which module is busier: the compute module (GEMM and
the ALU epilogue) or the load module (busy plus waiting for memory). The whole network is
`../shared/perf/resnet18_full.vk` (ResNet-18 as one program), found through VTA_SHARED, with its bound
and the fraction of it reached (`vtacc --explain` prints the same).

    python benchmarks/timing_resnet.py [--profiles chisel-2019,chisel-2021,hls] [--no-whole]
                                       [--onnx DIR [--only-onnx]]

``--onnx DIR`` adds the same table for the ONNX ResNet-18 that ``examples/resnet18/build_resnet18.py DIR``
wrote (imported, quantised on its calibration inputs and compiled for each profile).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.vtacc.resnet import RESNET, layer_source  # noqa: E402
from vtacc.frontend.check import check_source  # noqa: E402
from vtacc.program_builder import compile_file  # noqa: E402
from vtacc.reports.bound import network_bound  # noqa: E402
from vtasim.timing.names import BUILTIN, DEFAULT  # noqa: E402
from vtasim.timing.profile import Profile, load_profile  # noqa: E402
from vtasim.timing.run import time_program  # noqa: E402
from vtasm.config import default_config  # noqa: E402

SHARED = Path(os.environ.get("VTA_SHARED", REPO.parent / "shared"))


def layer_tables(profiles: list[Profile]) -> None:
    cfg = default_config()
    baseline = load_profile("chisel-2019")
    sources = {(name, n): layer_source(name, f"schedule {{ threads = {n} }}")[0] for name in RESNET for n in (1, 2)}
    compiled = {}
    for profile in [baseline] + [p for p in profiles if p.name != baseline.name]:
        for (name, n), src in sources.items():
            checked = check_source(src, f"{name}.vk")
            compiled[profile.name, name, n] = compile_file(checked, cfg, profile=profile).program
    for profile in profiles:
        print(f"\n{profile.name} ({profile.description}), {profile.clock_mhz:g} MHz, memory latency "
              f"{profile.latency}; tiles chosen for {profile.name}\n")
        print("| layer | cycles (1 thread) | cycles (2 threads) | speedup | time (2 threads) | GEMM utilisation | "
              "compute busy | load busy | bound | tiled for chisel-2019 (2 threads) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
        total = total_base = 0
        for name in RESNET:
            one = time_program(compiled[profile.name, name, 1], profile, record=False).report
            two = time_program(compiled[profile.name, name, 2], profile, record=False).report
            base = time_program(compiled[baseline.name, name, 2], profile, record=False).report.cycles
            total, total_base = total + two.cycles, total_base + base
            compute = two.modules["compute"]["busy"] / two.cycles
            load = (two.modules["load"]["busy"] + two.modules["load"]["memory"]) / two.cycles
            bound = "compute" if compute >= load else "memory"
            print(f"| {name} | {one.cycles:,} | {two.cycles:,} | {one.cycles / two.cycles:.2f}x | "
                  f"{two.seconds * 1e3:.2f} ms | {two.gemm_utilisation:.1%} | {compute:.0%} | {load:.0%} | {bound} | "
                  f"{base:,} ({base / two.cycles - 1:+.1%}) |")
        print(f"\nC2-C11, two threads: {total:,} cycles tiled for {profile.name}, {total_base:,} with the tiles "
              f"chosen for chisel-2019 ({total_base / total - 1:+.1%})")


def whole_network(profiles: list[Profile]) -> None:
    source = SHARED / "perf" / "resnet18_full.vk"
    if not source.is_file():
        print(f"\n(whole network skipped: {source} not found; set VTA_SHARED)")
        return
    cfg = default_config()
    checked = check_source(source.read_text(encoding="utf-8"), str(source))
    network_table(source.name, profiles, lambda profile: compile_file(checked, cfg, profile=profile))


def onnx_network(profiles: list[Profile], folder: Path) -> None:
    from vtacc.model import compile_model  # the onnx extra: only when asked

    model, calibration = folder / "resnet18.onnx", folder / "calibration.npy"
    network_table(f"the ONNX ResNet-18 of {folder}", profiles,
                  lambda profile: compile_model(model, default_config(), calibration, profile).compiled)


def network_table(name: str, profiles: list[Profile], compile_for) -> None:
    """A whole network compiled for each profile (``compile_for(profile)``): its cycles, its bound and the
    fraction reached, and the program compiled for chisel-2019 timed on each design."""
    baseline = load_profile("chisel-2019")
    base = compile_for(baseline)
    print(f"\nWhole network ({name}, {len(base.program.instructions):,} instructions compiled for "
          "chisel-2019), memory latency 16; its bound (vtacc/reports/bound.py: the arithmetic's own work on the "
          "compute stage, the compulsory bytes on the bus) and the fraction reached\n")
    print("| profile | cycles (tiled for it) | time at its clock | GEMM utilisation | bound | reached | "
          "tiled for chisel-2019 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for profile in profiles:
        compiled = base if profile.name == baseline.name else compile_for(profile)
        report = compiled.timed.report
        bound = network_bound(compiled)
        binds = "compute" if bound.compute >= bound.memory else "memory"
        other = time_program(base.program, profile, record=False).report.cycles
        label = f"`{profile.name}`" + (" (default)" if profile.name == DEFAULT else "")
        print(f"| {label} | {report.cycles:,} | {report.seconds * 1e3:.2f} ms | {report.gemm_utilisation:.1%} | "
              f"{bound.bound:,.0f} ({binds}) | {bound.fraction:.1%} | {other:,} ({other / report.cycles - 1:+.1%}) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default=",".join(BUILTIN))
    parser.add_argument("--no-whole", action="store_true", help="only the layers C2-C11")
    parser.add_argument("--onnx", type=Path, metavar="DIR",
                        help="also the ONNX ResNet-18 that examples/resnet18/build_resnet18.py wrote to DIR")
    parser.add_argument("--only-onnx", action="store_true", help="with --onnx: that table alone")
    args = parser.parse_args()
    profiles = [load_profile(name) for name in args.profiles.split(",")]
    if not args.only_onnx:
        layer_tables(profiles)
        if not args.no_whole:
            whole_network(profiles)
    if args.onnx is not None:
        onnx_network(profiles, args.onnx)


if __name__ == "__main__":
    main()

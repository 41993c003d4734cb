"""Timing model speed on a whole network: in-process time and what --timing adds to a run.

Compiles ResNet-18 as one program (the speed yardstick `perf/resnet18_full.vk`
of the shared ground truth, found through VTA_SHARED or ../shared), then
prints:

- in process, the median time of the timing model alone (planning and the
  event engine, as `--timing-only` runs them) under each built-in profile;
- whole process, the median wall time of `vtasim run` without and with
  `--timing`, run alternately so that both see the same machine, and their
  ratio; and of `vtasim run --timing-only`.

    python benchmarks/timing_speed.py [--runs 5] [--program FILE.vk]
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vtacc.frontend.check import check_source  # noqa: E402
from vtacc.program_builder import compile_file  # noqa: E402
from vtasim.timing.engine import simulate  # noqa: E402
from vtasim.timing.plan import plan  # noqa: E402
from vtasim.timing.profile import BUILTIN, load_profile  # noqa: E402
from vtasm.config import default_config  # noqa: E402
from vtasm.formats.vbin import save_vbin  # noqa: E402


def _default_program() -> Path:
    shared = Path(os.environ.get("VTA_SHARED", REPO.parent / "shared"))
    return shared / "perf" / "resnet18_full.vk"


def _vtasim() -> list[str]:
    exe = shutil.which("vtasim", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "vtasim.cli"]


def _median_seconds(runs: int, action, *args, **kwargs) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        action(*args, **kwargs)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--program", type=Path, default=_default_program())
    args = parser.parse_args()
    if not args.program.exists():
        sys.exit(f"error: {args.program} not found (set VTA_SHARED or pass --program FILE.vk)")
    program = compile_file(check_source(args.program.read_text(), str(args.program)), default_config(),
                           profile=load_profile("chisel-2019")).program  # the tiles docs/timing.md quotes
    print(f"{args.program.name}: {len(program.instructions):,} instructions\n")

    print("in process, timing model only (as --timing-only), median of", args.runs, "runs")
    print("| profile | cycles | plan | engine | total |")
    print("|---|---:|---:|---:|---:|")
    for name in BUILTIN:
        profile = load_profile(name)
        works = plan(program.instructions, program.config, profile)
        t_plan = _median_seconds(args.runs, plan, program.instructions, program.config, profile)
        t_engine = _median_seconds(args.runs, simulate, works, profile, record=False)
        cycles = simulate(works, profile, record=False).cycles
        print(f"| {name} | {cycles:,} | {t_plan:.3f} s | {t_engine:.3f} s | {t_plan + t_engine:.3f} s |")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "net.vbin"
        save_vbin(program, path)
        base = [*_vtasim(), "run", str(path), "--zero-inputs", "--out-dir", str(Path(tmp) / "out")]
        variants = {"run": base, "run --timing": [*base, "--timing"],
                    "run --timing-only": [*_vtasim(), "run", str(path), "--timing-only"]}
        walls: dict[str, list[float]] = {key: [] for key in variants}
        for _ in range(args.runs):  # alternate, so that every variant sees the same machine
            for key, cmd in variants.items():
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                walls[key].append(time.perf_counter() - t0)
    med = {key: statistics.median(values) for key, values in walls.items()}
    print(f"\nwhole process (vtasim, Python start-up included), median of {args.runs} runs")
    for key, value in med.items():
        print(f"  vtasim {key:<18} {value:.2f} s")
    print(f"  --timing adds {med['run --timing'] / med['run'] - 1:+.0%} to the run's wall time")


if __name__ == "__main__":
    main()

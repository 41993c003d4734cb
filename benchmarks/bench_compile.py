"""Compile times of the examples and the ResNet-18 layers, as whole `vtacc` processes.

    python benchmarks/bench_compile.py [--runs 3]
"""

from __future__ import annotations

import argparse
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


def _vtacc() -> list[str]:
    exe = shutil.which("vtacc", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "vtacc.cli"]


def timed(args: list[str], runs: int) -> tuple[float, float, float]:
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), min(walls), max(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(p.stem, p) for p in sorted((ROOT / "examples").glob("*.vk"))]
        for name in RESNET:
            path = Path(tmp) / f"{name}.vk"
            path.write_text(layer_source(name)[0])
            cases.append((f"resnet18 {name}", path))
        print(f"whole-process `vtacc FILE -o FILE.vbin`, median of {args.runs} (min, max):")
        for name, path in cases:
            med, lo, hi = timed([*_vtacc(), str(path), "-o", str(Path(tmp) / "out.vbin")], args.runs)
            print(f"  {name:24s} {med:.3f} s  ({lo:.3f}, {hi:.3f})")


if __name__ == "__main__":
    main()

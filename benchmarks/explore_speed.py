"""Sweep throughput on Dask: points per second with one and with two local workers, and a point's cost split.

Runs the same points (ResNet-18 C2-C11 from examples/explore/resnet18_layers.toml,
the first --points of them in the spec's order) on a local cluster of one
worker process and of two, alternately, --runs times each. Workers are warmed
up (the toolchain imported) before the clock starts, so the figures are the
steady sweep rate, not process start-up. Then it prints the median points per
second of each, their ratio, and per finished point the median compile and
timing-model seconds (measured inside the workers).

    python benchmarks/explore_speed.py [--points 120] [--runs 3] [--spec FILE.toml]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vtacc.explore.results import ResultTable  # noqa: E402
from vtacc.explore.spec import load_spec  # noqa: E402
from vtacc.explore.sweep import run_points  # noqa: E402


def _warm() -> None:
    import vtacc.explore.evaluate  # noqa: F401
    import vtacc.program_builder  # noqa: F401


def _rate(points, workers: int) -> tuple[float, list[dict]]:
    import dask.distributed as dd

    with dd.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR) as cluster, \
            dd.Client(cluster) as client, tempfile.TemporaryDirectory() as tmp:
        client.run(_warm)
        table = ResultTable(tmp, {p.key for p in points})
        started = time.perf_counter()
        run_points(points, client, table)
        elapsed = time.perf_counter() - started
        table.close()
        return len(points) / elapsed, list(table.rows.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=REPO / "examples/explore/resnet18_layers.toml")
    parser.add_argument("--points", type=int, default=120)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    spec = load_spec(args.spec)
    points = spec.points[: args.points]
    rates: dict[int, list[float]] = {1: [], 2: []}
    rows: list[dict] = []
    for _ in range(args.runs):
        for workers in (1, 2):
            rate, rows = _rate(points, workers)
            rates[workers].append(rate)
    ok = [r for r in rows if r["status"] == "ok"]
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    print(f"{len(points)} points of {args.spec.name} ({len(ok)} compiled and timed, the rest invalid), "
          f"median of {args.runs} runs each")
    print(f"  1 worker:  {one:6.2f} points/s")
    print(f"  2 workers: {two:6.2f} points/s   ({two / one:.2f}x)")
    if ok:
        compile_s = statistics.median(r["compile_s"] for r in ok)
        timing_s = statistics.median(r["timing_s"] for r in ok)
        print(f"  per point (median): compile {compile_s * 1e3:.0f} ms, timing model {timing_s * 1e3:.1f} ms "
              f"({compile_s / (compile_s + timing_s):.0%} compile)")


if __name__ == "__main__":
    main()

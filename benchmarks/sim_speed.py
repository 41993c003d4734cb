"""vtasim against VTA's reference behavioral simulator, through the yardstick, on the raw programs of perf/raw/.

The reference simulator was timed once, on a machine of this kind, side by side with a fixed C workload
(the shared ground truth's ``perf/yardstick.c``) on the raw programs of ``perf/raw/``; ``perf/README.md``'s
table gives each of its times as a multiple of the yardstick's ("reference / yardstick"). This script
builds the yardstick (``cc -O2``, in a temporary directory), times whole ``vtasim run RAW --out-dir TMP``
processes alternating with the yardstick on this machine, and prints vtasim's time as a ratio to the
reference's:

    vtasim / reference = (vtasim / yardstick, measured here) / (reference / yardstick, perf/README.md)

so no time measured on one machine is ever set against one measured on another. Each program's
"vtasim / yardstick" is the median of its pairs' ratios (a pair: one vtasim run and the yardstick run
beside it; which of the two goes first alternates), so a drift in the machine's speed moves both sides of
a pair. The bar: at most 1.0 (at most 0.5 on the ``_big`` programs).

vtasim runs from this checkout, through the installed command's entry (``vtasim.entry``: its quicker
start and end), its sources byte-compiled first as for an installed package. The shared folder is
``$VTA_SHARED``, else ``../shared`` beside the repository.

    python benchmarks/sim_speed.py [--runs 7] [--only NAME ...] [--cc CC]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("VTA_SHARED", REPO.parent / "shared"))
PERF = SHARED / "perf"
PROGRAMS = ("gemm_stream", "gemm_big", "resnet18_full", "pooling", "pooling_big", "eltwise", "eltwise_big")
# `vtasim` as the installed command starts it, on this checkout's sources
_ENTRY = "import sys; sys.argv[0] = 'vtasim'; from vtasim.entry import main; main()"


def bar(name: str) -> float:
    """The most vtasim may take, as a multiple of the reference's time."""
    return 0.5 if name.endswith("_big") else 1.0


def reference_ratios(readme: Path) -> dict[str, float]:
    """perf/README.md's "reference / yardstick" column, by raw program."""
    ratios: dict[str, float] = {}
    column = None
    for line in readme.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            column = None  # a table ends at the first line that is not a row
        elif "reference / yardstick" in cells:
            column = cells.index("reference / yardstick")
        elif column is not None and not set(cells[0]) <= set("-: "):
            ratios[cells[0].strip("`")] = float(cells[column])
    if not ratios:
        sys.exit(f"error: no 'reference / yardstick' table in {readme}")
    return ratios


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, peak resident MiB) of one child process, as the OS accounts for that child alone."""
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env=env)
    err = child.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stderr.close()  # type: ignore[union-attr]
    if child.returncode != 0:
        sys.exit(f"error: {shlex.join(cmd)} exited with {child.returncode}:\n{err.decode(errors='replace')}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="Pairs per program (default 7).")
    parser.add_argument("--only", nargs="+", choices=PROGRAMS, metavar="NAME", help="Measure these programs only.")
    parser.add_argument("--cc", default=os.environ.get("CC", "cc"), help="The C compiler for the yardstick.")
    args = parser.parse_args()
    if shutil.which(args.cc) is None:
        sys.exit(f"error: no C compiler {args.cc!r} to build the yardstick (give --cc or $CC)")
    if not (PERF / "yardstick.c").is_file():
        sys.exit(f"error: {PERF / 'yardstick.c'} not found (set VTA_SHARED)")
    reference = reference_ratios(PERF / "README.md")
    names = [n for n in PROGRAMS if not args.only or n in args.only]
    missing = [n for n in names if n not in reference or not (PERF / "raw" / n).is_dir()]
    if missing:
        sys.exit(f"error: {', '.join(missing)}: no raw program or no reference ratio in {PERF}")
    # byte-compiled as for an installed package (make does it too): start-up does not recompile the sources
    subprocess.run([sys.executable, "-m", "compileall", "-q", "vtasm", "vtasim", "vtacc"], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        yardstick = str(work / "yardstick")
        subprocess.run([args.cc, "-O2", str(PERF / "yardstick.c"), "-o", yardstick], check=True)
        rows = []
        for name in names:
            vtasim = [sys.executable, "-c", _ENTRY, "run", str(PERF / "raw" / name), "--out-dir", str(work / "out")]
            _timed(vtasim, env)  # warm-up: the files in the page cache, the compiled loop built
            _timed([yardstick])
            ours, theirs, pairs, peaks = [], [], [], []
            for i in range(args.runs):
                if i % 2:
                    (wall, peak), (yard, _) = _timed(vtasim, env), _timed([yardstick])
                else:
                    (yard, _), (wall, peak) = _timed([yardstick]), _timed(vtasim, env)
                ours.append(wall)
                theirs.append(yard)
                pairs.append(wall / yard)
                peaks.append(peak)
            here = statistics.median(pairs)
            rows.append((name, statistics.median(ours), statistics.median(theirs), here, reference[name],
                         here / reference[name], statistics.median(peaks)))
            print(f"{name}: vtasim {rows[-1][1]:.3f} s, yardstick {rows[-1][2]:.3f} s", file=sys.stderr)
    print(f"\nwhole processes, medians of {args.runs} alternating pairs; vtasim / reference = "
          "(vtasim / yardstick here) / (reference / yardstick, perf/README.md)\n")
    print("| raw program | vtasim | yardstick | vtasim / yardstick | reference / yardstick | vtasim / reference "
          "| bar | peak memory |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, wall, yard, here, ref, ratio, peak in rows:
        verdict = "met" if ratio <= bar(name) else "MISSED"
        print(f"| `{name}` | {wall:.3f} s | {yard:.3f} s | {here:.2f} | {ref:.2f} | **{ratio:.2f}** | "
              f"<= {bar(name):.1f} ({verdict}) | {peak:.0f} MiB |")


if __name__ == "__main__":
    main()

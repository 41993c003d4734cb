"""The timing model against the RTL measurements: one row per program and memory latency.

    python benchmarks/timing_accuracy.py [--profile chisel-2019] [--dir ../shared/timing] [--markdown]
    python benchmarks/timing_accuracy.py --all     # the summary line of each design against its own RTL

Each built-in profile is compared with its own design's measurements (cycles.json for the 2019 core,
cycles-2021.json, cycles-hls.json), by default on both measurement sets: the compiled programs of
../shared/timing and the micro cases of ../shared/timing-micro (--dir, repeated, for others).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vtasim.timing.names import BUILTIN, MEASURED  # noqa: E402
from vtasim.timing.profile import load_profile  # noqa: E402
from vtasim.timing.validate import compare, format_table, load_sets  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("VTA_SHARED", REPO.parent / "shared"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="chisel-2019")
    parser.add_argument("--dir", action="append", help="a directory of measured programs (repeatable; default: "
                        "../shared/timing and ../shared/timing-micro)")
    parser.add_argument("--markdown", action="store_true", help="one table row per program (for docs/timing.md)")
    parser.add_argument("--all", action="store_true", help="each built-in profile against its design's RTL")
    args = parser.parse_args()
    dirs = args.dir or [SHARED / "timing", SHARED / "timing-micro"]
    for name in BUILTIN if args.all else [args.profile]:
        profile = load_profile(name)
        table = format_table(compare(load_sets(dirs, MEASURED.get(profile.name, "cycles.json")), profile),
                             markdown=args.markdown)
        print(f"{profile.name}: {table.splitlines()[-1]}" if args.all else table)


if __name__ == "__main__":
    main()

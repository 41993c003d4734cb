"""The timing model against the RTL measurements: one row per program and memory latency.

    python benchmarks/timing_accuracy.py [--profile chisel-2019] [--dir ../shared/timing] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vtasim.timing.profile import load_profile  # noqa: E402
from vtasim.timing.validate import compare, format_table, load_cases  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="chisel-2019")
    parser.add_argument("--dir", default=str(Path(os.environ.get("VTA_SHARED", REPO.parent / "shared")) / "timing"))
    parser.add_argument("--markdown", action="store_true", help="one table row per program (for docs/timing.md)")
    args = parser.parse_args()
    print(format_table(compare(load_cases(args.dir), load_profile(args.profile)), markdown=args.markdown))


if __name__ == "__main__":
    main()

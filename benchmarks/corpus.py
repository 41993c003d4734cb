"""The compiled corpus, one JSON line per program and profile: its bytes' checksum and its cycles.

Compiles the example kernels, the shared perf/ yardsticks (found through
VTA_SHARED or ../shared), ResNet-18's layers C2-C11 (shared/spec/workloads.md)
and a sweep of convolutions with large pads and strides, for the hls,
chisel-2019 and chisel-2021 profiles, and prints for each the SHA-256 of the
.vbin, the cycles the timing model gives it on that profile, and how many
LOADs of no rows it holds (which hang the 2021 design). Run it before and
after a change and compare the lines: which programs changed bytes, and
their cycles before and after.

    python benchmarks/corpus.py [--only examples|perf|resnet|conv] > corpus.jsonl
    python benchmarks/corpus.py --compare before.jsonl after.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vtacc.frontend.check import check_source  # noqa: E402
from vtacc.program_builder import compile_file  # noqa: E402
from vtasim.timing.profile import load_profile  # noqa: E402
from vtasim.timing.run import time_program  # noqa: E402
from vtasm.config import default_config  # noqa: E402
from vtasm.formats.vbin import write_vbin  # noqa: E402

PROFILES = ("hls", "chisel-2019", "chisel-2021")
SHARED = Path(os.environ.get("VTA_SHARED", ROOT.parent / "shared"))
# ResNet-18's convolutions (shared/spec/workloads.md): H = W, IC, OC, kernel, pad, stride
RESNET = {"C2": (56, 64, 64, 3, 1, 1), "C3": (56, 64, 128, 3, 1, 2), "C4": (56, 64, 128, 1, 0, 2),
          "C5": (28, 128, 128, 3, 1, 1), "C6": (28, 128, 256, 3, 1, 2), "C7": (28, 128, 256, 1, 0, 2),
          "C8": (14, 256, 256, 3, 1, 1), "C9": (14, 256, 512, 3, 1, 2), "C10": (14, 256, 512, 1, 0, 2),
          "C11": (7, 512, 512, 3, 1, 1)}
# (kernel, stride, pad) of the sweep: large pads, strides larger than the kernel, windows in the padding
SWEEP = ((1, 1, 0), (1, 1, 2), (1, 2, 3), (1, 4, 6), (2, 2, 1), (2, 3, 2), (3, 1, 1), (3, 1, 6), (3, 2, 1),
         (3, 3, 2), (3, 4, 3), (5, 1, 6), (5, 2, 2), (5, 3, 3), (7, 2, 3), (7, 4, 6))


def _conv(h: int, ic: int, oc: int, k: int, pad: int, stride: int, epilogue: str) -> str:
    oh = (h + 2 * pad - k) // stride + 1
    return (f"kernel c(x: int8[1, {ic}, {h}, {h}], w: int8[{oc}, {ic}, {k}, {k}], b: int32[{oc}]) "
            f"-> y: int8[1, {oc}, {oh}, {oh}] {{ y = {epilogue.format(f'conv2d(x, w, stride={stride}, pad={pad})')} }}")


def sources(only: str | None):
    """(name, kernel source) of every corpus program (or of one family)."""
    if only in (None, "examples"):
        for path in sorted((ROOT / "examples").glob("*.vk")):
            yield f"examples/{path.name}", path.read_text()
    if only in (None, "perf"):
        for path in sorted((SHARED / "perf").glob("*.vk")):
            yield f"perf/{path.name}", path.read_text()
    if only in (None, "resnet"):
        for name, (h, ic, oc, k, pad, stride) in RESNET.items():
            yield f"resnet/{name}", _conv(h, ic, oc, k, pad, stride, "clip(({} >> 8) + b, 0, 127)")
    if only in (None, "conv"):
        for (k, stride, pad), h, ic in itertools.product(SWEEP, (5, 9, 14), (8, 32)):
            if h + 2 * pad >= k:
                yield f"conv/k{k}s{stride}p{pad}h{h}c{ic}", _conv(h, ic, 32, k, pad, stride, "relu({} >> 6)")


def measure(only: str | None) -> None:
    cfg = default_config()
    for name, source in sources(only):
        for profile_name in PROFILES:
            profile = load_profile(profile_name)
            compiled = compile_file(check_source(source, Path(name).name if name.endswith(".vk") else "k.vk"), cfg,
                                    profile=profile, jobs=1)
            program = compiled.program
            rowless = sum(1 for i in program.instructions if i.kind == "load" and i["y_size"] == 0 and i["x_size"])
            print(json.dumps({"name": name, "profile": profile_name,
                              "sha": hashlib.sha256(write_vbin(program)).hexdigest()[:16],
                              "cycles": time_program(program, profile, record=False).report.cycles,
                              "rowless": rowless}), flush=True)


def compare(before: Path, after: Path) -> None:
    def rows(path: Path) -> dict:
        return {(r["name"], r["profile"]): r for r in map(json.loads, path.read_text().splitlines())}

    a, b = rows(before), rows(after)
    changed = [k for k in a if k in b and a[k]["sha"] != b[k]["sha"]]
    print(f"{len(a)} programs, {len(changed)} changed; loads of no rows in {sum(r['rowless'] > 0 for r in a.values())}"
          f" before, {sum(r['rowless'] > 0 for r in b.values())} after")
    for key in changed:
        was, now = a[key]["cycles"], b[key]["cycles"]
        print(f"{key[0]:28s} {key[1]:12s} {was:>11,} -> {now:>11,}  {100 * (now / was - 1):+6.1f}%")
    if changed:
        mean = math.exp(sum(math.log(b[k]["cycles"] / a[k]["cycles"]) for k in changed) / len(changed))
        print(f"geometric mean of the changed programs' cycles: {mean:.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("examples", "perf", "resnet", "conv"))
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare)
    else:
        measure(args.only)


if __name__ == "__main__":
    main()

"""Per-layer figures for ResNet-18 C2-C11 (the table in docs/performance.md).

For each layer: compile (timed), count instructions and micro-ops, read the
DRAM traffic off the program (as the reference profiler counts it) against
the compulsory minimum, and the buffer occupancy; then run it on the simulator
with random data (timed apart from loading the inputs) and check the result
against numpy.

    python benchmarks/resnet_report.py [--config FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.vtacc.harness import conv_ref  # noqa: E402
from tests.vtacc.resnet import RESNET, layer_source  # noqa: E402
from vtacc.frontend.check import check_source  # noqa: E402
from vtacc.program_builder import compile_file  # noqa: E402
from vtacc.reports.explain import traffic  # noqa: E402
from vtasim.core.machine import Machine  # noqa: E402
from vtasim.timing.profile import load_profile  # noqa: E402
from vtasm.config import default_config, load_config  # noqa: E402

TILED_FOR = load_profile("chisel-2019")  # docs/performance.md's table: tiles chosen for the 2019 core


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="vta_config.json (default: the built-in 1x16x16)")
    args = parser.parse_args()
    cfg = load_config(args.config) if args.config else default_config()
    print(f"configuration {cfg.describe()}\n")
    print("| layer | tiling | instructions | micro-ops | GEMM executions | DRAM bytes moved | compulsory minimum "
          "| ratio | inp / wgt / acc occupancy | compile | simulate |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in RESNET:
        src, (h, ic, oc, k, pad, stride) = layer_source(name)
        rng = np.random.default_rng(0)
        x, w = rng.integers(-128, 128, (1, ic, h, h), dtype=np.int8), rng.integers(-128, 128, (oc, ic, k, k),
                                                                                    dtype=np.int8)
        b = rng.integers(-3000, 3000, oc).astype(np.int32)
        t0 = time.perf_counter()
        compiled = compile_file(check_source(src, "layer.vk"), cfg, profile=TILED_FOR)
        compile_s = time.perf_counter() - t0
        machine = Machine(compiled.program)
        for tensor, array in (("x", x), ("w", w), ("b", b)):
            seg, info = compiled.program.segment(tensor), compiled.program.tensor(tensor)
            machine.state.dram[seg.addr:seg.addr + info.nbytes] = np.frombuffer(info.pack(array), dtype=np.uint8)
        t1 = time.perf_counter()
        state = machine.run()
        simulate_s = time.perf_counter() - t1
        seg, info = compiled.program.segment("y"), compiled.program.tensor("y")
        y = info.unpack(state.state.dram[seg.addr:seg.addr + info.nbytes].tobytes())
        expected = np.clip((conv_ref(x, w, stride, pad) >> 8) + b[None, :, None, None], 0, 127).astype(np.int8)
        ok = bool((y == expected).all())
        moved = traffic(compiled)
        data = sum(v for key, v in moved.items() if key != "uop")
        minimum = sum(t.nbytes for t in compiled.tensors if not t.constant)
        occ = compiled.planned[0].tiling.occupancy
        prog = compiled.program
        gemm = state.counters["gemm_counter"]
        print(f"| {name}{'' if ok else ' (WRONG)'} | {compiled.planned[0].tiling.describe(cfg)} | "
              f"{len(prog.instructions)} | {len(prog.uops)} | {gemm:,} | {data:,} | {minimum:,} | "
              f"{data / minimum:.2f}x | {occ['inp']} / {occ['wgt']} / {occ['acc']} of {cfg.inp_depth} / "
              f"{cfg.wgt_depth} / {cfg.acc_depth} | {compile_s:.2f} s | {simulate_s:.2f} s |")


if __name__ == "__main__":
    main()

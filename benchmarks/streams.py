"""Instruction streams for benchmarking the simulator, built with vtasm."""

from __future__ import annotations

import numpy as np

from vtasm.config import VTAConfig, default_config
from vtasm.encoding import MicroOp, make_instruction
from vtasm.program import Program, Segment

PAGE = 4096


def _page(n: int) -> int:
    return (n + PAGE - 1) // PAGE * PAGE


def tiled_gemm_stream(n_gemm: int = 1024, rows: int = 16, cols: int = 16, taps: int = 16,
                      cfg: VTAConfig | None = None, seed: int = 0) -> Program:
    """A convolution-shaped GEMM stream: each instruction runs rows x cols x taps executions.

    One micro-op per tap (a distinct weight tile and input offset); the two
    hardware loops walk a rows x cols output tile, so each weight tile is shared
    by rows * cols executions and every output element sums ``taps`` products.
    Inputs and weights are loaded once; the accumulator is stored at the end.
    """
    cfg = cfg or default_config()
    rng = np.random.default_rng(seed)
    in_cols = cols + 2
    inp_elems = (rows + 2) * in_cols
    wgt_elems = taps
    inp = rng.integers(-128, 128, inp_elems * cfg.inp_elem_bytes, dtype=np.int8).tobytes()
    wgt = rng.integers(-128, 128, wgt_elems * cfg.wgt_elem_bytes, dtype=np.int8).tobytes()
    out_elems = rows * cols
    inp_addr = PAGE
    wgt_addr = _page(inp_addr + len(inp))
    out_addr = _page(wgt_addr + len(wgt))
    uop_addr = _page(out_addr + out_elems * cfg.out_elem_bytes)
    uops = [MicroOp(0, (t // 4) * in_cols + t % 4, t) for t in range(taps)]
    insn_addr = _page(uop_addr + 4 * len(uops))
    mk = make_instruction
    insns = [
        mk("load", memory_type=2, dram_base=inp_addr // cfg.inp_elem_bytes, y_size=1, x_size=inp_elems,
           x_stride=inp_elems),
        mk("load", memory_type=1, dram_base=wgt_addr // cfg.wgt_elem_bytes, y_size=1, x_size=wgt_elems,
           x_stride=wgt_elems, push_next=1),
        mk("load", memory_type=0, dram_base=uop_addr // 4, y_size=1, x_size=taps, x_stride=taps,
           pop_prev=1),
        mk("gemm", reset=1, uop_bgn=0, uop_end=1, iter_out=rows, iter_in=cols, dst_factor_out=cols,
           dst_factor_in=1),
    ]
    for _ in range(n_gemm):
        insns.append(mk("gemm", uop_bgn=0, uop_end=taps, iter_out=rows, iter_in=cols,
                        dst_factor_out=cols, dst_factor_in=1, src_factor_out=in_cols, src_factor_in=1))
    insns[-1].fields["push_next"] = 1
    insns.append(mk("store", memory_type=4, dram_base=out_addr // cfg.out_elem_bytes, y_size=1,
                    x_size=out_elems, x_stride=out_elems, pop_prev=1, push_prev=1))
    insns.append(mk("finish", pop_next=1))
    segs = [Segment("inp", inp_addr, inp), Segment("wgt", wgt_addr, wgt),
            Segment("out", out_addr, bytes(out_elems * cfg.out_elem_bytes))]
    return Program(cfg, insns, uops, insn_addr, uop_addr, segs)

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


def conv_stream(size: int = 14, in_tiles: int = 16, out_tiles: int = 16, chunk: int = 8,
                cfg: VTAConfig | None = None, seed: int = 0) -> Program:
    """A 3x3, pad 1, stride 1 convolution shaped like ResNet-18 C8 (14x14, 256 -> 256 channels).

    Input channels are processed in chunks of ``chunk`` tiles (the input buffer
    holds 8 padded 16x16 planes); each chunk is one LOAD INP with the padding
    done by the DMA, one LOAD WGT and one GEMM of size x size x (chunk * 9)
    micro-op executions; each output-channel tile is then requantised on the
    ALU (>> 8, max 0, min 127) and stored. Tokens order every reuse.
    """
    cfg = cfg or default_config()
    rng = np.random.default_rng(seed)
    plane = (size + 2) * (size + 2)
    inp = rng.integers(-128, 128, in_tiles * size * size * cfg.inp_elem_bytes, dtype=np.int8).tobytes()
    n_wgt = out_tiles * in_tiles * 9
    wgt = rng.integers(-128, 128, n_wgt * cfg.wgt_elem_bytes, dtype=np.int8).tobytes()
    out_bytes = out_tiles * size * size * cfg.out_elem_bytes
    inp_addr = PAGE
    wgt_addr = _page(inp_addr + len(inp))
    out_addr = _page(wgt_addr + len(wgt))
    uop_addr = _page(out_addr + out_bytes)
    taps = chunk * 9
    uops = [MicroOp(0, c * plane + ky * (size + 2) + kx, c * 9 + ky * 3 + kx)
            for c in range(chunk) for ky in range(3) for kx in range(3)]
    uops.append(MicroOp(0, 0, 0))  # ALU kernel: one element, walked by the loops
    insn_addr = _page(uop_addr + 4 * len(uops))
    mk = make_instruction
    loops = {"iter_out": size, "iter_in": size, "dst_factor_out": size, "dst_factor_in": 1}
    insns = [mk("load", memory_type=0, dram_base=uop_addr // 4, y_size=1, x_size=len(uops), x_stride=len(uops))]
    chunks = in_tiles // chunk
    first = True
    for oc in range(out_tiles):
        for ch in range(chunks):
            for c in range(chunk):  # one padded plane per input-channel tile; the first waits for compute
                insns.append(mk("load", memory_type=2, sram_base=c * plane,
                                dram_base=inp_addr // cfg.inp_elem_bytes + (ch * chunk + c) * size * size,
                                y_size=size, x_size=size, x_stride=size, x_pad_0=1, x_pad_1=1, y_pad_0=1,
                                y_pad_1=1, pop_next=int(c == 0 and not first)))
            w0 = (oc * in_tiles + ch * chunk) * 9
            insns.append(mk("load", memory_type=1, dram_base=wgt_addr // cfg.wgt_elem_bytes + w0, y_size=1,
                            x_size=taps, x_stride=taps, push_next=1))
            if ch == 0:
                insns.append(mk("gemm", reset=1, uop_bgn=0, uop_end=1, pop_next=0 if oc == 0 else 1, **loops))
            insns.append(mk("gemm", uop_bgn=0, uop_end=taps, src_factor_out=size + 2, src_factor_in=1,
                            pop_prev=1, push_prev=1, **loops))
            first = False
        for op, imm in ((3, 8), (1, 0), (0, 127)):
            insns.append(mk("alu", uop_bgn=taps, uop_end=taps + 1, alu_opcode=op, use_imm=1, imm=imm, **loops))
        insns[-1].fields["push_next"] = 1
        insns.append(mk("store", memory_type=4, dram_base=out_addr // cfg.out_elem_bytes + oc * size * size,
                        y_size=1, x_size=size * size, x_stride=size * size, pop_prev=1, push_prev=1))
    insns.append(mk("finish", pop_next=1))
    segs = [Segment("inp", inp_addr, inp), Segment("wgt", wgt_addr, wgt), Segment("out", out_addr, bytes(out_bytes))]
    return Program(cfg, insns, uops, insn_addr, uop_addr, segs)


def resnet_stream(cfg: VTAConfig | None = None) -> Program:
    """ResNet-18 layers C2-C11 compiled by vtacc into one program (one kernel, ten outputs)."""
    from tests.vtacc.resnet import RESNET
    from vtacc.frontend.check import check_source
    from vtacc.program_builder import compile_file

    params, results, body = [], [], []
    for name, (h, ic, oc, k, pad, stride) in RESNET.items():
        n = name.lower()
        oh = (h + 2 * pad - k) // stride + 1
        params += [f"x{n}: int8[1, {ic}, {h}, {h}]", f"w{n}: int8[{oc}, {ic}, {k}, {k}]", f"b{n}: int32[{oc}]"]
        results.append(f"y{n}: int8[1, {oc}, {oh}, {oh}]")
        body.append(f"    y{n} = clip((conv2d(x{n}, w{n}, stride={stride}, pad={pad}) >> 8) + b{n}, 0, 127)")
    src = f"kernel resnet({', '.join(params)}) -> ({', '.join(results)}) {{\n" + "\n".join(body) + "\n}\n"
    from vtasim.timing.profile import load_profile

    return compile_file(check_source(src, "resnet18.vk"), cfg or default_config(),
                        profile=load_profile("chisel-2019")).program  # the tiles docs/performance.md quotes

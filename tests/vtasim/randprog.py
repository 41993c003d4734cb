"""Hypothesis strategies for random, well-synchronised VTA programs.

A program works on small index ranges so that loads, GEMM and ALU writes
overlap: data segments of ``N`` elements per memory type, SRAM bases below
``SRAM_SPAN``, micro-ops with small indices (and sources next to their
destinations, so ALU chains and folds are frequent), loop factors 0..3. The
instructions are totally ordered by tokens (builders.chain), so the result
cannot depend on the interleaving. Data comes from a drawn seed.
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

from vtasm.config import VTAConfig
from vtasm.encoding import Instruction
from vtasm.program import DumpRange, Program

from .builders import ACC, ACC8, INP, OUT, UOP, WGT, Image, alu, chain, elem_bytes, gemm, load, store, uops

N = 24  # elements in each data segment
N_UOPS = 32  # micro-op table entries
N_OUT = 64  # out elements random stores may write
FINAL = 48  # accumulator elements stored at the end (to out elements N_OUT..)
SRAM_SPAN = {INP: 24, WGT: 12, ACC: 40, ACC8: 40, UOP: 32}
SEGMENT = {INP: "inp", WGT: "wgt", ACC: "acc", ACC8: "acc8", UOP: None}

small = st.integers(0, 3)
imm16 = st.one_of(st.integers(-40, 40), st.integers(-(1 << 15), (1 << 15) - 1),
                  st.sampled_from([-32768, 32767, -33, -32, -31, -17, -16, 15, 16, 31, 32, 33]))


@st.composite
def load_insn(draw) -> Instruction:
    mem = draw(st.sampled_from([INP, WGT, ACC, ACC8, UOP]))
    x = draw(st.integers(0, 4))
    y = draw(st.integers(0, 3))
    stride = draw(st.integers(0, 6))
    pad = tuple(draw(small) for _ in range(4))
    span = (y - 1) * stride + x if y and x else 0  # DRAM elements the rows reach
    limit = N_UOPS if mem == UOP else N
    offset = draw(st.integers(0, limit - span))
    sram = draw(st.integers(0, SRAM_SPAN[mem]))
    return load(mem, sram, offset, x, y, stride, pad)  # dram_base is relative here, fixed in build()


@st.composite
def store_insn(draw) -> Instruction:
    x = draw(st.integers(0, 4))
    y = draw(st.integers(0, 3))
    stride = draw(st.integers(0, 6))
    span = (y - 1) * stride + x if y and x else 0
    return store(draw(st.integers(0, SRAM_SPAN[ACC])), draw(st.integers(0, N_OUT - span)), x, y, stride)


@st.composite
def loop_fields(draw) -> dict:
    bgn = draw(st.integers(0, N_UOPS - 1))
    n = draw(st.integers(0, 4))
    iters = (draw(st.integers(0, 3)), draw(st.integers(0, 3)))
    return {"bgn": bgn, "end": bgn + n, "iters": iters, "dst": (draw(small), draw(small)),
            "src": (draw(small), draw(small))}


@st.composite
def gemm_insn(draw) -> Instruction:
    f = draw(loop_fields())
    wgt = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    return gemm(f["bgn"], f["end"], f["iters"], f["dst"], f["src"], wgt, reset=int(draw(st.integers(0, 4)) == 0))


@st.composite
def alu_insn(draw) -> Instruction:
    f = draw(loop_fields())
    op = draw(st.integers(0, 4))
    imm = draw(st.one_of(st.none(), imm16))
    return alu(op, f["bgn"], f["end"], f["iters"], f["dst"], f["src"], imm)


any_insn = st.one_of(load_insn(), gemm_insn(), alu_insn(), alu_insn(), store_insn())


def _acc_value(rng: random.Random) -> int:
    kind = rng.randrange(4)
    if kind == 0:
        return rng.randint(-40, 40)
    if kind == 1:
        return rng.choice([-(1 << 31), (1 << 31) - 1, -1, 0, 1, 1 << 16, -(1 << 16), 255, -129])
    return rng.randint(-(1 << 31), (1 << 31) - 1)


def _micro_ops(rng: random.Random, cfg: VTAConfig) -> list:
    table = []
    for _ in range(N_UOPS):
        dst = rng.randrange(N)
        src = min(max(dst + rng.randint(-2, 2), 0), N - 1) if rng.random() < 0.6 else rng.randrange(N)
        table.append((dst, src, rng.randrange(SRAM_SPAN[WGT])))
    return uops(*table)


def build(cfg: VTAConfig, body: list[Instruction], seed: int) -> Program:
    """A program: load the micro-op table, run ``body``, store accumulators 0..FINAL-1, FINISH."""
    rng = random.Random(seed)
    img = Image(cfg)
    for mem in (INP, WGT, ACC8):
        img.add(SEGMENT[mem], rng.randbytes(N * elem_bytes(cfg, mem)))
    lanes = cfg.batch * cfg.block_out
    img.add("acc", b"".join(_acc_value(rng).to_bytes(4, "little", signed=True) for _ in range(N * lanes)))
    out_bytes = (N_OUT + FINAL) * elem_bytes(cfg, OUT)
    out_addr = img.add("out", rng.randbytes(out_bytes))
    out_base = out_addr // elem_bytes(cfg, OUT)
    insns = [load(UOP, 0, img.uop_elem(), N_UOPS)]
    for insn in body:
        fields = dict(insn.fields)
        if insn.kind == "load" and fields["x_size"]:
            mem = fields["memory_type"]
            base = img.uop_elem() if mem == UOP else img.elem(SEGMENT[mem], mem)
            fields["dram_base"] += base
        elif insn.kind == "store" and fields["x_size"]:
            fields["dram_base"] += out_base
        insns.append(Instruction(insn.kind, fields))
    insns.append(store(0, out_base + N_OUT, FINAL))
    return img.program(chain(insns), _micro_ops(rng, cfg), [DumpRange(out_addr, out_bytes, "out.bin")])


@st.composite
def bodies(draw) -> list[Instruction]:
    """Random instructions, some GEMM/ALU repeated later (cached loop plans must see new data)."""
    body = draw(st.lists(any_insn, min_size=1, max_size=10))
    for _ in range(draw(st.integers(0, 3))):
        k = draw(st.integers(0, len(body) - 1))
        if body[k].kind in ("gemm", "alu"):
            body.insert(draw(st.integers(k + 1, len(body))), body[k])
    return body


seeds = st.integers(0, 2**32 - 1)

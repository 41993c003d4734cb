"""Helpers to build small VTA programs in Python for the simulator tests."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from vtasm.config import VTAConfig, load_config
from vtasm.encoding import Instruction, MicroOp, make_instruction
from vtasm.program import DumpRange, Program, Segment, TensorInfo

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("VTA_SHARED", REPO.parent / "shared"))
GOLDEN = SHARED / "spec" / "golden"
CONFORMANCE = SHARED / "conformance"

CONFIGS = ("default", "batch2", "batch4", "block8", "block32", "uop14")
UOP, WGT, INP, ACC, OUT, ACC8 = 0, 1, 2, 3, 4, 5
MIN, MAX, ADD, SHR, MUL = 0, 1, 2, 3, 4
PAGE = 4096


def config_path(name: str) -> Path:
    """The golden configuration file `name`; the default one falls back to the repository's copy."""
    path = GOLDEN / f"{name}.config.json"
    if not path.exists() and name == "default":
        return REPO / "vta_config.json"  # the 1x16x16 default needs no ground truth
    if not path.exists():
        pytest.skip(f"{path} not found (set VTA_SHARED)", allow_module_level=True)
    return path


def config(name: str) -> VTAConfig:
    return load_config(config_path(name))


def elem_bytes(cfg: VTAConfig, mem: int) -> int:
    """DRAM bytes of one element of a memory type (isa.md section 1 and 4)."""
    lanes = cfg.batch * cfg.block_out
    return {
        UOP: 4,
        WGT: cfg.block_out * cfg.block_in * cfg.wgt_width // 8,
        INP: cfg.batch * cfg.block_in * cfg.inp_width // 8,
        ACC: lanes * cfg.acc_width // 8,
        OUT: lanes * cfg.out_width // 8,
        ACC8: lanes,
    }[mem]


# -- instructions -----------------------------------------------------------


def load(mem: int, sram: int, dram: int, x: int, y: int = 1, stride: int | None = None,
         pad: tuple[int, int, int, int] = (0, 0, 0, 0), **flags: int) -> Instruction:
    """LOAD; ``pad`` is (y_pad_0, y_pad_1, x_pad_0, x_pad_1)."""
    y0, y1, x0, x1 = pad
    return make_instruction("load", memory_type=mem, sram_base=sram, dram_base=dram, x_size=x, y_size=y,
                            x_stride=x if stride is None else stride, y_pad_0=y0, y_pad_1=y1, x_pad_0=x0,
                            x_pad_1=x1, **flags)


def store(sram: int, dram: int, x: int, y: int = 1, stride: int | None = None, mem: int = OUT,
          **flags: int) -> Instruction:
    return make_instruction("store", memory_type=mem, sram_base=sram, dram_base=dram, x_size=x, y_size=y,
                            x_stride=x if stride is None else stride, **flags)


def nop(stage: str, **flags: int) -> Instruction:
    """A load/store with x_size 0: only moves tokens."""
    if stage == "store":
        return store(0, 0, 0, 0, **flags)
    return load({"load": INP, "compute": UOP}[stage], 0, 0, 0, 0, **flags)


def gemm(bgn: int, end: int, iters: tuple[int, int] = (1, 1), dst: tuple[int, int] = (0, 0),
         src: tuple[int, int] = (0, 0), wgt: tuple[int, int] = (0, 0), reset: int = 0, **flags: int) -> Instruction:
    """GEMM; each factor pair is (outer, inner)."""
    return make_instruction("gemm", reset=reset, uop_bgn=bgn, uop_end=end, iter_out=iters[0], iter_in=iters[1],
                            dst_factor_out=dst[0], dst_factor_in=dst[1], src_factor_out=src[0],
                            src_factor_in=src[1], wgt_factor_out=wgt[0], wgt_factor_in=wgt[1], **flags)


def alu(op: int, bgn: int, end: int, iters: tuple[int, int] = (1, 1), dst: tuple[int, int] = (0, 0),
        src: tuple[int, int] = (0, 0), imm: int | None = None, **flags: int) -> Instruction:
    """ALU; a tensor operation unless ``imm`` is given."""
    return make_instruction("alu", uop_bgn=bgn, uop_end=end, iter_out=iters[0], iter_in=iters[1],
                            dst_factor_out=dst[0], dst_factor_in=dst[1], src_factor_out=src[0],
                            src_factor_in=src[1], alu_opcode=op, use_imm=int(imm is not None),
                            imm=imm or 0, **flags)


def finish(**flags: int) -> Instruction:
    return make_instruction("finish", **flags)


def stage(insn: Instruction) -> str:
    """The pipeline stage of an instruction (isa.md section 5)."""
    if insn.kind == "store":
        return "store"
    if insn.kind == "load" and insn["memory_type"] in (INP, WGT):
        return "load"
    return "compute"


# Flags that order instruction ``a`` (stage 1) before the next instruction ``b`` (stage 2).
_ORDER = {
    ("load", "compute"): ("push_next", "pop_prev"),
    ("compute", "load"): ("push_prev", "pop_next"),
    ("compute", "store"): ("push_next", "pop_prev"),
    ("store", "compute"): ("push_prev", "pop_next"),
}


def chain(insns: list[Instruction]) -> list[Instruction]:
    """The instructions totally ordered by tokens (plus compute NOPs where load and store meet), then FINISH.

    Every instruction is ordered after the one before it, so the result is
    race-free and program order satisfies every pop.
    """
    out: list[Instruction] = []
    for insn in [*insns, finish()]:
        insn = Instruction(insn.kind, dict(insn.fields))
        if out and stage(out[-1]) != stage(insn):
            pair = (stage(out[-1]), stage(insn))
            if pair not in _ORDER:  # load <-> store: go through the compute stage
                bridge = nop("compute")
                _link(out[-1], bridge)
                out.append(bridge)
            _link(out[-1], insn)
        out.append(insn)
    return out


def _link(a: Instruction, b: Instruction) -> None:
    push, pop = _ORDER[(stage(a), stage(b))]
    a.fields[push] = 1
    b.fields[pop] = 1


# -- DRAM layout and programs ----------------------------------------------


@dataclass
class Image:
    """A DRAM image under construction: page-aligned named segments."""

    cfg: VTAConfig
    segments: list[Segment] = field(default_factory=list)
    tensors: list[TensorInfo] = field(default_factory=list)
    next_addr: int = PAGE

    def add(self, name: str, data: bytes, tensor: TensorInfo | None = None) -> int:
        """Place a segment; returns its byte address."""
        addr = self.next_addr
        self.segments.append(Segment(name, addr, bytes(data)))
        if tensor is not None:
            self.tensors.append(tensor)
        self.next_addr = addr + -(-max(len(data), 1) // PAGE) * PAGE
        return addr

    def elem(self, name: str, mem: int) -> int:
        """The element address (dram_base) of a segment for a memory type."""
        seg = next(s for s in self.segments if s.name == name)
        size = elem_bytes(self.cfg, mem)
        assert seg.addr % size == 0
        return seg.addr // size

    def program(self, insns: list[Instruction], uops: list[MicroOp] = (), dumps: list[DumpRange] = ()) -> Program:
        """The program: segments, then the micro-op table, then the instructions."""
        uop_addr = self.next_addr
        insn_addr = uop_addr + -(-max(4 * len(uops), 1) // PAGE) * PAGE
        return Program(config=self.cfg, instructions=list(insns), uops=list(uops), insn_addr=insn_addr,
                       uop_addr=uop_addr, segments=list(self.segments), tensors=list(self.tensors),
                       dumps=list(dumps))

    def uop_elem(self) -> int:
        """dram_base of the micro-op table of the program built next."""
        return self.next_addr // 4


def uops(*triples: tuple[int, int, int]) -> list[MicroOp]:
    return [MicroOp(d, s, w) for d, s, w in triples]


def int32_bytes(values) -> bytes:
    return b"".join(int(v).to_bytes(4, "little", signed=True) for v in values)


def int8_bytes(values) -> bytes:
    return b"".join(int(v).to_bytes(1, "little", signed=True) for v in values)


# -- a program with tensors: y = clip((x @ w^T) >> 4, -128, 127) ----------------

MATMUL_SHIFT = 4


def matmul_program(racy: bool = False, extra: list[Instruction] = ()) -> Program:
    """x int8[1, 32], w int8[16, 32] -> y int8[1, 16] on the default configuration.

    The GEMM (instruction 2) comes before the loads it waits for (3 and 4) in
    program order, so the real token counts differ from program-order counts:
    the loads run first. ``racy`` drops that token; ``extra`` instructions run
    just before FINISH.
    """
    cfg = config("default")
    img = Image(cfg)
    x_addr = img.add("x", bytes(32), TensorInfo("x", "int8", (1, 32), (1, 16)))
    w_addr = img.add("w", bytes(16 * 32), TensorInfo("w", "int8", (16, 32), (16, 16)))
    y_addr = img.add("y", bytes(16), TensorInfo("y", "int8", (1, 16), (1, 16)))
    sync = {} if racy else {"pop_prev": 1}
    insns = [
        load(UOP, 0, img.uop_elem(), 1),
        gemm(0, 1, reset=1),
        gemm(0, 1, (1, 2), src=(0, 1), wgt=(0, 1), **sync),
        load(INP, 0, x_addr // 16, 2),
        load(WGT, 0, w_addr // 256, 2, **({} if racy else {"push_next": 1})),
        alu(SHR, 0, 1, imm=MATMUL_SHIFT),
        alu(MIN, 0, 1, imm=127),
        alu(MAX, 0, 1, imm=-128, push_next=1),
        store(0, y_addr // 16, 1, pop_prev=1, push_prev=1),
        *extra,
        finish(pop_next=1),
    ]
    return img.program(insns, uops((0, 0, 0)), [DumpRange(y_addr, 16, "y.bin")])

"""The hardware designs' documented differences (isa.md section 7), as a slow interpreter for tests.

An extension of the plain reference interpreter (tests/vtasim/reference.py),
written from section 7 alone, so compiled code can be run as each FPGA design
would run it:

- every design: STORE reads an output buffer that only GEMM and ALU write;
- ``hls``: an execution does not see the accumulator writes of the two
  executions just before it (in one instruction); shift amounts are their low
  5 bits as a signed number; WGT and UOP loads ignore their padding;
- ``chisel-2019``: a GEMM execution does not see the write of the one just
  before it;
- ``chisel-2021``: an ALU execution does not see the write of the one just
  before it, an ALU with an immediate computes ``op(acc[src], imm)``, and a
  LOAD with ``y_size`` 0 and ``x_size`` > 0 never completes (``DesignHang``).

The 2019 core's zero-extended immediates are left out: portable code need not
avoid negative immediates (section 7), so compiled code would differ there on
purpose.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .vtasim.reference import (
    ALU_SHR,
    MEM_UOP,
    MEM_WGT,
    Geometry,
    Reference,
    alu_op,
    initial_dram,
    wrap,
)

LAG = {  # (GEMM, ALU): how many executions just before one whose writes its reads do not see
    "hls": (2, 2),
    "chisel-2019": (1, 0),
    "chisel-2021": (0, 1),
}


class DesignHang(Exception):
    """The design stops at an instruction it never completes."""


@dataclass
class DesignReference(Reference):
    """The reference machine with one design's differences."""

    design: str = "hls"
    out: dict = field(default_factory=dict)  # the output buffer STORE reads

    def load(self, f: dict) -> None:
        if self.design == "chisel-2021" and f["y_size"] == 0 and f["x_size"] > 0:
            raise DesignHang(f"a LOAD of memory type {f['memory_type']} with y_size 0 and x_size {f['x_size']} "
                             "never completes on chisel-2021")
        if self.design == "hls" and f["memory_type"] in (MEM_WGT, MEM_UOP):
            f = {**f, "x_pad_0": 0, "x_pad_1": 0, "y_pad_0": 0, "y_pad_1": 0}
        super().load(f)

    def _run(self, f: dict, lag: int, compute) -> None:
        pending: deque = deque()
        for dst, src, wgt in self.executions(f):
            pending.append((dst, compute(dst, src, wgt)))
            if len(pending) > lag:
                self._commit(*pending.popleft())
        while pending:
            self._commit(*pending.popleft())

    def _commit(self, index: int, value: list[int]) -> None:
        self.write("acc", index, value)
        self.out[index] = value

    def gemm(self, f: dict) -> None:
        g = self.geo

        def compute(acc_i, inp_i, wgt_i):
            if f["reset"]:
                return [0] * (g.batch * g.block)
            acc = list(self.read("acc", acc_i))
            inp, wgt = self.read("inp", inp_i), self.read("wgt", wgt_i)
            for b in range(g.batch):
                for o in range(g.block):
                    total = acc[b * g.block + o] + sum(inp[b * g.block + k] * wgt[o * g.block + k]
                                                       for k in range(g.block))
                    acc[b * g.block + o] = wrap(total, g.acc_bits)
            return acc

        self._run(f, LAG[self.design][0], compute)

    def alu(self, f: dict) -> None:
        bits = self.geo.acc_bits
        op, imm = f["alu_opcode"], wrap(f["imm"], 16)

        def compute(dst, src, _):
            x = self.read("acc", src if f["use_imm"] and self.design == "chisel-2021" else dst)
            y = [imm] * len(x) if f["use_imm"] else self.read("acc", src)
            if op == ALU_SHR and self.design == "hls":
                y = [wrap(v, 5) for v in y]
            return [alu_op(op, a, b, bits) for a, b in zip(x, y, strict=True)]

        self._run(f, LAG[self.design][1], compute)

    def store(self, f: dict) -> None:
        saved = self.sram["acc"]
        self.sram["acc"] = self.out  # hardware stores from the output buffer
        try:
            super().store(f)
        finally:
            self.sram["acc"] = saved


def run_design(program, design: str, inputs: dict[str, bytes]) -> bytearray:
    """DRAM after running ``program`` as ``design`` would, with ``inputs`` (packed bytes) in their segments."""
    geo = Geometry(program.config.log_values())
    dram = initial_dram(program, geo)
    for name, data in inputs.items():
        seg = program.segment(name)
        dram[seg.addr:seg.addr + len(data)] = data
    machine = DesignReference(geo, dram, design=design)
    machine.run([dict(insn.fields) for insn in program.instructions])
    return machine.dram

"""Portability lint: what the run did that real VTA hardware does differently (isa.md section 7).

Each rule fires only for behaviour the run actually triggered, once per
instruction and rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vtasm import isa
from vtasm.encoding import Instruction

from .faults import insn_title, source_of
from .machine import Machine
from .pipeline import StepEvent

MUL, SHR = isa.ALU_OPS["mul"], isa.ALU_OPS["shr"]
WGT, UOP, ACC, ACC8 = (isa.MEM_TYPES[n] for n in ("wgt", "uop", "acc", "acc8"))
HW_QUEUE_DEPTH = 8
SHIFT_MIN, SHIFT_MAX = -16, 15
NEVER, BY_LOAD, BY_COMPUTE = 0, 1, 2


@dataclass(frozen=True)
class Warning_:
    """One portability warning."""

    rule: str
    index: int | None
    message: str

    def describe(self, program) -> str:
        if self.index is None:
            return f"lint [{self.rule}]: {self.message}"
        insn = program.instructions[self.index]
        return (f"lint [{self.rule}]: instruction {self.index} ({insn_title(insn)}"
                f"{source_of(program, self.index)}): {self.message}")


class Linter:
    """Observes a run and collects portability warnings."""

    def __init__(self, machine: Machine):
        self.machine = machine
        self.warnings: dict[tuple, Warning_] = {}
        self.acc_writer = np.zeros(machine.state.cfg.acc_depth, dtype=np.int8)
        machine.pipeline.pre_observers.append(self.before)
        machine.observe(self.after)

    def _warn(self, rule: str, index: int | None, message: str) -> None:
        self.warnings.setdefault((rule, index), Warning_(rule, index, message))

    def before(self, index: int, insn: Instruction) -> None:
        """Checks that need the state before the instruction runs (tensor shift amounts)."""
        if insn.kind != "alu" or insn["alu_opcode"] != SHR or insn["use_imm"]:
            return
        n = insn["iter_out"] * insn["iter_in"] * (insn["uop_end"] - insn["uop_bgn"])
        if n <= 0:
            return
        plan = self.machine.plans.plan(self.machine.state, insn)
        acc = self.machine.state.acc
        if plan.src.size and plan.src.max() < acc.shape[0]:
            amounts = acc[plan.src]
            lo, hi = int(amounts.min()), int(amounts.max())
            if lo < SHIFT_MIN or hi > SHIFT_MAX:
                self._warn("shift-range", index, f"tensor shift amounts {lo}..{hi} leave {SHIFT_MIN}..{SHIFT_MAX}, "
                           "which the HLS design reads as 5-bit signed values")

    def after(self, event: StepEvent) -> None:
        insn, index = event.insn, event.index
        state = self.machine.state
        if insn.kind == "alu":
            op = insn["alu_opcode"]
            if op == MUL:
                self._warn("mul", index, "MUL is not implemented by the HLS and Chisel hardware designs")
            if op == SHR and insn["use_imm"] and not SHIFT_MIN <= insn["imm"] <= SHIFT_MAX:
                self._warn("shift-range", index, f"shift by {insn['imm']} is outside {SHIFT_MIN}..{SHIFT_MAX}")
        if insn.kind in ("gemm", "alu"):
            bgn, end = insn["uop_bgn"], insn["uop_end"]
            dst = state.uop_dst[bgn:min(end, state.uop_dst.size)].astype(np.int64)
            self._check_list(index, bgn, dst)
            n = insn["iter_out"] * insn["iter_in"] * (end - bgn)
            if n > 0:
                self._check_executions(index, insn, bgn, dst)
                plan = self.machine.plans.plan(state, insn)
                self.acc_writer[plan.dst] = BY_COMPUTE
        if insn.kind == "load" and insn["x_size"]:
            mtype = insn["memory_type"]
            pads = any(insn[f] for f in ("x_pad_0", "x_pad_1", "y_pad_0", "y_pad_1"))
            if pads and mtype in (WGT, UOP):
                self._warn("pad-ignored", index, f"the HLS design ignores padding on "
                           f"{isa.MEM_TYPE_DUMP[mtype]} loads")
            if mtype == ACC8:
                self._warn("acc8", index, "ACC_8BIT loads exist only in the behavioral simulator "
                           "and the Intel OpenCL design")
            if mtype in (ACC, ACC8):
                total = (insn["x_pad_0"] + insn["x_size"] + insn["x_pad_1"]) * (
                    insn["y_pad_0"] + insn["y_size"] + insn["y_pad_1"])
                self.acc_writer[insn["sram_base"] : insn["sram_base"] + total] = BY_LOAD
        if insn.kind == "store" and insn["x_size"]:
            lo = insn["sram_base"]
            writers = self.acc_writer[lo : lo + insn["x_size"] * insn["y_size"]]
            if (writers != BY_COMPUTE).any():
                what = "were loaded but never touched by GEMM/ALU" if (writers == BY_LOAD).any() else (
                    "were never written by GEMM/ALU")
                self._warn("stale-store", index, f"accumulator entries {what}; hardware stores from a separate "
                           "output buffer that only GEMM/ALU write (copy with ALU '>> 0' first)")
        for q, depth in event.queues.items():
            if depth > HW_QUEUE_DEPTH:
                self._warn(f"queue-depth-{q}", None, f"token queue {q} held {depth} tokens; hardware queues "
                           f"hold {HW_QUEUE_DEPTH}, so the producer would stall")

    def _check_list(self, index: int, bgn: int, dst: np.ndarray) -> None:
        """The runtime's rule: no micro-op of a kernel has the dst of either of the two before it in the list."""
        hits = [(int(u) + k, k) for k in (1, 2) for u in np.flatnonzero(dst[k:] == dst[:-k])[:1]]
        if hits:
            u, k = min(hits)
            apart = "adjacent" if k == 1 else "one apart"
            self._warn("uop-list-hazard", index, f"micro-ops {bgn + u - k} and {bgn + u} ({apart} in the list) both "
                       f"write acc[{int(dst[u])}]; the VTA runtime refuses a micro-op kernel that repeats the dst "
                       "of either of the two micro-ops before one")

    def _check_executions(self, index: int, insn: Instruction, bgn: int, dst: np.ndarray) -> None:
        """The pipeline's rule: no two consecutive executions write one accumulator element."""
        if not dst.size:
            return
        io, ii = insn["iter_out"], insn["iter_in"]
        f_out, f_in = insn["dst_factor_out"], insn["dst_factor_in"]
        same = np.flatnonzero(dst[1:] == dst[:-1])
        last = bgn + dst.size - 1
        if same.size:
            u = bgn + int(same[0])
            where = f"micro-ops {u} and {u + 1} both write acc[{int(dst[same[0]])}]"
        elif ii > 1 and dst[0] + f_in == dst[-1]:
            where = (f"micro-op {last} of iteration (0, 0) and micro-op {bgn} of iteration (0, 1) both write "
                     f"acc[{int(dst[-1])}]")
        elif io > 1 and dst[0] + f_out == dst[-1] + (ii - 1) * f_in:
            where = (f"micro-op {last} of iteration (0, {ii - 1}) and micro-op {bgn} of iteration (1, 0) both "
                     f"write acc[{int(dst[-1]) + (ii - 1) * f_in}]")
        else:
            return
        self._warn("uop-dst-hazard", index, f"{where} back to back (a read-after-write hazard in the pipelined "
                   "hardware: the second reads the element before the first's write lands)")

    def report(self) -> list[Warning_]:
        """Warnings in order of instruction (global ones first)."""
        return sorted(self.warnings.values(), key=lambda w: (-1 if w.index is None else w.index, w.rule))

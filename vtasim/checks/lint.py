"""Portability lint: what the run did that real VTA hardware does differently (isa.md section 7).

The rules, the designs each breaks on and their limits are declared in
``vtasm.portability``; this observer finds them in a run. Each rule fires only
for behaviour the run actually triggered, once per instruction and rule, and
names the designs on which the program computes something else (or stalls,
or is refused). Notes are facts that matter on one design but that portable
code need not avoid; they do not count as warnings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vtasim.core.faults import insn_title, source_of
from vtasim.core.machine import Machine
from vtasim.core.memory import loaded_elements
from vtasim.core.pipeline import StepEvent
from vtasm import isa
from vtasm import portability as port
from vtasm.encoding import Instruction

MUL, SHR = isa.ALU_OPS["mul"], isa.ALU_OPS["shr"]
ZERO_EXTENDED = frozenset(isa.ALU_OPS[name] for name in port.IMM_ZERO_EXTENDED)
WGT, UOP, ACC, ACC8 = (isa.MEM_TYPES[n] for n in ("wgt", "uop", "acc", "acc8"))
NEVER, BY_LOAD, BY_COMPUTE = 0, 1, 2


@dataclass(frozen=True)
class Warning_:
    """One portability warning (or note), with the designs it matters on."""

    rule: str
    index: int | None
    message: str
    designs: tuple[str, ...] = ()

    @property
    def note(self) -> bool:
        return port.RULES[self.rule].note

    def describe(self, program) -> str:
        head = f"lint {'note ' if self.note else ''}[{self.rule}]"
        tail = f" ({port.breaks(self.rule, self.designs)})"
        if self.index is None:
            return f"{head}: {self.message}{tail}"
        insn = program.instructions[self.index]
        return (f"{head}: instruction {self.index} ({insn_title(insn)}{source_of(program, self.index)}): "
                f"{self.message}{tail}")


def summary(found: list[Warning_]) -> str:
    """One line: how many warnings, on which designs, and how many notes."""
    warnings = [w for w in found if not w.note]
    notes = len(found) - len(warnings)
    per_design: dict[str, int] = {}
    for w in warnings:
        for d in w.designs or port.RULES[w.rule].designs:
            per_design[d] = per_design.get(d, 0) + 1
    where = "; ".join(f"{d}: {n}" for d, n in sorted(per_design.items()))
    text = f"{len(warnings)} lint warning{'s' if len(warnings) != 1 else ''}" + (f" ({where})" if where else "")
    return text + (f", {notes} note{'s' if notes != 1 else ''}" if notes else "")


class Linter:
    """Observes a run and collects portability warnings."""

    def __init__(self, machine: Machine):
        self.machine = machine
        self.warnings: dict[tuple, Warning_] = {}
        self.acc_writer = np.zeros(machine.state.cfg.acc_depth, dtype=np.int8)
        self._hazards: dict[tuple, port.Hazard | None] = {}  # per kernel and loops: the closest stale read
        self._lists: dict[tuple, tuple[int, int] | None] = {}  # per loaded micro-op range: the runtime's rule
        self._portable_uops = machine.state.cfg.uop_depth > port.UOP_ENTRIES
        machine.pipeline.pre_observers.append(self.before)
        machine.observe(self.after)

    def _warn(self, rule: str, index: int | None, message: str, designs: tuple[str, ...] = (),
              key: str = "") -> None:
        self.warnings.setdefault((rule, index, key), Warning_(rule, index, message, designs))

    def before(self, index: int, insn: Instruction) -> None:
        """Checks that need the state before the instruction runs (tensor shift amounts)."""
        if insn.kind != "alu" or insn["alu_opcode"] != SHR or insn["use_imm"]:
            return
        if self.machine.plans.count(insn) <= 0:
            return
        plan = self.machine.plans.plan(self.machine.state, insn)
        acc = self.machine.state.acc
        if plan.src.size and plan.src.max() < acc.shape[0]:
            amounts = acc[plan.src]
            lo, hi = int(amounts.min()), int(amounts.max())
            if lo < port.SHIFT_MIN or hi > port.SHIFT_MAX:
                self._warn("shift-range", index, f"tensor shift amounts {lo}..{hi} leave "
                           f"{port.SHIFT_MIN}..{port.SHIFT_MAX}, which the HLS design reads as 5-bit signed values")
            if lo < 0:
                self._warn("shift-negative-tensor", index, f"tensor shift amounts down to {lo}: a negative amount "
                           "from a tensor (a left shift) is not handled by the Chisel designs")

    def after(self, event: StepEvent) -> None:
        insn, index = event.insn, event.index
        if insn.kind == "alu":
            self._alu(index, insn)
        if insn.kind in ("gemm", "alu"):
            self._kernel(index, insn)
        if insn.kind == "load" and insn["x_size"]:
            self._load(index, insn)
        if insn.kind == "store" and insn["x_size"]:
            self._store(index, insn)
        for q, depth in event.queues.items():
            over = tuple(d for d, cap in port.TOKEN_CAPACITY.items() if depth > cap)
            if over:
                self._warn("queue-depth", None, f"token queue {q} held {depth} tokens, more than "
                           f"{', '.join(f'{d} ({port.TOKEN_CAPACITY[d]})' for d in over)} can hold", over, q)
            elif depth > port.HLS_SIM_QUEUE:
                self._warn("queue-depth-sim", None, f"token queue {q} held {depth} tokens; the HLS "
                           f"simulation top holds {port.HLS_SIM_QUEUE}, so its producer would stall there", key=q)

    def _alu(self, index: int, insn: Instruction) -> None:
        op = insn["alu_opcode"]
        if op == MUL:
            self._warn("mul", index, "MUL is not implemented by the HLS and Chisel hardware designs")
        if not insn["use_imm"]:
            return
        imm = insn["imm"]
        if op == SHR and not port.SHIFT_MIN <= imm <= port.SHIFT_MAX:
            self._warn("shift-range", index, f"shift by {imm} is outside {port.SHIFT_MIN}..{port.SHIFT_MAX}")
        if op in ZERO_EXTENDED and imm < 0:
            self._warn("imm-zero-extend", index, f"the immediate {imm} is read as {imm & 0xFFFF} by the 2019 "
                       "Chisel core")
        if self.machine.plans.count(insn) > 0 and not _src_is_dst(self.machine.state, insn):
            self._warn("imm-src", index, "an ALU instruction with an immediate whose src differs from its dst "
                       "(micro-ops or loop factors): the 2021 Chisel design computes op(acc[src], imm) into "
                       "acc[dst]; give it src == dst")

    def _kernel(self, index: int, insn: Instruction) -> None:
        state = self.machine.state
        bgn, end = insn["uop_bgn"], insn["uop_end"]
        if self._portable_uops and end > port.UOP_ENTRIES and end > bgn:
            self._warn("uop-capacity", index, f"micro-ops {bgn}..{end - 1} reach past entry "
                       f"{port.UOP_ENTRIES - 1}")
        dst = state.uop_dst[bgn:min(end, state.uop_dst.size)]
        self._check_list(index, bgn, dst)
        if self.machine.plans.count(insn) > 0:
            reads = not (insn.kind == "gemm" and insn["reset"])
            if reads:
                self._check_distance(index, insn, bgn, dst)
            plan = self.machine.plans.plan(state, insn)
            self.acc_writer[plan.dst] = BY_COMPUTE

    def _load(self, index: int, insn: Instruction) -> None:
        mtype = insn["memory_type"]
        pads = any(insn[f] for f in ("x_pad_0", "x_pad_1", "y_pad_0", "y_pad_1"))
        if pads and mtype in (WGT, UOP):
            self._warn("pad-ignored", index, f"the HLS design ignores padding on {isa.MEM_TYPE_DUMP[mtype]} loads")
        if port.rowless_load(insn["y_size"], insn["x_size"]):
            self._warn("load-no-rows", index, f"{isa.MEM_TYPE_DUMP[mtype]} load of no rows (y_size 0, x_size "
                       f"{insn['x_size']}) never completes on the 2021 Chisel design; give zeros another way (a "
                       "y_size 1 load of a zero row, one padding row fewer)")
        if mtype == ACC8:
            self._warn("acc8", index, "ACC_8BIT loads exist only in the behavioral simulator and the Intel OpenCL "
                       "design")
        if mtype == UOP and self._portable_uops:
            top = insn["sram_base"] + loaded_elements(insn)
            if top > port.UOP_ENTRIES:
                self._warn("uop-capacity", index, f"writes micro-op entries up to {top - 1}, past "
                           f"{port.UOP_ENTRIES - 1}")
        if mtype in (ACC, ACC8):
            self.acc_writer[insn["sram_base"] : insn["sram_base"] + loaded_elements(insn)] = BY_LOAD

    def _store(self, index: int, insn: Instruction) -> None:
        lo = insn["sram_base"]
        writers = self.acc_writer[lo : lo + insn["x_size"] * insn["y_size"]]
        if (writers != BY_COMPUTE).any():
            what = "were loaded but never touched by GEMM/ALU" if (writers == BY_LOAD).any() else (
                "were never written by GEMM/ALU")
            self._warn("stale-store", index, f"accumulator entries {what}; hardware stores from a separate "
                       "output buffer that only GEMM/ALU write (copy with ALU '>> 0' first)")

    def _check_list(self, index: int, bgn: int, dst: np.ndarray) -> None:
        """The runtime's rule: no micro-op of a kernel has the dst of either of the two before it in the list."""
        key = (self.machine.state.uop_generation, bgn, bgn + dst.size)
        if key not in self._lists:
            self._lists[key] = port.list_hazard(dst.tolist())
        hit = self._lists[key]
        if hit:
            a, b = hit
            apart = "adjacent" if b - a == 1 else "one apart"
            self._warn("uop-list-hazard", index, f"micro-ops {bgn + a} and {bgn + b} ({apart} in the list) both "
                       f"write acc[{int(dst[b])}]; the VTA runtime refuses a micro-op kernel that repeats the dst "
                       "of either of the two micro-ops before one")

    def _check_distance(self, index: int, insn: Instruction, bgn: int, dst: np.ndarray) -> None:
        """No execution reads an accumulator element that one of the two executions before it wrote."""
        state = self.machine.state
        end = bgn + dst.size
        tensor_alu = insn.kind == "alu" and not insn["use_imm"]
        key = (state.uop_generation, bgn, end, insn.kind == "gemm", tensor_alu,
               *(insn[f] for f in ("iter_out", "iter_in", "dst_factor_out", "dst_factor_in", "src_factor_out",
                                   "src_factor_in")))
        if key not in self._hazards:
            src = state.uop_src[bgn:end].tolist() if tensor_alu else None
            self._hazards[key] = port.acc_hazard(
                dst.tolist(), src, insn["iter_out"], insn["iter_in"], (insn["dst_factor_out"], insn["dst_factor_in"]),
                (insn["src_factor_out"], insn["src_factor_in"]))
        hazard = self._hazards[key]
        if hazard is None:
            return
        (wi, wj, wu), (ri, rj, ru) = hazard.writer, hazard.reader
        reads = "accumulates into" if insn.kind == "gemm" else (
            "reads" if hazard.via == "src" else "reads and writes")
        apart = "the next execution" if hazard.distance == 1 else f"{hazard.distance} executions later"
        self._warn("acc-distance", index, f"micro-op {bgn + wu} of iteration ({wi}, {wj}) writes "
                   f"acc[{hazard.element}] and {apart}, micro-op {bgn + ru} of iteration ({ri}, {rj}), {reads} it "
                   f"(via {hazard.via}); executions on one element must be at least {port.MIN_ACC_DISTANCE} apart",
                   hazard.designs(insn.kind == "gemm"))

    def report(self) -> list[Warning_]:
        """Warnings and notes in order of instruction (global ones first)."""
        return sorted(self.warnings.values(), key=lambda w: (-1 if w.index is None else w.index, w.rule))


def _src_is_dst(state, insn: Instruction) -> bool:
    """Whether every execution's src index equals its dst index (micro-ops and the loops that run)."""
    bgn, end = insn["uop_bgn"], insn["uop_end"]
    if not np.array_equal(state.uop_src[bgn:end], state.uop_dst[bgn:end]):
        return False
    return all(insn[f"src_factor_{w}"] == insn[f"dst_factor_{w}"] for w, n in (("out", insn["iter_out"]),
                                                                                  ("in", insn["iter_in"])) if n > 1)

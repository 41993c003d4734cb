"""From the tiled schedule to a VTA program: instructions, micro-ops, DRAM image, tokens.

Steps become instructions in schedule order. Micro-op kernels are stored once
each in the micro-op table and loaded into the micro-op buffer when a GEMM or
ALU instruction needs one that is not resident (a bump allocator that starts
over when full). DRAM tensors get page-aligned segments; layers chained
through DRAM get a compute-stage fence between a STORE and a later LOAD of the
same tensor. Finally the token pass (tokens.py) sets every dependency flag,
and FINISH waits for the last load and the last store.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vtacc.schedule.layouts import DramTensor
from vtacc.schedule.steps import ACC, INP, WGT, Alu, Gemm, Group, Kernel, Load, Store
from vtasm import isa
from vtasm import portability as port
from vtasm.columns import encoded_stream
from vtasm.config import VTAConfig
from vtasm.encoding import Instruction, MicroOp, blank_fields, make_instruction
from vtasm.errors import CompileError, EncodeError
from vtasm.program import DumpRange, Program, Segment, SourceLoc, TensorInfo

from .tokens import Access, assign_tokens, dependencies

PAGE = 4096
UOP_BATCH = 512  # micro-ops one LOAD UOP may bring ahead of their first use
MEM = {INP: isa.MEM_TYPES["inp"], WGT: isa.MEM_TYPES["wgt"], ACC: isa.MEM_TYPES["acc"]}
ALU_OP = isa.ALU_OPS


@dataclass
class Emitted:
    """One instruction with where it came from (for comments and the source map)."""

    insn: Instruction
    access: Access
    group: int | None
    note: str = ""


@dataclass
class Generated:
    """The program with, per instruction, where it came from, and the schedule it was generated from."""

    program: Program
    emitted: list[Emitted]
    groups: list[Group]
    stats: dict = field(default_factory=dict)


def _align(n: int, align: int = PAGE) -> int:
    return (n + align - 1) // align * align


class _Builder:
    def __init__(self, cfg: VTAConfig, tensors: list[DramTensor], constants: dict[str, bytes]):
        self.cfg = cfg
        self.tensors = {t.name: t for t in tensors}
        self.segments: list[Segment] = []
        align = cfg.dram_align  # every element size divides it, so element addresses are exact
        addr = align
        for t in tensors:
            data = constants.get(t.name, bytes(t.nbytes))
            self.segments.append(Segment(t.name, addr, data))
            addr = _align(addr + max(t.nbytes, 1), align)
        self.seg_addr = {s.name: s.addr for s in self.segments}
        self.data_end = addr
        self.table: dict[tuple, int] = {}  # kernel uops -> index in the micro-op table
        self.uops: list[MicroOp] = []
        self.resident: dict[tuple, int] = {}  # kernel uops -> micro-op buffer slot
        self.labels: dict[str, int] = {}  # micro-op table labels, one per kernel
        self.order: list[tuple] = []  # kernels in table order
        self.position: dict[tuple, int] = {}  # kernel -> its place in that order
        self.uop_next = 0
        self.out: list[Emitted] = []
        self.last = dict.fromkeys(isa.STAGES, -1)
        self.dram_state: dict[str, set[str]] = {}  # tensor -> stages that touched it since the last fence
        self.uop_loads = 0
        self.uop_entries = port.portable_uop_entries(cfg.uop_depth)  # what every measured design's buffer holds

    # -- helpers --------------------------------------------------------------
    def emit(self, insn: Instruction, access: Access, group: int | None, note: str = "") -> None:
        self.last[access.stage] = len(self.out)  # the stage's last instruction so far (FINISH waits for it)
        self.out.append(Emitted(insn, access, group, note))  # fields are checked at once when the program is done

    def dram_base(self, tensor: str, elem_bytes: int, elem: int) -> int:
        """The DRAM field value (in elements) of element ``elem`` of a tensor."""
        addr = self.seg_addr[tensor]
        if addr % elem_bytes:
            raise CompileError(f"internal error: segment {tensor} at 0x{addr:x} is not aligned to {elem_bytes} bytes")
        return addr // elem_bytes + elem

    def _fence_if_needed(self, tensor: str, stage: str, group: int | None) -> None:
        seen = self.dram_state.setdefault(tensor, set())
        other = {"load": "store", "store": "load"}.get(stage)
        if other in seen:
            nop = make_instruction("load", memory_type=isa.MEM_TYPES["uop"])
            buf = f"dram:{tensor}"
            self.emit(nop, Access("compute", [(buf, 0, 0)], [(buf, 0, 0)], fence=True), group,
                      f"fence: {tensor} passes between the store and load stages through DRAM")
            seen.clear()
        seen.add(stage)

    def register(self, kernel: Kernel, kind: str) -> None:
        """Give a kernel its place in the micro-op table (first use first; a pre-pass calls this in step order)."""
        key = kernel.uops
        if len(key) > self.uop_entries:
            raise CompileError(f"a micro-op kernel of {len(key)} micro-ops exceeds the micro-op buffer "
                               f"({self.uop_entries} entries{self._uop_note()})")
        if key not in self.table:
            self.table[key] = len(self.uops)
            self.labels[f"{kind}{len(self.labels)}"] = len(self.uops)
            self.uops += [MicroOp(*u) for u in key]
            self.position[key] = len(self.order)
            self.order.append(key)

    def _uop_note(self) -> str:
        return f", the portable part of {self.cfg.uop_depth}" if self.uop_entries < self.cfg.uop_depth else ""

    def _uop_slot(self, kernel: Kernel, group: int | None) -> int:
        """The micro-op buffer slot of a kernel, loading it first if it is not resident.

        A kernel goes to the slot equal to its index in the micro-op table when it
        fits there, so the assembly's labels name buffer slots too; one load then
        brings it with the kernels that follow it in the table (first used next),
        up to UOP_BATCH micro-ops, so a run of kernels pays the memory latency
        once. Tables larger than the buffer fall back to a cyclic allocator that
        evicts what it overlaps.
        """
        key = kernel.uops
        if key in self.resident:
            return self.resident[key]
        index, n = self.table[key], len(key)
        keys = [key]
        if index + n <= self.uop_entries:
            slot = index
            k = self.position[key] + 1
            while k < len(self.order):  # the kernels after it in the table, while they fit the batch and buffer
                nxt = self.order[k]
                end = self.table[nxt] + len(nxt)
                if end > self.uop_entries or end - index > max(UOP_BATCH, n):
                    break
                keys.append(nxt)
                n = end - index
                k += 1
        else:
            if self.uop_next + n > self.uop_entries:
                self.uop_next = 0
            slot = self.uop_next
            self.uop_next += n
        for other, at in list(self.resident.items()):
            if at < slot + n and slot < at + len(other):
                del self.resident[other]
        for got in keys:
            self.resident[got] = slot + self.table[got] - index
        dram = self.data_end // self.cfg.uop_elem_bytes + index
        insn = make_instruction("load", memory_type=isa.MEM_TYPES["uop"], sram_base=slot, dram_base=dram,
                                y_size=1, x_size=n, x_stride=n)
        self.emit(insn, Access("compute", [], [("uop", slot, slot + n - 1)]), group, "")
        self.uop_loads += 1
        return slot

    # -- steps ----------------------------------------------------------------
    def load(self, step: Load, group: int) -> None:
        mtype = MEM[step.buffer]
        stage = isa.stage_of(isa.OPCODES["load"], mtype)
        self._fence_if_needed(step.tensor, stage, group)
        d = step.dma
        eb = isa.elem_bytes(self.cfg, mtype)
        fields = blank_fields("load")
        fields.update(memory_type=mtype, sram_base=d.sram, dram_base=self.dram_base(step.tensor, eb, d.dram_elem),
                      y_size=d.y, x_size=d.x, x_stride=d.stride, y_pad_0=d.pads[0], y_pad_1=d.pads[1],
                      x_pad_0=d.pads[2], x_pad_1=d.pads[3])
        insn = Instruction("load", fields)
        access = Access(stage, [(f"dram:{step.tensor}", 0, 0)], [(step.buffer, d.sram, d.sram + d.sram_elems - 1)])
        self.emit(insn, access, group)

    def store(self, step: Store, group: int) -> None:
        self._fence_if_needed(step.tensor, "store", group)
        d = step.dma
        eb = self.cfg.out_elem_bytes
        fields = blank_fields("store")
        fields.update(memory_type=isa.MEM_TYPES["out"], sram_base=d.sram,
                      dram_base=self.dram_base(step.tensor, eb, d.dram_elem), y_size=d.y, x_size=d.x, x_stride=d.stride)
        insn = Instruction("store", fields)
        access = Access("store", [(ACC, d.sram, d.sram + d.y * d.x - 1)], [(f"dram:{step.tensor}", 0, 0)])
        self.emit(insn, access, group)

    def compute(self, step: Gemm | Alu, group: int) -> None:
        k = step.kernel
        slot = self._uop_slot(k, group)
        end = slot + len(k.uops)
        dst_lo, dst_hi = k.indices(0)
        reads = [("uop", slot, end - 1)]
        writes = [(ACC, dst_lo, dst_hi)]
        if type(step) is Gemm:
            fields = blank_fields("gemm")
            fields.update(reset=int(step.reset), uop_bgn=slot, uop_end=end, iter_out=k.iter_out, iter_in=k.iter_in,
                          dst_factor_out=k.dst[0], dst_factor_in=k.dst[1], src_factor_out=k.src[0],
                          src_factor_in=k.src[1], wgt_factor_out=k.wgt[0], wgt_factor_in=k.wgt[1])
            insn = Instruction("gemm", fields)
            if not step.reset:
                src_lo, src_hi = k.indices(1)
                wgt_lo, wgt_hi = k.indices(2)
                reads += [(INP, src_lo, src_hi), (WGT, wgt_lo, wgt_hi)]
        else:
            imm = step.imm
            fields = blank_fields("alu")
            fields.update(alu_opcode=ALU_OP[step.op], use_imm=int(imm is not None), imm=imm if imm is not None else 0,
                          uop_bgn=slot, uop_end=end, iter_out=k.iter_out, iter_in=k.iter_in, dst_factor_out=k.dst[0],
                          dst_factor_in=k.dst[1], src_factor_out=k.src[0], src_factor_in=k.src[1])
            insn = Instruction("alu", fields)
            reads.append((ACC, dst_lo, dst_hi))
            if imm is None:
                src_lo, src_hi = k.indices(1)
                reads.append((ACC, src_lo, src_hi))
        self.emit(insn, Access("compute", reads, writes), group)


def generate(groups: list[Group], tensors: list[DramTensor], constants: dict[str, bytes], outputs: list[str],
             cfg: VTAConfig, source_name: str) -> Generated:
    """Encode a tiled schedule as a complete Program with dependency tokens."""
    b = _Builder(cfg, tensors, constants)
    for group in groups:  # the micro-op table in first-use order, so loads can bring the next kernels along
        for step in group.steps:
            if isinstance(step, (Gemm, Alu)):
                b.register(step.kernel, "gemm" if isinstance(step, Gemm) else "alu")
    for gi, group in enumerate(groups):
        for step in group.steps:
            if isinstance(step, Load):
                b.load(step, gi)
            elif isinstance(step, Store):
                b.store(step, gi)
            else:
                b.compute(step, gi)
    last = dict(b.last)
    b.emit(make_instruction("finish"), Access("compute"), None, "end of program")
    # the micro-op buffer is loaded and read by the compute stage alone (isa.stage_of; tested): no token
    # guards it
    sizes = {INP: cfg.inp_depth, WGT: cfg.wgt_depth, ACC: cfg.acc_depth}
    sizes.update({f"dram:{t.name}": 1 for t in tensors})
    deps = dependencies([e.access for e in b.out], sizes)
    deps[-1] = {s: last[s] for s in ("load", "store") if last[s] >= 0}
    flags = assign_tokens([e.access.stage for e in b.out], deps)
    for e, f in zip(b.out, flags, strict=True):
        e.insn.fields.update(f)
    try:  # encoded once, every field in range checked over the whole stream (the encoder's own check)
        stream = encoded_stream([e.insn for e in b.out], cfg)
    except EncodeError as exc:
        raise CompileError(f"internal limit: {exc.message}") from None
    uop_addr = b.data_end
    insn_addr = _align(uop_addr + 4 * len(b.uops)) if b.uops else uop_addr
    source_map = {}
    located: dict[int | None, SourceLoc | None] = {None: None}  # one SourceLoc per group, shared by its instructions
    for i, e in enumerate(b.out):
        loc = located.get(e.group, False)
        if loc is False:
            span = groups[e.group].span
            loc = located[e.group] = SourceLoc(source_name, span.line) if span is not None else None
        if loc is not None:
            source_map[i] = loc
    infos: list[TensorInfo] = [t.tensor_info() for t in tensors if not t.constant]
    dumps = [DumpRange(b.seg_addr[name], tensors_by(tensors, name).nbytes, f"{name}.bin") for name in outputs]
    program = Program(cfg, stream, b.uops, insn_addr, uop_addr, b.segments, infos, dumps,
                      uop_labels=dict(b.labels), source_map=source_map)
    stats = {"uop_loads": b.uop_loads, "kernels": len(b.table)}
    return Generated(program, b.out, groups, stats)


def tensors_by(tensors: list[DramTensor], name: str) -> DramTensor:
    """The tensor of that name."""
    for t in tensors:
        if t.name == name:
            return t
    raise KeyError(name)


def identity_bytes(cfg: VTAConfig, negate: bool = False) -> bytes:
    """One weight element holding the (negated) identity: row o has a 1 (or -1) in column o."""
    eye = np.eye(cfg.block_out, cfg.block_in, dtype=np.int8)
    return (-eye if negate else eye).astype(np.int8).tobytes()

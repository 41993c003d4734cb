"""The VTA runtime's debug listing of instructions and micro-ops (isa.md section 6).

:func:`dump_instructions` prints a stream the way the runtime's instruction
dump does, queue counters included; :func:`format_instruction` prints one
block with whatever counters the caller gives (the simulator's trace passes
its real queue occupancy), and :func:`count_tokens` applies the runtime's
counting rule. Field values are read by their ISA names; templates name them.
"""

from __future__ import annotations

from collections.abc import Sequence

from vtasm import isa
from vtasm.config import default_config
from vtasm.encoding import Instruction, MicroOp, codec_for
from vtasm.program import Program

_DEP = "\tdep - pop prev: {pop_prev}, pop next: {pop_next}, push prev: {push_prev}, push next: {push_next}\n"
_MEM = (
    "\tDRAM: 0x{dram_base:08x}, SRAM:0x{sram_base:04x}\n"
    "\ty: size={y_size}, pad=[{y_pad_0}, {y_pad_1}]\n"
    "\tx: size={x_size}, stride={x_stride}, pad=[{x_pad_0}, {x_pad_1}]\n"
)
_RANGE = "\treset_out: {reset}\n\trange ({uop_bgn}, {uop_end})\n"
_GEMM = _RANGE + (
    "\touter loop - iter: {iter_out}, wgt: {wgt_factor_out}, inp: {src_factor_out}, acc: {dst_factor_out}\n"
    "\tinner loop - iter: {iter_in}, wgt: {wgt_factor_in}, inp: {src_factor_in}, acc: {dst_factor_in}\n"
)
_ALU = _RANGE + (
    "\touter loop - iter: {iter_out}, dst: {dst_factor_out}, src: {src_factor_out}\n"
    "\tinner loop - iter: {iter_in}, dst: {dst_factor_in}, src: {src_factor_in}\n"
)
# The body printed after the header (and dep line) of each kind.
BODY_TEMPLATES = {"load": _MEM, "store": _MEM, "gemm": _GEMM, "alu": _ALU}
_QUEUES = "\tl2g_queue = {l2g}, g2l_queue = {g2l}\n\ts2g_queue = {s2g}, g2s_queue = {g2s}\n"

# ALU operations the runtime prints with " imm" when use_imm is set.
_IMM_NAMED_OPS = ("min", "max", "add")
# The head (opcode and flags) sits at the same bits in every configuration.
_HEAD = tuple(isa.place_fields(isa.HEAD, default_config(), isa.WORD_BITS))


def new_queues() -> dict[str, int]:
    """All four queue counters at zero."""
    return {q: 0 for q in isa.QUEUES}


def alu_op_name(alu_opcode: int, use_imm: int) -> str:
    """The runtime's name of an ALU operation ('add imm', 'shr', 'unknown op', ...)."""
    name = isa.ALU_OP_NAMES.get(alu_opcode)
    if name is None:
        return "unknown op"
    return f"{name} imm" if use_imm and name in _IMM_NAMED_OPS else name


def _head_of(raw: bytes) -> dict[str, int]:
    word = int.from_bytes(raw, "little")
    return {f.name: (word >> f.offset) & ((1 << f.width) - 1) for f in _HEAD}


def _view(insn: Instruction) -> tuple[str | None, dict[str, int]]:
    """The kind to print an instruction as (None: undecodable) and its field values.

    A raw instruction with a known opcode whose fields are all known prints as
    that kind, as the runtime would (it ignores unused bits).
    """
    if insn.raw is None:
        return insn.kind, insn.fields
    fields = insn.fields if "opcode" in insn.fields else _head_of(insn.raw)
    spec = isa.KIND_BY_OPCODE.get(fields["opcode"])
    if spec is not None and all(f.name in fields for f in spec.fields):
        return spec.name, fields
    return None, fields


def _is_nop(kind: str | None, fields: dict[str, int]) -> bool:
    return kind in ("load", "store") and fields["x_size"] == 0


def count_tokens(insn: Instruction, queues: dict[str, int]) -> dict[str, int]:
    """The runtime's counters after an instruction: new dict, ``queues`` is not changed.

    LOAD, STORE, GEMM and ALU count each flag against the queue their stage
    connects it to (flags the stage has no queue for are ignored); FINISH and
    undecodable instructions change nothing.
    """
    out = dict(queues)
    kind, fields = _view(insn)
    if kind not in ("load", "store", "gemm", "alu"):
        return out
    stage = isa.stage_of(fields["opcode"], fields.get("memory_type", 0))
    for flag, queue in isa.STAGE_QUEUES[stage].items():
        if queue is not None and fields[flag]:
            out[queue] += 1 if flag.startswith("push") else -1
    return out


def format_header(insn: Instruction) -> str:
    """The text after 'INSTRUCTION i: ' (LOAD INP, STORE:, GEMM, ALU - add, NOP-..., ...)."""
    kind, fields = _view(insn)
    if kind is None:
        return f"UNKNOWN (opcode {fields['opcode']})"
    if _is_nop(kind, fields):
        stage = isa.stage_of(fields["opcode"], fields["memory_type"])
        return {
            isa.STORE_STAGE: "NOP-STORE-STAGE",
            isa.COMPUTE_STAGE: "NOP-COMPUTE-STAGE",
            isa.LOAD_STAGE: "NOP-MEMORY-STAGE",
        }[stage]
    if kind == "load":
        mem = fields["memory_type"]
        return f"LOAD {isa.MEM_TYPE_DUMP.get(mem, str(mem))}"
    if kind == "alu":
        return f"ALU - {alu_op_name(fields['alu_opcode'], fields['use_imm'])}"
    return {"store": "STORE:", "gemm": "GEMM", "finish": "FINISH"}[kind]


def format_queues(queues: dict[str, int]) -> str:
    """The two queue-counter lines."""
    return _QUEUES.format(**queues)


def format_instruction(index: int, insn: Instruction, queues: dict[str, int]) -> str:
    """One block of the runtime's dump: header, dep line, fields, then ``queues``."""
    kind, fields = _view(insn)
    text = f"INSTRUCTION {index}: {format_header(insn)}\n"
    if kind is not None and kind != "finish":
        text += _DEP.format(**fields)
        if not _is_nop(kind, fields):
            text += BODY_TEMPLATES[kind].format(**fields)
    return text + format_queues(queues)


def dump_instructions(program_or_insns: Program | Sequence[Instruction]) -> str:
    """The runtime's listing of an instruction stream, with running queue counters."""
    if isinstance(program_or_insns, Program):
        codec = codec_for(program_or_insns.config)
        insns = [i if i.raw is None else codec.decode(i.raw) for i in program_or_insns.instructions]
    else:
        insns = list(program_or_insns)
    parts = [f"There are {len(insns)} instructions\n"]
    queues = new_queues()
    for index, insn in enumerate(insns):
        queues = count_tokens(insn, queues)
        parts.append(format_instruction(index, insn, queues))
    return "".join(parts)


def dump_uops(uops: Sequence[MicroOp]) -> str:
    """The runtime's listing of a micro-op kernel, ending with an empty line."""
    lines = [f"There are {len(uops)} uops\n"]
    lines += [f"[{i:04d}]\t acc={u.dst_idx}, inp={u.src_idx}, wgt={u.wgt_idx}\n" for i, u in enumerate(uops)]
    lines.append("\n")
    return "".join(lines)

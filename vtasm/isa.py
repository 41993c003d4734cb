"""The VTA instruction set, declared once as data (isa.md sections 2, 3 and 5).

Everything that reads or writes instructions (encoder, decoder, assembler,
disassembler, dumps, the simulator's dispatch) is driven by these tables:
instruction kinds with their ordered fields and widths (functions of the
configuration), the enumerations, the pipeline stage of each instruction and
the token queue behind each dependency flag.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # isa.py is a leaf: the configuration module reads these tables, not the reverse
    from .config import VTAConfig

Width = Callable[["VTAConfig"], int]


def _fixed(n: int) -> Width:
    return lambda cfg: n


@dataclass(frozen=True)
class FieldSpec:
    """One bit-field: name as in the spec, width for a configuration, signedness."""

    name: str
    width: Width
    signed: bool = False


@dataclass(frozen=True)
class KindSpec:
    """One instruction layout: its name, opcode(s) and ordered fields."""

    name: str
    opcode: int
    fields: tuple[FieldSpec, ...]


# -- enumerations (one direction; reverse maps computed) ---------------------

OPCODES = {"load": 0, "store": 1, "gemm": 2, "finish": 3, "alu": 4}
MEM_TYPES = {"uop": 0, "wgt": 1, "inp": 2, "acc": 3, "out": 4, "acc8": 5}
ALU_OPS = {"min": 0, "max": 1, "add": 2, "shr": 3, "mul": 4}

MEM_TYPE_NAMES = {v: k for k, v in MEM_TYPES.items()}
ALU_OP_NAMES = {v: k for k, v in ALU_OPS.items()}

# Names the runtime's debug dump uses for memory types (isa.md section 6).
MEM_TYPE_DUMP = {0: "UOP", 1: "WGT", 2: "INP", 3: "ACC", 4: "OUT", 5: "ACC_8BIT"}

# -- field widths ------------------------------------------------------------


def _uop_depth(cfg: VTAConfig) -> int:
    return cfg.log_uop_depth


def _uop_depth_plus1(cfg: VTAConfig) -> int:
    return cfg.log_uop_depth + 1


def _acc_depth(cfg: VTAConfig) -> int:
    return cfg.log_acc_depth


def _inp_depth(cfg: VTAConfig) -> int:
    return cfg.log_inp_depth


def _wgt_depth(cfg: VTAConfig) -> int:
    return cfg.log_wgt_depth


def _src_uop(cfg: VTAConfig) -> int:
    return max(cfg.log_acc_depth, cfg.log_inp_depth)


HEAD = (
    FieldSpec("opcode", _fixed(3)),
    FieldSpec("pop_prev", _fixed(1)),
    FieldSpec("pop_next", _fixed(1)),
    FieldSpec("push_prev", _fixed(1)),
    FieldSpec("push_next", _fixed(1)),
)

MEM_FIELDS = HEAD + (
    FieldSpec("memory_type", _fixed(3)),
    FieldSpec("sram_base", _fixed(16)),
    FieldSpec("dram_base", _fixed(32)),
    FieldSpec("y_size", _fixed(16)),
    FieldSpec("x_size", _fixed(16)),
    FieldSpec("x_stride", _fixed(16)),
    FieldSpec("y_pad_0", _fixed(4)),
    FieldSpec("y_pad_1", _fixed(4)),
    FieldSpec("x_pad_0", _fixed(4)),
    FieldSpec("x_pad_1", _fixed(4)),
)

_LOOP = (
    FieldSpec("reset", _fixed(1)),
    FieldSpec("uop_bgn", _uop_depth),
    FieldSpec("uop_end", _uop_depth_plus1),
    FieldSpec("iter_out", _fixed(14)),
    FieldSpec("iter_in", _fixed(14)),
)

GEMM_FIELDS = HEAD + _LOOP + (
    FieldSpec("dst_factor_out", _acc_depth),
    FieldSpec("dst_factor_in", _acc_depth),
    FieldSpec("src_factor_out", _inp_depth),
    FieldSpec("src_factor_in", _inp_depth),
    FieldSpec("wgt_factor_out", _wgt_depth),
    FieldSpec("wgt_factor_in", _wgt_depth),
)

ALU_FIELDS = HEAD + _LOOP + (
    FieldSpec("dst_factor_out", _acc_depth),
    FieldSpec("dst_factor_in", _acc_depth),
    FieldSpec("src_factor_out", _acc_depth),
    FieldSpec("src_factor_in", _acc_depth),
    FieldSpec("alu_opcode", _fixed(3)),
    FieldSpec("use_imm", _fixed(1)),
    FieldSpec("imm", _fixed(16), signed=True),
)

KINDS: dict[str, KindSpec] = {
    "load": KindSpec("load", OPCODES["load"], MEM_FIELDS),
    "store": KindSpec("store", OPCODES["store"], MEM_FIELDS),
    "gemm": KindSpec("gemm", OPCODES["gemm"], GEMM_FIELDS),
    "alu": KindSpec("alu", OPCODES["alu"], ALU_FIELDS),
    "finish": KindSpec("finish", OPCODES["finish"], HEAD),
}
KIND_BY_OPCODE = {spec.opcode: spec for spec in KINDS.values()}

UOP_FIELDS = (
    FieldSpec("dst_idx", _acc_depth),
    FieldSpec("src_idx", _src_uop),
    FieldSpec("wgt_idx", _wgt_depth),
)

INSN_BITS = 128
UOP_BITS = 32
WORD_BITS = 64  # instruction bit-fields are declared over uint64_t words
UOP_WORD_BITS = 32  # micro-op bit-fields over uint32_t


@dataclass(frozen=True)
class PlacedField:
    """A field with its position: bit offset from the least significant bit."""

    name: str
    offset: int
    width: int
    signed: bool

    @property
    def max_value(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1

    @property
    def min_value(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0


def place_fields(fields: tuple[FieldSpec, ...], cfg: VTAConfig, word_bits: int) -> list[PlacedField]:
    """Lay fields out as C bit-fields do: LSB first, never straddling a storage word."""
    placed = []
    pos = 0
    for spec in fields:
        width = spec.width(cfg)
        if pos % word_bits + width > word_bits:
            pos = (pos // word_bits + 1) * word_bits
        placed.append(PlacedField(spec.name, pos, width, spec.signed))
        pos += width
    return placed


@lru_cache(maxsize=64)
def layout(kind: str, cfg: VTAConfig) -> tuple[PlacedField, ...]:
    """The placed fields of an instruction kind (or 'uop') for a configuration."""
    if kind == "uop":
        return tuple(place_fields(UOP_FIELDS, cfg, UOP_WORD_BITS))
    return tuple(place_fields(KINDS[kind].fields, cfg, WORD_BITS))


# What sizes each configuration-dependent field, for the advice on a configuration that does not fit.
_SIZED_BY: dict[Width, str] = {
    _uop_depth: "log2 of the uop depth",
    _uop_depth_plus1: "log2 of the uop depth, plus 1",
    _acc_depth: "log2 of the acc depth",
    _inp_depth: "log2 of the inp depth",
    _wgt_depth: "log2 of the wgt depth",
    _src_uop: "log2 of the larger of the inp and acc depths",
}
BUFF_KEYS = ("LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE", "LOG_ACC_BUFF_SIZE")


def check_layouts_fit(cfg: VTAConfig) -> str | None:
    """Why the configuration's micro-op or instructions overflow and which buffer size to lower, or None."""
    problem = _overflow(cfg)
    return None if problem is None else f"{problem}; {_advice(cfg)}"


def _overflow(cfg: VTAConfig) -> str | None:
    widths = {spec.name: spec.width(cfg) for spec in UOP_FIELDS}
    total = sum(widths.values())
    if total > UOP_BITS:
        return f"micro-op needs {total} bits but must fit {UOP_BITS}: {_sized_fields(UOP_FIELDS, cfg, ' + ')}"
    for name, spec in KINDS.items():
        for f in place_fields(spec.fields, cfg, WORD_BITS):
            if f.offset + f.width > INSN_BITS:
                return (
                    f"{name.upper()} instruction needs more than {INSN_BITS} bits: field "
                    f"{f.name} ({f.width} bits) would end at bit {f.offset + f.width} "
                    f"(the fields the configuration sizes: {_sized_fields(spec.fields, cfg, ', ')})"
                )
    return None


def _sized_fields(fields: tuple[FieldSpec, ...], cfg: VTAConfig, sep: str) -> str:
    """``dst_idx 12 bits (log2 of the acc depth) + ...``: each configuration-sized field and what sizes it."""
    groups: dict[Width, list[str]] = {}
    for spec in fields:
        if spec.width in _SIZED_BY:
            groups.setdefault(spec.width, []).append(spec.name)
    return sep.join(f"{'/'.join(names)} {width(cfg)} bits ({_SIZED_BY[width]})" for width, names in groups.items())


def _advice(cfg: VTAConfig) -> str:
    """Which single LOG_*_BUFF_SIZE value, lowered how far, makes every layout fit."""
    fixes = []  # (how much lower, advice), the smallest change first
    for key in BUFF_KEYS:
        attr, depth = key.lower(), f"log_{key.split('_')[1].lower()}_depth"
        for value in range(getattr(cfg, attr) - 1, -1, -1):
            smaller = replace(cfg, **{attr: value})
            if getattr(smaller, depth) < 1:  # the buffer must keep at least two elements
                break
            if _overflow(smaller) is None:
                fixes.append((getattr(cfg, attr) - value, f"{key} to {value}"))
                break
    if not fixes:
        return f"no single buffer size is enough: lower several of {', '.join(BUFF_KEYS)}"
    text = "lower " + " or ".join(advice for _, advice in sorted(fixes))
    src_from_acc = cfg.log_acc_depth >= cfg.log_inp_depth
    if _overflow(cfg).startswith("micro-op") and src_from_acc and not any("INP" in f for _, f in fixes):
        text += " (lowering LOG_INP_BUFF_SIZE alone cannot help: src_idx follows the larger acc depth)"
    return text


# -- micro-op executions ----------------------------------------------------------


def counted_executions(f):
    """A GEMM or ALU instruction's micro-op executions as VTA counts them: iter_out x iter_in x
    (uop_end - uop_bgn), negative for a reversed range. ``f``: an instruction or its fields (a number), or
    stream columns (vtasm.columns: an array, one count per instruction)."""
    get = f.column if hasattr(f, "column") else f.__getitem__
    return get("iter_out") * get("iter_in") * (get("uop_end") - get("uop_bgn"))


def executions(f):
    """The micro-op executions an instruction runs: the counted number, none for a reversed range."""
    n = counted_executions(f)
    return n * (n > 0)


# -- pipeline stages and token queues (isa.md section 5) ---------------------

LOAD_STAGE, COMPUTE_STAGE, STORE_STAGE = "load", "compute", "store"
STAGES = (LOAD_STAGE, COMPUTE_STAGE, STORE_STAGE)
QUEUES = ("l2g", "g2l", "s2g", "g2s")
FLAGS = ("pop_prev", "pop_next", "push_prev", "push_next")

# For each stage, the queue behind each dependency flag (None: the stage has none).
STAGE_QUEUES: dict[str, dict[str, str | None]] = {
    LOAD_STAGE: {"pop_prev": None, "pop_next": "g2l", "push_prev": None, "push_next": "l2g"},
    COMPUTE_STAGE: {"pop_prev": "l2g", "pop_next": "s2g", "push_prev": "g2l", "push_next": "g2s"},
    STORE_STAGE: {"pop_prev": "g2s", "pop_next": None, "push_prev": "s2g", "push_next": None},
}

# Each queue's ends, read off the table above: queue -> (producer stage, its push flag, consumer stage, its
# pop flag). The timing model and the compiler's token pass use these, not a table of their own.
QUEUE_ENDS: dict[str, tuple[str, str, str, str]] = {
    queue: next((stage, flag) for stage, table in STAGE_QUEUES.items() for flag, q in table.items()
                if q == queue and flag.startswith("push"))
    + next((stage, flag) for stage, table in STAGE_QUEUES.items() for flag, q in table.items()
           if q == queue and flag.startswith("pop"))
    for queue in QUEUES
}

# DRAM a program addresses: 32-bit byte addresses (the simulator models that much; the compiler refuses more).
MAX_DRAM_BYTES = 1 << 32

LOAD_STAGE_MEM_TYPES = frozenset({MEM_TYPES["inp"], MEM_TYPES["wgt"]})
# The on-chip buffer a LOAD of each memory type writes (ACC_8BIT: the accumulator).
LOAD_BUFFER = {MEM_TYPES[t]: b for t, b in (("uop", "uop"), ("wgt", "wgt"), ("inp", "inp"), ("acc", "acc"),
                                              ("acc8", "acc"))}


def stage_of(opcode: int, memory_type: int = 0) -> str:
    """The pipeline stage that executes an instruction with this opcode and memory type."""
    if opcode == OPCODES["store"]:
        return STORE_STAGE
    if opcode == OPCODES["load"] and memory_type in LOAD_STAGE_MEM_TYPES:
        return LOAD_STAGE
    return COMPUTE_STAGE


def elem_bytes(cfg: VTAConfig, memory_type: int) -> int | None:
    """Bytes of one DRAM element of a memory type (None for an unknown type)."""
    return _elem_table(cfg).get(memory_type)


def load_depth(cfg: VTAConfig, memory_type: int) -> int:
    """Elements in the on-chip buffer a LOAD of this memory type writes (LOAD_BUFFER)."""
    return _depth_table(cfg)[memory_type]


@lru_cache(maxsize=16)
def _depth_table(cfg: VTAConfig) -> dict[int, int]:
    return {t: getattr(cfg, f"{buffer}_depth") for t, buffer in LOAD_BUFFER.items()}


@lru_cache(maxsize=16)
def _elem_table(cfg: VTAConfig) -> dict[int, int]:
    return {
        MEM_TYPES["uop"]: cfg.uop_elem_bytes,
        MEM_TYPES["wgt"]: cfg.wgt_elem_bytes,
        MEM_TYPES["inp"]: cfg.inp_elem_bytes,
        MEM_TYPES["acc"]: cfg.acc_elem_bytes,
        MEM_TYPES["out"]: cfg.out_elem_bytes,
        MEM_TYPES["acc8"]: cfg.acc8_elem_bytes,
    }

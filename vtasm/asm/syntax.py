"""The assembly syntax as data, shared by the assembler and the disassembler.

Mnemonics are derived from the ISA tables (:mod:`vtasm.isa`); this module adds
only what the assembly language itself decides: the short operand names and
which fields they set, their canonical order, flag words, the NOP forms, the
built-in constants and how names and strings are written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from vtasm import isa
from vtasm.config import VTAConfig

# -- mnemonics ---------------------------------------------------------------------


@dataclass(frozen=True)
class Mnemonic:
    """What a mnemonic fixes: the instruction kind and preset field values.

    ``enum_field`` is the field a bare kind takes as an operand (``memory_type``
    for ``load``/``store``, ``alu_opcode`` for ``alu``); ``enum_required`` says
    whether it must be given.
    """

    name: str
    kind: str
    preset: tuple[tuple[str, int], ...] = ()
    enum_field: str | None = None
    enum_required: bool = False


# The runtime's NOP forms (isa.md section 6): a LOAD/STORE with x_size 0.
NOPS = {
    "nop.load": ("load", isa.MEM_TYPES["inp"]),
    "nop.compute": ("load", isa.MEM_TYPES["uop"]),
    "nop.store": ("store", isa.MEM_TYPES["uop"]),
}
STORE_DEFAULT = isa.MEM_TYPES["out"]


def _mnemonics() -> dict[str, Mnemonic]:
    table: dict[str, Mnemonic] = {}
    for kind in ("load", "store"):
        for mem, code in isa.MEM_TYPES.items():
            name = f"{kind}.{mem}"
            table[name] = Mnemonic(name, kind, (("memory_type", code),))
    table["load"] = Mnemonic("load", "load", enum_field="memory_type", enum_required=True)
    table["store"] = Mnemonic("store", "store", (("memory_type", STORE_DEFAULT),), "memory_type")
    for op, code in isa.ALU_OPS.items():
        table[f"alu.{op}"] = Mnemonic(f"alu.{op}", "alu", (("alu_opcode", code),))
    table["alu"] = Mnemonic("alu", "alu", enum_field="alu_opcode", enum_required=True)
    table["gemm"] = Mnemonic("gemm", "gemm")
    table["finish"] = Mnemonic("finish", "finish")
    for name, (kind, mem) in NOPS.items():
        table[name] = Mnemonic(name, kind, (("memory_type", mem),))
    return table


MNEMONICS = _mnemonics()
UOP_MNEMONIC, UOP_RAW_MNEMONIC = "uop", "uop.raw"


def mnemonic_for(kind: str, fields: dict[str, int]) -> tuple[str, str | None]:
    """The canonical mnemonic of an instruction, and the enum field to print (if unnamed)."""
    if kind in ("load", "store"):
        mem = fields.get("memory_type", 0)
        if mem not in isa.MEM_TYPE_NAMES:
            return kind, "memory_type"
        if kind == "store" and mem == STORE_DEFAULT:
            return "store", None
        return f"{kind}.{isa.MEM_TYPE_NAMES[mem]}", None
    if kind == "alu":
        op = fields.get("alu_opcode", 0)
        if op not in isa.ALU_OP_NAMES:
            return "alu", "alu_opcode"
        return f"alu.{isa.ALU_OP_NAMES[op]}", None
    return kind, None


def nop_mnemonic(kind: str, memory_type: int) -> str | None:
    for name, key in NOPS.items():
        if key == (kind, memory_type):
            return name
    return None


# -- operands ------------------------------------------------------------------------


@dataclass(frozen=True)
class OperandSpec:
    """A short operand: its key, the field(s) it sets and its form.

    Forms: ``one`` (key=N), ``addr`` (DRAM byte address, converted to elements),
    ``pair`` (key=(A, B)), ``range`` (key=B:E), ``flag`` (bare word, sets 1),
    ``imm`` (ALU immediate: also sets use_imm = 1).
    """

    key: str
    fields: tuple[str, ...]
    form: str


_MEM = (
    OperandSpec("sram", ("sram_base",), "one"),
    OperandSpec("dram", ("dram_base",), "addr"),
    OperandSpec("y", ("y_size",), "one"),
    OperandSpec("x", ("x_size",), "one"),
    OperandSpec("stride", ("x_stride",), "one"),
    OperandSpec("ypad", ("y_pad_0", "y_pad_1"), "pair"),
    OperandSpec("xpad", ("x_pad_0", "x_pad_1"), "pair"),
)
_LOOP = (
    OperandSpec("reset", ("reset",), "flag"),
    OperandSpec("uop", ("uop_bgn", "uop_end"), "range"),
    OperandSpec("iter", ("iter_out", "iter_in"), "pair"),
    OperandSpec("dst", ("dst_factor_out", "dst_factor_in"), "pair"),
    OperandSpec("src", ("src_factor_out", "src_factor_in"), "pair"),
)

#: Short operands of each kind, in canonical order.
OPERANDS: dict[str, tuple[OperandSpec, ...]] = {
    "load": _MEM,
    "store": _MEM,
    "gemm": _LOOP + (OperandSpec("wgt", ("wgt_factor_out", "wgt_factor_in"), "pair"),),
    "alu": _LOOP + (OperandSpec("imm", ("imm",), "imm"),),
    "finish": (),
}
QUEUE_KEYS = ("pop", "push")
USE_IMM = "use_imm"

#: Micro-op operands: short key -> field.
UOP_OPERANDS = {"dst": "dst_idx", "src": "src_idx", "wgt": "wgt_idx"}


def flag_for_queue(stage: str, direction: str, queue: str) -> str | None:
    """The flag (pop_prev, ...) that moves ``queue`` in ``direction`` for a stage, if any."""
    for flag, q in isa.STAGE_QUEUES[stage].items():
        if q == queue and flag.startswith(direction + "_"):
            return flag
    return None


def stage_queues(stage: str, direction: str) -> list[str]:
    """The queues a stage pops (direction 'pop') or pushes ('push')."""
    return [q for f, q in isa.STAGE_QUEUES[stage].items() if q and f.startswith(direction + "_")]


# -- built-in constants ----------------------------------------------------------------

_BUILTIN_ATTRS = {
    "BATCH": "batch",
    "BLOCK_IN": "block_in",
    "BLOCK_OUT": "block_out",
    "BLOCK": "block_in",
    "INP_ELEM": "inp_elem_bytes",
    "WGT_ELEM": "wgt_elem_bytes",
    "ACC_ELEM": "acc_elem_bytes",
    "OUT_ELEM": "out_elem_bytes",
    "ACC8_ELEM": "acc8_elem_bytes",
    "UOP_ELEM": "uop_elem_bytes",
    "UOP_DEPTH": "uop_depth",
    "INP_DEPTH": "inp_depth",
    "WGT_DEPTH": "wgt_depth",
    "ACC_DEPTH": "acc_depth",
}
BUILTIN_NAMES = frozenset(_BUILTIN_ATTRS)


def builtins(cfg: VTAConfig) -> dict[str, int]:
    """The built-in constants of a configuration."""
    return {name: getattr(cfg, attr) for name, attr in _BUILTIN_ATTRS.items()}


# -- names and strings -------------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_identifier(name: str) -> bool:
    """Whether a name lexes as a plain word: an identifier that is not one of the grammar's keywords."""
    return bool(_IDENT.fullmatch(name)) and name not in KEYWORDS


# the words grammar.lark spells out (tile, align, from, ...): the lexer reads them as keywords, so a name or
# key spelled like one is written as a string
KEYWORDS = frozenset(re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"', (Path(__file__).with_name("grammar.lark")).read_text()))


def is_symbol_name(name: str) -> bool:
    """Whether a name can be declared and referenced as a symbol (not a built-in)."""
    return is_identifier(name) and name not in BUILTIN_NAMES


def quote(text: str) -> str:
    """A string literal (JSON escapes) for a file name or other text."""
    return json.dumps(text, ensure_ascii=False)

"""Instruction and micro-op operands: from parsed statements to field values.

The short operand names, their forms and canonical order come from
:mod:`vtasm.asm.syntax`; field names, widths and ranges from :mod:`vtasm.isa`.
Every error points at the operand (or list element) it is about.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtasm import isa
from vtasm.config import VTAConfig
from vtasm.encoding import Instruction, MicroOp, codec_for
from vtasm.errors import AsmError, SourceSpan

from . import ast
from .expr import Symbols
from .parse import suggest
from .syntax import (
    MNEMONICS,
    OPERANDS,
    QUEUE_KEYS,
    UOP_OPERANDS,
    UOP_RAW_MNEMONIC,
    USE_IMM,
    OperandSpec,
    flag_for_queue,
    stage_queues,
)

_EXPR_TYPES = (ast.Num, ast.Sym, ast.BinOp, ast.Neg)


@dataclass
class OperandContext:
    """What operands need beyond the statement: configuration, symbols, uop table address."""

    cfg: VTAConfig
    symbols: Symbols
    uop_addr: int


class _Fields:
    """Field values being collected for one instruction or micro-op."""

    def __init__(self, layout: tuple[isa.PlacedField, ...], preset: dict[str, int]):
        self.layout = {f.name: f for f in layout}
        self.values = {name: 0 for name in self.layout} | preset
        self.spans: dict[str, SourceSpan] = {}

    def set(self, name: str, value: int, span: SourceSpan) -> None:
        if name in self.spans:
            raise AsmError(f"field {name} is given twice (also at column {self.spans[name].column})", span)
        self.spans[name] = span
        self.values[name] = value

    def check(self, default_span: SourceSpan) -> None:
        """Range-check every field against its width in the ISA layout."""
        for name, f in self.layout.items():
            value = self.values[name]
            if not f.min_value <= value <= f.max_value:
                raise AsmError(
                    f"{name} = {value} is out of range {f.min_value}..{f.max_value} "
                    f"({f.width} bit{'s' if f.width != 1 else ''})",
                    self.spans.get(name, default_span),
                )


def _expr(op: ast.Operand, what: str) -> ast.Expr:
    if not isinstance(op.value, _EXPR_TYPES):
        raise AsmError(f"operand '{op.key}' takes one value, e.g. {op.key}={what}", op.span)
    return op.value


def _pair(op: ast.Operand, fields: tuple[str, ...]) -> tuple[ast.Expr, ...]:
    if not isinstance(op.value, ast.Tuple) or len(op.value.items) != len(fields):
        raise AsmError(f"operand '{op.key}' takes a pair: {op.key}=({', '.join(fields)})", op.span)
    return op.value.items


def build_instruction(stmt: ast.Insn, ctx: OperandContext) -> Instruction:
    """The instruction a ``.text`` statement describes (fields range-checked)."""
    mnem = MNEMONICS.get(stmt.mnemonic)
    if mnem is None:
        hint = suggest(stmt.mnemonic.lower(), MNEMONICS) if stmt.mnemonic.lower() != stmt.mnemonic else ""
        if stmt.mnemonic.lower() in MNEMONICS:
            hint = f"; mnemonics are lower case: '{stmt.mnemonic.lower()}'"
        raise AsmError(f"unknown mnemonic '{stmt.mnemonic}'{hint or suggest(stmt.mnemonic, MNEMONICS)}",
                       stmt.mnemonic_span)
    kind = mnem.kind
    spec = isa.KINDS[kind]
    fields = _Fields(isa.layout(kind, ctx.cfg), {"opcode": spec.opcode, **dict(mnem.preset)})
    short = {o.key: o for o in OPERANDS[kind]}
    queues: list[tuple[str, ast.Sym]] = []
    dram: ast.Expr | None = None
    for op in stmt.operands:
        sop = short.get(op.key)
        if op.key is None:
            _flag_word(op, short, fields)
        elif sop is not None and sop.form != "flag":  # `reset=N` is the spec name
            dram = _short_operand(sop, op, fields, ctx) or dram
        elif op.key in QUEUE_KEYS:
            items = op.value.items if isinstance(op.value, ast.Seq) else (op.value,)
            for item in items:
                if not isinstance(item, ast.Sym):
                    raise AsmError(f"'{op.key}=' takes queue names: {', '.join(isa.QUEUES)}", item.span)
                queues.append((op.key, item))
        elif op.key in fields.layout and op.key != "opcode":
            if op.key in dict(mnem.preset) and op.key != mnem.enum_field:
                raise AsmError(f"{op.key} is set by the mnemonic '{mnem.name}'", op.key_span or op.span)
            fields.set(op.key, ctx.symbols.eval(_expr(op, "N")), op.span)
        else:
            known = list(short) + list(QUEUE_KEYS) + [n for n in fields.layout if n != "opcode"]
            raise AsmError(
                f"unknown operand '{op.key}' for {mnem.name}{suggest(op.key, known)}", op.key_span or op.span
            )
    if mnem.enum_required and mnem.enum_field not in fields.spans:
        raise AsmError(f"'{mnem.name}' needs {mnem.enum_field}=N", stmt.mnemonic_span)
    if "imm" in short and "imm" in fields.spans and USE_IMM not in fields.spans:
        fields.values[USE_IMM] = 1  # imm=V implies use_imm = 1 unless use_imm is given
    memory_type = fields.values.get("memory_type", 0)
    _set_queue_flags(fields, queues, isa.stage_of(spec.opcode, memory_type))
    if dram is not None:
        fields.values["dram_base"] = _dram_elements(dram, memory_type, ctx)
    fields.check(stmt.span)
    return Instruction(kind, fields.values)


def _flag_word(op: ast.Operand, short: dict[str, OperandSpec], fields: _Fields) -> None:
    """A bare word such as ``reset``."""
    word = op.value.name if isinstance(op.value, ast.Sym) else None
    flags = [o for o in short.values() if o.form == "flag"]
    match = next((o for o in flags if o.key == word), None)
    if match is None:
        hint = suggest(word, [o.key for o in flags]) if word else ""
        raise AsmError(f"expected an operand key=value, not '{_text(op)}'{hint}", op.span)
    fields.set(match.fields[0], 1, op.span)


def _short_operand(sop: OperandSpec, op: ast.Operand, fields: _Fields, ctx: OperandContext) -> ast.Expr | None:
    """Set the field(s) of a short operand; returns the expression of ``dram=`` (converted later)."""
    if sop.form == "addr":
        fields.set(sop.fields[0], 0, op.span)
        return _expr(op, "ADDR")
    if sop.form in ("one", "imm"):
        fields.set(sop.fields[0], ctx.symbols.eval(_expr(op, "N")), op.span)
    elif sop.form == "pair":
        for name, item in zip(sop.fields, _pair(op, sop.fields), strict=True):
            fields.set(name, ctx.symbols.eval(item), item.span)
    else:  # range
        if not isinstance(op.value, ast.Range):
            raise AsmError(f"operand '{op.key}' takes a range: {op.key}=BEGIN:END", op.span)
        fields.set(sop.fields[0], ctx.symbols.eval(op.value.lo), op.span)
        fields.set(sop.fields[1], ctx.symbols.eval(op.value.hi), op.span)
    return None


def _set_queue_flags(fields: _Fields, queues: list[tuple[str, ast.Sym]], stage: str) -> None:
    for direction, item in queues:
        queue = item.name
        if queue not in isa.QUEUES:
            raise AsmError(f"unknown queue '{queue}'{suggest(queue, isa.QUEUES)}", item.span)
        flag = flag_for_queue(stage, direction, queue)
        if flag is None:
            pops, pushes = stage_queues(stage, "pop"), stage_queues(stage, "push")
            summary = f"({stage} pops {', '.join(pops)}, pushes {', '.join(pushes)})"
            if queue in pops + pushes:
                other = "pushes" if direction == "pop" else "pops"
                msg = f"the {stage} stage {other} queue '{queue}', it cannot {direction} it {summary}"
            else:
                msg = f"queue '{queue}' is not connected to the {stage} stage {summary}"
            raise AsmError(msg, item.span)
        fields.set(flag, 1, item.span)


def _dram_elements(expr: ast.Expr, memory_type: int, ctx: OperandContext) -> int:
    """A DRAM byte address (or micro-op expression for UOP) as an element index."""
    elem = isa.elem_bytes(ctx.cfg, memory_type)
    if elem is None:
        raise AsmError(f"memory type {memory_type} has no element size; give dram_base=N instead", expr.span)
    index = ctx.symbols.uop_index(expr) if memory_type == isa.MEM_TYPES["uop"] else None
    addr = ctx.uop_addr + index * ctx.cfg.uop_elem_bytes if index is not None else ctx.symbols.eval(expr)
    if addr < 0:
        raise AsmError(f"dram address {addr} is negative", expr.span)
    if addr % elem:
        name = isa.MEM_TYPE_DUMP[memory_type]
        raise AsmError(
            f"dram address {addr:#x} is not a multiple of the {name} element size ({elem} bytes)", expr.span
        )
    return addr // elem


def _text(op: ast.Operand) -> str:
    span = op.span
    if span.source_line is None:
        return "?"
    return span.source_line[span.column - 1 : span.column - 1 + span.length]


# -- micro-ops ------------------------------------------------------------------------


def build_uop(stmt: ast.Insn, ctx: OperandContext) -> MicroOp:
    """The micro-op of a ``uop`` or ``uop.raw`` statement."""
    if stmt.mnemonic == UOP_RAW_MNEMONIC:
        if len(stmt.operands) != 1 or stmt.operands[0].key is not None:
            raise AsmError("uop.raw takes one 32-bit word, e.g. uop.raw 0x00020040", stmt.span)
        op = stmt.operands[0]
        word = ctx.symbols.eval(_expr(op, "WORD"))
        limit = (1 << isa.UOP_BITS) - 1
        if not 0 <= word <= limit:
            raise AsmError(f"micro-op word {word} is out of range 0..{limit:#x} ({isa.UOP_BITS} bits)", op.span)
        uop = codec_for(ctx.cfg).decode_uop(word.to_bytes(isa.UOP_BITS // 8, "little"))
        return MicroOp(uop.dst_idx, uop.src_idx, uop.wgt_idx, raw=word)
    fields = _Fields(isa.layout("uop", ctx.cfg), {})
    names = list(UOP_OPERANDS.values())
    positional = [op for op in stmt.operands if op.key is None]
    if positional:
        op = positional[0]
        items = op.value.items if isinstance(op.value, ast.Seq) else (op.value,)
        if len(stmt.operands) != 1 or len(items) != len(names):
            raise AsmError("uop takes dst=D src=S wgt=W, or three values: uop D, S, W", op.span)
        for name, item in zip(names, items, strict=True):
            fields.set(name, ctx.symbols.eval(item), item.span)
    for op in stmt.operands:
        if op.key is None:
            continue
        name = UOP_OPERANDS.get(op.key, op.key)
        if name not in fields.layout:
            known = list(UOP_OPERANDS) + names
            raise AsmError(f"unknown operand '{op.key}' for uop{suggest(op.key, known)}", op.key_span or op.span)
        fields.set(name, ctx.symbols.eval(_expr(op, "N")), op.span)
    fields.check(stmt.span)
    return MicroOp(**fields.values)

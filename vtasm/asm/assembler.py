"""The assembler: ``.vasm`` text to a :class:`~vtasm.program.Program` (docs/assembly.md).

Three passes over the parsed statements: collect them by section (nothing is
evaluated yet, so symbols may be used before they are defined), size and place
the segments and tables, then build micro-ops, instructions and dumps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from vtasm.config import VTAConfig, config_from_dict, default_config
from vtasm.encoding import Instruction, codec_for
from vtasm.errors import AsmError, ConfigError, FormatError, SourceSpan
from vtasm.fileio import read_text
from vtasm.program import DumpRange, Program, Segment, SourceLoc

from . import ast
from .expr import EQU, LABEL, SEGMENT, Symbols
from .layout import CONTENT_DIRECTIVES, PreparedSegment, SegmentDecl, place, prepare_segment
from .operands import OperandContext, build_instruction, build_uop
from .parse import parse, suggest
from .syntax import UOP_MNEMONIC, UOP_RAW_MNEMONIC, builtins

_UOP_MNEMONICS = (UOP_MNEMONIC, UOP_RAW_MNEMONIC)
_LAYOUT_KEYS = {"insn": "address", "uop": "address", "dram": "size", "insn_file": "file", "uop_file": "file"}
_JSON_WORDS = {"true": True, "false": False, "null": None}


@dataclass
class _Unit:
    """The statements of a file, sorted by what they declare (pass 1)."""

    config: list[ast.KeyValue] = field(default_factory=list)
    config_span: SourceSpan | None = None
    layout: list[ast.KeyValue] = field(default_factory=list)
    layout_span: SourceSpan | None = None
    equs: list[ast.Directive] = field(default_factory=list)
    segments: list[SegmentDecl] = field(default_factory=list)
    labels: list[tuple[ast.Name, int]] = field(default_factory=list)
    uops: list[ast.Insn] = field(default_factory=list)
    insns: list[tuple[ast.Insn | ast.Directive, object]] = field(default_factory=list)  # (stmt, loc source)
    dumps: list[ast.Directive] = field(default_factory=list)
    sourcemap_off: ast.Directive | None = None
    locs: list[ast.Directive] = field(default_factory=list)


def assemble(
    text: str,
    filename: str = "<input>",
    cfg: VTAConfig | None = None,
    base_dir: str | Path | None = None,
    fallback: VTAConfig | None = None,
) -> Program:
    """Assemble source text. ``cfg`` is the configuration given to the tool (None: none given).

    A ``.config`` directive must agree with ``cfg``; without one, ``cfg`` is used,
    else ``fallback`` (the CLIs pass ./vta_config.json), else the default.

    Paths in the source are relative to ``base_dir`` (default: the directory of
    ``filename``). Every problem raises AsmError with its source position.
    """
    if base_dir is None:
        base_dir = Path(filename).parent if not filename.startswith("<") else Path(".")
    unit = _collect(parse(text, filename))
    config = _program_config(unit, cfg, fallback)
    symbols = Symbols(builtins(config))
    for name, index in unit.labels:
        symbols.define(name, LABEL, value=index)
    for d in unit.equs:
        symbols.define(d.args[0], EQU, expr=d.args[1])
    _check_unique("segment", [decl.name for decl in unit.segments])
    _check_unique("micro-op label", [name for name, _ in unit.labels])
    for decl in unit.segments:
        symbols.define(decl.name, SEGMENT)
    prepared = [prepare_segment(decl, symbols, Path(base_dir), config.dram_align) for decl in unit.segments]
    layout = _layout_values(unit, symbols)
    tables = place(prepared, {
        "uop": (layout.get("uop"), config.uop_elem_bytes * len(unit.uops)),
        "insn": (layout.get("insn"), config.insn_bytes * len(unit.insns)),
    }, unit.layout_span)
    insn_addr, uop_addr = tables["insn"], tables["uop"]
    for p in prepared:
        symbols.place(p.decl.name.value, p.addr)
    ctx = OperandContext(config, symbols, uop_addr)
    segments = [Segment(p.decl.name.value, p.addr, p.data(symbols), p.file) for p in prepared]
    return Program(
        config=config,
        instructions=[_instruction(stmt, ctx) for stmt, _ in unit.insns],
        uops=[build_uop(stmt, ctx) for stmt in unit.uops],
        insn_addr=insn_addr,
        uop_addr=uop_addr,
        segments=segments,
        tensors=[p.tensor for p in prepared if p.tensor is not None],
        dumps=[_dump(d, symbols, prepared) for d in unit.dumps],
        uop_labels={name.value: index for name, index in unit.labels},
        source_map=_source_map(unit, filename, symbols),
        dram_bytes=layout.get("dram"),
        insn_file=layout.get("insn_file", "insn.bin"),
        uop_file=layout.get("uop_file", "uop.bin"),
    )


def assemble_file(path: str | Path, cfg: VTAConfig | None = None, fallback: VTAConfig | None = None) -> Program:
    """Assemble a ``.vasm`` file (paths in it are relative to its directory)."""
    p = Path(path)
    try:
        text = read_text(p, "assembly source")  # a FIFO or device refused; a byte-order mark dropped
    except FormatError as exc:
        raise AsmError(exc.message) from None
    return assemble(text, str(p), cfg, p.parent, fallback)


# -- pass 1: sections ----------------------------------------------------------------


def _collect(statements: list[ast.Statement]) -> _Unit:
    unit = _Unit()
    section: str | SegmentDecl = "text"
    loc: object = "line"  # "line" (each instruction's own line), a .loc directive, or None
    for stmt in statements:
        if isinstance(stmt, ast.Label):
            if section != "uops":
                raise AsmError("labels are only allowed in .uops sections (micro-op labels)", stmt.span)
            unit.labels.append((stmt.name, len(unit.uops)))
        elif isinstance(stmt, ast.Insn):
            is_uop = stmt.mnemonic in _UOP_MNEMONICS
            if section == "uops" and not is_uop:
                raise AsmError(f"'{stmt.mnemonic}' in a .uops section, which holds uop and uop.raw "
                               "(write .text before instructions)", stmt.mnemonic_span)
            if section == "text" and is_uop:
                raise AsmError(f"'{stmt.mnemonic}' belongs in a .uops section", stmt.mnemonic_span)
            if isinstance(section, SegmentDecl):
                raise AsmError(f"instruction inside segment {section.name.value} "
                               "(write .text before instructions)", stmt.mnemonic_span)
            if is_uop:
                unit.uops.append(stmt)
            else:
                unit.insns.append((stmt, loc))
        else:
            section, loc = _directive(unit, stmt, section, loc)
    if unit.sourcemap_off is not None and unit.locs:
        raise AsmError(".loc in a program with .sourcemap off", unit.locs[0].span)
    return unit


def _directive(unit: _Unit, d: ast.Directive, section, loc):
    name = d.name
    if name in (".text", ".uops"):
        return name[1:], loc
    if name in (".data", ".tensor"):
        decl = SegmentDecl(d)
        unit.segments.append(decl)
        return decl, loc
    if name in CONTENT_DIRECTIVES:
        if not isinstance(section, SegmentDecl):
            raise AsmError(f"'{name}' must follow .data or .tensor", d.span)
        section.contents.append(d)
    elif name == ".insn":
        if section != "text":
            raise AsmError("'.insn' belongs in the .text section", d.span)
        unit.insns.append((d, loc))
    elif name == ".equ":
        unit.equs.append(d)
    elif name == ".dump":
        unit.dumps.append(d)
    elif name in (".config", ".layout"):
        items = getattr(unit, name[1:])
        items.extend(d.args)
        setattr(unit, f"{name[1:]}_span", getattr(unit, f"{name[1:]}_span") or d.span)
    elif name == ".sourcemap":
        if d.args[0].value != "off":
            raise AsmError("expected '.sourcemap off'", d.args[0].span)
        unit.sourcemap_off = d
    elif name == ".loc":
        if isinstance(d.args[0], ast.Name) and d.args[0].value != "off":
            raise AsmError("expected .loc \"FILE\" LINE, or .loc off", d.args[0].span)
        unit.locs.append(d)
        return section, (d if isinstance(d.args[0], ast.Str) else None)
    return section, loc


def _check_unique(what: str, names: list[ast.Name]) -> None:
    seen: dict[str, ast.Name] = {}
    for name in names:
        if name.value in seen:
            raise AsmError(f"{what} '{name.value}' is already declared (line {seen[name.value].span.line})",
                           name.span)
        seen[name.value] = name


# -- configuration and layout ----------------------------------------------------------


def _program_config(unit: _Unit, given: VTAConfig | None, fallback: VTAConfig | None) -> VTAConfig:
    if not unit.config:
        return given or fallback or default_config()
    data: dict[str, object] = {}
    evaluator = Symbols({})
    for kv in unit.config:
        if kv.key in data:
            raise AsmError(f"configuration key {kv.key} is given twice", kv.span)
        value = kv.value
        if isinstance(value, ast.Sym) and value.name in _JSON_WORDS:
            value = _JSON_WORDS[value.name]
        elif isinstance(value, (ast.Num, ast.Sym, ast.BinOp, ast.Neg)):
            value = evaluator.eval(value)
        data[kv.key] = value
    try:
        cfg = config_from_dict(data, ".config")
    except ConfigError as exc:
        raise AsmError(exc.message, unit.config_span) from None
    if given is not None and given.log_values() != cfg.log_values():
        diffs = [f"{k}={v} here but {given.log_values()[k]} given"
                 for k, v in cfg.log_values().items() if given.log_values()[k] != v]
        raise AsmError(f".config differs from the configuration given to the assembler: {', '.join(diffs)}",
                       unit.config_span)
    return cfg


def _layout_values(unit: _Unit, symbols: Symbols) -> dict[str, object]:
    values: dict[str, object] = {}
    for kv in unit.layout:
        kind = _LAYOUT_KEYS.get(kv.key)
        if kind is None:
            raise AsmError(f"unknown .layout key '{kv.key}'{suggest(kv.key, _LAYOUT_KEYS)}", kv.span)
        if kv.key in values:
            raise AsmError(f".layout key {kv.key} is given twice", kv.span)
        if kind == "file":
            if not isinstance(kv.value, str) or not kv.value:
                raise AsmError(f".layout {kv.key} takes a file name in quotes", kv.span)
            values[kv.key] = kv.value
            continue
        if not isinstance(kv.value, (ast.Num, ast.Sym, ast.BinOp, ast.Neg)):
            raise AsmError(f".layout {kv.key} takes a number", kv.span)
        value = symbols.eval(kv.value)
        if value < 0:
            raise AsmError(f".layout {kv.key} must not be negative, got {value}", kv.span)
        values[kv.key] = value
    return values


# -- pass 3: instructions, dumps, source map ----------------------------------------------


def _instruction(stmt: ast.Insn | ast.Directive, ctx: OperandContext) -> Instruction:
    if isinstance(stmt, ast.Insn):
        return build_instruction(stmt, ctx)
    text = stmt.args[0]  # .insn "HEX"
    digits = "".join(text.value.split())
    try:
        raw = bytes.fromhex(digits)
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise AsmError("'.insn' takes 32 hex digits (16 bytes in memory order)", text.span)
    return Instruction("raw", codec_for(ctx.cfg).decode(raw).fields, raw=raw)


def _dump(d: ast.Directive, symbols: Symbols, prepared: list[PreparedSegment]) -> DumpRange:
    if len(d.args) == 1:
        ref = d.args[0]
        if not isinstance(ref, ast.Sym) or symbols.kind(ref.name) != SEGMENT:
            segments = [p.decl.name.value for p in prepared if not p.decl.name.quoted]
            what = f"'{ref.name}' is not a segment{suggest(ref.name, segments)}; " if isinstance(ref, ast.Sym) else ""
            raise AsmError(f'{what}.dump takes a segment name, or ADDR, NBYTES, "FILE"', d.span)
        seg = next(p for p in prepared if p.decl.name.value == ref.name and not p.decl.name.quoted)
        return DumpRange(seg.addr, seg.size, f"{ref.name}.bin")
    addr, nbytes = (symbols.eval(e) for e in d.args[:2])
    for value, expr, what in ((addr, d.args[0], "address"), (nbytes, d.args[1], "size")):
        if value < 0:
            raise AsmError(f"dump {what} must not be negative, got {value}", expr.span)
    name = d.args[2].value
    if not name:
        raise AsmError(".dump needs a file name", d.args[2].span)
    parts = PurePosixPath(name).parts
    if PurePosixPath(name).is_absolute() or ".." in parts or name in (".",):
        raise AsmError(f"dump file '{name}' must stay inside the results directory (no absolute path, no '..')",
                       d.args[2].span)
    return DumpRange(addr, nbytes, name)


def _source_map(unit: _Unit, filename: str, symbols: Symbols) -> dict[int, SourceLoc] | None:
    if unit.sourcemap_off is not None:
        return None
    base = Path(filename).name
    locs = {id(d): _loc(d, symbols) for d in unit.locs if isinstance(d.args[0], ast.Str)}
    out: dict[int, SourceLoc] = {}
    for i, (stmt, loc) in enumerate(unit.insns):
        if loc == "line":
            out[i] = SourceLoc(base, stmt.span.line)
        elif loc is not None:
            out[i] = locs[id(loc)]
    return out


def _loc(d: ast.Directive, symbols: Symbols) -> SourceLoc:
    file, line = d.args[0], symbols.eval(d.args[1])
    if not file.value:
        raise AsmError(".loc needs a file name", file.span)
    if line < 0:
        raise AsmError(f"a line number must not be negative, got {line}", d.args[1].span)
    return SourceLoc(file.value, line)

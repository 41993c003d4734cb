"""The disassembler: a :class:`~vtasm.program.Program` as canonical assembly text.

The text follows the canonical form of docs/assembly.md, and assembling it
gives back the same program, whatever the program holds: raw instructions,
unnamed memory types and ALU opcodes, NOPs with stray fields, flags no queue
expresses, raw micro-op words, addresses outside every segment. Names that
cannot be symbols (not identifiers, built-ins, clashes) are declared in quotes
and referred to by number.
"""

from __future__ import annotations

import math

from vtasm import isa
from vtasm.errors import FormatError
from vtasm.program import Program, Segment, TensorInfo

from .syntax import (
    OPERANDS,
    QUEUE_KEYS,
    USE_IMM,
    is_identifier,
    is_symbol_name,
    mnemonic_for,
    nop_mnemonic,
    quote,
)

_INDENT = " " * 8
_HEX_LINE = 32  # bytes per .hex line
_HEX_GROUP = 4


def disassemble(program: Program) -> str:
    """The canonical assembly text of a program."""
    return "\n".join(_Printer(program).lines()) + "\n"


class _Printer:
    def __init__(self, program: Program):
        self.p = program
        self.cfg = program.config
        used: set[str] = set()
        self.seg_sym: list[str | None] = []
        for seg in program.segments:
            ok = is_symbol_name(seg.name) and seg.name not in used
            self.seg_sym.append(seg.name if ok else None)
            used.add(seg.name)
        self.label_sym: dict[str, str | None] = {}
        for name in program.uop_labels:
            ok = is_symbol_name(name) and name not in used
            self.label_sym[name] = name if ok else None
            used.add(name)
        # labels usable in expressions, by index (first declared wins)
        self.labels_at: dict[int, str] = {}
        for name, index in program.uop_labels.items():
            if self.label_sym[name] and index not in self.labels_at:
                self.labels_at[index] = name

    def lines(self) -> list[str]:
        p = self.p
        out = [
            f"; VTA program for {self.cfg.describe()}: {_count(len(p.instructions), 'instruction')}, "
            f"{_count(len(p.uops), 'micro-op')}, {_count(len(p.segments), 'segment')} (vtasm disasm)",
            ".config " + " ".join(f"{_key(k)}={_config_value(k, v)}" for k, v in self.cfg.to_dict().items()),
            ".layout " + " ".join(self._layout()),
        ]
        if p.source_map is None:
            out.append(".sourcemap off")
        tensors: dict[str, TensorInfo] = {}
        for t in p.tensors:
            tensors.setdefault(t.name, t)
        for seg, sym in zip(p.segments, self.seg_sym, strict=True):
            out += self._segment(seg, sym, tensors.get(seg.name))
        out += [self._dump(d) for d in p.dumps]
        if p.uops or p.uop_labels:
            out.append(".uops")
            out += self._uops()
        out.append(".text")
        out += self._text()
        return out

    # -- header and data --------------------------------------------------------------
    def _layout(self) -> list[str]:
        p = self.p
        items = [f"insn={p.insn_addr:#x}", f"uop={p.uop_addr:#x}"]
        if p.dram_bytes is not None:
            items.append(f"dram={p.dram_bytes:#x}")
        if p.insn_file != "insn.bin":
            items.append(f"insn_file={quote(p.insn_file)}")
        if p.uop_file != "uop.bin":
            items.append(f"uop_file={quote(p.uop_file)}")
        return items

    def _segment(self, seg: Segment, sym: str | None, tensor: TensorInfo | None) -> list[str]:
        name = sym or quote(seg.name)
        where = f"@ {seg.addr:#x}" + (f" file {quote(seg.file)}" if seg.file is not None else "")
        data = bytes(seg.data)
        used = len(data.rstrip(b"\0"))
        if tensor is not None and tensor.nbytes == len(data):
            repeat = f" repeat {tensor.repeat}" if tensor.repeat != 1 else ""
            if tensor.view is not None:
                repeat += f" view [{_ints(tensor.view)}]"
            if tensor.groups is not None:
                repeat += f" groups({_ints(tensor.groups)})"
            if tensor.patches is not None:
                repeat += f" patches({_ints(tensor.patches)})"
            head = f".tensor {name} {tensor.dtype}[{_ints(tensor.shape)}] tile({_ints(tensor.tile)}){repeat} {where}"
            return [head] + _hex_lines(data[:used])
        lines = [f".data {name} {where}"] + _hex_lines(data[:used])
        if used < len(data):
            lines.append(f"{_INDENT}.zero {len(data) - used}")
        return lines

    def _dump(self, d) -> str:
        for seg, sym in zip(self.p.segments, self.seg_sym, strict=True):
            if sym and (seg.addr, len(seg.data), f"{sym}.bin") == (d.addr, d.nbytes, d.file):
                return f".dump {sym}"
        return f".dump {self._address(d.addr)}, {d.nbytes}, {quote(d.file)}"

    def _uops(self) -> list[str]:
        by_index: dict[int, list[str]] = {}
        for name, index in self.p.uop_labels.items():
            by_index.setdefault(min(max(index, 0), len(self.p.uops)), []).append(name)
        out = []
        for i in range(len(self.p.uops) + 1):
            out += [f"{self.label_sym[n] or quote(n)}:" for n in by_index.get(i, [])]
            if i < len(self.p.uops):
                u = self.p.uops[i]
                if u.raw is not None:
                    out.append(f"{_INDENT}uop.raw {u.raw:#010x}")
                else:
                    out.append(f"{_INDENT}uop dst={u.dst_idx} src={u.src_idx} wgt={u.wgt_idx}")
        return out

    # -- instructions -----------------------------------------------------------------
    def _text(self) -> list[str]:
        out: list[str] = []
        sm = self.p.source_map
        previous: object = ()  # nothing printed yet
        for i, insn in enumerate(self.p.instructions):
            if sm is not None:
                loc = sm.get(i)
                if loc != previous:
                    out.append(f".loc {quote(loc.file)} {loc.line}" if loc else ".loc off")
                    previous = loc
            out.append(self._insn(insn))
        return out

    def _insn(self, insn) -> str:
        if insn.raw is not None or insn.kind not in isa.KINDS:
            if insn.raw is None:
                raise FormatError(f"instruction of unknown kind {insn.kind!r} has no raw bytes")
            return f'{_INDENT}.insn "{insn.raw.hex()}"'
        kind = insn.kind
        f = {pf.name: insn.fields.get(pf.name, 0) for pf in isa.layout(kind, self.cfg)}
        mnem, enum_field = mnemonic_for(kind, f)
        ops = [f"{enum_field}={f[enum_field]}"] if enum_field else []
        if kind in ("load", "store"):
            nop = f["x_size"] == 0
            if nop:
                mnem = nop_mnemonic(kind, f["memory_type"]) or mnem
            ops += self._mem_operands(kind, f, nop)
        elif kind in ("gemm", "alu"):
            ops += self._loop_operands(kind, f)
        ops += self._flags(f, isa.stage_of(f["opcode"], f.get("memory_type", 0)))
        return f"{_INDENT}{mnem:<11} {' '.join(ops)}".rstrip()

    def _mem_operands(self, kind: str, f: dict[str, int], nop: bool) -> list[str]:
        ops = []
        for spec in OPERANDS[kind]:
            values = [f[n] for n in spec.fields]
            if (nop or spec.form == "pair") and not any(values):
                continue
            if spec.form == "addr":
                elem = isa.elem_bytes(self.cfg, f["memory_type"])
                if elem is None:
                    ops.append(f"dram_base={values[0]}")
                else:
                    ops.append(f"dram={self._address(values[0] * elem, f['memory_type'])}")
            elif spec.form == "pair":
                ops.append(f"{spec.key}=({values[0]}, {values[1]})")
            else:
                ops.append(f"{spec.key}={values[0]}")
        return ops

    def _loop_operands(self, kind: str, f: dict[str, int]) -> list[str]:
        ops = []
        for spec in OPERANDS[kind]:
            values = [f[n] for n in spec.fields]
            if spec.form == "flag":
                if values[0]:
                    ops.append(spec.key)
            elif spec.form == "range":
                ops.append(f"{spec.key}={self._uop_range(*values)}")
            elif spec.form == "pair":
                ops.append(f"{spec.key}=({values[0]}, {values[1]})")
            elif f[USE_IMM]:  # imm
                ops.append(f"{spec.key}={values[0]}")
            elif values[0]:
                ops.append(f"{spec.key}={values[0]} {USE_IMM}=0")
        return ops

    def _flags(self, f: dict[str, int], stage: str) -> list[str]:
        ops, raw = [], []
        for direction in QUEUE_KEYS:
            queues = []
            for flag in isa.FLAGS:
                if flag.startswith(direction + "_") and f[flag]:
                    queue = isa.STAGE_QUEUES[stage][flag]
                    if queue:
                        queues.append(queue)
                    else:
                        raw.append(f"{flag}={f[flag]}")
            if queues:
                ops.append(f"{direction}={','.join(queues)}")
        return ops + raw

    def _uop_range(self, bgn: int, end: int) -> str:
        label = self.labels_at.get(bgn)
        if label is None:
            return f"{bgn}:{end}"
        delta = end - bgn
        return f"{label}:{label}{delta:+d}" if delta else f"{label}:{label}"

    def _address(self, addr: int, memory_type: int | None = None) -> str:
        """A DRAM byte address as a micro-op label (UOP only), SEGMENT+OFFSET, or hex."""
        p = self.p
        if memory_type == isa.MEM_TYPES["uop"] and p.uop_addr <= addr < p.uop_end:
            offset = addr - p.uop_addr
            if offset % self.cfg.uop_elem_bytes == 0:
                index = offset // self.cfg.uop_elem_bytes
                below = [i for i in self.labels_at if i <= index]
                if below:
                    base = max(below)
                    label = self.labels_at[base]
                    return f"{label}+{index - base}" if index > base else label
        for seg, sym in zip(p.segments, self.seg_sym, strict=True):
            if sym and seg.addr <= addr < seg.end:
                return f"{sym}+{addr - seg.addr:#x}" if addr > seg.addr else sym
        return f"{addr:#x}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _ints(values) -> str:
    return ", ".join(str(v) for v in values)


def _hex_lines(data: bytes) -> list[str]:
    lines = []
    for start in range(0, len(data), _HEX_LINE):
        chunk = data[start : start + _HEX_LINE]
        groups = [chunk[i : i + _HEX_GROUP].hex() for i in range(0, len(chunk), _HEX_GROUP)]
        lines.append(f'{_INDENT}.hex "{" ".join(groups)}"')
    return lines


def _key(key: str) -> str:
    return key if is_identifier(key) else quote(key)


def _config_value(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    raise FormatError(f"configuration value {key}={value!r} cannot be written in assembly")

"""The compiler's assembly output: vtasm's canonical text with the story told in comments.

The program is printed by vtasm's disassembler (so the text assembles back to
exactly the compiled program, source map included), and each group of
instructions gets a comment block: which source line and which tile produced
it, the tiling chosen for each operator, and a note on instructions the code
generator added (micro-op loads, fences).
"""

from __future__ import annotations

from pathlib import Path

from vtacc.compiler import Compiled
from vtasm.asm.disassembler import disassemble

from .explain import explain


def _insn_comments(compiled: Compiled, source_lines: list[str]) -> dict[int, list[str]]:
    comments: dict[int, list[str]] = {}
    previous_group = object()
    for i, e in enumerate(compiled.generated.emitted):
        notes = []
        if e.group is not None and e.group != previous_group:
            group = compiled.groups[e.group]
            notes.append("")
            notes.append(f"; --- {group.title}")
            if group.span is not None:
                line = source_lines[group.span.line - 1].strip() if 0 < group.span.line <= len(source_lines) else ""
                notes.append(f";     from {Path(group.span.file).name}:{group.span.line}: {line}")
            previous_group = e.group
        elif e.group is None and e.group != previous_group:
            notes.append("")
            previous_group = e.group
        if e.note:
            notes.append(f"; {e.note}")
        if notes:
            comments[i] = notes
    return comments


def assembly(compiled: Compiled, source_name: str, source_text: str | None = None) -> str:
    """Annotated assembly text of a compiled program."""
    text = disassemble(compiled.program)
    head, sep, body = text.partition("\n.text\n")
    lines = (source_text or "").splitlines()
    comments = _insn_comments(compiled, lines)
    out = [f"; {source_name}: compiled by vtacc", ";"]
    out += [f"; {line}" if line else ";" for line in explain(compiled).rstrip("\n").splitlines()]
    out += [head, sep.strip("\n")]
    index = 0
    pending: list[str] = []
    for line in body.splitlines():
        if line.startswith(".loc"):
            pending.append(line)
            continue
        out += comments.get(index, []) + pending + [line]
        pending = []
        index += 1
    return "\n".join(out) + "\n"

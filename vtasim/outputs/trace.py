"""Execution traces: the runtime's debug format with real token counts, or JSON lines.

Both can map an event back to the program: the source line of the
instruction (from the source map) and the DRAM address of a LOAD or STORE as
the segment holding it plus a byte offset (``x+0x40``). JSON lines always
carry them; the text format only when asked, so that by default it stays
byte for byte the runtime's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TextIO

from vtasim.core.pipeline import StepEvent
from vtasim.core.state import MachineState
from vtasm.formats.dump import format_header, format_instruction
from vtasm.locate import Locator
from vtasm.program import Program

UOP_LINE = "[{slot:04d}]\t acc={dst}, inp={src}, wgt={wgt}\n"


class TraceStream:
    """The trace's way to stdout. When its reader goes away (a closed pipe: ``--trace | head``), the rest of
    the trace is dropped and stdout is pointed at the null device: the run goes on and still writes its
    results, instead of stopping half way with nothing written."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.gone = False

    def write(self, text: str) -> None:
        if self.gone:
            return
        try:
            self.stream.write(text)
        except BrokenPipeError:
            self.gone = True
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())  # what is still buffered, or printed later, goes nowhere
            os.close(devnull)


def _uop_rows(state: MachineState, event: StepEvent) -> list[tuple[int, int, int, int]]:
    insn = event.insn
    if insn.kind not in ("gemm", "alu"):
        return []
    end = min(insn["uop_end"], state.uop_dst.size)
    return [
        (slot, int(state.uop_dst[slot]), int(state.uop_src[slot]), int(state.uop_wgt[slot]))
        for slot in range(insn["uop_bgn"], end)
    ]


def _with_locations(block: str, source: str | None, dram: str | None) -> str:
    """A runtime block with '\\tsource: ...' after its header and '\\tdram: ...' after its DRAM line."""
    head, _, body = block.partition("\n")
    lines = [head + "\n"]
    if source is not None:
        lines.append(f"\tsource: {source}\n")
    for line in body.splitlines(keepends=True):
        lines.append(line)
        if dram is not None and line.startswith("\tDRAM: "):
            lines.append(f"\tdram: {dram}\n")
    return "".join(lines)


def text_tracer(out: TextIO, state: MachineState, with_uops: bool = False,
                locator: Locator | None = None) -> Callable[[StepEvent], None]:
    """An observer printing one runtime-style block per executed instruction (plus locations with a locator)."""

    def on_step(event: StepEvent) -> None:
        block = format_instruction(event.index, event.insn, event.queues)
        if locator is not None:
            block = _with_locations(block, locator.source(event.index), locator.dram(event.insn))
        out.write(block)
        if with_uops:
            rows = _uop_rows(state, event)
            if rows:
                out.write(f"\tuops executed ({event.ops} executions of {len(rows)} micro-ops):\n")
                for slot, dst, src, wgt in rows:
                    out.write("\t" + UOP_LINE.format(slot=slot, dst=dst, src=src, wgt=wgt))

    return on_step


def jsonl_tracer(out: TextIO, state: MachineState, with_uops: bool = False,
                 locator: Locator | None = None) -> Callable[[StepEvent], None]:
    """An observer printing one JSON object per executed instruction."""

    def on_step(event: StepEvent) -> None:
        record = {
            "index": event.index,
            "stage": event.stage,
            "kind": event.insn.kind,
            "name": format_header(event.insn).rstrip(":"),
            "source": locator.source(event.index) if locator else None,
            "dram": locator.dram(event.insn) if locator else None,
            "fields": event.insn.fields,
            "queues": event.queues,
            "popped": [{"queue": q, "from": i} for q, i in event.popped],
            "uop_executions": event.ops,
        }
        if with_uops:
            record["uops"] = [
                {"slot": s, "dst": d, "src": r, "wgt": w} for s, d, r, w in _uop_rows(state, event)
            ]
        out.write(json.dumps(record, separators=(",", ":")) + "\n")

    return on_step


def trace_header(program: Program) -> str:
    """The first line of a text trace, as the runtime's dump starts."""
    return f"There are {len(program.instructions)} instructions\n"

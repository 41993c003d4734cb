"""Execution traces: the runtime's debug format with real token counts, or JSON lines."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TextIO

from vtasm.formats.dump import format_header, format_instruction
from vtasm.program import Program

from .pipeline import StepEvent
from .state import MachineState

UOP_LINE = "[{slot:04d}]\t acc={dst}, inp={src}, wgt={wgt}\n"


def _uop_rows(state: MachineState, event: StepEvent) -> list[tuple[int, int, int, int]]:
    insn = event.insn
    if insn.kind not in ("gemm", "alu"):
        return []
    end = min(insn["uop_end"], state.uop_dst.size)
    return [
        (slot, int(state.uop_dst[slot]), int(state.uop_src[slot]), int(state.uop_wgt[slot]))
        for slot in range(insn["uop_bgn"], end)
    ]


def text_tracer(out: TextIO, state: MachineState, with_uops: bool = False) -> Callable[[StepEvent], None]:
    """An observer printing one runtime-style block per executed instruction."""

    def on_step(event: StepEvent) -> None:
        out.write(format_instruction(event.index, event.insn, event.queues))
        if with_uops:
            rows = _uop_rows(state, event)
            if rows:
                out.write(f"\tuops executed ({event.ops} executions of {len(rows)} micro-ops):\n")
                for slot, dst, src, wgt in rows:
                    out.write("\t" + UOP_LINE.format(slot=slot, dst=dst, src=src, wgt=wgt))

    return on_step


def jsonl_tracer(out: TextIO, state: MachineState, with_uops: bool = False) -> Callable[[StepEvent], None]:
    """An observer printing one JSON object per executed instruction."""

    def on_step(event: StepEvent) -> None:
        record = {
            "index": event.index,
            "stage": event.stage,
            "kind": event.insn.kind,
            "name": format_header(event.insn).rstrip(":"),
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

"""A timing run as a Chrome trace (trace-event JSON), for Perfetto and chrome://tracing.

One process, one thread per track: fetch, load, compute, store, and the
memory engine's read and write channels. Each instruction is a complete
slice named as in the runtime's dump (``LOAD INP``, ``GEMM``, ``ALU - max``,
``NOP-COMPUTE-STAGE``, ...) with its index, source line, DRAM address
(``x+0x40``), cycles and waits as args; the cycles it waited for tokens
before starting are a ``wait`` slice just before it. Memory bursts are slices
on the channel tracks named by client, and each token queue's occupancy is a
counter. Timestamps are microseconds at the profile's clock; args keep cycles.
"""

from __future__ import annotations

import json
from pathlib import Path

from vtasm.fileio import write_atomic
from vtasm.formats.dump import format_header
from vtasm.locate import Locator, dram_rows, executable
from vtasm.program import Program

from .engine import InsnTime
from .plan import CLIENTS, EXEC, FINISH, MODULES, QUEUES, READ, SYNC, WRITE, Work
from .run import TimingResult

PID = 1
# Track (thread) ids, top to bottom in the viewer.
FETCH_TID, READ_TID, WRITE_TID = 0, 4, 5
MODULE_TIDS = {m: m + 1 for m in range(len(MODULES))}
TRACKS = {FETCH_TID: "fetch", **{t: MODULES[m] for m, t in MODULE_TIDS.items()},
          READ_TID: "memory read", WRITE_TID: "memory write"}


def category(work: Work) -> str:
    """The colour class of an instruction: 'load inp', 'uop', 'acc', 'gemm', 'alu', 'store', 'sync', ..."""
    if work.kind == READ:
        name = CLIENTS[work.client]
        return f"load {name}" if name in ("inp", "wgt") else name
    if work.kind == EXEC:
        return work.unit or "gemm"
    return {WRITE: "store", SYNC: "sync", FINISH: "finish"}[work.kind]


def insn_name(program: Program, index: int) -> str:
    """The runtime dump's name of an instruction (its header, without the colon of ``STORE:``)."""
    return format_header(program.instructions[index]).rstrip(":")


class _Clock:
    """Cycles to trace microseconds."""

    def __init__(self, mhz: float):
        self.mhz = mhz

    def us(self, cycles: int) -> float:
        return round(cycles / self.mhz, 6)

    def span(self, start: int, end: int) -> float:
        """A duration that ends exactly where a slice starting at ``end`` begins (no overlap from rounding)."""
        return round(self.us(end) - self.us(start), 6)


def _slice(clock: _Clock, tid: int, name: str, cat: str, start: int, end: int, args: dict) -> dict:
    """A complete event from cycle ``start`` to ``end``; its args begin with the cycles."""
    args = {"start_cycle": start, "end_cycle": end, "cycles": end - start, **args}
    return {"name": name, "cat": cat, "ph": "X", "pid": PID, "tid": tid, "ts": clock.us(start),
            "dur": clock.span(start, end), "args": args}


def _metadata(result: TimingResult) -> list[dict]:
    report = result.report
    label = f"VTA timing ({report.profile}, {report.clock_mhz:g} MHz)"
    events = [{"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "ts": 0, "args": {"name": label}}]
    for tid, name in TRACKS.items():
        events.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "ts": 0, "args": {"name": name}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": tid, "ts": 0,
                       "args": {"sort_index": tid}})
    return events


def _insn_args(work: Work, it: InsnTime, locator: Locator) -> dict:
    program = locator.program
    args: dict = {"index": work.index}
    source = locator.source(work.index)
    if source is not None:
        args["source"] = source
    rows = dram_rows(program, executable(program.instructions[work.index]))
    if rows is not None:
        args["dram"] = locator.address(rows[0])
        args["bytes"] = work.bytes
    args.update(token_wait=it.start - it.ready, memory_wait=it.mem_wait)
    if work.pops:
        args["pops"] = [QUEUES[q] for q in work.pops]
    if work.pushes:
        args["pushes"] = [QUEUES[q] for q in work.pushes]
    if work.bursts:
        args["bursts"] = len(work.bursts)
    if work.executions:
        args["executions"] = work.executions
    return args


def _instructions(result: TimingResult, locator: Locator, clock: _Clock) -> list[dict]:
    events = []
    for it in result.timeline.insns:
        work = result.works[it.index]
        tid = MODULE_TIDS[it.module]
        if it.start > it.ready:
            queues = ", ".join(QUEUES[q] for q in work.pops)
            events.append(_slice(clock, tid, f"wait {queues}".strip(), "token wait", it.ready, it.start,
                                 {"index": it.index}))
        name = insn_name(locator.program, it.index)
        events.append(_slice(clock, tid, name, category(work), it.start, it.end, _insn_args(work, it, locator)))
    return events


def _fetches(result: TimingResult, clock: _Clock) -> list[dict]:
    events = []
    fetches = result.timeline.fetches
    n = len(result.works)
    for k, (first, accept, last, _stalled) in enumerate(fetches):
        stop = fetches[k + 1][0] if k + 1 < len(fetches) else n
        events.append(_slice(clock, FETCH_TID, f"FETCH {first}-{stop - 1}", "fetch", accept, last,
                             {"first_index": first, "instructions": stop - first}))
    return events


def _transfers(result: TimingResult, clock: _Clock) -> list[dict]:
    events = []
    for tr in result.timeline.transfers:
        tid = WRITE_TID if tr.client == "out" else READ_TID
        args = {"index": tr.index, "beats": tr.beats, "accept_cycle": tr.accept, "latency": tr.first - tr.accept}
        events.append(_slice(clock, tid, tr.client, "burst", tr.first, tr.last + 1, args))
    return events


def _counters(result: TimingResult, clock: _Clock) -> list[dict]:
    events = []
    for queue, steps in result.timeline.tokens.items():
        levels = {0: 0}
        for cycle, count in steps:  # several steps in one cycle: the last one stands
            levels[cycle] = count
        for cycle, count in sorted(levels.items()):
            events.append({"name": f"{queue} queue", "ph": "C", "pid": PID, "tid": 0, "ts": clock.us(cycle),
                           "args": {"tokens": count}})
    return events


def chrome_trace(result: TimingResult, program: Program) -> dict:
    """The trace-event JSON object of a timing run of ``program`` (run with ``record=True``)."""
    report = result.report
    clock = _Clock(report.clock_mhz)
    locator = Locator(program)
    events = _metadata(result)
    events += _fetches(result, clock)
    events += _instructions(result, locator, clock)
    events += _transfers(result, clock)
    events += _counters(result, clock)
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"profile": report.profile, "clock_mhz": report.clock_mhz, "cycles": report.cycles,
                          "instructions": len(result.works)}}


def write_chrome_trace(result: TimingResult, program: Program, path: str | Path) -> None:
    """Write :func:`chrome_trace` to ``path`` (a one-line FormatError when it cannot be written)."""
    write_atomic(path, json.dumps(chrome_trace(result, program), separators=(",", ":")))

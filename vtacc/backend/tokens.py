"""Dependency tokens, derived from what each instruction reads and writes.

The code generator emits instructions in an order that is correct if run one
at a time (program order). This pass finds, for every instruction, the latest
earlier instruction of each *other* stage that touches the same on-chip
elements (read after write, write after read, write after write) and makes the
consumer wait for it through the token queue between the two stages. Per
queue, a consumer pops only when it needs a later producer than the previous
consumer of that stage already waited for, so every instruction pushes and
pops at most one token per queue, every pushed token is popped, and tokens
pair up in FIFO order. Waiting only on earlier instructions makes deadlock
impossible; ordering every conflicting pair makes the program race-free.

Load and store stages share no queue: a DRAM tensor written by a STORE and
read by a later LOAD (layers chained through DRAM) needs a compute-stage
*fence* between them, which the code generator inserts; the fence reads and
writes the tensor, so it orders both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vtasm import isa

STAGE_ID = {s: i for i, s in enumerate(isa.STAGES)}
# (producer stage, consumer stage) -> (queue, producer's push flag, consumer's pop flag), from vtasm's table
QUEUE = {(prod, cons): (queue, push, pop) for queue, (prod, push, cons, pop) in isa.QUEUE_ENDS.items()}


@dataclass
class Access:
    """What one instruction touches: (buffer, lo, hi) ranges, inclusive."""

    stage: str
    reads: list[tuple[str, int, int]] = field(default_factory=list)
    writes: list[tuple[str, int, int]] = field(default_factory=list)
    fence: bool = False  # orders everything before it on its buffers: later accesses need only the fence


class _Tracker:
    """Last reader and writer, per stage, of every element of one buffer."""

    def __init__(self, size: int):
        self.write = np.full((3, size), -1, dtype=np.int64)
        self.read = np.full((3, size), -1, dtype=np.int64)


def dependencies(accesses: list[Access], sizes: dict[str, int]) -> list[dict[str, int]]:
    """For each instruction, the latest conflicting earlier instruction of each other stage.

    ``sizes``: the buffers to track and their sizes; ranges in other buffers are not looked at (a buffer
    only one stage touches needs no token)."""
    trackers = {name: _Tracker(size) for name, size in sizes.items()}
    deps: list[dict[str, int]] = []
    for i, acc in enumerate(accesses):
        sid = STAGE_ID[acc.stage]
        latest = [-1, -1, -1]  # per stage: the latest earlier instruction this one conflicts with
        reads = [(trackers[buf], lo, hi) for buf, lo, hi in acc.reads if buf in trackers]
        writes = [(trackers[buf], lo, hi) for buf, lo, hi in acc.writes if buf in trackers]
        for tr, lo, hi in reads:
            _latest(latest, tr.write, lo, hi)
        for tr, lo, hi in writes:
            _latest(latest, tr.write, lo, hi)
            _latest(latest, tr.read, lo, hi)
        deps.append({isa.STAGES[t]: j for t, j in enumerate(latest) if t != sid and j >= 0})
        for tr, lo, hi in reads:
            tr.read[sid, lo : hi + 1] = i
        for tr, lo, hi in writes:
            tr.write[sid, lo : hi + 1] = i
        if acc.fence:
            for tr, lo, hi in reads + writes:
                for t in range(3):
                    if t != sid:
                        tr.read[t, lo : hi + 1] = -1
                        tr.write[t, lo : hi + 1] = -1
    return deps


def _latest(latest: list[int], last: np.ndarray, lo: int, hi: int) -> None:
    """Raise ``latest`` (per stage) to the last access each stage made to elements lo..hi of ``last``."""
    found = (last[:, lo] if lo == hi else last[:, lo : hi + 1].max(axis=1)).tolist()
    for t in range(3):
        if found[t] > latest[t]:
            latest[t] = found[t]


def assign_tokens(stages: list[str], deps: list[dict[str, int]]) -> list[dict[str, int]]:
    """Flags (pop_prev, pop_next, push_prev, push_next) for each instruction."""
    flags = [dict.fromkeys(isa.FLAGS, 0) for _ in stages]
    for i, mine in enumerate(deps):
        for stage in mine:
            if (stage, stages[i]) not in QUEUE:
                raise AssertionError(f"instruction {i} depends on the {stage} stage, which has no queue to it")
    for (prod, cons), (_queue, push_flag, pop_flag) in QUEUE.items():
        covered = -1
        for i, stage in enumerate(stages):
            if stage != cons:
                continue
            j = deps[i].get(prod, -1)
            if j > covered:
                if stages[j] != prod:
                    raise AssertionError(f"dependency of {i} on {j} crosses stages without a queue")
                flags[i][pop_flag] = 1
                flags[j][push_flag] = 1
                covered = j
    return flags

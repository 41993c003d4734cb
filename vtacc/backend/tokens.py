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
    """Per stage, the last instruction that wrote and that read each element of one buffer (-1: none), and
    whether the stage has touched the buffer at all (a stage that never did needs no look)."""

    def __init__(self, size: int):
        self.write = [np.full(size, -1, dtype=np.int64) for _ in isa.STAGES]
        self.read = [np.full(size, -1, dtype=np.int64) for _ in isa.STAGES]
        self.wrote = [False] * len(isa.STAGES)
        self.was_read = [False] * len(isa.STAGES)


_OTHERS = {sid: tuple(t for t in range(len(isa.STAGES)) if t != sid) for sid in range(len(isa.STAGES))}


def dependencies(accesses: list[Access], sizes: dict[str, int]) -> list[dict[str, int]]:
    """For each instruction, the latest conflicting earlier instruction of each other stage.

    ``sizes``: the buffers to track and their sizes; ranges in other buffers are not looked at (a buffer
    only one stage touches needs no token)."""
    trackers = {name: _Tracker(size) for name, size in sizes.items()}
    stages = isa.STAGES
    deps: list[dict[str, int]] = []
    for i, acc in enumerate(accesses):
        sid = STAGE_ID[acc.stage]
        others = _OTHERS[sid]
        latest = [-1, -1, -1]  # per stage: the latest earlier instruction this one conflicts with
        reads = [(trackers[buf], lo, hi) for buf, lo, hi in acc.reads if buf in trackers]
        writes = [(trackers[buf], lo, hi) for buf, lo, hi in acc.writes if buf in trackers]
        for tr, lo, hi in reads:  # read after write
            for t in others:
                if tr.wrote[t]:
                    _raise(latest, t, tr.write[t], lo, hi)
        for tr, lo, hi in writes:  # write after write, write after read
            for t in others:
                if tr.wrote[t]:
                    _raise(latest, t, tr.write[t], lo, hi)
                if tr.was_read[t]:
                    _raise(latest, t, tr.read[t], lo, hi)
        deps.append({stages[t]: latest[t] for t in others if latest[t] >= 0})
        for tr, lo, hi in reads:
            tr.read[sid][lo : hi + 1] = i
            tr.was_read[sid] = True
        for tr, lo, hi in writes:
            tr.write[sid][lo : hi + 1] = i
            tr.wrote[sid] = True
        if acc.fence:
            for tr, lo, hi in reads + writes:
                for t in others:
                    tr.read[t][lo : hi + 1] = -1
                    tr.write[t][lo : hi + 1] = -1
    return deps


_MAX = np.maximum.reduce  # the ufunc itself: ndarray.max goes through a Python wrapper first


def _raise(latest: list[int], stage: int, last: np.ndarray, lo: int, hi: int) -> None:
    """Raise ``latest[stage]`` to the last access the stage made to elements lo..hi (``last``: its array)."""
    found = int(last[lo]) if lo == hi else int(_MAX(last[lo : hi + 1]))
    if found > latest[stage]:
        latest[stage] = found


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

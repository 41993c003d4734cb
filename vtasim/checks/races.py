"""Race checking: accesses by different stages that no dependency token orders.

Tokens define happens-before: instructions of one stage are ordered by program
order, and the n-th pop of a queue is ordered after the n-th push of it. Each
executed instruction gets a vector clock (one entry per stage). Every element of
the inp, wgt and acc buffers and every DRAM byte remembers the clock of its last
write and, per stage, of its last read; an access by another stage that is not
ordered after them is a race, whatever order this run happened to use.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vtasim.checks.access import accesses
from vtasim.core.faults import insn_title, source_of
from vtasim.core.machine import Machine
from vtasim.core.pipeline import StepEvent
from vtasm import isa

STAGE_ID = {s: n for n, s in enumerate(isa.STAGES)}


@dataclass(frozen=True)
class Race:
    """Two unordered accesses to the same elements."""

    buffer: str
    first: int  # instruction index of the earlier access (in this run)
    first_access: str  # "reads" / "writes"
    second: int
    second_access: str
    lo: int
    hi: int

    def describe(self, program) -> str:
        a = program.instructions[self.first]
        b = program.instructions[self.second]
        where = f"DRAM bytes 0x{self.lo:x}..0x{self.hi:x}" if self.buffer == "dram" else (
            f"{self.buffer}[{self.lo}..{self.hi}]"
        )
        return (
            f"race on {where}: instruction {self.first} ({insn_title(a)}, {a.stage} stage"
            f"{source_of(program, self.first)}) {self.first_access} and instruction {self.second} "
            f"({insn_title(b)}, {b.stage} stage{source_of(program, self.second)}) "
            f"{self.second_access}; no dependency token orders them"
        )


class _Shadow:
    """Last-write and last-read clocks of every element of one buffer."""

    def __init__(self, size: int):
        self.w_stage = np.full(size, -1, dtype=np.int8)
        self.w_clock = np.zeros(size, dtype=np.int32)
        self.r_clock = np.zeros((len(isa.STAGES), size), dtype=np.int32)


class RaceChecker:
    """Observes a machine's run and collects races."""

    def __init__(self, machine: Machine):
        self.machine = machine
        cfg = machine.state.cfg
        self.shadows = {
            "inp": _Shadow(cfg.inp_depth),
            "wgt": _Shadow(cfg.wgt_depth),
            "acc": _Shadow(cfg.acc_depth),
            "dram": _Shadow(machine.state.dram.size),
        }
        self.clock_of: dict[int, np.ndarray] = {}  # instruction index -> vector clock
        self.stage_last = {s: np.zeros(len(isa.STAGES), dtype=np.int64) for s in isa.STAGES}
        self.by_clock: dict[tuple[int, int], int] = {}  # (stage id, clock) -> instruction index
        self.races: dict[tuple, Race] = {}
        machine.observe(self.on_step)

    def on_step(self, event: StepEvent) -> None:
        sid = STAGE_ID[event.stage]
        vc = self.stage_last[event.stage].copy()
        for _, pusher in event.popped:
            np.maximum(vc, self.clock_of[pusher], out=vc)
        vc[sid] += 1
        self.stage_last[event.stage] = vc
        self.clock_of[event.index] = vc
        self.by_clock[(sid, int(vc[sid]))] = event.index
        if event.insn.kind == "finish":
            self._check_results(event.index, vc)
        acc = accesses(self.machine.state, event.insn, self.machine.plans)
        for name, idx in acc.reads.items():
            if name in self.shadows and idx.size:
                self._check(name, idx, sid, vc, event.index, write=False)
        for name, idx in acc.writes.items():
            if name in self.shadows and idx.size:
                self._check(name, idx, sid, vc, event.index, write=True)

    def _check(self, name: str, idx: np.ndarray, sid: int, vc: np.ndarray, index: int, write: bool) -> None:
        sh = self.shadows[name]
        ws = sh.w_stage[idx]
        other = (ws >= 0) & (ws != sid)
        if other.any():
            known = vc[np.where(other, ws, 0).astype(np.int64)]
            bad = other & (sh.w_clock[idx] > known)
            self._report(name, idx, bad, ws, sh.w_clock[idx], "writes", index, write)
        if write:
            for t in range(len(isa.STAGES)):
                if t == sid:
                    continue
                rc = sh.r_clock[t, idx]
                bad = rc > vc[t]
                if bad.any():
                    self._report(name, idx, bad, np.full(idx.size, t), rc, "reads", index, write)
            sh.w_stage[idx] = sid
            sh.w_clock[idx] = vc[sid]
        else:
            sh.r_clock[sid, idx] = vc[sid]

    def _check_results(self, index: int, vc: np.ndarray) -> None:
        """FINISH tells the host the results are in DRAM: every STORE's write must be ordered before it."""
        sh = self.shadows["dram"]
        store = STAGE_ID[isa.STORE_STAGE]
        late = np.flatnonzero((sh.w_stage == store) & (sh.w_clock > vc[store]))
        if late.size:
            self._report("dram", late, np.ones(late.size, dtype=bool), np.full(late.size, store), sh.w_clock[late],
                         "writes", index, False, "ends the program, after which the host reads DRAM")

    def _report(self, name, idx, bad, stages, clocks, first_access, index, write, second: str | None = None) -> None:
        if not bad.any():
            return
        where = np.flatnonzero(bad)
        keys = np.asarray(stages, dtype=np.int64)[where] * (1 << 40) + np.asarray(clocks)[where]
        uniq, inverse = np.unique(keys, return_inverse=True)
        for u, key in enumerate(uniq.tolist()):
            first = self.by_clock[(key >> 40, key & ((1 << 40) - 1))]
            hit = idx[where[inverse == u]]
            lo, hi = int(hit.min()), int(hit.max())
            race_key = (name, first, index, first_access)
            if race_key not in self.races:
                self.races[race_key] = Race(name, first, first_access, index,
                                            second or ("writes" if write else "reads"), lo, hi)

    def report(self) -> list[Race]:
        """Races found, ordered by the later instruction."""
        return sorted(self.races.values(), key=lambda r: (r.second, r.first, r.buffer))

"""The timing engine: a discrete-event model of VTA's four modules and its memory engine.

Fetch reads the instruction stream in chunks (one burst each) and dispatches
the instructions one per cycle into the three module queues. Load, compute
and store each run their queue in order: an instruction starts when it is in
the queue, the module is free and every token it pops has been pushed; DMA
instructions then issue their bursts to the shared memory engine, which
serves read clients by the profile's fixed priority (memory.read_priority)
with a bounded number of reads in flight, and writes on their own channel.
The result is, for every instruction, the cycle it starts and ends and how
long it waited for tokens and for memory, plus every memory transfer. Nothing
here looks at data: timing depends on the instructions only.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field

from vtasm.errors import SimFault

from .plan import CLIENTS, COMPUTE, EXEC, FETCH, FINISH, LOAD, MODULES, QUEUES, READ, STORE, SYNC, UOP, WGT, WRITE, Work
from .profile import Profile


@dataclass
class InsnTime:
    """When one instruction ran on its module."""

    index: int
    module: int
    ready: int  # in the queue and the module free
    start: int  # tokens popped, execution begins
    end: int  # done (tokens pushed at this cycle)
    mem_wait: int = 0  # cycles its bursts waited for the memory engine


@dataclass
class Transfer:
    """One burst on the memory engine."""

    index: int  # instruction (-1 for fetch)
    client: str  # fetch, uop, inp, wgt, acc or out
    accept: int
    first: int
    last: int
    beats: int


@dataclass
class Timeline:
    """Everything the engine computed."""

    cycles: int
    insns: list[InsnTime]
    transfers: list[Transfer] = field(default_factory=list)
    fetches: list[tuple[int, int, int, int]] = field(default_factory=list)
    """Per fetch chunk: (first instruction, read accepted, last dispatch, cycles stalled on full queues)."""
    tokens: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # queue -> (cycle, count) steps


class _Signal:
    """A growing list of event times that processes can wait on by position."""

    def __init__(self) -> None:
        self.times: list[int] = []
        self.waiters: dict[int, tuple[Generator, int, int]] = {}


class _Engine:
    def __init__(self, works: list[Work], profile: Profile, record: bool):
        self.p = profile
        self.works = works
        self.record = record
        self.heap: list = []
        self.seq = 0
        self.pushes = [_Signal() for _ in QUEUES]
        self.pops = [0] * len(QUEUES)
        self.dispatched = [_Signal() for _ in MODULES]
        self.done = [_Signal() for _ in MODULES]
        self.queues: list[list[Work]] = [[] for _ in MODULES]
        for w in works:
            self.queues[w.module].append(w)
        self.insns: list[InsnTime | None] = [None] * len(works)
        self.transfers: list[Transfer] = []
        self.fetches: list[tuple[int, int, int, int]] = []
        self.finish: int | None = None
        # read port
        self.rd_pending: list[tuple[int, int, int, int, Generator]] = []  # (rank, t_req, seq, beats, gen)
        self.rank = [profile.read_priority.index(name) for name in CLIENTS]  # the arbiter's order of the clients
        self.rd_inflight: deque[int] = deque()  # cycle each outstanding read frees its slot, in order
        self.rd_next_cmd = 0
        self.rd_data_free = 0
        self.rd_decision_at: set[int] = set()
        # write port
        self.wr_pending: deque = deque()
        self.wr_free = 0
        self.wr_decision_at: set[int] = set()

    # -- scheduling ---------------------------------------------------------
    def _at(self, t: int, gen: Generator, value, order: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, order, self.seq, gen, value))

    def _step(self, gen: Generator, value) -> None:
        while True:
            try:
                cmd = gen.send(value)
            except StopIteration:
                return
            op = cmd[0]
            if op == "sig":
                _, sig, k, t, delay = cmd
                if k >= len(sig.times):
                    sig.waiters[k] = (gen, t, delay)
                    return
                when = max(t, sig.times[k] + delay)
                if not self.heap or self.heap[0][0] > when:
                    value = when  # nothing else can happen first: carry on at once
                    continue
                self._at(when, gen, when)
                return
            if op == "read":
                _, t, client, beats = cmd
                value = self._try_read(t, beats)
                if value is not None:
                    continue
                self.seq += 1
                self.rd_pending.append((self.rank[client], t, self.seq, beats, gen))
                self._read_decision(max(t, self._read_free()))
                return
            _, t, beats, busy = cmd
            value = self._try_write(t, busy)
            if value is not None:
                continue
            self.wr_pending.append((t, beats, busy, gen))
            self._write_decision(max(t, self.wr_free))
            return

    def _try_read(self, t: int, beats: int) -> tuple[int, int, int] | None:
        """Grant a read at once when no other client can ask before it (else None: queue it).

        Runs once a burst: written without helper calls (_read_free's rule, spelt with comparisons)."""
        inflight = self.rd_inflight
        accept = self.rd_next_cmd
        if len(inflight) >= self.p.reads_in_flight and inflight[0] > accept:
            accept = inflight[0]
        if t > accept:
            accept = t
        if self.rd_pending or (self.heap and self.heap[0][0] <= accept):
            return None
        return self._grant_read(accept, beats)

    def _try_write(self, t: int, busy: int) -> tuple[int, int, int, int] | None:
        accept = max(t, self.wr_free)
        if not self.wr_pending and (not self.heap or self.heap[0][0] > accept):
            return self._grant_write(accept, busy)
        return None

    def _try_sig(self, sig: _Signal, k: int, t: int, delay: int) -> int | None:
        """The cycle a signal wait ends, when it is already known and nothing else comes first."""
        if k < len(sig.times):
            when = max(t, sig.times[k] + delay)
            if not self.heap or self.heap[0][0] > when:
                return when
        return None

    def _signal(self, sig: _Signal, t: int) -> None:
        k = len(sig.times)
        sig.times.append(t)
        waiter = sig.waiters.pop(k, None)
        if waiter is not None:
            gen, t0, delay = waiter
            when = max(t0, t + delay)
            self._at(when, gen, when)

    # -- memory engine --------------------------------------------------------
    def _read_free(self) -> int:
        """The first cycle the memory takes another read command (the reads in flight at their limit:
        when the oldest one's data is in)."""
        inflight = self.rd_inflight
        if len(inflight) >= self.p.reads_in_flight and inflight[0] > self.rd_next_cmd:
            return inflight[0]
        return self.rd_next_cmd

    def _read_decision(self, t: int) -> None:
        if t not in self.rd_decision_at:
            self.rd_decision_at.add(t)
            self._at(t, None, ("rd",), order=1)

    def _write_decision(self, t: int) -> None:
        if t not in self.wr_decision_at:
            self.wr_decision_at.add(t)
            self._at(t, None, ("wr",), order=1)

    def _decide_read(self, t: int) -> None:
        self.rd_decision_at.discard(t)
        if not self.rd_pending or self._read_free() > t:
            return
        eligible = [r for r in self.rd_pending if r[1] <= t]
        if not eligible:
            self._read_decision(min(r[1] for r in self.rd_pending))
            return
        req = min(eligible)
        self.rd_pending.remove(req)
        _, _, _, beats, gen = req
        self._at(t, gen, self._grant_read(t, beats))
        if self.rd_pending:
            self._read_decision(max(self._read_free(), min(r[1] for r in self.rd_pending)))

    def _grant_read(self, t: int, beats: int) -> tuple[int, int, int]:
        p = self.p
        first = t + p.read_setup + p.latency
        if self.rd_data_free > first:
            first = self.rd_data_free
        last = first + beats - 1
        self.rd_data_free = last + 1
        inflight = self.rd_inflight
        while inflight and inflight[0] <= t:
            inflight.popleft()
        inflight.append(last + 1)
        self.rd_next_cmd = t + 1
        return t, first, last

    def _grant_write(self, t: int, busy: int) -> tuple[int, int, int, int]:
        p = self.p
        first = t + p.write_setup
        last = first + busy - 1
        self.wr_free = last + 1
        return t, first, last, last + p.write_response + p.latency

    def _decide_write(self, t: int) -> None:
        self.wr_decision_at.discard(t)
        if not self.wr_pending or self.wr_free > t:
            return
        t_req, beats, busy, gen = self.wr_pending[0]
        if t_req > t:
            self._write_decision(t_req)
            return
        self.wr_pending.popleft()
        self._at(t, gen, self._grant_write(t, busy))
        if self.wr_pending:
            self._write_decision(max(self.wr_free, self.wr_pending[0][0]))

    # -- processes ----------------------------------------------------------
    def _fetch(self):
        p = self.p
        n = len(self.works)
        beats_per_insn = max(1, 16 // p.bus_bytes)
        counts = [0] * len(MODULES)
        t = p.fetch_start
        i = 0
        while i < n:
            k = min(p.fetch_chunk, n - i)
            accept, first, last = yield ("read", t, FETCH, k * beats_per_insn)
            if self.record:
                self.transfers.append(Transfer(-1, "fetch", accept, first, last, k * beats_per_insn))
            d = last + 1
            if p.fetch_overlap:  # each instruction as soon as its beats are in
                d = first + beats_per_insn
            stalled = 0
            for j in range(i, i + k):
                if p.fetch_overlap and d < first + (j - i + 1) * beats_per_insn:
                    d = first + (j - i + 1) * beats_per_insn
                m = self.works[j].module
                if counts[m] >= p.queue_depth:
                    room = yield ("sig", self.done[m], counts[m] - p.queue_depth, d, 1)
                    stalled += room - d
                    d = room
                self._signal(self.dispatched[m], d)
                counts[m] += 1
                d += p.fetch_dispatch
            self.fetches.append((i, accept, d - p.fetch_dispatch, stalled))
            t = d - p.fetch_dispatch + p.fetch_gap
            i += k

    def _module(self, m: int):
        p = self.p
        latency = [{"g2l": p.g2l_latency, "s2g": p.s2g_latency}.get(name, p.token_latency) for name in QUEUES]
        free = 0
        for j, w in enumerate(self.queues[m]):
            t = self._try_sig(self.dispatched[m], j, free, 1)
            if t is None:
                t = yield ("sig", self.dispatched[m], j, free, 1)
            ready = t
            for q in w.pops:
                sig = self.pushes[q]
                k = self.pops[q]
                delay = latency[q]
                when = self._try_sig(sig, k, t, delay)
                t = when if when is not None else (yield ("sig", sig, k, t, delay))
                self.pops[q] += 1
            start = t
            mem_wait = 0
            kind = w.kind
            if kind == EXEC:
                end = start + w.cycles
            elif kind == READ:
                t = start + 1 + w.setup
                inflight: deque[int] = deque()
                last = t - 1
                serial = p.row_setup and w.client != UOP  # the HLS cores: one row at a time
                if serial and w.bursts:  # the first row's memcpy too
                    t += p.row_setup
                slow, taken = w.client == WGT and p.wgt_beat_cycles > 1, -1  # the HLS weight bank's read-modify-write
                own_limit, record = p.client_reads_in_flight, self.record
                pipelined = own_limit > 1  # the next burst is asked for a cycle after this one is accepted
                # the 2021 design writes all the padding while its reads are in flight, the data after it
                pad_first = p.dma_pad_during_reads and w.client != UOP
                for k, (beats, gap) in enumerate(zip(w.bursts, w.gaps, strict=True)):
                    if not pad_first:
                        t += gap
                    if serial and k in w.row_starts:  # the next row is asked for once this one has arrived
                        t = max(t, last + 1 + p.row_setup)
                    if len(inflight) >= own_limit:
                        oldest = inflight.popleft() + 1
                        if oldest > t:
                            t = oldest
                    grant = self._try_read(t, beats)
                    if grant is None:
                        grant = yield ("read", t, w.client, beats)
                    accept, first, last = grant
                    mem_wait += accept - t
                    if record:
                        self.transfers.append(Transfer(w.index, CLIENTS[w.client], accept, first, last, beats))
                    if slow:  # the client takes the beats slower than they come (buffered in its read FIFO)
                        last = max(first, taken + 1) + beats * p.wgt_beat_cycles - 1
                        taken = last
                    inflight.append(last)
                    t = accept + 1 if pipelined else last + 1
                if pad_first:
                    end = max(last, start + w.setup + sum(w.gaps) + w.tail + sum(w.bursts))
                else:
                    end = max(last, t - 1) + w.tail if w.bursts else start + 1 + w.setup + w.tail
            elif kind == WRITE:
                t = start + 1 + w.setup
                end = t
                if p.row_setup and w.bursts:  # the HLS store: every row a memcpy of its own, the first too
                    t += p.row_setup
                for k, (beats, busy) in enumerate(zip(w.bursts, w.busy, strict=True)):
                    if k in w.row_starts:  # a new command: the answers of the last one are in first
                        t = max(t, end + 1 + (p.store_row_setup if k in w.rows else 0))
                    grant = self._try_write(t, busy)
                    if grant is None:
                        grant = yield ("write", t, beats, busy)
                    accept, first, last, ack = grant
                    mem_wait += accept - t
                    if self.record:
                        self.transfers.append(Transfer(w.index, "out", accept, first, last, beats))
                    end = max(end, ack)
                    t = last + 1
            elif kind == SYNC:
                end = start + w.cycles
            else:  # FINISH
                end = start + w.cycles
                self.finish = end
            self.insns[w.index] = InsnTime(w.index, m, ready, start, end, mem_wait)
            self._signal(self.done[m], end)
            for q in w.pushes:  # (an ALU instruction's tokens may go out before its last results: alu.token_lead)
                self._signal(self.pushes[q], end - w.lead)
            free = end + p.insn_gap
            if kind == FINISH:
                return

    def run(self) -> Timeline:
        # Every process starts from the heap, so none can run ahead of one not yet started.
        for gen in (self._fetch(), self._module(LOAD), self._module(COMPUTE), self._module(STORE)):
            self._at(0, gen, None)
        heap = self.heap
        while heap:
            t, _, _, gen, value = heapq.heappop(heap)
            if gen is None:
                if value[0] == "rd":
                    self._decide_read(t)
                else:
                    self._decide_write(t)
            else:
                self._step(gen, value)
            if self.finish is not None and not heap:
                break
        if self.finish is None:
            self._deadlock()
        insns = [x for x in self.insns if x is not None]
        return Timeline(self.finish, insns, self.transfers, self.fetches, self._token_steps())

    def _token_steps(self) -> dict[str, list[tuple[int, int]]]:
        if not self.record:
            return {}
        out = {}
        pop_times: list[list[int]] = [[] for _ in QUEUES]
        for w, it in zip(self.works, self.insns, strict=True):
            if it is None:
                continue
            for q in w.pops:
                pop_times[q].append(it.start)
        for q, name in enumerate(QUEUES):
            events = [(t, 1) for t in self.pushes[q].times] + [(t, -1) for t in pop_times[q]]
            events.sort()
            level, steps = 0, []
            for t, d in events:
                level += d
                steps.append((t, level))
            out[name] = steps
        return out

    def _deadlock(self) -> None:
        waiting = []
        for m, queue in enumerate(self.queues):
            done = sum(1 for w in queue if self.insns[w.index] is not None)
            if done < len(queue):
                w = queue[done]
                names = ", ".join(QUEUES[q] for q in w.pops) or "the fetch unit"
                waiting.append(f"{MODULES[m]} at instruction {w.index} waits on {names}")
        detail = "; ".join(waiting) if waiting else "FINISH never ran"
        raise SimFault(f"timing: deadlock: {detail}")


def simulate(works: list[Work], profile: Profile, record: bool = True) -> Timeline:
    """Run the timing model over planned instructions (``record`` keeps transfers for pictures)."""
    if not works or works[-1].kind != FINISH and not any(w.kind == FINISH for w in works):
        raise SimFault("timing: the program has no FINISH instruction")
    return _Engine(works, profile, record).run()

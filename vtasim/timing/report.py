"""What a timing run adds up to: cycles, where each module's time went, utilisation, bandwidth.

Per module the cycles of the run split into *busy* (executing, memory waits
excluded), *token* (an instruction was in the queue but a token it pops had
not arrived), *memory* (its bursts waited for the memory engine) and *idle*
(nothing to do: the queue was empty). The four add up to the total cycles:
work still running when FINISH completes (a FINISH that pops no token from
the last STOREs) is counted only up to then, and reported as such.
For fetch, *busy* is dispatching, *memory* reading a chunk, and *token* the
cycles it stalled because a module's command queue was full.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtasm.config import VTAConfig

from .engine import Timeline
from .plan import MODULES, Work
from .profile import Profile


@dataclass
class TimingReport:
    """The summary of one timing run (all figures derived from the timeline)."""

    profile: str
    cycles: int
    clock_mhz: float
    modules: dict[str, dict[str, int]]
    gemm_executions: int
    alu_executions: int
    macs: int
    peak_macs_per_cycle: int
    alu_peak_cycles: int
    lanes: int
    read_bytes: int
    write_bytes: int
    bus_bytes_per_cycle: int
    notes: tuple[str, ...] = ()  # what the cycles do not say (an instruction the design never completes)

    @property
    def seconds(self) -> float:
        return self.cycles / (self.clock_mhz * 1e6)

    @property
    def gemm_utilisation(self) -> float:
        return self.macs / (self.peak_macs_per_cycle * self.cycles) if self.cycles else 0.0

    @property
    def alu_utilisation(self) -> float:
        """ALU executions against the peak: one execution (all lanes) per immediate-form execution time."""
        return self.alu_executions * self.alu_peak_cycles / self.cycles if self.cycles else 0.0

    @property
    def gops(self) -> float:
        return 2 * self.macs / self.seconds / 1e9 if self.cycles else 0.0

    @property
    def peak_gops(self) -> float:
        return 2 * self.peak_macs_per_cycle * self.clock_mhz * 1e6 / 1e9

    def bandwidth(self, nbytes: int) -> float:
        """Bytes per cycle moved, as a fraction of one channel's peak."""
        return nbytes / (self.bus_bytes_per_cycle * self.cycles) if self.cycles else 0.0

    def as_dict(self) -> dict:
        """The JSON form (``--profile``): integers for counts, rounded fractions."""
        return {
            "profile": self.profile,
            "cycles": self.cycles,
            "clock_mhz": self.clock_mhz,
            "time_us": round(self.seconds * 1e6, 3),
            "modules": self.modules,
            "gemm": {"executions": self.gemm_executions, "macs": self.macs,
                     "utilisation": round(self.gemm_utilisation, 4)},
            "alu": {"executions": self.alu_executions, "lane_ops": self.alu_executions * self.lanes,
                    "utilisation": round(self.alu_utilisation, 4), "busy_fraction": round(
                        self.modules["compute"]["alu"] / self.cycles if self.cycles else 0.0, 4)},
            "dram": {"read_bytes": self.read_bytes, "write_bytes": self.write_bytes,
                     "read_bandwidth_fraction": round(self.bandwidth(self.read_bytes), 4),
                     "write_bandwidth_fraction": round(self.bandwidth(self.write_bytes), 4),
                     "bus_bytes_per_cycle": self.bus_bytes_per_cycle},
            "gops": round(self.gops, 3),
            "peak_gops": round(self.peak_gops, 3),
            **({"notes": list(self.notes)} if self.notes else {}),
        }

    def text(self) -> str:
        """A few human lines for the terminal."""
        us = self.seconds * 1e6
        lines = [f"timing ({self.profile}): {self.cycles:,} cycles = {us:,.2f} us at {self.clock_mhz:g} MHz"]
        for name, m in self.modules.items():
            # fetch waits on no token: its "token" cycles are stalls on a module's full command queue
            label = {"token": "queue full"} if name == "fetch" else {}
            parts = ", ".join(f"{label.get(k, k)} {v:,} ({100 * v / self.cycles:.0f}%)" for k, v in m.items()
                              if k in ("busy", "token", "memory", "idle"))
            if m.get("after_finish"):
                parts += (f"; {m['after_finish']:,} instruction(s) still running when FINISH ended the run "
                          "(FINISH waits for no token from them)")
            lines.append(f"  {name:8s} {parts}")
        lines.append(f"  GEMM {self.gemm_utilisation:.1%} of peak ({self.macs:,} MACs); "
                     f"{self.gops:.2f} GOPS of {self.peak_gops:.1f}")
        lines.append(f"  ALU  {self.alu_utilisation:.1%} of peak ({self.alu_executions:,} executions of "
                     f"{self.lanes} lanes)")
        lines.append(f"  DRAM read {self.read_bytes:,} B ({self.bandwidth(self.read_bytes):.1%} of the bus), "
                     f"write {self.write_bytes:,} B ({self.bandwidth(self.write_bytes):.1%})")
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


def summarise(timeline: Timeline, works: list[Work], cfg: VTAConfig, profile: Profile) -> TimingReport:
    """Add up a timeline into a report."""
    cycles = timeline.cycles
    modules: dict[str, dict[str, int]] = {}
    alu_busy = 0
    for m, name in enumerate(MODULES):
        busy = token = memory = late = 0
        for it in timeline.insns:
            if it.module != m:
                continue
            # what runs on past FINISH (a FINISH that waits for no STORE) is not in the run's cycles
            start, end = min(it.start, cycles), min(it.end, cycles)
            token += start - min(it.ready, cycles)
            waited = min(it.mem_wait, end - start)
            memory += waited
            busy += end - start - waited
            late += it.end > cycles
            if works[it.index].unit == "alu":
                alu_busy += end - start
        busy = max(busy, 0)
        entry = {"busy": busy, "token": token, "memory": memory,
                 "idle": max(cycles - busy - token - memory, 0), "instructions": sum(
                     1 for it in timeline.insns if it.module == m), "after_finish": late}
        modules[name] = entry
    modules["compute"]["alu"] = alu_busy
    # Fetch: memory = from a chunk's read to its last beat, busy = dispatching, queue_full = stalled on a
    # full module queue (reported under "token": it waits on another module, as a token wait does).
    fetch_memory = fetch_busy = fetch_stalled = 0
    for first, accept, last_dispatch, stalled in timeline.fetches:
        k = min(profile.fetch_chunk, len(works) - first)
        dispatching = k * profile.fetch_dispatch
        fetch_busy += dispatching
        fetch_stalled += stalled
        fetch_memory += max(last_dispatch + profile.fetch_dispatch - accept - dispatching - stalled, 0)
    modules = {"fetch": {"busy": fetch_busy, "token": fetch_stalled, "memory": fetch_memory,
                         "idle": max(cycles - fetch_busy - fetch_stalled - fetch_memory, 0),
                         "instructions": len(works), "after_finish": 0}, **modules}
    running = {it.index for it in timeline.insns if it.end > cycles}  # still running when FINISH ends the run
    read_bytes = sum(w.bytes for i, w in enumerate(works) if w.kind == "read" and i not in running)
    read_bytes += 16 * len(works)
    write_bytes = sum(w.bytes for i, w in enumerate(works) if w.kind == "write" and i not in running)
    return TimingReport(
        profile=profile.name, cycles=cycles, clock_mhz=profile.clock_mhz, modules=modules,
        gemm_executions=sum(w.executions for w in works if w.unit == "gemm"),
        alu_executions=sum(w.executions for w in works if w.unit == "alu"),
        macs=sum(w.macs for w in works),
        peak_macs_per_cycle=cfg.batch * cfg.block_in * cfg.block_out // profile.gemm_per_execution,
        alu_peak_cycles=profile.alu_imm_per_execution, lanes=cfg.batch * cfg.block_out,
        read_bytes=read_bytes, write_bytes=write_bytes, bus_bytes_per_cycle=profile.bus_bytes,
    )

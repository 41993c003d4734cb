"""Starting a run and telling its end, for each design's control interface (register maps: registers.py).

``hls`` (the Pynq, Ultra96 and ZCU104 bitstreams) as VTA's Pynq driver does it: the instruction count and
address into fetch, the data ports of load, compute and store at 0 (the instructions' addresses are
absolute), the three workers started with auto-restart, fetch started; the run is over when compute's
``done`` output reads 1. ``chisel-2021`` (the Chisel shell's VCR): the cycle counter cleared, the count and
the instruction pointer, the five data pointers at 0, launch; the run is over when control's finish bit is
set, and the event counter holds the device's cycles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import registers as r

DESIGNS = ("hls", "chisel-2021")


@dataclass
class HlsProtocol:
    """The four HLS cores' register windows (pynq MMIO objects), by core name."""

    mmio: dict[str, Any]

    def start(self, insn_addr: int, insn_count: int) -> None:
        fetch, load, compute, store = (self.mmio[c.name] for c in r.HLS_CORES)
        fetch.write(r.FETCH.ports["insn_count"], insn_count)
        fetch.write(r.FETCH.ports["insns"], insn_addr)
        load.write(r.LOAD.ports["inputs"], 0)
        load.write(r.LOAD.ports["weights"], 0)
        compute.write(r.COMPUTE.ports["uops"], 0)
        compute.write(r.COMPUTE.ports["biases"], 0)
        store.write(r.STORE.ports["outputs"], 0)
        fetch.write(r.AP_CTRL, r.AP_START)
        for core in r.HLS_WORKERS:
            self.mmio[core.name].write(r.AP_CTRL, r.HLS_RUN)

    def finished(self) -> bool:
        return self.mmio[r.COMPUTE.name].read(r.COMPUTE.ports["done_o"]) == 1

    def cycles(self) -> int | None:
        return None  # the HLS design has no cycle counter


@dataclass
class ChiselProtocol:
    """The VCR's register window (a pynq MMIO object)."""

    vcr: Any

    def start(self, insn_addr: int, insn_count: int) -> None:
        v = r.VCR
        self.vcr.write(v.cycles, 0)
        self.vcr.write(v.insn_count, insn_count)
        for name, offset in v.pointers:
            self.vcr.write(offset, insn_addr if name == "insns" else 0)
            self.vcr.write(offset + 4, 0)  # the high word: addresses lie below 4 GiB
        self.vcr.write(v.control, v.launch)

    def finished(self) -> bool:
        return bool(self.vcr.read(r.VCR.control) & r.VCR.finish)

    def cycles(self) -> int | None:
        return self.vcr.read(r.VCR.cycles)

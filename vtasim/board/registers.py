"""The register maps of VTA's two control interfaces, as data (the designs' public drivers' layouts).

``hls``: four HLS cores (fetch, load, compute, store), each an AXI-lite register file with the HLS block
protocol at 0x00 and its scalar ports from 0x10 (32-bit addresses, as the Pynq bitstreams are built).
``chisel-2021``: the Chisel shell's VCR, one register file: control, the event (cycle) counter, the
instruction count and six 64-bit pointers (instructions, micro-ops, inputs, weights, accumulators,
outputs), each a base the DMA adds to an instruction's byte address.
"""

from __future__ import annotations

from dataclasses import dataclass

# the HLS block-level protocol register (ap_ctrl) at offset 0 of every core
AP_CTRL = 0x00
AP_START = 0x01  # read/write, cleared when the core takes the start
AP_DONE = 0x02  # read, cleared on read
AP_IDLE = 0x04  # read
AP_READY = 0x08  # read, cleared on read
AUTO_RESTART = 0x80  # read/write
GIE, IER, ISR = 0x04, 0x08, 0x0C  # interrupt enable and status (toggle on write)

REGISTER_SPAN = 0x1000  # each core's register window


@dataclass(frozen=True)
class HlsCore:
    """One HLS core: its usual IP name, its usual base address on a Pynq board, its scalar ports."""

    name: str
    default_base: int
    ports: dict[str, int]  # port name -> offset of its 32-bit data register
    read_only: tuple[str, ...] = ()  # ports the core writes (outputs)


FETCH = HlsCore("fetch_0", 0x43C00000, {"insn_count": 0x10, "insns": 0x18})
LOAD = HlsCore("load_0", 0x43C01000, {"inputs": 0x10, "weights": 0x18})
COMPUTE = HlsCore("compute_0", 0x43C02000, {"done_i": 0x10, "done_o": 0x18, "done_o_vld": 0x1C,
                                            "uops": 0x20, "biases": 0x28}, read_only=("done_o", "done_o_vld"))
STORE = HlsCore("store_0", 0x43C03000, {"outputs": 0x10})
HLS_CORES = (FETCH, LOAD, COMPUTE, STORE)
HLS_WORKERS = (LOAD, COMPUTE, STORE)  # the cores fetch feeds through queues: they run with auto-restart
HLS_RUN = AUTO_RESTART | AP_START  # what a worker's control register is written with (0x81)


@dataclass(frozen=True)
class Vcr:
    """The Chisel shell's VCR: register offsets and the control bits."""

    name: str = "vta_0"
    default_base: int = 0x43C00000
    control: int = 0x00
    cycles: int = 0x04
    insn_count: int = 0x08
    pointers: tuple[tuple[str, int], ...] = (("insns", 0x0C), ("uops", 0x14), ("inputs", 0x1C),
                                             ("weights", 0x24), ("biases", 0x2C), ("outputs", 0x34))
    launch: int = 0x1  # control bit 0: start (written by the host)
    finish: int = 0x2  # control bit 1: the run reached FINISH (set by the device)
    span: int = 0x40

    def pointer(self, name: str) -> int:
        """The offset of a pointer's low word (its high word follows)."""
        return dict(self.pointers)[name]


VCR = Vcr()

# which DMA port (its base register) serves each memory type: the base is added to dram_base * element bytes
PORT_OF_MEMORY_TYPE = {"uop": "uops", "wgt": "weights", "inp": "inputs", "acc": "biases", "acc8": "biases",
                       "out": "outputs"}

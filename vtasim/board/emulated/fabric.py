"""The emulated board's fabric: the register files of one VTA design and the device that runs a program
from physical memory with the functional simulator.

``hls``: four HLS cores at their usual addresses, each with the block protocol (ap_start write-one and
cleared when taken, ap_done and ap_ready cleared on read, ap_idle read-only, auto_restart) and its ports.
``chisel-2021``: the VCR. A run starts when fetch is started (or the VCR launched) and executes at the
first poll after every HLS worker runs with auto-restart; a worker never started leaves the run hanging,
as on hardware. Protocol misuses a board would punish are EmulatorErrors: a data register written while
a run is in progress, a worker started without auto-restart, a register that does not exist or is
read-only, an address outside every allocated buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vtasm import isa
from vtasm.columns import decode_columns, decode_stream
from vtasm.config import VTAConfig
from vtasm.errors import VtaError
from vtasm.program import Program

from .. import registers as r
from ..relocate import add_to_dram_base, element_sizes
from .memory import Dram, EmulatorError


@dataclass
class HlsCore:
    """One HLS core's registers."""

    spec: r.HlsCore
    ports: dict[int, int] = field(default_factory=dict)  # offset -> value
    pending_start: bool = False
    auto_restart: bool = False
    started: bool = False  # taken a start since the fabric was programmed
    done_flag: bool = False
    ready_flag: bool = False
    gie: int = 0
    ier: int = 0
    isr: int = 0


class Fabric:
    """The programmed bitstream: register files by base address, the DRAM, the run's state."""

    def __init__(self, design: str, config: VTAConfig, dram: Dram, hung=lambda: False):
        self.design, self.config, self.dram = design, config, dram
        self.running = False  # a run started and not yet seen finished
        self.finished = False
        self.hung = hung  # true for a board that never finishes (tests of the driver's timeout)
        self.stuck = False  # the run waits for a token or a FINISH that never comes
        self.program: Program | None = None  # the last run, un-relocated (for the cycle counter)
        self._cycles: int | None = None
        self.hls = {c.default_base: HlsCore(c) for c in r.HLS_CORES} if design == "hls" else {}
        self.vcr: dict[int, int] = {}

    # -- register windows --------------------------------------------------------------------------------
    def window(self, base: int, length: int):
        """The register file at ``base`` (pynq.MMIO's target), or an error naming what is there."""
        spans = [(b, r.REGISTER_SPAN, core.spec.name) for b, core in self.hls.items()] if self.hls else \
            [(r.VCR.default_base, r.VCR.span, r.VCR.name)]
        for start, span, _ in spans:
            if start <= base and base + length <= start + max(span, r.REGISTER_SPAN):
                return start, base - start
        raise EmulatorError(f"no device registers at {base:#x}..{base + length - 1:#x} (the {self.design} design's "
                            f"cores: {', '.join(f'{n} at {b:#x}' for b, _, n in spans)})")

    def read(self, base: int, offset: int) -> int:
        if self.hls:
            return self._hls_read(self.hls[base], offset)
        return self._vcr_read(offset)

    def write(self, base: int, offset: int, value: int) -> None:
        if not 0 <= value < 1 << 32:
            raise EmulatorError(f"register value {value} does not fit 32 bits")
        if self.hls:
            self._hls_write(self.hls[base], offset, value)
        else:
            self._vcr_write(offset, value)

    # -- HLS cores -----------------------------------------------------------------------------------------
    def _hls_read(self, core: HlsCore, offset: int) -> int:
        spec = core.spec
        if offset == r.AP_CTRL:
            self._poll()
            idle = not self.running or not core.started
            value = (r.AP_START if core.pending_start else 0) | (r.AP_DONE if core.done_flag else 0) | \
                (r.AP_IDLE if idle else 0) | (r.AP_READY if core.ready_flag else 0) | \
                (r.AUTO_RESTART if core.auto_restart else 0)
            core.done_flag = core.ready_flag = False  # clear on read
            return value
        if offset in (r.GIE, r.IER, r.ISR):
            return {r.GIE: core.gie, r.IER: core.ier, r.ISR: core.isr}[offset]
        if offset not in spec.ports.values():
            raise EmulatorError(f"{spec.name}: no register at offset {offset:#x}")
        if spec is r.COMPUTE and offset == spec.ports["done_o"]:
            self._poll()
            return int(self.finished)
        if spec is r.COMPUTE and offset == spec.ports["done_o_vld"]:
            self._poll()
            return int(self.finished)
        return core.ports.get(offset, 0)

    def _hls_write(self, core: HlsCore, offset: int, value: int) -> None:
        spec = core.spec
        if offset == r.AP_CTRL:
            core.auto_restart = bool(value & r.AUTO_RESTART)
            if value & r.AP_START:  # write-one: writing 0 does not stop a core
                if spec is r.FETCH:
                    self._start()
                core.pending_start = True
                core.started = True
            return
        if offset in (r.GIE, r.IER):
            setattr(core, "gie" if offset == r.GIE else "ier", value & (1 if offset == r.GIE else 3))
            return
        if offset == r.ISR:
            core.isr ^= value & 3  # toggle on write
            return
        names = {o: n for n, o in spec.ports.items()}
        if offset not in names:
            raise EmulatorError(f"{spec.name}: no register at offset {offset:#x}")
        if names[offset] in spec.read_only:
            raise EmulatorError(f"{spec.name}: register {names[offset]} at {offset:#x} is read-only")
        if self.running:
            raise EmulatorError(f"{spec.name}: register {names[offset]} written while a run is in progress "
                                "(wait for done first)")
        core.ports[offset] = value

    # -- the Chisel shell's VCR ----------------------------------------------------------------------------
    def _vcr_read(self, offset: int) -> int:
        v = r.VCR
        self._vcr_offset(offset)
        if offset == v.control:
            self._poll()
            return v.finish if self.finished else 0
        if offset == v.cycles:
            self._poll()
            return self.cycles() if self.finished else 0
        return self.vcr.get(offset, 0)

    def _vcr_write(self, offset: int, value: int) -> None:
        v = r.VCR
        self._vcr_offset(offset)
        if offset == v.control:
            if value & ~(v.launch | v.finish):
                raise EmulatorError(f"{v.name}: control bits {value:#x}: only launch (bit 0) is writable")
            if value & v.launch:
                self._start()
            return
        if self.running:
            raise EmulatorError(f"{v.name}: register at {offset:#x} written while a run is in progress "
                                "(wait for finish first)")
        if offset == v.cycles:
            self._cycles = None  # the host clears the event counter
            return
        self.vcr[offset] = value

    def _vcr_offset(self, offset: int) -> None:
        if offset % 4 or not 0 <= offset < r.VCR.pointers[-1][1] + 8:
            raise EmulatorError(f"{r.VCR.name}: no register at offset {offset:#x}")

    # -- the run ---------------------------------------------------------------------------------------------
    def _start(self) -> None:
        if self.running:
            raise EmulatorError("the device was started while a run is in progress")
        self.running, self.finished, self._cycles, self.program, self.stuck = True, False, None, None, False

    def _poll(self) -> None:
        """Execute a started run once every worker can take its instructions."""
        if not self.running or self.hung() or self.stuck:
            return
        if self.hls:
            fetch = self.hls[r.FETCH.default_base]
            fetch.pending_start = False
            for spec in r.HLS_WORKERS:
                core = self.hls[spec.default_base]
                if core.started and not core.auto_restart:
                    raise EmulatorError(f"{spec.name} was started without auto-restart: it takes one instruction "
                                        "and stops, so the run can never finish (write 0x81 to its control)")
                if not core.started:
                    return  # its queue never drains: the run hangs, as on hardware
                core.pending_start = False
            count, insn_addr = (fetch.ports.get(fetch.spec.ports[p], 0) for p in ("insn_count", "insns"))
        else:
            count = self.vcr.get(r.VCR.insn_count, 0)
            insn_addr = self._pointer("insns")
        self.program = self._program(insn_addr, count)
        if not self._execute(self.program):
            self.stuck = True  # the device waits for ever, as the hardware would
            return
        self.running, self.finished = False, True
        if self.hls:
            self.hls[r.FETCH.default_base].done_flag = True

    def _pointer(self, name: str) -> int:
        offset = r.VCR.pointer(name)
        return self.vcr.get(offset, 0) | self.vcr.get(offset + 4, 0) << 32

    def _port(self, memory: str) -> int:
        """The base address the DMA adds for a memory type (the port offset register or VCR pointer)."""
        port = r.PORT_OF_MEMORY_TYPE[memory]
        if not self.hls:
            return self._pointer(port)
        for core in self.hls.values():
            if port in core.spec.ports:
                return core.ports.get(core.spec.ports[port], 0)
        raise AssertionError(port)

    def _program(self, insn_addr: int, count: int) -> Program:
        """The instructions fetch reads from physical memory, their addresses made offsets into the DRAM;
        every LOAD or STORE that moves data must lie inside an allocated buffer."""
        if count == 0:
            raise EmulatorError("started with an instruction count of 0")
        nbytes = count * 16
        self.dram.check(insn_addr, insn_addr + nbytes, f"the instruction stream ({count} instructions)")
        at = insn_addr - self.dram.base
        data = self.dram.device[at:at + nbytes].tobytes()
        columns = decode_columns(data, self.config)
        elem = element_sizes(columns)
        moves = (elem > 0) & (columns.column("x_size") > 0) & (columns.column("y_size") > 0)
        port = self._ports(columns)
        start = port + columns.column("dram_base") * elem
        rows, x_size, stride = (columns.column(n) for n in ("y_size", "x_size", "x_stride"))
        end = start + np.where(stride >= x_size, (rows - 1) * stride + x_size, rows * x_size) * elem
        self.dram.check_all(start, end, moves, lambda k: f"instruction {k} ({_what(columns, k)})")
        offset = start - self.dram.base
        misaligned = moves & (offset % np.maximum(elem, 1) != 0)
        if misaligned.any():
            k = int(np.argmax(misaligned))
            raise EmulatorError(f"instruction {k}: address {int(start[k]):#x} is not a whole number of {int(elem[k])}-"
                                "byte elements into the memory")
        words = np.frombuffer(data, dtype="<u8").reshape(-1, 2).copy()
        delta = np.where(moves, offset // np.maximum(elem, 1) - columns.column("dram_base"), 0)
        add_to_dram_base(words, columns, moves, delta)
        return Program(self.config, instructions=decode_stream(words.tobytes(), self.config),
                       dram_bytes=self.dram.size, insn_addr=at, uop_addr=at)

    def _ports(self, columns) -> np.ndarray:
        """Each instruction's DMA base: its memory type's port offset register (or VCR pointer)."""
        port = np.zeros(len(columns), dtype=np.int64)
        load = columns.opcode == isa.OPCODES["load"]
        for value, memory in isa.MEM_TYPE_NAMES.items():
            if memory in r.PORT_OF_MEMORY_TYPE:
                port[load & (columns.column("memory_type") == value)] = self._port(memory)
        port[columns.opcode == isa.OPCODES["store"]] = self._port("out")
        return port

    def _execute(self, program: Program) -> bool:
        """Run the program on the physical memory; False when it never finishes (a deadlock, or no FINISH:
        the hardware waits for ever), an EmulatorError for any other fault."""
        from vtasim.core.machine import Machine

        machine = Machine(program)
        machine.state.dram = self.dram.device  # the device reads and writes the physical memory itself
        try:
            machine.run()
        except VtaError as exc:
            if exc.message.startswith("deadlock") or "without a FINISH" in exc.message:
                return False
            raise EmulatorError(f"the device faulted: {exc.message}") from None
        return True

    def cycles(self) -> int:
        """The last run's cycles, as the design's timing model computes them (the emulated counter)."""
        if self._cycles is None and self.program is not None:
            from vtasim.timing.profile import load_profile
            from vtasim.timing.run import time_program

            self._cycles = time_program(self.program, load_profile(self.design), record=False).report.cycles
        return (self._cycles or 0) & 0xFFFFFFFF


def _what(columns, k: int) -> str:
    """An instruction in two words: its kind and memory type."""
    if columns.opcode[k] == isa.OPCODES["store"]:
        return "store"
    return f"load {isa.MEM_TYPE_NAMES.get(int(columns.column('memory_type')[k]), '?')}"

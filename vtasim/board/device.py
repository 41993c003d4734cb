"""A VTA board: open its overlay, load programs into contiguous memory, run them, read the results back.

    with Board("hls", platform="pynq", bitstream="vta.bit") as board:
        loaded = board.load(program)          # a buffer holding its DRAM, relocated (relocate.py)
        loaded.dram[addr:addr + n] = data     # inputs go into the buffer's CPU view (program DRAM addresses)
        launch = board.execute(loaded)        # flush, start, poll, invalidate: seconds (and cycles)
        result = loaded.dram[addr:addr + n]

Every buffer is freed when the board is closed, whatever happened. Anything the platform raises becomes
a DeviceError (one line); a run that does not finish within the timeout is a DeviceTimeout.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vtasm.config import VTAConfig, load_config
from vtasm.errors import FormatError, UsageError, VtaError
from vtasm.program import Program

from . import registers as r
from .errors import DeviceError, DeviceTimeout
from .platform import DEFAULT_PLATFORM, load_platform
from .protocols import DESIGNS, ChiselProtocol, HlsProtocol
from .relocate import Placed, alignment, check_placeable, place

DEFAULT_TIMEOUT = 10.0  # seconds a run may take before the device is declared hung


def default_bitstream(design: str) -> str:
    """The bitstream loaded when none is named: vta-DESIGN.bit in the current directory."""
    return f"vta-{design}.bit"


@dataclass
class Launch:
    """What one run on the device measured: its wall time and, on the Chisel shell, its cycles."""

    seconds: float
    cycles: int | None


@dataclass
class Loaded:
    """A program in a device buffer: the buffer (a pynq buffer: an ndarray with a physical address), the
    program's DRAM within it as the CPU sees it (uint8, indexed by the program's DRAM addresses) and the
    placement of its instruction stream."""

    program: Program
    buffer: Any
    dram: np.ndarray
    placed: Placed


@dataclass
class Board:
    """An opened board of one design (see the module docstring)."""

    design: str
    platform: str = DEFAULT_PLATFORM
    bitstream: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    config: VTAConfig | None = None  # the bitstream's, once opened
    _module: Any = None
    _protocol: Any = None
    _buffers: list = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.design not in DESIGNS:
            raise UsageError(f"--board {self.design}: the boards run the designs {', '.join(DESIGNS)}")

    def __enter__(self) -> Board:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        """Load the platform, the overlay (programming the bitstream) and the design's register windows."""
        module = load_platform(self.platform)
        path = self.bitstream or default_bitstream(self.design)
        overlay = _calling(f"loading the bitstream {path}", lambda: module.Overlay(path))
        self.config = bitstream_config(overlay, path)
        ips = getattr(overlay, "ip_dict", {}) or {}
        if self.design == "hls":
            self._protocol = HlsProtocol({c.name: self._window(module, ips, c.name, c.default_base, r.REGISTER_SPAN,
                                                               f"xilinx.com:hls:{c.name.split('_')[0]}")
                                          for c in r.HLS_CORES})
        else:
            self._protocol = ChiselProtocol(self._window(module, ips, r.VCR.name, r.VCR.default_base, r.VCR.span,
                                                         "VTAShell"))
        self._module = module

    def _window(self, module, ips: dict, name: str, base: int, span: int, kind: str):
        """A core's register window: where the overlay's hardware description puts it (by name, or by IP
        type), else the design's usual address when the overlay describes no IP at all."""
        entry = ips.get(name) or next((v for v in ips.values() if kind in str(v.get("type", ""))), None)
        if entry is None and ips:
            raise DeviceError(f"the bitstream has no {name} core ({kind}): it is not the {self.design} design "
                              f"(its cores: {', '.join(sorted(ips)) or 'none'})")
        if entry is not None:
            base = int(entry.get("phys_addr", base))
            span = int(entry.get("addr_range", span))
        return _calling(f"mapping {name} at {base:#x}", lambda: module.MMIO(base, span))

    def check_config(self, program: Program, origin: str) -> None:
        """Refuse, before anything reaches the device, a program built for another configuration."""
        if self.config is not None and program.config != self.config:
            raise FormatError(f"{origin}: built for VTA configuration {describe(program.config)}, but the "
                              f"bitstream is {describe(self.config)}")

    def load(self, program: Program, origin: str = "program") -> Loaded:
        """A buffer holding the program's DRAM image, relocated to the buffer's physical address (written to
        the CPU's view; the run flushes it)."""
        self.check_config(program, origin)
        size = check_placeable(program, origin)
        align = alignment(program)
        buffer = _calling(f"allocating {size:#x} bytes of contiguous memory",
                          lambda: self._module.allocate(shape=(size + align,), dtype=np.uint8))
        self._buffers.append(buffer)
        physical = int(buffer.physical_address)
        skip = -physical % align  # the program starts at the first aligned byte of the buffer
        placed = place(program, physical + skip, origin)
        dram = np.asarray(buffer).reshape(-1)[skip:skip + size]  # the CPU's view of the program's DRAM
        dram[:] = placed.image
        return Loaded(program, buffer, dram, placed)

    def execute(self, loaded: Loaded) -> Launch:
        """Run a loaded program to its FINISH: flush, start, poll until done or the timeout, invalidate."""
        buffer = loaded.buffer
        _calling("flushing the buffer", buffer.flush)
        started = time.perf_counter()
        _calling("starting the device", lambda: self._protocol.start(loaded.placed.insn_addr, loaded.placed.insn_count))
        while not _calling("polling the device", self._protocol.finished):
            if time.perf_counter() - started > self.timeout:
                raise DeviceTimeout(f"the {self.design} device did not finish within {self.timeout:g} s "
                                    f"({loaded.placed.insn_count} instructions); its buffers were freed")
            time.sleep(0)
        seconds = time.perf_counter() - started
        cycles = _calling("reading the cycle counter", self._protocol.cycles)
        _calling("invalidating the buffer", buffer.invalidate)
        return Launch(seconds, cycles)

    def close(self) -> None:
        """Free every buffer (each one's failure is ignored: the others are still freed)."""
        while self._buffers:
            buffer = self._buffers.pop()
            try:
                buffer.freebuffer()
            except Exception:  # noqa: BLE001 - freeing the rest matters more than why one failed
                pass


def _calling(what: str, call):
    """``call()``, with whatever the platform raises turned into one DeviceError line."""
    try:
        return call()
    except VtaError:
        raise
    except Exception as exc:  # noqa: BLE001 - the platform is someone else's code: its errors become ours
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise DeviceError(f"{what}: {detail}") from None


def bitstream_config(overlay, path: str) -> VTAConfig:
    """The VTA configuration the bitstream was built for: where the overlay says (a ``vta_config``
    attribute), else a vta_config.json (or FILE.json) beside the bitstream."""
    said = getattr(overlay, "vta_config", None)
    if isinstance(said, VTAConfig):
        return said
    bit = Path(path)
    for candidate in (bit.with_suffix(".json"), bit.parent / "vta_config.json"):
        if candidate.is_file():
            return load_config(candidate)
    raise UsageError(f"{path}: cannot tell which VTA configuration the bitstream was built for: put its "
                     f"vta_config.json beside it")


def describe(cfg: VTAConfig) -> str:
    """A configuration in a few words: its widths, block and buffer sizes."""
    return (f"{1 << cfg.log_batch}x{1 << cfg.log_block} i{1 << cfg.log_inp_width}w{1 << cfg.log_wgt_width}"
            f"a{1 << cfg.log_acc_width} buffers 2^{cfg.log_uop_buff_size}/{cfg.log_inp_buff_size}/"
            f"{cfg.log_wgt_buff_size}/{cfg.log_acc_buff_size}")

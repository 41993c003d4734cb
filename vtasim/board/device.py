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

import math
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
    read_cycles: bool = False  # read the device's cycle counter after each run (the Chisel shell has one)
    config: VTAConfig | None = None  # the bitstream's, once opened
    config_source: str = ""  # where that configuration was read
    _module: Any = None
    _protocol: Any = None
    _buffers: list = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.design not in DESIGNS:
            raise UsageError(f"board design {self.design!r}: the boards run the designs {', '.join(DESIGNS)}")
        if not (isinstance(self.timeout, int | float) and math.isfinite(self.timeout) and self.timeout > 0):
            raise UsageError(f"board timeout {self.timeout!r}: give a finite number of seconds above 0")

    def __enter__(self) -> Board:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        """Load the platform, the overlay (programming the bitstream) and the design's register windows."""
        module = load_platform(self.platform)
        path = self.bitstream or default_bitstream(self.design)
        if Path(path).is_dir():
            raise UsageError(f"bitstream {path}: a directory, where a .bit file is expected")
        overlay = _calling(f"loading the bitstream {path}", lambda: module.Overlay(path))
        self.config, self.config_source = bitstream_config(overlay, path)
        ips = _calling("reading the bitstream's hardware description (ip_dict)",
                       lambda: _ip_entries(getattr(overlay, "ip_dict", None)))
        self._path = path
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
            other = next((d for d in DESIGNS if d != self.design), "")
            hint = f"; it looks like the {other} design: --board {other}" if _looks_like(ips, other) else ""
            raise DeviceError(f"bitstream {self._path}: no {name} core ({kind}), so it is not the {self.design} "
                              f"design (its cores: {', '.join(sorted(ips)) or 'none'}){hint}")
        if entry is not None:
            base, span = _calling(f"reading {name}'s address from the hardware description",
                                  lambda: (int(entry.get("phys_addr", base)), int(entry.get("addr_range", span))))
        return _calling(f"mapping {name} at {base:#x}", lambda: module.MMIO(base, span))

    def check_config(self, program: Program, origin: str) -> None:
        """Refuse, before anything reaches the device, a program built for another configuration."""
        if self.config is not None and program.config != self.config:
            raise FormatError(f"{origin}: built for VTA configuration {describe(program.config)}, but the "
                              f"bitstream is built for {describe(self.config)} ({self.config_source})")

    def load(self, program: Program, origin: str = "program") -> Loaded:
        """A buffer holding the program's DRAM image, relocated to the buffer's physical address (written to
        the CPU's view; the run flushes it)."""
        self.check_config(program, origin)
        size = check_placeable(program, origin)
        align = alignment(program)
        buffer = _calling(f"allocating {size:#x} bytes of contiguous memory",
                          lambda: self._module.allocate(shape=(size + align,), dtype=np.uint8))
        self._buffers.append(buffer)
        physical = _calling("reading the buffer's physical address", lambda: int(buffer.physical_address))
        skip = -physical % align  # the program starts at the first aligned byte of the buffer
        placed = place(program, physical + skip, origin, size)
        dram = _calling("viewing the buffer", lambda: np.asarray(buffer).reshape(-1).view(np.uint8))
        if len(dram) < skip + size:
            raise DeviceError(f"the platform's buffer holds {len(dram)} bytes, not the {size + align} asked for")
        dram = dram[skip:skip + size]  # the CPU's view of the program's DRAM
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
        cycles = _calling("reading the cycle counter", self._protocol.cycles) if self.read_cycles else None
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
    except SystemExit as exc:
        raise DeviceError(f"{what}: the platform tried to exit the process (status {exc.code})") from None
    except Exception as exc:  # noqa: BLE001 - the platform is someone else's code: its errors become ours
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise DeviceError(f"{what}: {detail}") from None


def _ip_entries(ips) -> dict[str, dict]:
    """The overlay's ip_dict as name -> entry dictionaries (none: an empty dict)."""
    if ips is None:
        return {}
    if not isinstance(ips, dict) or not all(isinstance(v, dict) for v in ips.values()):
        raise DeviceError(f"the overlay's ip_dict is not a dictionary of IP entries ({type(ips).__name__})")
    return ips


def _looks_like(ips: dict, design: str) -> bool:
    """Whether an overlay's IPs are those of ``design``."""
    if design == "hls":
        return all(c.name in ips for c in r.HLS_CORES)
    return r.VCR.name in ips or any("VTAShell" in str(v.get("type", "")) for v in ips.values())


def bitstream_config(overlay, path: str) -> tuple[VTAConfig, str]:
    """The VTA configuration the bitstream was built for and where it was read: where the overlay says (a
    ``vta_config`` attribute, ``vta_config_source`` saying whence), else a vta_config.json (or FILE.json)
    beside the bitstream."""
    said = getattr(overlay, "vta_config", None)
    if isinstance(said, VTAConfig):
        return said, str(getattr(overlay, "vta_config_source", f"as the overlay of {path} says"))
    bit = Path(path)
    for candidate in (bit.with_suffix(".json"), bit.parent / "vta_config.json"):
        if candidate.is_file():
            return load_config(candidate), f"from {candidate}"
    raise UsageError(f"{path}: cannot tell which VTA configuration the bitstream was built for: put its "
                     f"vta_config.json beside it")


def describe(cfg: VTAConfig) -> str:
    """A configuration in a few words: its widths, block and buffer sizes."""
    return (f"{1 << cfg.log_batch}x{1 << cfg.log_block} i{1 << cfg.log_inp_width}w{1 << cfg.log_wgt_width}"
            f"a{1 << cfg.log_acc_width} buffers 2^{cfg.log_uop_buff_size}/{cfg.log_inp_buff_size}/"
            f"{cfg.log_wgt_buff_size}/{cfg.log_acc_buff_size}")

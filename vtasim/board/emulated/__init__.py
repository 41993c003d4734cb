"""An emulated VTA board: the pynq API (Overlay, MMIO, allocate) in this process, for dry runs and tests.

    vtasim run k.vbin --board hls --platform emulated

One board per process (like a real one: one fabric, one memory). ``Overlay(bitfile)`` programs it with the
design the bitstream's file name says (``chisel`` in the name: the Chisel shell's VCR, else the four HLS
cores) for the configuration of the ``vta_config.json`` (or FILE.json) beside it, else the default one; the
file itself need not exist. Memory is contiguous at physical address BASE (not 0, not page 1) behind a
write-back cache (memory.py); the device runs the relocated program from that memory on the functional
simulator (fabric.py). ``board()`` is the board itself, for tests (``board().never_finish = True``: a
device that never reports completion).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vtasm.config import VTAConfig, default_config, load_config

from .fabric import Fabric
from .memory import Dram, EmulatedBuffer, EmulatorError, new_buffer

BASE = 0x16000000  # where the board's contiguous memory starts
SIZE = 512 << 20

__all__ = ["MMIO", "Overlay", "allocate", "board", "EmulatedBuffer", "EmulatorError"]


class _Board:
    """The emulated board: its memory and, once an overlay is loaded, its fabric."""

    def __init__(self, base: int = BASE, size: int = SIZE):
        self.dram = Dram(base, size)
        self.fabric: Fabric | None = None
        self.never_finish = False

    def program(self, design: str, config: VTAConfig) -> Fabric:
        """Load a bitstream of ``design`` for ``config``: a fresh fabric on the same memory."""
        if self.fabric is not None and self.fabric.running:
            raise EmulatorError("a bitstream was loaded while the device was running")
        self.fabric = Fabric(design, config, self.dram, hung=lambda: self.never_finish)
        return self.fabric


_board = _Board()


def board() -> _Board:
    """The emulated board of this process."""
    return _board


def reset(base: int = BASE, size: int = SIZE) -> _Board:
    """A fresh board (memory freed, no bitstream): tests start from here."""
    global _board
    _board = _Board(base, size)
    return _board


def design_of(bitfile: str) -> str:
    """The design a bitstream of this name carries on the emulated board."""
    return "chisel-2021" if "chisel" in Path(bitfile).name.lower() else "hls"


class Overlay:
    """A bitstream loaded on the emulated board: its IPs (``ip_dict``) and its VTA configuration."""

    def __init__(self, bitfile_name: str, download: bool = True, **_ignored):
        path = Path(bitfile_name)
        if path.is_dir():
            raise EmulatorError(f"{path} is a directory, not a bitstream")
        config, self.vta_config_source = _config_beside(path)
        self.bitfile_name = str(path)
        self.design = design_of(bitfile_name)
        self.vta_config: VTAConfig = config
        if download or _board.fabric is None:
            _board.program(self.design, config)
        self.ip_dict = _ip_dict(self.design)

    def download(self) -> None:
        _board.program(self.design, self.vta_config)


class MMIO:
    """A window on the emulated fabric's registers (pynq.MMIO's read and write of 32-bit words)."""

    def __init__(self, base_addr: int, length: int = 4, **_ignored):
        if _board.fabric is None:
            raise EmulatorError("no bitstream is loaded: load an Overlay first")
        self.base_addr, self.length = base_addr, length
        self._fabric = _board.fabric
        self._core, self._skip = self._fabric.window(base_addr, length)

    def _offset(self, offset: int) -> int:
        if offset % 4 or not 0 <= offset < self.length:
            raise EmulatorError(f"MMIO at {self.base_addr:#x}: offset {offset:#x} is outside its {self.length:#x} "
                                "bytes or not word aligned")
        return self._skip + offset

    def read(self, offset: int = 0, length: int = 4, **_ignored) -> int:
        return self._fabric.read(self._core, self._offset(offset))

    def write(self, offset: int, data: int, **_ignored) -> None:
        self._fabric.write(self._core, self._offset(offset), int(data))


def allocate(shape, dtype=np.uint32, **_ignored) -> EmulatedBuffer:
    """A physically contiguous buffer (pynq.allocate): an ndarray with physical_address, flush,
    invalidate and freebuffer."""
    return new_buffer(_board.dram, shape, dtype)


def _config_beside(path: Path) -> tuple[VTAConfig, str]:
    """The emulated bitstream's configuration and where it came from."""
    for candidate in (path.with_suffix(".json"), path.parent / "vta_config.json"):
        if candidate.is_file():
            return load_config(candidate), f"from {candidate}"
    return default_config(), (f"the emulated board's default: no {path.with_suffix('.json').name} or "
                              f"vta_config.json beside {path}")


def _ip_dict(design: str) -> dict:
    """The IPs the hardware description lists, as pynq's Overlay.ip_dict gives them."""
    from .. import registers as r

    if design == "hls":
        return {c.name: {"phys_addr": c.default_base, "addr_range": r.REGISTER_SPAN,
                         "type": f"xilinx.com:hls:{c.name.split('_')[0]}:1.0"} for c in r.HLS_CORES}
    return {r.VCR.name: {"phys_addr": r.VCR.default_base, "addr_range": r.REGISTER_SPAN,
                         "type": "vta:chisel:VTAShell:1.0"}}

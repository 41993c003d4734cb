"""The emulated board's memory: physically contiguous DRAM at a non-zero base, and buffers whose CPU view
goes through a write-back cache.

The device sees ``device`` (the DRAM); the CPU sees each buffer's own array. A flush writes the cache lines
the CPU changed since the last flush or invalidate back to DRAM; an invalidate drops the CPU's lines and
reads DRAM again. So data the CPU wrote and did not flush is invisible to the device, and data the device
wrote is invisible to the CPU until it invalidates (a real cache may write a line back earlier, never
later: this is the worst case a driver must handle).
"""

from __future__ import annotations

import numpy as np

LINE = 64  # cache line bytes
PAGE = 4096


class EmulatorError(RuntimeError):
    """What the emulated board reports for a misuse a real board would punish (one line)."""


class Dram:
    """Contiguous physical memory [base, base + size) with a first-fit allocator of page-aligned blocks."""

    def __init__(self, base: int, size: int):
        self.base, self.size = base, size
        self.device = np.zeros(size, dtype=np.uint8)  # pages are untouched until written
        self.blocks: dict[int, int] = {}  # offset -> bytes, the live allocations

    def allocate(self, nbytes: int) -> int:
        """The offset of a new block of at least ``nbytes`` (page aligned)."""
        need = max(PAGE, -(-nbytes // PAGE) * PAGE)
        at = 0
        for start in sorted(self.blocks):
            if start - at >= need:
                break
            at = max(at, start + -(-self.blocks[start] // PAGE) * PAGE)
        if at + need > self.size:
            raise EmulatorError(f"cannot allocate {nbytes:#x} bytes of contiguous memory: the emulated board's "
                                f"{self.size >> 20} MiB at {self.base:#x} hold no free block that large")
        self.blocks[at] = nbytes
        return at

    def free(self, offset: int) -> None:
        if self.blocks.pop(offset, None) is None:
            raise EmulatorError(f"freeing memory at {self.base + offset:#x}, which is not allocated (freed twice?)")

    def check(self, start: int, end: int, what: str) -> None:
        """Refuse a device access to physical bytes [start, end) outside every live allocation."""
        lo, hi = start - self.base, end - self.base
        if any(o <= lo and hi <= o + n for o, n in self.blocks.items()):
            return
        raise EmulatorError(f"{what} reaches physical bytes {start:#x}..{end - 1:#x}, outside every buffer "
                            "allocated on the board")


    def check_all(self, start: np.ndarray, end: np.ndarray, rows: np.ndarray, what) -> None:
        """Refuse the first of the accesses [start, end) ``rows`` selects that lies outside every live
        allocation; ``what(k)`` names access k."""
        if not rows.any():
            return
        offsets = np.array(sorted(self.blocks), dtype=np.int64) + self.base
        ends = offsets + np.array([self.blocks[o - self.base] for o in offsets], dtype=np.int64)
        block = np.searchsorted(offsets, start, side="right") - 1
        inside = (block >= 0) & (end <= ends[np.maximum(block, 0)]) if len(offsets) else np.zeros_like(rows)
        outside = rows & ~inside
        if outside.any():
            k = int(np.argmax(outside))
            self.check(int(start[k]), int(end[k]), what(k))


class EmulatedBuffer(np.ndarray):
    """A buffer as pynq.allocate returns it: an ndarray (the CPU's view) with a physical address, flush,
    invalidate and freebuffer."""

    dram: Dram | None
    offset: int
    synced: np.ndarray | None

    def __array_finalize__(self, obj) -> None:
        self.dram = getattr(obj, "dram", None)
        self.offset = getattr(obj, "offset", 0)
        self.synced = None  # views of a buffer share its memory, not its cache bookkeeping

    @property
    def physical_address(self) -> int:
        self._live()
        return self.dram.base + self.offset

    device_address = physical_address

    @property
    def coherent(self) -> bool:
        return False

    def _bytes(self) -> np.ndarray:
        return np.asarray(self).reshape(-1).view(np.uint8)

    def _live(self) -> None:
        if self.synced is None or self.dram is None or self.offset not in self.dram.blocks:
            raise EmulatorError("the buffer was freed (or is a view of one): allocate a new one")

    def flush(self) -> None:
        """Write the cache lines the CPU changed back to DRAM."""
        self._live()
        cpu, synced = self._bytes(), self.synced
        n = len(cpu)
        whole = n - n % LINE
        dirty = np.flatnonzero((cpu[:whole] != synced[:whole]).reshape(-1, LINE).any(axis=1)) if whole else []
        device = self.dram.device[self.offset:self.offset + n]
        for line in dirty:
            device[line * LINE:(line + 1) * LINE] = cpu[line * LINE:(line + 1) * LINE]
        if whole < n and not np.array_equal(cpu[whole:], synced[whole:]):
            device[whole:] = cpu[whole:]
        synced[:] = cpu

    def invalidate(self) -> None:
        """Drop the CPU's lines: its view reads DRAM again (unflushed CPU writes are lost)."""
        self._live()
        cpu = self._bytes()
        cpu[:] = self.dram.device[self.offset:self.offset + len(cpu)]
        self.synced[:] = cpu

    def freebuffer(self) -> None:
        self._live()
        self.dram.free(self.offset)
        self.synced = None

    def close(self) -> None:
        self.freebuffer()


def new_buffer(dram: Dram, shape, dtype) -> EmulatedBuffer:
    """A buffer of ``shape`` and ``dtype`` in ``dram``, its CPU view reading what DRAM holds."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes <= 0:
        raise EmulatorError(f"cannot allocate a buffer of shape {tuple(np.atleast_1d(shape))}")
    offset = dram.allocate(nbytes)
    cpu = np.array(dram.device[offset:offset + nbytes]).view(dtype).reshape(shape)
    buffer = cpu.view(EmulatedBuffer)
    buffer.dram, buffer.offset = dram, offset
    buffer.synced = buffer._bytes().copy()
    return buffer

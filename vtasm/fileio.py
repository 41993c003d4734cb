"""Small file helpers shared by the tools: atomic writes, mapped reads and array files."""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .errors import FormatError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _new_beside(p: Path) -> tuple[int, str]:
    """A new, empty, private file in ``p``'s directory for the data to go to first: (descriptor, path)."""
    for attempt in range(1000):
        tmp = str(p.parent / f".{p.name}.{os.getpid()}.{attempt}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600), tmp
        except FileExistsError:  # left by another writer: the next name
            continue
    raise FileExistsError(f"no free temporary name beside {p}")


def write_atomic(path: str | Path, data: bytes | memoryview | str) -> None:
    """Write a file so that readers see either the old file or the whole new one.

    Symbolic links are written through (the file they point to is replaced);
    special files (a FIFO, /dev/null) are written in place, since they cannot
    be replaced; a new file gets the permissions the umask allows, an existing
    one keeps its own. Problems are one-line FormatErrors.
    """
    if isinstance(data, str):
        data = data.encode()
    p = Path(os.path.realpath(path))
    try:
        if p.is_dir():
            raise FormatError(f"{path}: cannot write: it is a directory")
        if p.exists() and not p.is_file():
            with open(p, "wb") as fh:
                fh.write(data)
            return
        if not p.parent.is_dir():
            what = "is not a directory" if p.parent.exists() else "does not exist"
            raise FormatError(f"{path}: cannot write: {p.parent} {what}")
        mode = p.stat().st_mode & 0o7777 if p.exists() else 0o666 & ~_umask()
        fd, tmp = _new_beside(p)
    except OSError as exc:
        raise FormatError(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise FormatError(f"{path}: cannot write: {exc.strerror or exc}") from None
        raise


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name the same existing file."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def read_bytes(path: str | Path, what: str = "file") -> bytes:
    """Read a whole file, turning OS errors into one-line FormatErrors."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise FormatError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None


MAP_AT_LEAST = 1 << 20  # smaller files are simply read
PIECE_BYTES = 1 << 23  # what pieces() hands out at a time
KEEP_MAPPED = 1 << 25  # a check may read a mapped chunk up to this size whole, leaving its pages for the next pass


def read_mapped(path: str | Path, what: str = "file") -> bytes | memoryview:
    """A whole file as a read-only buffer, like read_bytes but without a copy on the heap.

    A regular file of MAP_AT_LEAST bytes or more is mapped (its pages stay the
    page cache's: the kernel can drop them, and pieces() hands them back as it
    goes); anything else is read. The file must not shrink while the buffer is used.
    """
    try:
        with open(path, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size < MAP_AT_LEAST:
                return fh.read()
            return memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))
    except OSError as exc:
        raise FormatError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None


def pieces(buffer: bytes | memoryview, size: int = PIECE_BYTES) -> Iterator[tuple[int, memoryview]]:
    """(offset, piece) over a buffer, PIECE_BYTES at a time.

    When the buffer is (a slice of) a mapped file, the pages of each piece are
    released from this process once the caller has used it (they stay in the
    page cache), so reading a mapped file end to end never holds more than a
    piece of it.
    """
    view = memoryview(buffer)
    mapped = view.obj if isinstance(view.obj, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED") else None
    base = _address(view) - _address(memoryview(mapped)) if mapped is not None and len(view) else 0
    for start in range(0, len(view), size):
        piece = view[start : start + size]
        yield start, piece
        if mapped is not None:
            _release(mapped, base + start, len(piece))


def _address(view: memoryview) -> int:
    return np.frombuffer(view, dtype=np.uint8).__array_interface__["data"][0]


def _release(mapped: mmap.mmap, start: int, length: int) -> None:
    """Drop the whole pages of mapped[start:start+length] from this process (their data stays in the file)."""
    first = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
    last = (start + length) // mmap.PAGESIZE * mmap.PAGESIZE
    if last > first:
        mapped.madvise(mmap.MADV_DONTNEED, first, last - first)


def read_npy(path: str | Path, mapped: bool = False) -> np.ndarray:
    """Load a .npy file (no pickles), with a one-line error for anything unreadable; ``mapped`` maps it
    read-only instead of reading it (its pages are read as they are used)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(6)
    except OSError as exc:
        raise FormatError(f"{path}: cannot read array: {exc.strerror or exc}") from None
    if head[:2] == b"PK":
        raise FormatError(f"{path}: an .npz archive; give one array as a .npy file (numpy.save)")
    if head != b"\x93NUMPY":
        raise FormatError(f"{path}: not a .npy file (no NUMPY header); write arrays with numpy.save")
    try:
        array = np.load(Path(path), allow_pickle=False, mmap_mode="r" if mapped else None)
    except OSError as exc:
        raise FormatError(f"{path}: cannot read array: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise FormatError(f"{path}: not a valid .npy array: {exc}") from None
    if not isinstance(array, np.ndarray):
        raise FormatError(f"{path}: not a single array")
    return array


def npy_bytes(array: np.ndarray) -> bytes:
    """The .npy file contents of an array."""
    import io

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()

"""Small file helpers shared by the tools: atomic writes, mapped reads and array files."""

from __future__ import annotations

import math
import mmap
import os
import stat
import tokenize
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


def open_regular(path: str | Path, what: str = "file"):
    """A regular file opened for reading (binary), or a one-line FormatError: a FIFO, a device or a directory
    is refused before a byte is read (a FIFO would block, a device never end)."""
    name = os.fspath(path)
    if "\0" in str(name):
        raise FormatError(f"{name!r}: cannot read {what}: the name holds a NUL character")
    try:  # non-blocking: opening a FIFO for reading would wait for a writer
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise FormatError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode) else (
            "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "not a regular file")
        raise FormatError(f"{path}: cannot read {what}: it is {kind}, not a regular file")
    return os.fdopen(fd, "rb")


def read_bytes(path: str | Path, what: str = "file") -> bytes:
    """Read a whole regular file, turning OS errors into one-line FormatErrors."""
    with open_regular(path, what) as fh:
        try:
            return fh.read()
        except OSError as exc:
            raise FormatError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None


def read_text(path: str | Path, what: str = "file") -> str:
    """A regular file's UTF-8 text (a leading byte-order mark dropped), or a one-line FormatError."""
    data = read_bytes(path, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: cannot read {what}: not UTF-8 text (byte {exc.start})") from None


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
        with open_regular(path, what) as fh:
            if os.fstat(fh.fileno()).st_size < MAP_AT_LEAST:
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


NPY_HEADER_BYTES = 1 << 16  # the most header bytes read_npy reads (numpy.save writes a few hundred)


def read_npy(path: str | Path, mapped: bool = False) -> np.ndarray:
    """Load a .npy file (no pickles), with a one-line error for anything unreadable; ``mapped`` maps it
    read-only instead of reading it (its pages are read as they are used).

    The header is read first and checked against the file: an array whose
    declared shape needs more bytes than the file holds is refused before
    anything is allocated, so memory never follows what a header says."""
    from numpy.lib import format as npy

    with open_regular(path, "array") as fh:
        try:
            head = fh.read(6)
            if head[:2] == b"PK":
                raise FormatError(f"{path}: an .npz archive; give one array as a .npy file (numpy.save)")
            if head != b"\x93NUMPY":
                raise FormatError(f"{path}: not a .npy file (no NUMPY header); write arrays with numpy.save")
            fh.seek(0)
            version = npy.read_magic(fh)
            reader = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}.get(version)
            if reader is None:
                raise FormatError(f"{path}: .npy format version {version[0]}.{version[1]}; this tool reads 1.0 "
                                  "and 2.0 (numpy.save writes them)")
            at = fh.tell()  # the header's length, checked before numpy reads that many bytes
            field = fh.read(2 if version == (1, 0) else 4)
            length = int.from_bytes(field, "little")
            if len(field) < (2 if version == (1, 0) else 4) or length > NPY_HEADER_BYTES:
                raise FormatError(f"{path}: its header declares {length:,} bytes; a .npy header holds at most "
                                  f"{NPY_HEADER_BYTES:,}")
            fh.seek(at)
            try:
                shape, fortran, dtype = reader(fh, max_header_size=NPY_HEADER_BYTES)
            except (ValueError, SyntaxError, TypeError, KeyError, tokenize.TokenError) as exc:
                raise FormatError(f"{path}: not a valid .npy header: {' '.join(str(exc).split())[:160]}") from None
            if dtype.hasobject:
                raise FormatError(f"{path}: an array of Python objects; give numbers")
            if any(d < 0 for d in shape):
                raise FormatError(f"{path}: its header declares a negative dimension {list(shape)}")
            count = math.prod(shape)
            start = fh.tell()
            held = os.fstat(fh.fileno()).st_size - start
            if count * dtype.itemsize > held:
                raise FormatError(f"{path}: its header declares {list(shape)} {dtype} ({count * dtype.itemsize:,} "
                                  f"bytes) but the file holds {held:,} bytes of data")
            order = "F" if fortran else "C"
            if mapped and count:
                array = np.memmap(fh, dtype=dtype, mode="r", offset=start, shape=shape, order=order)
            else:
                array = np.fromfile(fh, dtype=dtype, count=count).reshape(shape, order=order)
        except OSError as exc:
            raise FormatError(f"{path}: cannot read array: {exc.strerror or exc}") from None
        except (ValueError, SyntaxError, TypeError) as exc:
            raise FormatError(f"{path}: not a valid .npy array: {' '.join(str(exc).split())[:160]}") from None
    if not isinstance(array, np.ndarray):
        raise FormatError(f"{path}: not a single array")
    return array


def npy_bytes(array: np.ndarray) -> bytes:
    """The .npy file contents of an array."""
    import io

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()

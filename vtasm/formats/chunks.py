"""The framing the .vbin and network files share (docs/vbin.md): a 16-byte header (magic, format version,
chunk count), then chunks, each a 4-byte tag, the CRC-32 and length of its payload, the payload and zero
padding to 8 bytes. One writer and one reader: whatever a file's chunks hold, their framing is checked the
same way, and the first problem is one FormatError line."""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable

from vtasm.errors import FormatError
from vtasm.fileio import KEEP_MAPPED, pieces

HEADER = struct.Struct("<8sII")
CHUNK_HEADER = struct.Struct("<4sIQ")
ALIGN = 8


def padding(n: int) -> int:
    """Zero bytes after an ``n``-byte payload."""
    return -n % ALIGN


def framed(magic: bytes, version: int, chunks: list[tuple[str, bytes]]) -> bytes:
    """The header and the chunks, each with its tag, CRC-32, length and zero padding to 8 bytes."""
    out = [HEADER.pack(magic, version, len(chunks))]
    for tag, payload in chunks:
        out.append(CHUNK_HEADER.pack(tag.encode("ascii"), zlib.crc32(payload), len(payload)))
        out.append(payload)
        out.append(bytes(padding(len(payload))))
    return b"".join(out)


def read_header(data: bytes, magic: bytes, version: int, origin: str, what: str, format_name: str) -> int:
    """Check a file's magic and version (``what`` and ``format_name`` name them in messages); its chunk count."""
    if len(data) < len(magic) or data[: len(magic)] != magic:
        if data and len(data) < len(magic) and magic.startswith(bytes(data)):
            raise FormatError(f"{origin}: truncated: header is missing {HEADER.size - len(data)} bytes")
        raise FormatError(f"{origin}: not a {what} (bad magic)")
    if len(data) < HEADER.size:
        raise FormatError(f"{origin}: truncated: header is missing {HEADER.size - len(data)} bytes")
    _, found, count = HEADER.unpack_from(data, 0)
    if found != version:
        raise FormatError(f"{origin}: unsupported {format_name} version {found} (this tool reads {version})")
    return count


class DataCheck:
    """The CRC of a large chunk, computed on a thread of its own (zlib lets go of the GIL) while the reader
    decodes the rest; ``wait`` gives its verdict."""

    MIN_BYTES = 1 << 20  # below this, a thread costs more than it saves

    def __init__(self, tag: str = "DATA") -> None:
        self.tag = tag  # the chunk it may check
        self._thread: threading.Thread | None = None
        self._ok = True

    def start(self, payload: memoryview, crc: int) -> None:
        def check() -> None:
            self._ok = crc32(payload) == crc

        self._thread = threading.Thread(target=check, name="vbin-crc", daemon=True)
        self._thread.start()

    def wait(self) -> bool:
        """Whether the chunk's CRC matched (True when nothing was left to check)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        return self._ok


def crc32(payload: memoryview | bytes) -> int:
    """The CRC-32 of a payload, a large mapped one read piece by piece."""
    if len(payload) <= KEEP_MAPPED:  # read whole: the pages stay mapped for the reader of the segments next
        return zlib.crc32(payload)
    crc = 0
    for _, piece in pieces(memoryview(payload)):  # a large mapped file is checked without holding all of it
        crc = zlib.crc32(piece, crc)
    return crc


def read_chunks(data: bytes, count: int, origin: str, tag_at: Callable[[bytes, int], str],
                later: DataCheck | None = None) -> list[tuple[str, memoryview]]:
    """The ``count`` chunks after the header, framing checked: each header present, its tag accepted by
    ``tag_at(raw tag, index)`` (which raises for one out of place), the payload and its zero padding inside
    the file, the CRC (a large chunk's left to ``later`` when given), nothing after the last chunk."""
    pos = HEADER.size
    view = memoryview(data)
    chunks: list[tuple[str, memoryview]] = []
    for k in range(count):
        if len(data) < pos + CHUNK_HEADER.size:
            if pos == len(data):
                raise FormatError(f"{origin}: truncated: the header announces {count} chunks but the file ends "
                                  f"after {k}")
            missing = pos + CHUNK_HEADER.size - len(data)
            raise FormatError(f"{origin}: truncated: header of chunk {k + 1} is missing {missing} bytes")
        raw_tag, crc, length = CHUNK_HEADER.unpack_from(data, pos)
        tag = tag_at(raw_tag, k)
        start = pos + CHUNK_HEADER.size
        end = start + length + padding(length)
        if end > len(data):
            raise FormatError(f"{origin}: truncated: chunk {tag} is missing {end - len(data)} bytes")
        payload = view[start : start + length]
        if later is not None and tag == later.tag and length >= DataCheck.MIN_BYTES:
            later.start(payload, crc)
        elif crc32(payload) != crc:
            raise FormatError(f"{origin}: CRC mismatch in chunk {tag} (chunk {k + 1}; the file is corrupt)")
        if any(view[start + length : end]):
            raise FormatError(f"{origin}: chunk {tag} (chunk {k + 1}): padding bytes are not zero")
        chunks.append((tag, payload))
        pos = end
    if pos != len(data):
        raise FormatError(f"{origin}: {len(data) - pos} unexpected bytes after the last chunk")
    return chunks

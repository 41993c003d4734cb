"""Small file helpers shared by the tools: atomic writes and array files."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from .errors import FormatError


def write_atomic(path: str | Path, data: bytes | str) -> None:
    """Write a file so that readers see either the old file or the whole new one."""
    p = Path(path)
    if isinstance(data, str):
        data = data.encode()
    parent = p.parent if str(p.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_bytes(path: str | Path, what: str = "file") -> bytes:
    """Read a whole file, turning OS errors into one-line FormatErrors."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise FormatError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None


def read_npy(path: str | Path) -> np.ndarray:
    """Load a .npy file (no pickles), with a one-line error for anything unreadable."""
    try:
        return np.load(Path(path), allow_pickle=False)
    except OSError as exc:
        raise FormatError(f"{path}: cannot read array: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise FormatError(f"{path}: not a valid .npy array: {exc}") from None


def npy_bytes(array: np.ndarray) -> bytes:
    """The .npy file contents of an array."""
    import io

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()

"""The first bytes of the toolchain's binary files, and which kind a file is, read without loading the
modules that read each kind (a `vtasim run` of a program need not import the network format)."""

from __future__ import annotations

import os
from pathlib import Path

VBIN = b"VTA\x00VBIN"  # a program (formats/vbin.py)
NETWORK = b"VTA\x00VNET"  # a network: VTA launches and host steps (formats/network.py)


def is_network(data: bytes) -> bool:
    """Whether bytes start with the network file's magic."""
    return bytes(data[: len(NETWORK)]) == NETWORK


def network_file(path: str | Path) -> bool:
    """Whether ``path`` is a file that starts with the network file's magic."""
    p = Path(path)
    if not p.is_file():  # a FIFO, a device, a directory: not one (whoever reads it next refuses it)
        return False
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        return f.read(len(NETWORK)) == NETWORK

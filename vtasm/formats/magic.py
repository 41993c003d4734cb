"""The first bytes of the toolchain's binary files, and which kind a file is, read without loading the
modules that read each kind (a `vtasim run` of a program need not import the network format)."""

from __future__ import annotations

from pathlib import Path

VBIN = b"VTA\x00VBIN"  # a program (formats/vbin.py)
NETWORK = b"VTA\x00VNET"  # a network: VTA launches and host steps (formats/network.py)


def is_network(data: bytes) -> bool:
    """Whether bytes start with the network file's magic."""
    return bytes(data[: len(NETWORK)]) == NETWORK


def network_file(path: str | Path) -> bool:
    """Whether ``path`` is a file that starts with the network file's magic."""
    p = Path(path)
    if not p.is_file():
        return False
    with open(p, "rb") as f:
        return f.read(len(NETWORK)) == NETWORK

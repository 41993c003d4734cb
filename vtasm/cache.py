"""The toolchain's private cache directory, and what is kept there between processes.

Lark's analysis of our grammars (LALR tables: about 40 ms to build) and vtasim's compiled run loop go to
the user's cache directory ($XDG_CACHE_HOME or ~/.cache, then vta-toolchain/), made private to the user.
Lark's own default would be a file in the shared temporary directory, which it unpickles: anyone who can
write there first could hand it code to run. Lark checks the grammar's hash stored in the file before
using it. Where that directory cannot be made, nothing is cached.
"""

from __future__ import annotations

import os
from pathlib import Path


def private_cache_dir() -> Path | None:
    """The toolchain's directory in the user's cache directory, made if missing and private to the user;
    None where it cannot be made or is not the user's own (vtasim's native run loop is built there too)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vta-toolchain"
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        if root.stat().st_uid != os.getuid() or not os.access(root, os.W_OK):
            return None
    except OSError:
        return None
    return root


def grammar_cache(name: str) -> str | bool:
    """The cache file for grammar ``name`` (a Lark ``cache=`` argument), or False for no cache."""
    if os.environ.get("VTA_NO_GRAMMAR_CACHE"):
        return False
    root = private_cache_dir()
    return False if root is None else str(root / f"{name}.lark-cache")

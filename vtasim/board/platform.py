"""The module that provides the pynq API (Overlay, MMIO, allocate), named by a setting.

``pynq`` on the board, a PYNQ.remote client from a workstation, ``emulated`` (this package's emulated
board, vtasim.board.emulated) or any module with the same names. Imported only when a device is opened.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from vtasm.errors import UsageError

DEFAULT_PLATFORM = "pynq"
ALIASES = {"emulated": "vtasim.board.emulated"}
NEEDED = ("Overlay", "MMIO", "allocate")
INSTALL = ("install the toolchain with its board extra on the board (pip install '.[board]' in its folder), or "
           "dry-run on the emulated board with --platform emulated")


def load_platform(name: str = DEFAULT_PLATFORM) -> ModuleType:
    """The platform module by name; a missing module or one without the pynq API is a one-line UsageError."""
    target = ALIASES.get(name, name)
    if not target or target.startswith(".") or not all(part.isidentifier() for part in target.split(".")):
        raise UsageError(f"platform {name!r}: not a module name (pynq, emulated, or a dotted module path)")
    try:
        module = importlib.import_module(target)
    except ImportError as exc:
        missing = getattr(exc, "name", None)
        if name == DEFAULT_PLATFORM and missing in (None, "pynq"):
            raise UsageError(f"the board needs the pynq package, which is not installed: {INSTALL}") from None
        raise UsageError(f"platform {name}: cannot import {target} ({' '.join(str(exc).split())})") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - someone else's module failed as it loaded
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise UsageError(f"platform {name}: importing {target} failed: {type(exc).__name__}: {detail}") from None
    absent = [n for n in NEEDED if not hasattr(module, n)]
    if absent:
        raise UsageError(f"platform {name}: module {target} does not provide the pynq API "
                         f"(no {', '.join(absent)})")
    return module

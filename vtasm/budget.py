"""The memory budget: what a file may make the tools allocate.

Sizes a file declares (a program's DRAM, a network's tensors and host
operators' outputs, an ONNX model's tensors) are checked against one budget
before anything of that size is allocated, so memory is bounded by the
budget whatever a file says. The default fits a board with 2 GB of memory;
``--max-memory`` (every tool) raises or lowers it for a run.
"""

from __future__ import annotations

import re

from .errors import FormatError, UsageError, VtaError

DEFAULT_BYTES = 1 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_limit = [DEFAULT_BYTES]


def limit() -> int:
    """The budget in bytes."""
    return _limit[0]


def set_limit(nbytes: int) -> None:
    """Set the budget for this process (the tools' --max-memory)."""
    if nbytes <= 0:
        raise UsageError(f"--max-memory must be positive, got {nbytes}")
    _limit[0] = nbytes


def parse_size(text: str) -> int:
    """'1.5G', '512M', '4096' (bytes), with K, M, G, T as powers of 1024 (a trailing 'B' or 'iB' allowed)."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not found:
        raise UsageError(f"--max-memory {text!r}: expected a size such as 512M, 2G or 1.5G")
    value = int(float(found.group(1)) * _UNITS[found.group(2).upper()])
    if value <= 0:
        raise UsageError(f"--max-memory {text!r}: must be positive")
    return value


def check(nbytes: int, what: str, error: type[VtaError] = FormatError) -> None:
    """Raise ``error`` (one line naming ``what``) when ``nbytes`` exceed the budget."""
    if nbytes > _limit[0]:
        raise error(f"{what} needs {nbytes:,} bytes, more than the memory budget of {_limit[0]:,} bytes "
                    f"(--max-memory raises it)")

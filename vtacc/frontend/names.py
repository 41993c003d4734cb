"""The names the kernel language reserves, and kernel names made from anything else."""

from __future__ import annotations

from vtasm.names import kernel_identifier, unique

from .check_builtins import BUILTINS

KEYWORDS = ("kernel", "schedule")
ENTRY = "main"  # the kernel a program runs: a network's launches call their layers' kernels from it
RESERVED = frozenset({*KEYWORDS, *BUILTINS, ENTRY})


def kernel_name(base: str, taken: set[str] | None = None) -> str:
    """``base`` as a kernel's name: a kernel-language identifier (vtasm.names.kernel_identifier: 'l' before
    a digit, 'layer' for nothing), '_layer' after a reserved word, and (given the names ``taken`` so far) a
    suffix where it would repeat one."""
    name = kernel_identifier(base, lead="l", empty="layer")
    if name in RESERVED:
        name += "_layer"
    return name if taken is None else unique(name, taken)

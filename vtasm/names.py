"""Names made from model and file names: kernel-language identifiers, and unique ones.

A model's tensor and node names can hold anything (separators, '..', control characters); what reaches
a program's tensor table, the kernel language or a file name is spelt by these rules, one each.
"""

from __future__ import annotations

import re
from collections.abc import Callable


def kernel_identifier(name: str, lead: str = "t_", empty: str = "t") -> str:
    """A model name as the kernel language (and so a VTA program's tensor table) spells it: letters, digits
    and underscores, no underscore at either end, never a digit first (``lead`` before it: 't_' for a
    tensor, 'l' for a layer) and ``empty`` for a name with nothing left."""
    text = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_") or empty
    return (lead + text) if text[0].isdigit() else text


def unique(base: str, taken: set[str], fold: Callable[[str], str] = str) -> str:
    """``base``, else ``base_2``, ``base_3``, ...: the first whose ``fold`` (lower-casing, for a file system
    that ignores case) is not in ``taken``; it is added there."""
    name, k = base, 1
    while fold(name) in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(fold(name))
    return name

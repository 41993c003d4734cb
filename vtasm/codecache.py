"""Dataclasses made from compiled code kept between processes: a short command's quicker start.

Making a dataclass compiles its methods from source text (``__init__``, ``__repr__``, ``__eq__``, and for
a frozen one ``__hash__``, ``__setattr__`` and ``__delattr__``), a few tenths of a millisecond a class:
for the 85 classes a compile loads, about an eighth of `vtacc`'s whole process. While
:func:`compiled_methods` is active, the ``exec`` the dataclasses module calls takes the code of a text it
has met before from a cache file instead of compiling that text again. The text itself is the key, so an
edited class simply compiles anew (and is kept too); the code is exactly what ``exec`` would compile from
it (``compile(text, "<string>", "exec", dont_inherit=True)``), so the classes are the same.

The file lies in the toolchain's private cache directory (vtasm.cache), one per command and Python
build; it is read whole at the start and written, whole, only when something new was compiled. Only the
installed commands use it (vtasm.entry); ``VTA_NO_CODE_CACHE=1`` turns it off.
"""

from __future__ import annotations

import dataclasses
import marshal
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType

from .cache import private_cache_dir

MAX_ENTRIES = 4096  # more than every class of the toolchain has methods: the rest are stale, start again


@contextmanager
def compiled_methods(command: str) -> Iterator[None]:
    """While active, dataclasses are made from the compiled code kept for ``command`` (module docstring)."""
    path = cache_file(command)
    codes = _read(path) if path is not None else {}
    known = len(codes)

    def exec_cached(source, globals=None, locals=None, /):
        if type(source) is str and globals is not None:
            code = codes.get(source)
            if type(code) is not CodeType:
                code = codes[source] = compile(source, "<string>", "exec", dont_inherit=True)
            source = code
        return exec(source, globals, locals)

    dataclasses.exec = exec_cached  # type: ignore[attr-defined]  # found before the builtin by its exec calls
    try:
        yield
    finally:
        del dataclasses.exec  # type: ignore[attr-defined]
        if path is not None and len(codes) > known:
            _write(path, codes if len(codes) <= MAX_ENTRIES else {})


def cache_file(command: str) -> Path | None:
    """Where ``command``'s compiled methods are kept, or None when nothing is to be kept."""
    if os.environ.get("VTA_NO_CODE_CACHE"):
        return None
    root = private_cache_dir()
    if root is None:
        return None
    return root / f"dataclass-code-{command}-{sys.implementation.cache_tag}-{sys.hexversion:x}.marshal"


def _read(path: Path) -> dict[str, CodeType]:
    try:
        codes = marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):  # missing, unreadable or damaged: compile anew
        return {}
    return codes if isinstance(codes, dict) else {}


def _write(path: Path, codes: dict[str, CodeType]) -> None:
    """The whole file replaced at once (a reader sees the old one or the new one); problems are ignored."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(marshal.dumps(codes))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)

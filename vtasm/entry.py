"""The commands as installed (`vtasim`, `vtacc`): a click CLI started and ended for a short process.

A run is often over in a few tenths of a second, so the process's own start
and end are a good part of it. Two things make them shorter without changing
what the command does: the cyclic garbage collector is paused while the
modules import (they make no garbage worth collecting, and the collector
would otherwise walk every new object dozens of times), and the process
ends with ``os._exit`` once the command has returned, after flushing stdout
and stderr: every file the command writes is closed by then, so the only
work skipped is the interpreter tearing down its modules and objects. While
the command runs, the collector walks the youngest objects less often
(vtasm.collector): a compile keeps most of what it builds until it writes it.
Dataclasses are made from the compiled code of earlier runs (vtasm.codecache).
``python -m vtasim.cli`` and in-process callers of a ``cli.main`` keep the
ordinary start and end.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable

from vtasm.codecache import compiled_methods
from vtasm.collector import fewer_collections


def run_command(load: Callable[[], Callable[[], None]], command: str) -> None:
    """Import a CLI (``load`` returns its main), run it, then end the process at once with its exit code.
    ``command``: the command's name (its cache of compiled dataclass methods)."""
    with compiled_methods(command):  # the command's own lazy imports make dataclasses too
        gc.disable()
        try:
            cli = load()
        finally:
            gc.enable()
        try:
            with fewer_collections():  # a short process keeps most of what it builds until it ends
                cli()
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 0 if done.code is None else 1
            if not isinstance(done.code, int | None):
                print(done.code, file=sys.stderr)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a reader that went away (a closed pipe): nothing more can reach it
        code = code or 1
    os._exit(code)

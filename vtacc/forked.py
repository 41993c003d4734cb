"""Independent pieces of a compile run on the machine's other cores, in forked worker processes.

The tiling search of one operator does not depend on another's (compiler.py), so
a network's searches can run side by side. ``forked_map`` keeps the caller's
results and errors exactly as a plain loop would give them: results come back
in order, and an item whose worker raised is run again here, so that the
error (or the bug) is raised in this process as the loop would raise it.

Workers are forked (the items and the function are inherited, nothing is sent
but their indices), only on Linux, only from a process's only Python thread and
outside a daemonic process (a sweep's worker: `vtacc explore` already runs its
points side by side), and only once the items run here have taken
SERIAL_SECONDS: a small program compiles as it always did.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

SERIAL_SECONDS = 0.05  # items run here until they have taken this long; the rest go to workers
MAX_JOBS = 8
_WORK: tuple[Callable, Sequence] | None = None  # what forked workers run: inherited, never pickled


def available_jobs() -> int:
    """The cores this process may run on (at most MAX_JOBS)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_JOBS))


def forked_map(fn: Callable[[T], R], items: Sequence[T], jobs: int | None = None) -> list[R]:
    """[fn(x) for x in items]; once the items done here have taken SERIAL_SECONDS, the rest in forked
    workers (module docstring). ``jobs``: the most processes to use (None: the cores this process may run
    on; 1: no workers)."""
    jobs = available_jobs() if jobs is None else jobs
    start = time.perf_counter()
    results: list[R] = []
    for done, item in enumerate(items):
        if jobs > 1 and len(items) - done > 1 and time.perf_counter() - start > SERIAL_SECONDS and _can_fork():
            return results + _in_workers(fn, items[done:], jobs)
        results.append(fn(item))
    return results


def _in_workers(fn: Callable[[T], R], items: Sequence[T], jobs: int) -> list[R]:
    import multiprocessing

    global _WORK
    _WORK = (fn, items)
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns of forking a process with threads of any kind; numpy's BLAS keeps idle worker
            # threads, which it re-creates in a child (pthread_atfork), and no Python thread runs (_can_fork)
            warnings.simplefilter("ignore", DeprecationWarning)
            pool = multiprocessing.get_context("fork").Pool(min(jobs, len(items)))
        with pool:
            outcomes = pool.map(_run, range(len(items)), chunksize=1)
    finally:
        _WORK = None
    return [value if ok else fn(x) for (ok, value), x in zip(outcomes, items, strict=True)]


def _can_fork() -> bool:
    """Linux, the process's only Python thread (a fork copies no other thread's locks), not a daemon."""
    if not sys.platform.startswith("linux") or threading.active_count() != 1:
        return False
    import multiprocessing

    return not multiprocessing.current_process().daemon


def _run(index: int) -> tuple[bool, object]:
    """In a worker: (True, the result) or (False, None) when it raised (the caller runs it again)."""
    fn, items = _WORK
    try:
        return True, fn(items[index])
    except BaseException:  # noqa: BLE001  (re-run by the caller, who raises it)
        return False, None

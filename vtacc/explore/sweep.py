"""Running a sweep's points on Dask: a local cluster (one worker process per core) or an existing one.

Dask does the scheduling: each point is one task; a task on a worker that
dies is given to another worker (up to the scheduler's ``allowed-failures``);
a point lost beyond that becomes a ``failed`` row, computed again next time.
Rows go to the result table the moment their point finishes.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable

from vtasm.errors import UsageError

from .evaluate import STATUSES, evaluate, failed_row
from .results import ResultTable
from .spec import Point


def _dask():
    try:
        import dask.distributed as dd
    except ImportError:
        raise UsageError("vtacc explore runs on Dask, which is not installed: pip install 'vta-toolchain[explore]'") \
            from None
    return dd


def start_client(scheduler: str | None = None, workers: int | None = None):
    """A Dask client: of the cluster at ``scheduler``, else of a new local cluster of ``workers`` processes."""
    dd = _dask()
    if scheduler:
        try:
            return dd.Client(scheduler, timeout=10)
        except (OSError, TimeoutError) as exc:
            raise UsageError(f"--scheduler {scheduler}: cannot reach a Dask scheduler there ({exc})") from None
    cluster = dd.LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                              host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    return dd.Client(cluster)


def stop_client(client) -> None:
    """Close a client and, if it made it, its local cluster."""
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


class Progress:
    """Points done, failed and the time left: a tqdm bar on a terminal where tqdm is installed, else (a log, a
    pipe) a line per tenth."""

    def __init__(self, total: int, show: bool = True):
        self.total, self.counts, self.started = total, Counter(), time.perf_counter()
        self.bar = None
        self.next_line = 0.1
        self.show = show
        if show and sys.stderr.isatty():  # a bar redraws itself with carriage returns: only on a terminal
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit="point", file=sys.stderr, dynamic_ncols=True, smoothing=0.1)
            except ImportError:
                pass

    def update(self, row: dict) -> None:
        self.counts[row["status"]] += 1
        done = sum(self.counts.values())
        if self.bar is not None:
            self.bar.set_postfix_str(self.postfix(), refresh=False)
            self.bar.update(1)
        elif self.show and done >= self.next_line * self.total:
            elapsed = time.perf_counter() - self.started
            left = elapsed / done * (self.total - done)
            print(f"{done}/{self.total} points ({self.postfix()}), about {left:.0f} s left", file=sys.stderr)
            self.next_line += 0.1

    def postfix(self) -> str:
        return ", ".join(f"{status} {self.counts[status]}" for status in STATUSES
                         if self.counts[status])

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_points(points: list[Point], client, table: ResultTable, on_row: Callable[[dict], None] | None = None) -> int:
    """Compute every point on the client's cluster, adding each row to the table as it lands.

    Returns how many rows were added. An exception from ``on_row`` (or Ctrl-C)
    cancels what is still queued; rows already added stay in the table.
    """
    dd = _dask()
    futures = {}
    for point in points:
        future = client.submit(evaluate, point, pure=False)
        futures[future.key] = (future, point)
    added = 0
    try:
        for future in dd.as_completed([f for f, _ in futures.values()]):
            _, point = futures.pop(future.key)
            try:
                row = future.result()
            except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: the point is lost, not the sweep
                row = failed_row(point, f"lost on the cluster: {type(exc).__name__}: {exc}")
            future.release()
            table.add(row)
            added += 1
            if on_row is not None:
                on_row(row)
    finally:
        if futures:
            client.cancel([f for f, _ in futures.values()])
    return added

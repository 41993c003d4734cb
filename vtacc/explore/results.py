"""The results table of a sweep: ``points.csv``, one row per point, appended as points finish.

Every row is flushed when written, so a crash or Ctrl-C loses nothing that
finished. Reopening the table for the same spec keeps the rows of points the
spec still has (their keys say so) and drops a half-written last line and
rows of points that failed; rows of points the spec no longer has (another
spec, or an older toolchain) move to ``points-stale.csv``. A Parquet copy is
written where pyarrow is installed.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from vtasm.fileio import write_atomic

from .evaluate import COLUMNS

_INTS = {"bus_bytes", "latency", "threads", "cycles", "macs", "peak_macs_per_cycle", "dram_read_bytes",
         "dram_write_bytes", "onchip_bytes", "instructions", "worker"} | {c for c in COLUMNS if c.startswith("LOG_")}
_FLOATS = {"clock_mhz", "time_us", "gops", "peak_gops", "gemm_utilisation", "alu_utilisation", "macs_per_cycle",
           "compile_s", "timing_s"}


def typed(row: dict) -> dict:
    """A row read from CSV with its numbers as numbers (empty cells as None)."""
    out = {}
    for key in COLUMNS:
        value = row.get(key)
        if value in (None, ""):
            out[key] = None
        elif key in _INTS:
            out[key] = int(float(value))
        elif key in _FLOATS:
            out[key] = float(value)
        else:
            out[key] = value
    return out


def _read(path: Path) -> tuple[list[dict], bool]:
    """The complete rows of a CSV file, and whether every line was complete (a last line without its
    newline was cut off mid-write: dropped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return [], False
    whole = text.endswith("\n")
    if not whole:
        text = text[: text.rfind("\n") + 1]
    rows = list(csv.DictReader(io.StringIO(text)))
    complete = [r for r in rows if None not in r and None not in r.values()]
    return complete, whole and len(complete) == len(rows)


def _csv_text(rows: list[dict], header: bool = True) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    if header:
        writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


class ResultTable:
    """``DIR/points.csv`` for one spec: the finished rows, and an append handle for new ones.

    Nothing is written until the first row is added (or :meth:`write_parquet`), so
    a sweep that cannot start leaves no files behind.
    """

    def __init__(self, directory: str | Path, keys: set[str]):
        self.directory = Path(directory)
        self.path = self.directory / "points.csv"
        existing, whole = _read(self.path)
        same_columns = not existing or list(existing[0]) == list(COLUMNS)
        kept = [r for r in existing if same_columns and r["key"] in keys and r["status"] != "failed"]
        self._kept = list({r["key"]: r for r in kept}.values())
        self._stale = [r for r in existing if r["key"] not in keys or not same_columns]
        self._rewrite = not whole or len(self._kept) != len(existing)
        self.stale = len(self._stale)
        self.rows: dict[str, dict] = {r["key"]: typed(r) for r in self._kept}
        self.resumed = len(self.rows)
        self._file = None
        self._writer = None

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._stale:
            stale_path = self.directory / "points-stale.csv"
            old = stale_path.read_text(encoding="utf-8") if stale_path.exists() else ""
            write_atomic(stale_path, old + _csv_text(self._stale, header=not old))
        if self._rewrite:
            write_atomic(self.path, _csv_text(self._kept))
        self._file = self.path.open("a", encoding="utf-8", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")

    def add(self, row: dict) -> None:
        """Append one finished point and flush it to the file."""
        if self._file is None:
            self._open()
        self._writer.writerow(row)
        self._file.flush()
        self.rows[row["key"]] = typed({k: "" if v is None else v for k, v in row.items()})

    def close(self) -> None:
        """Close the file, bringing it up to date first (cut-off lines and stale rows gone)."""
        if self._file is None and (self._rewrite or self._stale) and self.directory.exists():
            self._open()
        if self._file is not None:
            self._file.close()
            self._file = None

    def write_parquet(self) -> Path | None:
        """``points.parquet`` beside the CSV, where pyarrow is installed (else None)."""
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            return None
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / "points.parquet"
        table = pa.Table.from_pylist(list(self.rows.values()))
        buffer = pa.BufferOutputStream()
        pq.write_table(table, buffer)
        write_atomic(path, buffer.getvalue().to_pybytes())
        return path

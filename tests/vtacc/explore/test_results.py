"""The results table: rows flushed as they land, cut-off lines dropped, resumed by key, stale rows set aside."""

from __future__ import annotations

import csv

from vtacc.explore.evaluate import COLUMNS
from vtacc.explore.results import ResultTable


def _row(key: str, status: str = "ok", cycles: int = 100) -> dict:
    return {"key": key, "workload": "w", "config": "1x16x16", "status": status, "reason": "",
            "cycles": cycles if status == "ok" else None, "time_us": cycles / 100, "onchip_bytes": 1024,
            "LOG_BLOCK": 4, "threads": None}


def _lines(path) -> list[str]:
    return path.read_text().splitlines()


def test_each_row_is_on_disk_as_soon_as_it_is_added(tmp_path):
    table = ResultTable(tmp_path, {"a", "b"})
    table.add(_row("a"))
    rows = list(csv.DictReader((tmp_path / "points.csv").open()))  # read while the table is still open
    assert [r["key"] for r in rows] == ["a"] and list(rows[0]) == list(COLUMNS)
    table.close()


def test_reopening_keeps_finished_rows_and_types_them(tmp_path):
    table = ResultTable(tmp_path, {"a", "b"})
    table.add(_row("a", cycles=1234))
    table.add(_row("b", status="invalid"))
    table.close()
    again = ResultTable(tmp_path, {"a", "b", "c"})
    assert set(again.rows) == {"a", "b"} and again.resumed == 2
    assert again.rows["a"]["cycles"] == 1234 and again.rows["a"]["time_us"] == 12.34
    assert again.rows["b"]["cycles"] is None and again.rows["a"]["threads"] is None
    again.close()


def test_a_line_cut_off_mid_write_is_dropped_and_the_file_repaired(tmp_path):
    table = ResultTable(tmp_path, {"a", "b"})
    table.add(_row("a"))
    table.close()
    path = tmp_path / "points.csv"
    path.write_text(path.read_text() + "b,w,1x16x16,")  # a crash in the middle of the next row
    again = ResultTable(tmp_path, {"a", "b"})
    assert set(again.rows) == {"a"}
    again.add(_row("b"))
    again.close()
    assert [line.split(",")[0] for line in _lines(path)] == ["key", "a", "b"]


def test_failed_rows_are_computed_again_and_other_points_set_aside(tmp_path):
    table = ResultTable(tmp_path, {"a", "b", "old"})
    table.add(_row("a"))
    table.add(_row("b", status="failed"))
    table.add(_row("old"))
    table.close()
    again = ResultTable(tmp_path, {"a", "b"})
    assert set(again.rows) == {"a"} and again.stale == 1
    again.close()
    assert [line.split(",")[0] for line in _lines(tmp_path / "points.csv")] == ["key", "a"]
    assert [line.split(",")[0] for line in _lines(tmp_path / "points-stale.csv")] == ["key", "old"]


def test_parquet_holds_the_same_rows(tmp_path):
    import pyarrow.parquet as pq

    table = ResultTable(tmp_path, {"a", "b"})
    table.add(_row("a", cycles=77))
    table.add(_row("b", status="refused"))
    path = table.write_parquet()
    table.close()
    data = pq.read_table(path).to_pylist()
    assert [(r["key"], r["status"], r["cycles"]) for r in data] == [("a", "ok", 77), ("b", "refused", None)]


def test_progress_writes_lines_not_a_bar_when_stderr_is_no_terminal(capsys):
    """Issue 23, item 6: tqdm's carriage returns filled logs; off a terminal the progress is a line per tenth."""
    from vtacc.explore.sweep import Progress

    progress = Progress(10, show=True)
    assert progress.bar is None
    for _ in range(10):
        progress.update({"status": "ok"})
    err = capsys.readouterr().err
    assert "\r" not in err and err.count("\n") >= 5 and "10/10 points" in err

"""Sweeps on a real local Dask cluster: two worker processes on loopback.

Every point ends as one row; a worker killed mid-sweep loses no point (Dask
gives its tasks to another worker); an interrupted sweep resumes without
computing a finished point again; invalid points are rows with reasons.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from vtacc.explore.results import ResultTable
from vtacc.explore.spec import load_spec
from vtacc.explore.sweep import run_points

from .specs import SMALL, WIDER, write

dd = pytest.importorskip("dask.distributed")
pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def _cluster():
    cluster = dd.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                              dashboard_address="127.0.0.1:0", silence_logs=40)
    return cluster, dd.Client(cluster)


@pytest.fixture(scope="module")
def client():
    cluster, client = _cluster()
    yield client
    client.close()
    cluster.close()


def _csv_rows(directory: Path) -> list[dict]:
    with (directory / "points.csv").open() as fh:
        return list(csv.DictReader(fh))


def test_a_sweep_accounts_for_every_point(client, tmp_path):
    spec = load_spec(write(tmp_path, WIDER))
    table = ResultTable(tmp_path / "out", {p.key for p in spec.points})
    assert run_points(spec.points, client, table) == len(spec.points)
    table.close()
    rows = _csv_rows(tmp_path / "out")
    assert sorted(r["key"] for r in rows) == sorted(p.key for p in spec.points)
    by_status = {s: [r for r in rows if r["status"] == s] for s in ("ok", "invalid", "refused", "failed")}
    assert len(by_status["ok"]) == 24 and len(by_status["invalid"]) == 24 and not by_status["failed"]
    assert all(r["LOG_BLOCK"] == "3" and "micro-op needs" in r["reason"] for r in by_status["invalid"])
    assert all(int(r["cycles"]) > 0 and r["reason"] == "" for r in by_status["ok"])
    assert len({r["worker"] for r in by_status["ok"]}) == 2  # both workers did some


def test_killing_a_worker_mid_sweep_loses_no_point(tmp_path):
    cluster, client = _cluster()
    try:
        spec = load_spec(write(tmp_path, WIDER))
        table = ResultTable(tmp_path / "out", {p.key for p in spec.points})
        killed = []

        def kill_one(row):
            if not killed:
                pid = next(iter(client.run(os.getpid).values()))
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

        run_points(spec.points, client, table, kill_one)
        table.close()
    finally:
        client.close()
        cluster.close()
    rows = _csv_rows(tmp_path / "out")
    assert killed
    assert sorted(r["key"] for r in rows) == sorted(p.key for p in spec.points)
    assert not [r for r in rows if r["status"] == "failed"]


def test_an_interrupted_sweep_resumes_without_recomputing(client, tmp_path):
    spec = load_spec(write(tmp_path, WIDER))
    keys = {p.key for p in spec.points}
    table = ResultTable(tmp_path / "out", keys)
    seen = []

    def interrupt(row):
        seen.append(row["key"])
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_points(spec.points, client, table, interrupt)
    table.close()
    before = (tmp_path / "out" / "points.csv").read_text()
    assert len(_csv_rows(tmp_path / "out")) == 5

    again = ResultTable(tmp_path / "out", keys)
    todo = [p for p in spec.points if p.key not in again.rows]
    assert len(todo) == len(spec.points) - 5 and not {p.key for p in todo} & set(seen)
    assert run_points(todo, client, again) == len(todo)
    again.close()
    after = (tmp_path / "out" / "points.csv").read_text()
    assert after.startswith(before)  # the first rows are kept as they were
    assert sorted(r["key"] for r in _csv_rows(tmp_path / "out")) == sorted(keys)


def test_the_command_line_sweeps_then_resumes_with_nothing_to_do(tmp_path):
    spec = write(tmp_path, SMALL)
    out = tmp_path / "results"
    first = subprocess.run([BIN / "vtacc", "explore", spec, "-o", out, "--workers", "2", "--no-progress"],
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "8 points (2 workloads); 0 finished earlier, 8 to compute" in first.stderr
    assert "8 of 8 points: 4 ok, 4 invalid" in first.stdout
    assert {p.name for p in out.iterdir()} >= {"points.csv", "points.parquet", "summary.txt", "pareto-memory.png",
                                              "pareto-macs.png"}
    table = (out / "points.csv").read_text()
    second = subprocess.run([BIN / "vtacc", "explore", spec, "-o", out, "--no-progress"],
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert "8 finished earlier, 0 to compute" in second.stderr
    assert (out / "points.csv").read_text() == table


def test_ctrl_c_keeps_finished_rows_and_a_rerun_resumes(tmp_path):
    import time

    spec = Path(__file__).resolve().parents[3] / "examples" / "explore" / "quick.toml"  # 32 points of ~0.2 s
    out = tmp_path / "results"
    proc = subprocess.Popen([BIN / "vtacc", "explore", spec, "-o", out, "--workers", "2", "--no-progress",
                             "--no-pictures"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait for some rows to land, then interrupt as Ctrl-C does
        if (out / "points.csv").exists() and (out / "points.csv").read_text().count("\n") >= 4:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    done = len(_csv_rows(out))
    total = len(load_spec(spec).points)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "run the same command again" in stderr
    assert 3 <= done < total
    again = subprocess.run([BIN / "vtacc", "explore", spec, "-o", out, "--workers", "2", "--no-progress",
                            "--no-pictures"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"{done} finished earlier, {total - done} to compute" in again.stderr
    assert sorted(r["key"] for r in _csv_rows(out)) == sorted(p.key for p in load_spec(spec).points)

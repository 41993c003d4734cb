"""Pareto fronts worked out by hand, network sums, and the pictures."""

from __future__ import annotations

from vtacc.explore.pareto import ALL, by_workload, draw_fronts, front, front_text


def _row(workload, config, memory, time_us, block=4, status="ok", hardware="hw"):
    return {"workload": workload, "config": config, "hardware": hardware, "threads": None, "status": status,
            "onchip_bytes": memory, "time_us": time_us, "cycles": int(time_us * 100), "LOG_BLOCK": block,
            "peak_macs_per_cycle": 1 << (2 * block - 2)}


def test_front_keeps_only_points_nothing_beats_on_both():
    rows = [_row("w", "a", 100, 9.0), _row("w", "b", 200, 5.0), _row("w", "c", 300, 6.0),  # c: b beats it
            _row("w", "d", 400, 1.0), _row("w", "e", 100, 10.0)]  # e: a beats it
    assert [r["config"] for r in front(rows, "onchip_bytes")] == ["a", "b", "d"]


def test_network_sum_counts_only_configurations_every_workload_finished():
    rows = [_row("x", "a", 100, 1.0), _row("y", "a", 100, 2.0),
            _row("x", "b", 200, 0.5), _row("y", "b", 200, 0.0, status="refused")]
    groups = by_workload(rows)
    assert list(groups) == [ALL, "x", "y"]
    assert [(r["config"], r["time_us"]) for r in groups[ALL]] == [("a", 3.0)]
    assert [r["config"] for r in groups["y"]] == ["a"]


def test_front_text_lists_each_front(tmp_path):
    rows = [_row("x", "a", 1024, 2000.0), _row("x", "b", 2048, 1000.0), _row("x", "c", 4096, 1500.0)]
    text = front_text(rows)
    assert "x: 3 points, 2 on the latency/memory front" in text
    assert "2.000 ms" in text and "1.000 ms" in text and "1.500 ms" not in text


def test_pictures_are_pngs_with_a_panel_per_workload(tmp_path):
    import matplotlib.image

    rows = [_row(w, f"c{i}", 1024 * (i + 1), 100.0 / (i + 1) + j, block=3 + i % 3)
            for j, w in enumerate(("x", "y", "z")) for i in range(6)]
    paths = draw_fronts(rows, tmp_path, "test")
    assert [p.name for p in paths] == ["pareto-memory.png", "pareto-macs.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        height, width = matplotlib.image.imread(p).shape[:2]
        assert width > height > 300
    assert draw_fronts([_row("x", "a", 1, 1.0, status="invalid")], tmp_path / "none", "t") == []

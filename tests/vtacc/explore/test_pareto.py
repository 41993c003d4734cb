"""Pareto fronts worked out by hand, network sums, and the pictures."""

from __future__ import annotations

import pytest

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


def _figures(rows, tmp_path, monkeypatch) -> list:
    """The figures draw_fronts draws, kept open (drawn) for inspection."""
    import matplotlib.pyplot as plt

    kept: list = []
    monkeypatch.setattr(plt, "close", kept.append)
    draw_fronts(rows, tmp_path, "test")
    for fig in kept:
        fig.canvas.draw()
    return kept


def _labelled(axis, limits) -> list[str]:
    """The labels of an axis's major ticks inside its view limits."""
    lo, hi = sorted(limits)
    return [t.label1.get_text() for t in axis.get_major_ticks()
            if lo <= t.get_loc() <= hi and t.label1.get_visible() and t.label1.get_text()]


@pytest.mark.parametrize("spread", ["narrow", "wide"])
def test_every_log_axis_of_the_pictures_carries_three_to_ten_labelled_ticks(spread, tmp_path, monkeypatch):
    if spread == "narrow":  # 250..400 KiB and 4.2..11.5 ms: a round log step would label two ticks of each
        points = ((250, 11.5, 4), (300, 8.0, 5), (400, 4.2, 4), (350, 6.0, 5))
    else:  # 16..65536 MACs per cycle and 0.05..900 ms: every half octave would crowd 26 labels together
        points = tuple((64 * 4**i, 900.0 / 7**i, 3 + i) for i in range(7))
    rows = [_row("x", f"c{i}", 1024 * m, 1000.0 * t, block=b) for i, (m, t, b) in enumerate(points)]
    for fig in _figures(rows, tmp_path, monkeypatch):
        for ax in (a for a in fig.axes if a.get_visible()):
            for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
                labels = _labelled(axis, limits)
                assert 3 <= len(labels) <= 10, (fig.texts[0].get_text(), axis.axis_name, labels)


def test_batch_sizes_have_markers_of_their_own_and_overlapping_points_stay_visible(tmp_path, monkeypatch):
    rows = [{**_row("x", f"{1 << b}x16x16", 1024 * 400, 5000.0), "LOG_BATCH": b} for b in (0, 1)]
    for fig in _figures(rows, tmp_path, monkeypatch):
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert "batch 1, block 16" in legend and "batch 2, block 16" in legend
        ax = fig.axes[0]
        points = [c for c in ax.collections if len(c.get_offsets()) == 1 and c.get_sizes()[0] < 60]
        assert len(points) == 2
        shapes = [c.get_paths()[0].vertices for c in points]
        assert shapes[0].shape != shapes[1].shape or (shapes[0] != shapes[1]).any()  # two shapes on one spot
        assert all(len(c.get_facecolor()) == 0 for c in points)  # hollow: the one below shows through

"""The timing model against cycle counts measured on the 2019 Chisel core's RTL (../shared/timing).

Every program at every measured memory latency must be within 3 % of the
measurement, and the median error under 1 %. The model's costs are global
profile values; nothing in it knows these programs.
"""

from __future__ import annotations

import statistics

import pytest

from tests.vtasm.paths import SHARED, require
from vtasim.timing.profile import load_profile
from vtasim.timing.validate import compare, load_cases

TIMING = SHARED / "timing"


@pytest.fixture(scope="module")
def rows():
    return compare(load_cases(require(TIMING)), load_profile("chisel-2019"))


def test_every_measurement_within_three_percent(rows):
    bad = [f"{r.name} at latency {r.latency}: model {r.model}, measured {r.measured} ({100 * r.error:+.2f}%)"
           for r in rows if abs(r.error) > 0.03]
    assert not bad, "\n".join(bad)


def test_median_error_under_one_percent(rows):
    assert statistics.median(abs(r.error) for r in rows) < 0.01


def test_the_whole_set_was_compared(rows):
    names = {r.name for r in rows}
    expected = {p.name for p in TIMING.iterdir() if (p / "cycles.json").is_file()}
    assert names == expected and len(rows) == 3 * len(expected)


@pytest.mark.parametrize("design, worst, outside", [("chisel-2021", 0.065, 3), ("hls", 0.035, 1)])
def test_other_designs_against_their_own_measurements(design, worst, outside):
    """Each profile is compared with its own design's RTL (names.MEASURED): median under 1 %, and what is
    left outside 3 % (programs of many tiny transfers at memory latency 0, docs/timing.md) bounded as it
    stands: chisel-2021 at most 6.5 % on 3 of 126 measurements, hls at most 3.5 % on one."""
    from vtasim.timing.names import MEASURED

    rows = compare(load_cases(require(TIMING), MEASURED[design]), load_profile(design))
    expected = {p.name for p in TIMING.iterdir() if (p / MEASURED[design]).is_file()}
    assert {r.name for r in rows} == expected and len(rows) == 3 * len(expected)
    errors = [abs(r.error) for r in rows]
    assert statistics.median(errors) < 0.01
    assert max(errors) < worst and sum(e > 0.03 for e in errors) <= outside

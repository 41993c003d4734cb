"""Hashing rows: the GEMM unit's multipliers (splitmix64, written here from its definition)
and the distinct rows found with them (the in-order run's kernel numbering, im2col classes)."""

from __future__ import annotations

from vtasim.core.gemm import ROW_HASH_TAPS, _row_hash

MASK = (1 << 64) - 1


def splitmix64(n: int) -> list[int]:
    """The first n outputs of splitmix64 from state 0 (Steele, Lea and Flood, 2014)."""
    out, state = [], 0
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        out.append(z ^ (z >> 31))
    return out


def test_multipliers_are_splitmix64_in_range_and_distinct():
    h = _row_hash()
    assert h.size == ROW_HASH_TAPS and h.dtype.itemsize == 8
    assert splitmix64(1)[0] == 0xE220A8397B1DCDAF  # the published first output from seed 0
    assert h[:256].tolist() == [(z >> 2) | 1 for z in splitmix64(256)]
    assert int(h.min()) >= 1 and int(h.max()) < 1 << 62
    assert len(set(h.tolist())) == ROW_HASH_TAPS


def _distinct_by_tuples(values):
    """Distinct rows in sorted order, with plain Python."""
    return sorted({tuple(r) for r in values.tolist()}), None


def test_distinct_kernel_rows_numbered_like_sorting_them(monkeypatch):
    import numpy as np

    import vtasim.core.gemm as gemm

    rng = np.random.default_rng(4)
    for trial in range(40):
        values = rng.integers(-3, 3, (int(rng.integers(1, 60)), int(rng.integers(1, 12)))).astype(np.int64)
        values[rng.integers(0, values.shape[0], 5) % values.shape[0]] = values[0]  # repeats
        if trial % 2:  # every row hashes alike: the exact check must notice and sort the rows instead
            monkeypatch.setattr(gemm, "_row_hash", lambda: np.zeros(64, dtype=np.int64))
        else:
            monkeypatch.undo()
        first, which = gemm.distinct_rows(values)
        distinct = values[first]
        expected_rows, _ = _distinct_by_tuples(values)
        assert sorted(map(tuple, distinct.tolist())) == expected_rows
        assert [tuple(distinct[k]) for k in which.tolist()] == [tuple(r) for r in values.tolist()]
        assert len(distinct) == len(expected_rows) and len(set(which.tolist())) == len(expected_rows)

"""The GEMM unit's row-hash multipliers: the splitmix64 sequence, written here from its definition."""

from __future__ import annotations

from vtasim.gemm import ROW_HASH_TAPS, _row_hash

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

"""docs/timing.md's table of profile values says what the built-in profiles hold: every key, every value."""

from __future__ import annotations

import re
from pathlib import Path

from vtasim.timing.names import BUILTIN
from vtasim.timing.profile import load_profile, parse_override, profile_keys

DOC = Path(__file__).resolve().parents[2] / "docs" / "timing.md"


def _table() -> tuple[list[str], dict[str, list[str]]]:
    """The profile names of the values table's header and, per key, the cells under them."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| key | meaning |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")][2:]
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[2:]
    return header, rows


def _shown(value) -> str:
    if isinstance(value, tuple):
        return ", ".join(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def test_the_values_table_lists_every_key_of_every_builtin_profile():
    header, rows = _table()
    assert header == list(BUILTIN)
    assert sorted(rows) == sorted(profile_keys())
    wrong = []
    for name in BUILTIN:
        profile = load_profile(name)
        column = header.index(name)
        for key, cells in rows.items():
            value = getattr(profile, parse_override(f"{key}=0")[0])
            if re.sub(r"\s+", " ", cells[column]) != _shown(value):
                wrong.append(f"{key} on {name}: docs say {cells[column]}, the profile holds {_shown(value)}")
    assert not wrong, "\n".join(wrong)

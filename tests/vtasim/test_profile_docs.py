"""The profile keys are declared once (vtasim/timing/profile_keys.py): the Profile's fields, what a profile
file and --set take, and docs/timing.md's table of keys, meanings and built-in values all follow it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from vtasim.timing.profile import Profile, load_profile, parse_override, profile_keys, values_table, with_overrides
from vtasim.timing.profile_keys import KEYS
from vtasm.errors import ConfigError

DOC = Path(__file__).resolve().parents[2] / "docs" / "timing.md"
TOP = {"name", "description", "clock_mhz", "fitted"}


def test_the_docs_table_is_the_one_made_from_the_keys_and_the_builtin_profiles():
    text = DOC.read_text(encoding="utf-8")
    table = values_table()
    assert table in text, "docs/timing.md's values table is stale: python -m vtasim.timing.profile prints it"


def test_every_profile_field_is_a_declared_key_and_every_key_a_field():
    fields = [f.name for f in dataclasses.fields(Profile) if f.name not in TOP]
    assert [k.attr for k in KEYS] == fields  # the same keys, in the same order
    assert profile_keys() == [k.spelt for k in KEYS]
    assert len({k.spelt for k in KEYS}) == len(KEYS)


@pytest.mark.parametrize("key", KEYS, ids=lambda k: k.spelt)
def test_each_key_is_set_by_its_spelling_and_held_to_its_least_value(key):
    if key.attr == "read_priority":
        assert parse_override(f"{key.spelt}=acc,fetch,inp,uop,wgt") == ("read_priority",
                                                                          ("acc", "fetch", "inp", "uop", "wgt"))
        return
    assert parse_override(f"{key.spelt}=1")[0] == key.attr
    profile = load_profile("hls")
    if key.least > 0:
        with pytest.raises(ConfigError, match=f"{key.spelt} must be at least {key.least}"):
            with_overrides(profile, {key.attr: key.least - 1})
    with pytest.raises(ConfigError, match=f"{key.spelt} must be at least"):
        with_overrides(profile, {key.attr: -1})

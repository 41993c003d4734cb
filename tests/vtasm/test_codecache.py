"""vtasm.codecache: dataclasses made from kept compiled code are the dataclasses Python makes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from vtasm.codecache import cache_file, compiled_methods


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("VTA_NO_CODE_CACHE", raising=False)


def _make():
    @dataclass(frozen=True)
    class Span:
        """A frozen class: every method dataclasses writes."""

        path: str
        line: int = 1
        tags: tuple = field(default=(), compare=False)

    @dataclass(kw_only=True)
    class Box:
        items: list = field(default_factory=list)
        name: str = "box"

    return Span, Box


def _behaviour(Span, Box) -> list:
    a, b = Span("k.vk", 3, ("x",)), Span("k.vk", 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.line = 4  # type: ignore[misc]
    box = Box(name="b")
    box.items.append(1)
    return [repr(a), a == b, hash(a) == hash(b), dataclasses.astuple(a), repr(box), Box().items, box == Box(),
            [f.name for f in dataclasses.fields(Box)]]


def test_classes_from_the_cache_behave_as_plain_dataclasses():
    plain = _behaviour(*_make())
    with compiled_methods("test"):
        first = _behaviour(*_make())  # compiled here, then kept
    assert cache_file("test").is_file()
    with compiled_methods("test"):
        again = _behaviour(*_make())  # from the file
    assert first == plain and again == plain
    assert "exec" not in vars(dataclasses)  # the dataclasses module is left as it was


def test_the_file_is_written_only_when_something_new_was_compiled():
    with compiled_methods("test"):
        _make()
    path = cache_file("test")
    before = path.stat().st_mtime_ns
    path.touch()  # would be rewritten with a new modification time
    touched = path.stat().st_mtime_ns
    with compiled_methods("test"):
        _make()
    assert path.stat().st_mtime_ns == touched and touched >= before


def test_a_damaged_or_missing_file_compiles_anew(monkeypatch):
    path = cache_file("test")
    path.write_bytes(b"\x00 not marshal data")
    with compiled_methods("test"):
        Span, Box = _make()
    assert _behaviour(Span, Box) == _behaviour(*_make())
    monkeypatch.setenv("VTA_NO_CODE_CACHE", "1")
    assert cache_file("test") is None
    with compiled_methods("test"):
        assert _behaviour(*_make()) == _behaviour(Span, Box)

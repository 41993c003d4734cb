"""The process helpers: the collector's thresholds during a block, and where the grammars' tables are cached."""

from __future__ import annotations

import gc

from vtasm.cache import grammar_cache
from vtasm.collector import FIRST_GENERATION, fewer_collections


def test_fewer_collections_raises_the_first_threshold_and_restores_it():
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold()[0] == max(FIRST_GENERATION, before[0])
        assert gc.get_threshold()[1:] == before[1:]
    assert gc.get_threshold() == before
    try:
        with fewer_collections():
            raise ValueError("inside")
    except ValueError:
        pass
    assert gc.get_threshold() == before


def test_the_grammar_cache_lives_in_a_private_user_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("VTA_NO_GRAMMAR_CACHE", raising=False)
    path = grammar_cache("kernel")
    assert path == str(tmp_path / "vta-toolchain" / "kernel.lark-cache")
    assert (tmp_path / "vta-toolchain").stat().st_mode & 0o777 == 0o700


def test_no_grammar_cache_where_the_directory_cannot_be_made_or_when_asked(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert grammar_cache("kernel") is False
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("VTA_NO_GRAMMAR_CACHE", "1")
    assert grammar_cache("kernel") is False

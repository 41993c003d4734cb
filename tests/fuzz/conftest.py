"""Fixtures of the fuzz suite: the seed files (built once per session) and the size of the run.

The default run is small (a few hundred cases, most through the parsers' API in a worker process, a
sample through the installed commands). ``VTA_FUZZ_LONG=1`` enables the tests marked ``fuzz_long``: the
same checks over many more cases. ``VTA_FUZZ_LOG=FILE`` appends every failure as a JSON line to FILE.
"""

from __future__ import annotations

import os

import pytest

from .seeds import Seeds, build_seeds

LONG = os.environ.get("VTA_FUZZ_LONG") == "1"


def pytest_configure(config):
    config.addinivalue_line("markers", "fuzz_long: the long fuzz sweep (runs only with VTA_FUZZ_LONG=1)")


def pytest_collection_modifyitems(config, items):
    if LONG:
        return
    skip = pytest.mark.skip(reason="long fuzz sweep: set VTA_FUZZ_LONG=1 to run it")
    for item in items:
        if "fuzz_long" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def seeds(tmp_path_factory) -> Seeds:
    pytest.importorskip("onnx")
    return build_seeds(tmp_path_factory.mktemp("fuzz-seeds"))

"""Searches side by side in forked workers (vtacc.forked): the results and errors of a plain loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vtacc import forked
from vtacc.forked import forked_map
from vtasm.errors import CompileError, SourceSpan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
pytestmark = pytest.mark.skipif(not forked._can_fork(), reason="forked workers run on Linux only")


@pytest.fixture
def at_once(monkeypatch):
    """Workers from the first item on, whatever the items take."""
    monkeypatch.setattr(forked, "SERIAL_SECONDS", -1.0)


def _square_where(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _fresh(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (its only thread: a test process may have others, and then
    nothing is forked) and return the JSON it prints."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2], check=True)
    return json.loads(done.stdout)


def test_results_in_order_from_other_processes():
    got = _fresh("""
import json, os
from vtacc import forked
forked.SERIAL_SECONDS = -1.0
got = forked.forked_map(lambda x: (x * x, os.getpid()), list(range(12)), jobs=2)
print(json.dumps({"values": [v for v, _ in got], "pids": [p for _, p in got], "me": os.getpid()}))
""")
    assert got["values"] == [x * x for x in range(12)]
    assert set(got["pids"]) - {got["me"]}  # computed in other processes


def test_one_job_or_one_item_stays_here(at_once):
    assert {pid for _, pid in forked_map(_square_where, [1, 2, 3], jobs=1)} == {os.getpid()}
    assert forked_map(_square_where, [], jobs=2) == []


def _refuse_odd(x: int) -> int:
    if x % 2:
        raise CompileError(f"item {x} is odd", SourceSpan("k.vk", x, 1))
    return x


def test_error_raised_here_as_the_loop_raises_it(at_once):
    with pytest.raises(CompileError) as err:
        forked_map(_refuse_odd, [0, 2, 4, 5, 7], jobs=2)
    assert err.value.message == "item 5 is odd" and err.value.span.line == 5


def test_a_network_compiles_to_the_same_program_either_way():
    got = _fresh("""
import json, os
from pathlib import Path
from vtacc import forked
from vtacc.frontend.check import check_source
from vtacc.program_builder import compile_file
from vtasm.config import default_config
forked.SERIAL_SECONDS = -1.0
sent = []
in_workers = forked._in_workers
forked._in_workers = lambda fn, items, jobs: (sent.append(len(items)), in_workers(fn, items, jobs))[1]
checked = check_source(Path("examples/resnet_block.vk").read_text(), "resnet_block.vk")
apart = compile_file(checked, default_config(), jobs=2)
here = compile_file(checked, default_config(), jobs=1)
print(json.dumps({"same": apart.program.instructions == here.program.instructions,
                  "tilings": [p.tiling == q.tiling for p, q in zip(apart.planned, here.planned)],
                  "distinct": len({p.tiling for p in here.planned}), "sent": sent}))
""")
    assert got["distinct"] > 1 and got["sent"] and got["sent"][0] > 1  # searches that went to workers
    assert got["same"] and all(got["tilings"])

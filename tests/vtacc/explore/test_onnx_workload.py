"""An ONNX model as a sweep workload: imported once, timed like the program `vtacc model.onnx` builds."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("onnx")

from tests.onnx.test_cli import _model  # noqa: E402
from tests.vtacc.test_cli import tool  # noqa: E402
from vtacc.explore.evaluate import evaluate  # noqa: E402
from vtacc.explore.spec import load_spec  # noqa: E402
from vtasm.errors import SpecError  # noqa: E402

from .specs import write  # noqa: E402


def test_an_onnx_point_has_the_cycles_of_the_compiled_model(tmp_path):
    _model(tmp_path)
    spec = load_spec(write(tmp_path, '[[workload]]\nfile = "m.onnx"\ncalibrate = "cal.npy"\n'))
    (point,) = spec.points
    assert point.workload.name == "m" and "kernel main(" in point.workload.source
    row = evaluate(point)
    assert row["status"] == "ok", row["reason"]
    r = tool("vtacc", "m.onnx", "--calibrate", "cal.npy", "-o", "m.vbin", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = tool("vtasim", "run", "m.vbin", "--timing-only", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert row["cycles"] == int(re.search(r"([\d,]+) cycles", r.stdout + r.stderr).group(1).replace(",", ""))
    assert row["macs"] == 16 * 16 * 9 * 4 * 4  # OC x IC x 3x3 x H x W


def test_a_model_that_cannot_be_imported_names_the_workload_line(tmp_path):
    _model(tmp_path)
    path = write(tmp_path, 'title = "t"\n\n[[workload]]\nfile = "m.onnx"\n')  # a float model needs calibrate
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.render().startswith(f"{path}:3: [[workload]] #1: ")
    assert "calibrat" in info.value.render()

"""`vtacc MODEL.onnx`: the program, its kernel-language form, and bad models refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.vtacc.test_cli import tool
from vtasm.formats.network import load_network
from vtasm.formats.vbin import write_vbin

from .models import save_model, tensor


def _model(tmp_path, nodes=None, consts=None, shape=(1, 16, 4, 4)):
    w = np.random.default_rng(0).normal(0, 0.2, (16, 16, 3, 3)).astype(np.float32)
    nodes = nodes or [helper.make_node("Conv", ["x", "w"], ["c"], name="conv1", kernel_shape=[3, 3],
                                       pads=[1, 1, 1, 1]),
                      helper.make_node("Relu", ["c"], ["y"], name="relu1")]
    path = save_model(tmp_path / "m.onnx", nodes, [tensor("x", list(shape))], [tensor("y", None)],
                      {"w": w} if consts is None else consts)
    np.save(tmp_path / "cal.npy", np.random.default_rng(1).normal(0, 1, (8,) + tuple(shape[1:])))
    return path


def test_model_and_its_kernel_language_give_the_same_program(tmp_path):
    path = _model(tmp_path)
    r = tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "-o", tmp_path / "a.vbin", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "conv1" in r.stderr and "calibration range" in r.stderr  # the import report: scales and ranges
    r = tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "--emit", "vk", "-o", tmp_path / "m.vk",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "m.vk").read_text()
    assert "kernel conv1(" in text and "kernel main(" in text and (tmp_path / "m.npz").exists()
    r = tool("vtacc", tmp_path / "m.vk", "--params", tmp_path / "m.npz", "-o", tmp_path / "b.vbin", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    network = load_network(tmp_path / "a.vbin")  # the model's file: its one VTA program, with the scales
    assert [s.kind for s in network.steps] == ["vta"] and network.tensors["x"].exp == network.tensors["x"].exp
    assert write_vbin(network.steps[0].program) == (tmp_path / "b.vbin").read_bytes()


def _refused(tmp_path, path, *args) -> str:
    r = tool("vtacc", path, *args, "-o", tmp_path / "out.vbin", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out.vbin").exists()
    lines = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_wrong_calibration_shape(tmp_path):
    path = _model(tmp_path)
    np.save(tmp_path / "bad.npy", np.zeros((4, 3, 4, 4)))
    line = _refused(tmp_path, path, "--calibrate", tmp_path / "bad.npy")
    assert "do not match the input" in line and "[4, 3, 4, 4]" in line


@pytest.mark.parametrize("case, expected", [
    ("npz", "an .npz archive; give one array as a .npy file"),
    ("text", "not a .npy file"),
    ("nan", "NaN or infinite values (3 of them)"),
    ("zero", "all zero: they give no range"),
])
def test_unusable_calibration_files_are_refused_in_one_line(tmp_path, case, expected):
    """Calibration data that cannot set scales is refused (an .npz was an internal error; NaN data made a
    useless program with every scale 2^0; all-zero data gave a puzzling message about left shifts)."""
    path = _model(tmp_path)
    data = np.random.default_rng(2).normal(0, 1, (4, 16, 4, 4))
    cal = tmp_path / f"cal_{case}.npy"
    if case == "npz":
        cal = tmp_path / "cal.npz"
        np.savez(cal, x=data)
    elif case == "text":
        cal.write_text("0.5 0.25\n")
    else:
        if case == "nan":
            data[0, 0, 0, :3] = np.nan
        else:
            data[...] = 0
        np.save(cal, data)
    assert expected in _refused(tmp_path, path, "--calibrate", cal)


def test_float_model_without_calibration(tmp_path):
    assert "--calibrate" in _refused(tmp_path, _model(tmp_path))


def test_operator_neither_side_computes(tmp_path):
    nodes = [helper.make_node("Hardmax", ["x"], ["y"], name="mix")]
    line = _refused(tmp_path, _model(tmp_path, nodes, {}), "--calibrate", tmp_path / "cal.npy")
    assert "node 'mix' (Hardmax)" in line


def _host_line(tmp_path, nodes, shape=(1, 16, 4, 4), consts=None) -> str:
    """The import report's line for the node 'odd', which the host computes."""
    r = tool("vtacc", _model(tmp_path, nodes, consts, shape=shape), "--calibrate", tmp_path / "cal.npy", "-o",
             tmp_path / "out.vbin", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "out.vbin").exists(), r.stderr
    return next(line for line in r.stderr.splitlines() if line.strip().startswith("odd"))


def test_weight_that_is_not_an_initialiser_runs_on_the_host(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "x"], ["y"], name="odd", kernel_shape=[4, 4])]
    line = _host_line(tmp_path, nodes, consts={})
    assert "host Conv" in line and "must be a constant" in line


@pytest.mark.parametrize("attrs, words", [({"dilations": [2, 2]}, "dilation"),
                                          ({"strides": [1, 2]}, "strides")])
def test_conv_vta_cannot_compute_runs_on_the_host_with_the_reason(tmp_path, attrs, words):
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="odd", kernel_shape=[3, 3], **attrs)]
    line = _host_line(tmp_path, nodes, shape=(1, 16, 9, 9))
    assert "host Conv" in line and words in line


def test_a_layer_vta_cannot_compile_runs_on_the_host_with_the_compilers_reason(tmp_path):
    """The fallback is total (issue 38): a layer whose tiles fit no buffer is imported again on the host."""
    w = np.random.default_rng(0).normal(0, 0.05, (16, 16, 33, 33)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="odd", kernel_shape=[33, 33])]
    line = _host_line(tmp_path, nodes, shape=(1, 16, 33, 33), consts={"w": w})
    assert "host Conv" in line and "VTA cannot compile it: no tiling fits" in line and ".vk" not in line


def test_explain_says_where_its_source_lines_are(tmp_path):
    """--explain cites [model.vk:LINE]; that file is the kernel language --emit vk writes, and the note says so."""
    path = _model(tmp_path)
    r = tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "--explain", "-o", tmp_path / "a.vasm", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"(written by vtacc {path.name} --emit vk -o {path.stem}.vk, with the same calibration)" in r.stdout
    assert f"[{path.stem}.vk:" in r.stdout
    alone = tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "--explain", cwd=tmp_path)
    assert alone.returncode == 0 and alone.stdout == r.stdout  # the report, without the assembly

"""External data only from inside the model's folder: every way out is refused before a file is opened.

A model is data from anywhere: its external-data locations must be relative
names whose real paths lie in the model file's real folder and name regular
files, and the range they name must hold exactly the tensor's bytes. Each
case is run as a user runs it: ``vtacc model.onnx`` from the model's folder
(the name without a directory) and by an absolute path.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import helper

from tests.vtacc.test_cli import tool
from vtacc.onnx.read.graph import load_graph
from vtasm.errors import ModelError

from .models import tensor

ROWS, COLS = 16, 32
W = (np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) - 200) / 300


def _external_model(folder, location: str = "w.data", offset: int | None = None, length: int | None = None):
    """A dense layer whose weights live in external data at ``location`` (the file is written only for the
    default location)."""
    folder.mkdir(parents=True, exist_ok=True)
    init = onnx.numpy_helper.from_array(W, "w")
    if location == "w.data":
        (folder / "w.data").write_bytes(W.tobytes())
    init.ClearField("raw_data")
    init.data_location = onnx.TensorProto.EXTERNAL
    entries = {"location": location, **({"offset": str(offset)} if offset is not None else {}),
               **({"length": str(length)} if length is not None else {})}
    for key, value in entries.items():
        e = init.external_data.add()
        e.key, e.value = key, value
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)], "g",
                              [tensor("x", [1, COLS])], [tensor("y", [1, ROWS])], [init])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_external_data_inside_the_folder_is_read(tmp_path):
    path = _external_model(tmp_path / "m")
    assert np.array_equal(load_graph(path).constants["w"], W)
    np.save(tmp_path / "m" / "cal.npy", np.ones((2, 1, COLS), np.float32))
    r = tool("vtacc", "model.onnx", "--calibrate", "cal.npy", "-o", "m.vbin", cwd=tmp_path / "m")
    assert r.returncode == 0, r.stderr
    sub = tmp_path / "n" / "deeper"  # a location in a subfolder is inside too
    sub.mkdir(parents=True)
    (sub / "w.bin").write_bytes(W.tobytes())
    assert np.array_equal(load_graph(_external_model(tmp_path / "n", "deeper/w.bin")).constants["w"], W)


def _refused(path, cwd, words: str) -> None:
    """The model is refused with one line naming ``words``, both by name from its folder and by full path."""
    with pytest.raises(ModelError, match=words):
        load_graph(path)
    np.save(path.parent / "cal.npy", np.ones((2, 1, COLS), np.float32))
    for name in ("model.onnx", str(path)):
        r = tool("vtacc", name, "--calibrate", "cal.npy", "-o", "out.vbin", cwd=cwd)
        assert r.returncode == 1, (name, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "tensor 'w'" in r.stderr, r.stderr
        assert not (cwd / "out.vbin").exists()


@pytest.mark.parametrize("location,words", [
    ("../secret.data", "leads outside the model's folder"),
    ("/etc/passwd", "is an absolute path"),
    ("/proc/self/environ", "is an absolute path"),
    ("sub/../../secret.data", "leads outside the model's folder"),
    ("w.data\0/etc/passwd", "holds a NUL character"),
    (".", "leads outside the model's folder"),
    ("missing.data", "cannot read external data"),
])
def test_locations_that_leave_the_folder_are_refused(tmp_path, location, words):
    (tmp_path / "secret.data").write_bytes(W.tobytes())  # a file the model must not reach
    (tmp_path / "m" / "sub").mkdir(parents=True)
    path = _external_model(tmp_path / "m", location)
    _refused(path, tmp_path / "m", words)


def test_symlinks_out_of_the_folder_are_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "w.data").write_bytes(W.tobytes())
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "link").symlink_to(outside, target_is_directory=True)  # a symlinked folder
    _refused(_external_model(folder, "link/w.data"), folder, "leads outside the model's folder")
    (folder / "file.data").symlink_to(outside / "w.data")  # a symlinked file
    _refused(_external_model(folder, "file.data"), folder, "leads outside the model's folder")
    # the model's own folder may be a symlink: what counts is where its files really are
    (tmp_path / "alias").symlink_to(folder, target_is_directory=True)
    (folder / "w.data").write_bytes(W.tobytes())
    _external_model(folder)
    assert np.array_equal(load_graph(tmp_path / "alias" / "model.onnx").constants["w"], W)


def test_fifos_and_devices_are_refused_without_reading(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    os.mkfifo(folder / "pipe")
    _refused(_external_model(folder, "pipe"), folder, "not a regular file")
    os.mkfifo(tmp_path / "model.onnx")  # a FIFO given as the model itself
    r = tool("vtacc", "model.onnx", cwd=tmp_path)
    assert r.returncode == 1 and "FIFO" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("offset,length,words", [
    (0, ROWS * COLS * 4 + 4, "lies past the file's end"),
    (8, None, "bytes of external data, but its shape"),
    (4, ROWS * COLS * 4, "lies past the file's end"),
    (0, 12, "bytes of external data, but its shape"),
])
def test_ranges_that_do_not_hold_the_tensor_are_refused(tmp_path, offset, length, words):
    path = _external_model(tmp_path / "m", offset=offset, length=length)
    _refused(path, tmp_path / "m", words)

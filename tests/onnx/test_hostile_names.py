"""Names are data, never code: what a model or a file calls things reaches generated text and terminals
escaped, and the formats refuse names that would act rather than show."""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.vtacc.test_cli import tool
from vtacc.frontend.check import check_source
from vtasm.errors import FormatError, ModelError, printable
from vtasm.formats.network import read_network

EVIL = "conv1\nkernel evil() {}\n# "
ESC = "\x1b[31m"


def _evil_model(tmp_path):
    w = np.random.default_rng(0).normal(0, 0.2, (16, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", [f"in{ESC}put", "w"], ["c\ny"], name=EVIL, kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c\ny"], ["out\u2028put"], name="relu\x1b]0;title\x07"),
             helper.make_node("LRN", ["out\u2028put"], ["n\rorm"], name="lrn\x7f", size=3)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(f"in{ESC}put", TensorProto.FLOAT,
                                                                          [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("n\rorm", TensorProto.FLOAT, [1, 16, 8, 8])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "evil.onnx"
    path.write_bytes(model.SerializeToString())
    np.save(tmp_path / "cal.npy", np.random.default_rng(1).normal(0, 1, (4, 1, 3, 8, 8)).astype(np.float32))
    return path


def test_names_never_become_kernel_language_or_terminal_codes(tmp_path):
    path = _evil_model(tmp_path)
    w = np.random.default_rng(0).normal(0, 0.2, (16, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name=EVIL, kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 8, 8])],
                              [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(tmp_path / "vk.onnx"))
    r = tool("vtacc", "vk.onnx", "--calibrate", "cal.npy", "--emit", "vk", "-o", "vk.vk", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "vk.vk").read_text()
    assert not any(line.lstrip().startswith("kernel evil") for line in text.splitlines())
    checked = check_source(text, "vk.vk")  # the text parses, and declares only the importer's kernels
    assert all("evil" not in k.name or k.name.startswith("conv1") for k in checked.kernels)
    r = tool("vtacc", path.name, "--calibrate", "cal.npy", "-o", "evil.vbin", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stderr + r.stdout and "\\x1b[31m" in r.stderr  # shown escaped
    r = tool("vtasim", "run", "evil.vbin", "--zero-inputs", "--timing", "--trace", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not any(c in r.stdout + r.stderr for c in "\x1b\r\x07\u2028")
    r = tool("vtasm", "dump", "evil.vbin", cwd=tmp_path)
    assert r.returncode == 0 and "\x1b" not in r.stdout and "lrn\\x7f" in r.stdout


def test_errors_quote_names_escaped_on_one_line():
    error = ModelError(f"m.onnx: node '{EVIL}{ESC}' (Foo): not supported")
    assert error.report() == "error: m.onnx: node 'conv1\\nkernel evil() {}\\n# \\x1b[31m' (Foo): not supported"
    assert printable("tab\tand\ud800") == "tab\tand\\ud800"


@pytest.mark.parametrize("bad", ["a\nb", f"x{ESC}", "\u2028", "\x00", "\ud800"])
def test_the_formats_refuse_names_that_are_not_printable(tmp_path, bad):
    path = _evil_model(tmp_path)
    r = tool("vtacc", path.name, "--calibrate", "cal.npy", "-o", "n.vbin", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = (tmp_path / "n.vbin").read_bytes()
    length = struct.unpack_from("<Q", data, 24)[0]
    meta = json.loads(data[32:32 + length])
    meta["name"] = bad
    payload = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()  # \\u escapes: valid JSON
    chunk = struct.pack("<4sIQ", b"NETW", zlib.crc32(payload), len(payload)) + payload + bytes(-len(payload) % 8)
    rest = data[32 + length + (-length % 8):]
    with pytest.raises(FormatError, match="not printable"):
        read_network(data[:16] + chunk + rest)

"""What the network format says to refuse is refused, in one line, before anything runs."""

from __future__ import annotations

import pytest

from tests.test_memory_budget import _rechunked
from tests.vtacc.test_cli import tool
from vtasm.errors import FormatError
from vtasm.formats.network import read_network

from .test_host_network import _model


@pytest.fixture(scope="module")
def network(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("refusals")
    path, _ = _model(folder)
    assert tool("vtacc", path, "--calibrate", "cal.npy", "-o", "net.vbin", cwd=folder).returncode == 0
    return (folder / "net.vbin").read_bytes()


def _edited(data: bytes, edit) -> bytes:
    return _rechunked(data, b"NETW", edit)


def test_a_launch_whose_inputs_no_binding_fills_is_refused(network, tmp_path):
    def unbind(meta):
        step = next(s for s in meta["steps"] if s["kind"] == "vta")
        step["inputs"] = {}
        return meta

    (tmp_path / "n.vbin").write_bytes(_edited(network, unbind))
    r = tool("vtasim", "run", "n.vbin", "--zero-inputs", cwd=tmp_path)  # it ran on zeros: every image alike
    assert r.returncode == 1 and "step 1 (VTA launch 'vta1') reads program tensor 'x'" in r.stderr
    assert "no input binding fills" in r.stderr and not (tmp_path / "n.out").exists()


@pytest.mark.parametrize("edit,words", [
    (lambda m: {**m, "opset": 99}, "opset: 99; host steps follow opsets 7 to 21"),
    (lambda m: {**m, "constants": [{"name": "k", "dtype": "float32", "shape": [1], "offset": 4, "nbytes": 4}]},
     "offset 4 is not a multiple of 8"),
])
def test_format_violations_are_refused(network, edit, words):
    with pytest.raises(FormatError, match=words.replace("(", r"\(")):
        read_network(_edited(network, edit))


def test_a_key_given_twice_is_refused(network):
    import struct

    length = struct.unpack_from("<Q", network, 24)[0]
    text = network[32:32 + length]
    doubled = text.replace(b'"opset":', b'"opset":13,"opset":', 1)  # (json.dumps cannot write it)
    assert doubled != text
    with pytest.raises(FormatError, match="the key 'opset' appears twice"):
        read_network(_raw_netw(network, doubled))


def _raw_netw(data: bytes, payload: bytes) -> bytes:
    import struct
    import zlib

    length = struct.unpack_from("<Q", data, 24)[0]
    chunk = struct.pack("<4sIQ", b"NETW", zlib.crc32(payload), len(payload)) + payload + bytes(-len(payload) % 8)
    return data[:16] + chunk + data[32 + length + (-length % 8):]


@pytest.mark.parametrize("edit,words", [
    (lambda node: node.update(inputs=node["inputs"] * 2, in_shapes=node["in_shapes"] * 2), "2 inputs; the operator "
     "takes one"),
    (lambda node: node["attrs"].update(size=float("inf")), "cannot compute it"),
    (lambda node: node["attrs"].update(size=1e30), "cannot compute it"),
])
def test_host_nodes_the_file_gets_wrong_are_refused_in_one_line(network, tmp_path, edit, words):
    def change(meta):
        host = next(s for s in meta["steps"] if s["kind"] == "host")
        edit(host["nodes"][0])  # the LRN
        return meta

    (tmp_path / "n.vbin").write_bytes(_edited(network, change))
    r = tool("vtasim", "run", "n.vbin", "--zero-inputs", cwd=tmp_path)
    assert r.returncode == 1 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr

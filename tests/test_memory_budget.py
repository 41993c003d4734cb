"""Memory follows the budget, not what a file says: sizes a file declares are checked before allocation.

A 1.6 KB program declaring 4 GiB of DRAM, a network whose host step would
resize to [1, 4, 20000, 20000], an ONNX model whose tensor needs 6.4 GB:
each is refused with one line naming the budget, fast and small, and runs
once ``--max-memory`` allows it.
"""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from vtasm import budget
from vtasm.errors import UsageError

from .vtacc.test_cli import EXAMPLES, tool


def _rechunked(data: bytes, tag: bytes, edit) -> bytes:
    """The file with its first chunk's JSON edited and the CRC recomputed (the chunk must be the first)."""
    length = struct.unpack_from("<Q", data, 24)[0]
    value = edit(json.loads(data[32:32 + length]))
    payload = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    chunk = struct.pack("<4sIQ", tag, zlib.crc32(payload), len(payload)) + payload + bytes(-len(payload) % 8)
    return data[:16] + chunk + data[32 + length + (-length % 8):]


def test_a_program_declaring_4_gib_of_dram_is_refused_by_every_tool(tmp_path):
    assert tool("vtacc", EXAMPLES / "vadd.vk", "-o", tmp_path / "v.vbin", cwd=tmp_path).returncode == 0
    big = {"addr": 1 << 20, "file": None, "name": "big", "offset": 0, "size": (1 << 32) - (1 << 20), "zero": True}
    data = _rechunked((tmp_path / "v.vbin").read_bytes(), b"META",
                      lambda meta: {**meta, "segments": meta["segments"] + [big]})
    (tmp_path / "big.vbin").write_bytes(data)
    assert len(data) < 4096
    for args in (["vtasm", "dump", "big.vbin"], ["vtasm", "disasm", "big.vbin"],
                 ["vtasim", "run", "big.vbin", "--zero-inputs"], ["vtasm", "export", "--raw", "raw", "big.vbin"]):
        r = tool(*args, cwd=tmp_path)
        assert r.returncode == 1, (args, r.stderr)
        assert "more than the memory budget of 1,073,741,824 bytes (--max-memory raises it)" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "raw").exists()
    r = tool("vtasim", "run", "big.vbin", "--zero-inputs", "--max-memory", "5G", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # allowed: its DRAM is zero pages nobody touches


def test_a_host_step_that_would_allocate_gigabytes_is_refused_at_load(tmp_path):
    from .onnx.test_host_network import _model

    path, _ = _model(tmp_path)
    assert tool("vtacc", path, "--calibrate", "cal.npy", "-o", "net.vbin", cwd=tmp_path).returncode == 0

    def grow(meta):
        host = next(s for s in meta["steps"] if s["kind"] == "host")
        node = host["nodes"][0]
        node["out_shapes"][0] = [1, 4, 20000, 20000]
        return meta

    (tmp_path / "big.vbin").write_bytes(_rechunked((tmp_path / "net.vbin").read_bytes(), b"NETW", grow))
    r = tool("vtasim", "run", "big.vbin", "--zero-inputs", cwd=tmp_path)
    assert r.returncode == 1 and "host node" in r.stderr and "[1, 4, 20000, 20000] as float32" in r.stderr


def test_an_onnx_tensor_beyond_the_budget_is_refused_before_import(tmp_path):
    nodes = [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="up", mode="nearest")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array([1, 4, 20000, 20000], np.int64), "sizes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(tmp_path / "big.onnx"))
    r = tool("vtacc", "big.onnx", "-o", "b.vbin", cwd=tmp_path)
    assert r.returncode == 1 and "tensor 'y' [1, 4, 20000, 20000] as float32 needs 6,400,000,000 bytes" in r.stderr


def test_sizes_parse_and_the_budget_is_enforced():
    assert budget.parse_size("512M") == 512 << 20 and budget.parse_size("1.5G") == 3 << 29
    assert budget.parse_size("4096") == 4096 and budget.parse_size("2GiB") == 2 << 30
    for bad in ("", "-1G", "lots", "0"):
        with pytest.raises(UsageError):
            budget.parse_size(bad)
    r = tool("vtasm", "dump", EXAMPLES / "vadd.vasm", "--max-memory", "lots", cwd=EXAMPLES)
    assert r.returncode == 2 and "--max-memory" in r.stderr


def _peak_mb(args: list[str], cwd) -> tuple[int, float]:
    """Exit code and peak resident memory (MB) of `vtasim ARGS` run in a process of its own."""
    import subprocess
    import sys

    code = ("import atexit, resource, sys\n"
            "atexit.register(lambda: print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
            "file=sys.stderr))\n"
            "from vtasim.cli import main\n"
            f"main({args!r}, prog_name='vtasim')\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)
    peak = next(int(line.split()[1]) for line in r.stderr.splitlines() if line.startswith("peak "))
    return r.returncode, peak / 1024


def test_a_batch_run_streams_its_samples(tmp_path):
    """Memory does not grow with the number of samples (it grew about 1.7 MB a sample when every run's
    machine state was kept: 7 GB for 4,000; benchmarks/stream_memory.py measures up to 10,000)."""
    from .onnx.test_host_network import _model

    path, _ = _model(tmp_path)
    assert tool("vtacc", path, "--calibrate", "cal.npy", "-o", "net.vbin", cwd=tmp_path).returncode == 0
    rng = np.random.default_rng(0)
    peaks = {}
    for n in (10, 400):
        np.save(tmp_path / f"x{n}.npy", rng.normal(0, 1, (n, 3, 8, 8)).astype(np.float32))
        code, peaks[n] = _peak_mb(["run", "net.vbin", "--input", f"x=x{n}.npy", "--output", f"prob=p{n}.npy"],
                                  tmp_path)
        assert code == 0
    assert np.load(tmp_path / "p400.npy").shape == (400, 10)
    assert peaks[400] - peaks[10] < 40, peaks  # 390 more samples: ~660 MB before, ~1 MB now

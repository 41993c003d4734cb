"""Networks with host steps: VTA launches and float32 host operators in one file, float in and float out.

Checked against the numpy int8 execution of the quantised network (bit for
bit, host steps included) and against onnxruntime's float model (SQNR).
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import helper

from tests.vtacc.test_cli import tool
from vtacc.model import compile_model
from vtacc.onnx.reference import run_int8
from vtasim import api
from vtasim.host.quant import dequantise
from vtasm.config import default_config
from vtasm.formats.network import load_network, read_network, write_network

from .models import save_model, sqnr, tensor

RNG = np.random.default_rng(3)


def _w(*shape, scale=0.15):
    return RNG.normal(0, scale, shape).astype(np.float32)


def _model(tmp_path):
    """conv -> LRN (host) -> conv + residual -> sigmoid gate (host Mul by a tensor) -> pool -> dense -> softmax."""
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Relu", ["c1"], ["r1"], name="relu1"),
             n("LRN", ["r1"], ["l1"], name="norm1", size=5, alpha=1e-3, beta=0.75),
             n("Conv", ["l1", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Add", ["c2", "r1"], ["a2"], name="res2"),
             n("Sigmoid", ["a2"], ["g"], name="gate"),
             n("Mul", ["a2", "g"], ["m"], name="swish"),
             n("GlobalAveragePool", ["m"], ["p"], name="pool"),
             n("Flatten", ["p"], ["f"], name="flat"),
             n("Gemm", ["f", "fw", "fb"], ["logits"], name="fc", transB=1),
             n("Softmax", ["logits"], ["prob"], name="softmax", axis=1)]
    consts = {"w1": _w(16, 3, 3, 3, scale=0.3), "b1": _w(16), "w2": _w(16, 16, 3, 3), "b2": _w(16),
              "fw": _w(10, 16, scale=0.5), "fb": _w(10)}
    path = save_model(tmp_path / "host.onnx", nodes, [tensor("x", [1, 3, 8, 8])],
                      [tensor("logits", [1, 10]), tensor("prob", [1, 10])], consts)
    cal = RNG.normal(0, 1, (16, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "cal.npy", cal)
    return path, cal



def test_host_steps_between_vta_launches_are_bit_exact_with_numpy(tmp_path):
    path, cal = _model(tmp_path)
    model = compile_model(path, default_config(), cal)
    net = model.network
    assert [s.kind for s in net.steps] == ["vta", "host", "vta", "host", "vta", "host"]
    assert net.outputs == ["logits", "prob"]
    qnet = model.imported.qnet
    x = RNG.normal(0, 1, (5, 3, 8, 8)).astype(np.float32)
    got = api.run(net, x, int8=True)  # five images stacked: five runs, outputs stacked
    for k in range(5):
        want = run_int8(qnet, qnet.quantise_input(x[k:k + 1]))
        for name in net.outputs:
            assert np.array_equal(got[name][k:k + 1], want[name]), (k, name)
    floats = api.run(net, x)
    assert floats["logits"].dtype == np.float32
    assert np.array_equal(floats["logits"], dequantise(got["logits"], net.tensors["logits"].exp))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref = np.concatenate([session.run(["logits"], {"x": x[k:k + 1]})[0] for k in range(5)])
    assert sqnr(ref, floats["logits"]) > 20


def test_vtasim_runs_the_network_file_from_float_input(tmp_path):
    path, cal = _model(tmp_path)
    r = tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "-o", tmp_path / "net.vbin", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "host LRN" in r.stderr and "runs in 3 VTA launches and 3 host steps" in r.stderr
    x = RNG.normal(0, 1, (1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = tool("vtasim", "run", tmp_path / "net.vbin", "--input", "x=" + str(tmp_path / "x.npy"), "--output",
             "prob=" + str(tmp_path / "p.npy"), "--output", "logits=" + str(tmp_path / "l.npy"), "--timing",
             "--trace-file", str(tmp_path / "t.txt"), "--lint", "--timeline", str(tmp_path / "steps.png"),
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    net = load_network(tmp_path / "net.vbin")
    model = compile_model(path, default_config(), cal)
    qnet = model.imported.qnet
    want = run_int8(qnet, qnet.quantise_input(x))
    assert np.array_equal(np.load(tmp_path / "p.npy"), dequantise(want["prob"], net.tensors["prob"].exp))
    assert np.load(tmp_path / "l.npy").dtype == np.float32
    assert "host step" in r.stdout and "measured on this CPU" in r.stdout and "timing model" in r.stdout
    trace = (tmp_path / "t.txt").read_text()
    assert "VTA launch 'vta1'" in trace and "host step 'host2': LRN 'norm1'" in trace
    assert "0 lint warnings" in r.stderr
    assert (tmp_path / "steps.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_api_timing_gives_numbers_that_print_as_the_table(tmp_path):
    path, cal = _model(tmp_path)
    net = compile_model(path, default_config(), cal).network
    from vtasim.timing.profile import load_profile
    from vtasim.timing.run import time_program

    t = api.timing(net, "chisel-2019")
    launches = [s for s in net.steps if s.kind == "vta"]
    want = [time_program(s.program, load_profile("chisel-2019"), record=False).report.cycles for s in launches]
    assert [s.cycles for s in t.steps if s.kind == "vta"] == want and t.vta_cycles == sum(want)
    assert t.vta_seconds == pytest.approx(sum(want) / (t.clock_mhz * 1e6))
    assert [(s.step, s.kind) for s in t.steps] == [(k + 1, s.kind) for k, s in enumerate(net.steps)]
    assert all(s.seconds is None and s.cycles is None for s in t.steps if s.kind == "host")
    assert t.host_seconds == 0 and t.seconds == t.vta_seconds
    assert str(t).startswith("timing (chisel-2019): 3 VTA launches, 3 host steps") and "not run" in str(t)
    assert t.rows()[1]["what"] == "LRN" and set(t.rows()[0]) == {"step", "kind", "name", "what", "cycles",
                                                                 "seconds", "macs", "ops"}
    assert t.rows()[1]["macs"] == 0 and t.rows()[0]["macs"] is None  # a launch's MACs are the compiler's to say
    x = RNG.normal(0, 1, (2, 3, 8, 8)).astype(np.float32)
    measured = api.timing(net, "chisel-2019", x)
    assert all(s.seconds > 0 for s in measured.steps if s.kind == "host") and measured.host_seconds > 0
    assert measured.vta_cycles == t.vta_cycles and "measured on this CPU" in measured.text()
    r = tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "-o", tmp_path / "net.vbin", cwd=tmp_path)
    r = tool("vtasim", "run", tmp_path / "net.vbin", "--timing-only", "--timing", "chisel-2019", cwd=tmp_path)
    assert r.stdout == t.text()  # the command prints the same table


def test_network_file_round_trip_and_damage(tmp_path):
    path, cal = _model(tmp_path)
    data = write_network(compile_model(path, default_config(), cal).network)
    assert write_network(read_network(data)) == data
    from vtasm.errors import FormatError

    damaged = bytearray(data)
    damaged[40] ^= 0xFF
    with pytest.raises(FormatError, match="CRC mismatch in chunk NETW \\(chunk 1;"):
        read_network(bytes(damaged))
    # a chunk's padding must be zero, as in a .vbin: the same reader checks both
    import struct

    pos, k = 16, 0
    while True:  # the first chunk whose payload is followed by padding
        tag, _, length = struct.unpack_from("<4sIQ", data, pos)
        k += 1
        if length % 8:
            break
        pos += 16 + length
    padded = bytearray(data)
    padded[pos + 16 + length] = 1
    with pytest.raises(FormatError, match=f"chunk {tag.decode()} \\(chunk {k}\\): padding bytes are not zero"):
        read_network(bytes(padded))
    with pytest.raises(FormatError, match="unexpected bytes after the last chunk"):
        read_network(data + bytes(8))
    with pytest.raises(FormatError, match="truncated"):
        read_network(data[:-9])
    with pytest.raises(FormatError, match="bad magic"):
        read_network(b"VTA\x00VBIN" + data[8:])


def test_a_network_run_without_output_writes_every_output_to_a_directory(tmp_path):
    path, cal = _model(tmp_path)
    tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "-o", tmp_path / "net.vbin", cwd=tmp_path)
    x = RNG.normal(0, 1, (1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = tool("vtasim", "run", "net.vbin", "--input", "x=x.npy", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "net.out").iterdir()) == ["logits.npy", "prob.npy"]
    assert "net.out/logits.npy" in r.stderr and "net.out/prob.npy" in r.stderr
    net = load_network(tmp_path / "net.vbin")
    qnet = compile_model(path, default_config(), cal).imported.qnet
    want = run_int8(qnet, qnet.quantise_input(x))
    for name in ("logits", "prob"):
        assert np.array_equal(np.load(tmp_path / "net.out" / f"{name}.npy"),
                              dequantise(want[name], net.tensors[name].exp))
    # --out-dir puts them elsewhere (created), with --int8 the values; --output alone writes no directory
    r = tool("vtasim", "run", "net.vbin", "--input", "x=x.npy", "--out-dir", "res/int8", "--int8", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "res" / "int8" / "prob.npy"), want["prob"])
    r = tool("vtasim", "run", "net.vbin", "--input", "x=x.npy", "--output", "prob=p.npy", "--out-dir", "both",
             cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "p.npy").exists() and (tmp_path / "both" / "logits.npy").exists()
    (tmp_path / "p.npy").unlink()
    import shutil

    shutil.rmtree(tmp_path / "net.out")
    r = tool("vtasim", "run", "net.vbin", "--input", "x=x.npy", "--output", "prob=p.npy", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "p.npy").exists() and not (tmp_path / "net.out").exists()
    r = tool("vtasim", "run", "net.vbin", "--timing-only", "--out-dir", "t", cwd=tmp_path)
    assert r.returncode == 2 and "--out-dir" in r.stderr and not (tmp_path / "t").exists()
    r = tool("vtasim", "run", "--help", cwd=tmp_path)
    assert "NET.out/" in " ".join(r.stdout.split()) and "as NAME.npy" in " ".join(r.stdout.split())


def test_output_files_are_plain_names_whatever_the_model_calls_its_outputs():
    from vtasim.network_cli import output_files

    names = ["prob", "Prob", "../../etc/passwd", "a/b", ".hidden", "\x1b[31mred", "x" * 300, "", "prob_2", "out:0"]
    files = output_files(names)
    assert files["prob"] == "prob.npy" and files["out:0"] == "out_0.npy"
    assert len({f.lower() for f in files.values()}) == len(names)  # distinct on a case-insensitive disk too
    for f in files.values():
        assert "/" not in f and "\\" not in f and not f.startswith(".") and len(f) <= 110 and f.isprintable()


def test_output_name_that_is_not_the_networks(tmp_path):
    path, cal = _model(tmp_path)
    tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "-o", tmp_path / "net.vbin", cwd=tmp_path)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.float32))
    r = tool("vtasim", "run", tmp_path / "net.vbin", "--input", "x=" + str(tmp_path / "x.npy"), "--output",
             "y=" + str(tmp_path / "y.npy"), cwd=tmp_path)
    assert r.returncode == 2 and "'logits', 'prob'" in r.stderr and not (tmp_path / "y.npy").exists()


def test_the_other_tools_on_a_network_file(tmp_path):
    path, _ = _model(tmp_path)
    tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "-o", tmp_path / "net.vbin", cwd=tmp_path)
    r = tool("vtasm", "dump", tmp_path / "net.vbin", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.count("VTA launch") == 3 and "host step 'host2': LRN 'norm1'" in r.stdout
    assert r.stdout.count("There are") == 3
    r = tool("vtasm", "disasm", tmp_path / "net.vbin", cwd=tmp_path)
    assert r.returncode == 1 and "a network file" in r.stderr and "vtasim run" in r.stderr
    r = tool("vtasim", "run", tmp_path / "net.vbin", "--timing-only", cwd=tmp_path)
    assert r.returncode == 0 and "not run (--timing-only)" in r.stdout and r.stdout.count("timing model") == 3
    r = tool("vtasim", "run", tmp_path / "net.vbin", "--dump-dram", "0:4:x.bin", cwd=tmp_path)
    assert r.returncode == 2 and "--dump-dram" in r.stderr
    r = tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "--explain", "-o", tmp_path / "n2.vbin",
             cwd=tmp_path)
    assert r.stdout.count("== step") == 6 and "host step 'host4': Sigmoid 'gate', Mul 'swish'" in r.stdout
    assert "are lines of the kernel language the model imports as (each VTA launch's own" in r.stdout
    assert "where it runs" in r.stdout and "% of the time)" in r.stdout
    alone = tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "--explain", cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr  # the network's report alone: no program, nothing refused
    assert alone.stdout.count("== step") == 6 and "where it runs" in alone.stdout  # host times vary: not equal
    assert alone.stdout.split("where it runs")[0] == r.stdout.split("where it runs")[0]
    assert "runs in 3 VTA launches" in alone.stderr and not list(tmp_path.glob("*.vasm"))
    macs = 16 * 8 * 8 * 27 + 16 * 8 * 8 * 144 + 10 * 16  # conv1, conv2 and fc, counted by hand
    assert f"VTA: 3 steps, {macs:,} MACs (100.0%)" in r.stdout
    r = tool("vtacc", path, "--calibrate", tmp_path / "cal.npy", "--emit", "vk", "-o", tmp_path / "n.vk",
             cwd=tmp_path)
    assert r.returncode == 2 and "host steps" in r.stderr and not (tmp_path / "n.vk").exists()


def test_pad_before_a_conv_the_host_computes(tmp_path):
    """The Pad joins a Conv's padding on VTA; before a dilated Conv (host) it runs on the host itself."""
    n = helper.make_node
    nodes = [n("Pad", ["x", "pads"], ["p"], name="pad"),
             n("Conv", ["p", "w"], ["y"], name="dilated", kernel_shape=[3, 3], dilations=[2, 2])]
    consts = {"pads": np.array([0, 0, 2, 2, 0, 0, 2, 2], np.int64), "w": _w(16, 3, 3, 3)}
    path = save_model(tmp_path / "pad.onnx", nodes, [tensor("x", [1, 3, 8, 8])], [tensor("y", None)], consts)
    cal = RNG.normal(0, 1, (8, 3, 8, 8)).astype(np.float32)
    model = compile_model(path, default_config(), cal)
    assert [layer.node.op for layer in model.imported.qnet.network.on_host] == ["Pad", "Conv"]
    x = RNG.normal(0, 1, (1, 3, 8, 8)).astype(np.float32)
    qnet = model.imported.qnet
    got = api.run(model.network, x, int8=True)["y"]
    assert np.array_equal(got, run_int8(qnet, qnet.quantise_input(x))["y"])
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert sqnr(session.run(None, {"x": x})[0], dequantise(got, model.network.tensors["y"].exp)) > 30


def test_mobilenet_v3_block_hard_swish_and_squeeze_excite(tmp_path):
    """What the PaddlePaddle MobileNetV3 export stopped at: hard-swish (x * hard-sigmoid(x)) and
    squeeze-excite (a tensor scaled by a per-channel gate): the products run on the host, the rest on VTA."""
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], name="expand", kernel_shape=[1, 1]),
             n("HardSwish", ["c1"], ["h1"], name="hswish"),
             n("GlobalAveragePool", ["h1"], ["s"], name="squeeze"),
             n("Conv", ["s", "w2", "b2"], ["s1"], name="se_reduce", kernel_shape=[1, 1]),
             n("Relu", ["s1"], ["s2"], name="se_relu"),
             n("Conv", ["s2", "w3", "b3"], ["s3"], name="se_expand", kernel_shape=[1, 1]),
             n("HardSigmoid", ["s3"], ["gate"], name="se_gate", alpha=1 / 6, beta=0.5),
             n("Mul", ["h1", "gate"], ["e"], name="excite"),
             n("Conv", ["e", "w4", "b4"], ["y"], name="project", kernel_shape=[1, 1])]
    consts = {"w1": _w(32, 16, 1, 1, scale=0.4), "b1": _w(32), "w2": _w(16, 32, 1, 1, scale=0.4), "b2": _w(16),
              "w3": _w(32, 16, 1, 1, scale=0.4), "b3": _w(32), "w4": _w(16, 32, 1, 1, scale=0.3), "b4": _w(16)}
    path = save_model(tmp_path / "mbv3.onnx", nodes, [tensor("x", [1, 16, 8, 8])], [tensor("y", None)], consts,
                      opsets={"": 14})
    cal = RNG.normal(0, 1, (16, 16, 8, 8)).astype(np.float32)
    model = compile_model(path, default_config(), cal)
    assert sorted(layer.node.op for layer in model.imported.qnet.network.on_host) == ["HardSwish", "Mul"]
    x = RNG.normal(0, 1, (3, 16, 8, 8)).astype(np.float32)
    qnet = model.imported.qnet
    got = api.run(model.network, x, int8=True)["y"]
    for k in range(3):
        assert np.array_equal(got[k:k + 1], run_int8(qnet, qnet.quantise_input(x[k:k + 1]))["y"])
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run(None, {"x": x[k:k + 1]})[0] for k in range(3)])
    assert sqnr(want, dequantise(got, model.network.tensors["y"].exp)) > 20

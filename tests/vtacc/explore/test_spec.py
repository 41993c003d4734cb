"""Reading exploration specs: expansion, ranges, keys, single-layer sources and one-line errors."""

from __future__ import annotations

import re

import pytest

from tests.vtacc.resnet import layer_source as resnet_layer
from vtacc.explore.spec import load_spec, point_key
from vtasm.errors import SpecError

from .specs import SMALL, WIDER, write


def test_every_combination_is_one_point(tmp_path):
    spec = load_spec(write(tmp_path, SMALL))
    assert spec.title == "two layers"
    assert [w.name for w in spec.workloads] == ["conv", "fc"]
    assert len(spec.points) == 2 * 2 * 2  # workloads x blocks x buses
    seen = {(p.workload.name, dict(p.config)["LOG_BLOCK"], p.hardware.value("bus_bytes")) for p in spec.points}
    assert seen == {(w, b, bus) for w in ("conv", "fc") for b in (3, 4) for bus in (8, 16)}
    assert len({p.key for p in spec.points}) == len(spec.points)
    # the LOG_* values not named keep the default configuration's
    assert all(dict(p.config)["LOG_WGT_BUFF_SIZE"] == 18 for p in spec.points)


def test_ranges_lists_threads_and_latency_axes(tmp_path):
    spec = load_spec(write(tmp_path, WIDER))
    assert len(spec.points) == 2 * 3 * 2 * 2 * 2
    assert sorted({dict(p.config)["LOG_INP_BUFF_SIZE"] for p in spec.points}) == [13, 14, 15]
    assert sorted({p.hardware.value("latency") for p in spec.points}) == [16, 64]
    assert sorted({p.threads for p in spec.points}) == [1, 2]


def test_keys_are_stable_and_change_with_what_decides_a_point(tmp_path):
    first = load_spec(write(tmp_path, SMALL))
    again = load_spec(write(tmp_path, SMALL))
    assert [p.key for p in first.points] == [p.key for p in again.points]
    p = first.points[0]
    base = point_key(p.workload, p.config, p.hardware, p.threads, "toolchain-a")
    assert point_key(p.workload, p.config, p.hardware, p.threads, "toolchain-b") != base
    assert point_key(p.workload, p.config, p.hardware, 2, "toolchain-a") != base
    changed = tuple((k, 16 if k == "LOG_ACC_BUFF_SIZE" else v) for k, v in p.config)
    assert point_key(p.workload, changed, p.hardware, p.threads, "toolchain-a") != base
    # a different layer size is a different workload, hence a different key
    other = load_spec(write(tmp_path, SMALL.replace("out_features = 32", "out_features = 48")))
    assert {q.key for q in other.points if q.workload.name == "fc"}.isdisjoint(
        {q.key for q in first.points if q.workload.name == "fc"})


def test_a_conv_layer_is_the_resnet_layer_written_by_hand(tmp_path):
    spec = load_spec(write(tmp_path, """
[[workload]]
name = "C8"
layer = "conv2d"
input = [1, 256, 14, 14]
out_channels = 256
kernel_size = 3
pad = 1
stride = 1
"""))
    ours = spec.workloads[0].source
    theirs = resnet_layer("C8")[0]
    assert " ".join(ours.split()) == " ".join(theirs.split())


def test_file_workloads_read_vk_and_pick_a_kernel(tmp_path):
    (tmp_path / "k.vk").write_text(resnet_layer("C11")[0] + resnet_layer("C10")[0])
    spec = load_spec(write(tmp_path, '[[workload]]\nfile = "k.vk"\nkernel = "c10"\n'))
    (w,) = spec.workloads
    assert (w.name, w.kernel, w.filename) == ("k", "c10", "k.vk")


@pytest.mark.parametrize("text, line, message", [
    ("[[workload]]\nlayer = \"conv2d\"\ninput = [1, 16, 8, 8]\n", 1, "needs out_channels"),
    ("[[workload]]\nlayer = \"softmax\"\n", 2, "layer must be one of conv2d, dense, max_pool"),
    ("[[workload]]\nlayer = \"conv2d\"\ninput = [1, 16, 8, 8]\nout_channels = 16\nkernel_size = 3\nstide = 2\n",
     6, "unknown key 'stide' for a conv2d layer"),
    (SMALL.replace("[config]\n", "[config]\nLOG_FOO = 3\n"), 19, "[config] LOG_FOO: unknown key"),
    ("[[workload]]\nlayer = \"dense\"\ninput = [1, 16]\nout_features = 16\n[config]\nLOG_BLOCK = \"four\"\n",
     6, "LOG_BLOCK: expected an integer"),
    ("[[workload]]\nlayer = \"dense\"\ninput = [1, 16]\nout_features = 16\n[config]\n"
     "LOG_BLOCK = {from = 5, to = 3}\n", 6, "from <= to"),
    ("[[workload]]\nlayer = \"dense\"\ninput = [1, 16]\nout_features = 16\n[[hardware]]\nbus_width = 8\n",
     6, "unknown profile key bus_width"),
    ("[[workload]]\nlayer = \"dense\"\ninput = [1, 16]\nout_features = 16\n[[hardware]]\nprofile = \"fpga\"\n",
     6, "no such profile"),
    ("[[workload]]\nlayer = \"dense\"\ninput = [1, 16]\nout_features = 16\n[schedule]\nthreads = 3\n",
     6, "one or two virtual threads"),
    ("[[workload]]\nfile = \"missing.vk\"\n", 2, "cannot read"),
    ("[[workload]]\nlayer = \"dense\"\ninput = [1, 16\n", 3, "invalid TOML"),
    ("title = \"no workloads\"\n", None, "at least one [[workload]]"),
])
def test_a_bad_spec_is_one_line_naming_the_line(tmp_path, text, line, message):
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    rendered = info.value.render()
    assert "\n" not in rendered
    assert message in rendered
    assert rendered.startswith(str(path))
    if line is not None:
        assert re.match(rf"{re.escape(str(path))}:{line}[:]", rendered), rendered


def test_the_example_specs_expand_as_their_comments_say():
    from pathlib import Path

    examples = Path(__file__).resolve().parents[3] / "examples" / "explore"
    resnet = load_spec(examples / "resnet18_layers.toml")
    assert len(resnet.points) == 480 and len(resnet.workloads) == 10
    assert len(load_spec(examples / "quick.toml").points) == 32


@pytest.mark.parametrize("kernel_line, source, message", [
    ("", "kernel k(x: int8[1, 16]) -> y: int8[1, 16] {\n    y = x >> \n}\n", "k.vk:2:"),
    ('kernel = "nosuch"\n', "kernel k(x: int8[1, 16]) -> y: int8[1, 16] {\n    y = x >> 1\n}\n", "nosuch"),
])
def test_a_kernel_language_workload_is_checked_before_the_sweep(tmp_path, kernel_line, source, message):
    """A .vk workload with a mistake is one spec error up front (every point used to come out 'refused',
    exit 0), as an ONNX workload that cannot be imported is."""
    (tmp_path / "k.vk").write_text(source)
    path = write(tmp_path, f'[[workload]]\nfile = "k.vk"\n{kernel_line}')
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert message in info.value.render() and info.value.render().startswith(f"{path}:1")

"""One point -> one row: figures checked by hand and against the command-line tools run separately."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vtacc.explore.evaluate import COLUMNS, evaluate, onchip_bytes
from vtacc.explore.spec import load_spec

from .specs import write

BIN = Path(sys.executable).parent

SPEC = """
[[workload]]
name = "conv"
layer = "conv2d"
input = [1, 32, 8, 8]
out_channels = 32
kernel_size = 3
pad = 1

[config]
LOG_INP_BUFF_SIZE = [7, 8]           # 7: 8 input elements, one fewer than a 3x3 window needs
LOG_WGT_BUFF_SIZE = 13

[[hardware]]
profile = "chisel-2019"              # the figures below are its (the default is hls)
bus_bytes = [16, 12]                 # 12: not a power of two
"""


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    spec = load_spec(write(tmp_path_factory.mktemp("spec"), SPEC))
    return {(dict(p.config)["LOG_INP_BUFF_SIZE"], p.hardware.value("bus_bytes")): evaluate(p) for p in spec.points}


def test_rows_have_every_column(rows):
    for row in rows.values():
        assert set(row) <= set(COLUMNS)
        assert {"key", "workload", "status", "config", "onchip_bytes"} <= set(row)


def test_an_ok_row_by_hand(rows):
    row = rows[(8, 16)]
    assert row["status"] == "ok" and row["reason"] == ""
    assert row["macs"] == 1 * 32 * 8 * 8 * 32 * 3 * 3  # N x OC x OH x OW x IC x KH x KW
    assert row["peak_macs_per_cycle"] == 16 * 16 // 4  # block x block per GEMM step of 4 cycles
    assert row["onchip_bytes"] == 2 ** 15 + 2 ** 8 + 2 ** 13 + 2 ** 17
    assert row["time_us"] == pytest.approx(row["cycles"] / 100.0)  # 100 MHz
    assert row["macs_per_cycle"] == pytest.approx(row["macs"] / row["cycles"], rel=1e-3)
    assert row["gops"] == pytest.approx(2 * row["macs"] / (row["time_us"] * 1e3), rel=1e-3)
    assert row["dram_write_bytes"] == 32 * 8 * 8  # the int8 output, once
    assert row["dram_read_bytes"] >= 32 * 8 * 8 + 32 * 32 * 9 + 4 * 32  # input, weights, bias at least


def test_an_ok_row_matches_vtacc_and_vtasim_run_by_hand(rows, tmp_path):
    row = rows[(8, 16)]
    config = {k: row[k] for k in COLUMNS if k.startswith("LOG_")}
    (tmp_path / "vta_config.json").write_text(json.dumps(config))
    spec = load_spec(write(tmp_path, SPEC))
    (tmp_path / "conv.vk").write_text(spec.workloads[0].source)
    subprocess.run([BIN / "vtacc", "conv.vk", "--timing", "chisel-2019", "--set", "bus_bytes=16", "-o", "conv.vbin"],
                   cwd=tmp_path, check=True, capture_output=True)
    out = subprocess.run([BIN / "vtasim", "run", "conv.vbin", "--timing-only", "--timing=chisel-2019", "--set",
                          "bus_bytes=16"],
                         cwd=tmp_path, check=True, capture_output=True, text=True)
    cycles = int(re.search(r"([\d,]+) cycles", out.stdout + out.stderr).group(1).replace(",", ""))
    assert row["cycles"] == cycles


def test_a_configuration_the_layer_does_not_fit_is_a_refused_row(rows):
    row = rows[(7, 16)]
    assert row["status"] == "refused"
    assert "no tiling fits the on-chip buffers" in row["reason"] and "9 inp elements" in row["reason"]
    assert row.get("cycles") is None


def test_impossible_hardware_is_an_invalid_row(rows):
    for inp in (7, 8):
        row = rows[(inp, 12)]
        assert row["status"] == "invalid"
        assert "bus_bytes must be a power of two, got 12" in row["reason"]


def test_an_invalid_configuration_is_a_row_with_the_reason(tmp_path):
    spec = load_spec(write(tmp_path, SPEC.replace("LOG_WGT_BUFF_SIZE = 13", "LOG_WGT_BUFF_SIZE = 13\nLOG_BLOCK = 3\n"
                                                  "LOG_ACC_BUFF_SIZE = 20")))
    row = evaluate(spec.points[0])
    assert row["status"] == "invalid"
    assert "micro-op needs" in row["reason"] and "must fit 32" in row["reason"]
    assert row["onchip_bytes"] == onchip_bytes(dict(spec.points[0].config))

"""Small exploration specs for the tests (written into a temporary directory)."""

from __future__ import annotations

from pathlib import Path

SMALL = """
title = "two layers"

[[workload]]
name = "conv"
layer = "conv2d"
input = [1, 32, 8, 8]
out_channels = 32
kernel_size = 3
pad = 1

[[workload]]
name = "fc"
layer = "dense"
input = [1, 64]
out_features = 32

[config]
LOG_BLOCK = [3, 4]     # block 8 with the default buffers: the micro-op does not fit (invalid rows)

[[hardware]]
profile = "chisel-2019"
bus_bytes = [8, 16]
"""

# 2 workloads x 3 buffer sizes x 2 blocks x 2 latencies x 2 threads = 48 points (24 valid, 24 invalid).
WIDER = """
[[workload]]
name = "conv"
layer = "conv2d"
input = [1, 32, 16, 16]
out_channels = 32
kernel_size = 3
pad = 1

[[workload]]
name = "fc"
layer = "dense"
input = [1, 256]
out_features = 64

[config]
LOG_BLOCK = [3, 4]
LOG_INP_BUFF_SIZE = { from = 13, to = 15 }

[[hardware]]
latency = [16, 64]

[schedule]
threads = [1, 2]
"""


def write(directory: Path, text: str, name: str = "spec.toml") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path

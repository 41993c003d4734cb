"""Networks from Python: load a network file, run it on arrays, time it (for notebooks and scripts).

    from vtasim import api
    net = api.load("net.vbin")
    probs = api.run(net, {"data": images})["prob"]    # float32 in, float32 out; N images stacked run N times
    probs = api.run(net, images, board="hls", platform="emulated")  # the VTA launches on a board
    t = api.timing(net, "hls", images)                 # VTA's cycles per launch, the host's time per step
    print(t); t.vta_cycles, t.steps[0].cycles, t.rows()   # the table, or its numbers

Inputs are given by the model's own names, in the model's shape or N of them
stacked on the batch axis; float arrays are quantised at the input's scale
(int8 arrays are taken as quantised values). Outputs are float32 at their
scale, or the int8 values with ``int8=True``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vtasim.core.pipeline import DEFAULT_MAX_OPS
from vtasim.network_cli import check_runnable, int8_inputs, run_batches, stacked
from vtasim.timing.names import DEFAULT
from vtasim.timing.network_timing import NetworkTiming, time_network
from vtasm.errors import UsageError
from vtasm.formats.network import NetworkFile, load_network


def load(path: str | Path) -> NetworkFile:
    """A network file written by `vtacc MODEL.onnx -o NET.vbin` (FormatError names what is wrong)."""
    net = load_network(path)
    check_runnable(net, str(path))
    return net


def run(net: NetworkFile | str | Path, inputs: dict[str, np.ndarray] | np.ndarray, int8: bool = False,
        max_ops: int = DEFAULT_MAX_OPS, board: str | None = None, platform: str = "pynq",
        bitstream: str | None = None, timeout: float = 10.0) -> dict[str, np.ndarray]:
    """Every model output for the given inputs (an array alone is the model's only input). With ``board``
    ("hls" or "chisel-2021") the VTA launches run on a board of that design reached through ``platform``
    (the module providing the pynq API; "emulated" for this toolchain's emulated board), as `vtasim run
    --board` runs them (docs/board.md)."""
    if not isinstance(net, NetworkFile):
        net = load(net)
    if not isinstance(inputs, dict):
        inputs = {net.inputs[0]: inputs}
    given = int8_inputs(net, inputs, "the inputs", "input")
    if board is None and (platform != "pynq" or bitstream is not None):
        raise UsageError("platform and bitstream choose the board that board= names (hls or chisel-2021)")
    if board is not None:
        from vtasim.board.launch import BoardLauncher, BoardSpec

        with BoardSpec(board, platform, bitstream, timeout).open() as device:
            for step in net.steps:
                if step.kind == "vta":
                    device.check_config(step.program, f"{net.name}: launch '{step.name}'")
            runs = run_batches(net, given, max_ops, launch=BoardLauncher(device, net.name))
    else:
        runs = run_batches(net, given, max_ops)
    new_axis = any(v.new_axis for v in given.values())
    return {name: stacked(net, runs, name, int8, new_axis) for name in net.outputs}


def timing(net: NetworkFile | str | Path, profile: str = DEFAULT,
           inputs: dict[str, np.ndarray] | np.ndarray | None = None, max_ops: int = DEFAULT_MAX_OPS) -> NetworkTiming:
    """Each step's time: the timing model's cycles for each VTA launch and, when ``inputs`` are given (as for
    run), each host step's time measured running them (the median over stacked samples; else not run).

    The result holds the numbers (``.steps``: step, kind, name, what, cycles, seconds; ``.vta_cycles``,
    ``.vta_seconds``, ``.host_seconds``, ``.seconds``; ``.rows()`` for a table) and prints as the table
    `vtasim run --timing` prints."""
    from vtasim.timing.profile import resolve_profile

    if not isinstance(net, NetworkFile):
        net = load(net)
    runs = None
    if inputs is not None:
        if not isinstance(inputs, dict):
            inputs = {net.inputs[0]: inputs}
        runs = run_batches(net, int8_inputs(net, inputs, "the inputs", "input"), max_ops)
    return time_network(net, resolve_profile(profile, None, ()), runs)

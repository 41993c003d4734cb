"""Running a network file: VTA launches on the simulator, host steps on this CPU, tensors passed as int8.

The network's int8 tensors live in one dictionary; a VTA step packs the ones
it reads into its program's DRAM, runs the program to FINISH and unpacks the
ones it writes; a host step computes its outputs in float32 (vtasim.host).
Each step's wall time is recorded, so reports can put the host's measured
time next to VTA's modelled cycles.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vtasim.core.machine import Machine
from vtasim.core.pipeline import DEFAULT_MAX_OPS
from vtasim.host.step import run_host_step
from vtasim.runs.session import run_arrays
from vtasm.errors import FormatError
from vtasm.formats.network import HostStep, NetworkFile, Step

# called before each step with its index, the step, and a VTA launch's machine (None for a host step): traces,
# lint and race checks attach here
StepHook = Callable[[int, Step, Machine | None], None]
# runs one VTA launch as session.run_arrays does (program, inputs, outputs, max_ops, before_run) -> (outputs,
# a result whose profile() is the step's counters): the simulator, or a board (vtasim.board.launch)
Launcher = Callable[..., tuple[dict[str, np.ndarray], Any]]


@dataclass
class StepRecord:
    """What one step did: its wall time here, and a VTA launch's profiler counters (None for a host step;
    the launch's machine is not kept: a batch of runs keeps only what it reports)."""

    step: Step
    seconds: float
    profile: dict | None = None


@dataclass
class NetworkRun:
    """The run's int8 model outputs and each step's record."""

    values: dict[str, np.ndarray]
    records: list[StepRecord] = field(default_factory=list)

    def outputs(self, net: NetworkFile) -> dict[str, np.ndarray]:
        return {t: self.values[t] for t in net.outputs}


def run_network(net: NetworkFile, inputs: dict[str, np.ndarray], max_ops: int = DEFAULT_MAX_OPS,
                before_step: StepHook | None = None, launch: Launcher = run_arrays) -> NetworkRun:
    """Run every step on the int8 ``inputs`` (model input name -> array in its model shape); each VTA launch
    through ``launch`` (the simulator unless a board is given).

    Raises FormatError for a missing or badly shaped input, SimFault for a
    fault of a VTA launch (the caller locates it in that launch's program).
    """
    values: dict[str, np.ndarray] = {}
    for name in net.inputs:
        if name not in inputs:
            raise FormatError(f"{net.name}: no value for the model input '{name}'")
        array = np.asarray(inputs[name])
        if array.dtype != np.int8 or array.shape != net.tensors[name].shape:
            raise FormatError(f"{net.name}: input '{name}' must be int8{list(net.tensors[name].shape)}, got "
                              f"{array.dtype}{list(array.shape)}")
        values[name] = array
    run = NetworkRun(values)
    for k, step in enumerate(net.steps):
        started = time.perf_counter()
        if isinstance(step, HostStep):
            if before_step is not None:
                before_step(k, step, None)
            values.update(run_host_step(step, values, net.tensors, net.constants, net.opset))
            run.records.append(StepRecord(step, time.perf_counter() - started))
            continue
        program = step.program
        arrays = {prog: values[net_name].reshape(program.tensor(prog).shape) for net_name, prog in step.inputs.items()}
        hook = None if before_step is None else (lambda machine, k=k, step=step: before_step(k, step, machine))
        got, result = launch(program, arrays, list(step.outputs.values()), max_ops, hook)
        for net_name, prog_name in step.outputs.items():
            values[net_name] = got[prog_name].reshape(net.tensors[net_name].shape)
        run.records.append(StepRecord(step, time.perf_counter() - started, result.profile()))
    run.values = {t: values[t] for t in net.outputs}  # the intermediate tensors go with the run
    return run

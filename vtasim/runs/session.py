"""Run one loaded program many times on in-memory arrays (an image at a time, from Python)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from vtasim.core.machine import Machine, RunResult
from vtasim.core.pipeline import DEFAULT_MAX_OPS
from vtasm.program import Program


def run_arrays(program: Program, inputs: dict[str, np.ndarray], outputs: list[str],
               max_ops: int = DEFAULT_MAX_OPS, before_run: Callable[[Machine], None] | None = None
               ) -> tuple[dict[str, np.ndarray], RunResult]:
    """Pack ``inputs`` (logical arrays) into their tensors, run to FINISH, unpack ``outputs``.

    ``before_run`` sees the loaded machine first (to attach a trace, a lint, a race check). Raises
    FormatError for an unknown tensor or a badly shaped array, SimFault for a fault of the run; the
    program itself is not changed.
    """
    machine = Machine(program, max_ops)
    dram = machine.state.dram
    for name, array in inputs.items():
        tensor, segment = program.tensor(name), program.segment(name)
        data = np.frombuffer(tensor.pack(tensor.conform(np.asarray(array), f"input {name}")), dtype=np.uint8)
        dram[segment.addr:segment.addr + len(data)] = data
    if before_run is not None:
        before_run(machine)
    result = machine.run()
    got = {}
    for name in outputs:
        tensor, segment = program.tensor(name), program.segment(name)
        got[name] = tensor.unpack(result.state.dram[segment.addr:segment.addr + tensor.nbytes].tobytes())
    return got, result

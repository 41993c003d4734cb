"""`vtasim run NET.vbin` for a network file: float (or int8) inputs in, float32 (or int8) outputs out.

Each model input is given in its model shape, or as N of them stacked on the
batch axis (the network then runs N times in this process and the outputs
are stacked the same way). A float array is quantised at the input's scale as
the importer quantises (vtasim.host.quant); an int8 array is taken as the
quantised values. Outputs are written as float32 at their scale, or as the
int8 values with ``int8``. The timing report puts each VTA launch's modelled
cycles next to each host step's time measured here.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np

from vtasim.core.faults import located
from vtasim.core.pipeline import DEFAULT_MAX_OPS
from vtasim.host.quant import dequantise, quantise
from vtasim.host.step import unknown_ops
from vtasim.outputs.io import PendingFile, check_out_dir, check_writable, write_files
from vtasim.runs.launches import NetworkRun, run_network
from vtasm.errors import FormatError, SimFault, UsageError
from vtasm.fileio import npy_bytes, read_npy
from vtasm.formats.network import HostStep, NetTensor, NetworkFile, VtaStep
from vtasm.names import kernel_identifier, unique

PLAIN_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


@dataclass
class NetworkOptions:
    """What `vtasim run` was asked to do with a network file."""

    inputs: list[tuple[str, str]] = field(default_factory=list)
    outputs: list[tuple[str, str]] = field(default_factory=list)
    out_dir: Path | None = None  # every model output goes here as NAME.npy (output_files)
    int8: bool = False
    zero_inputs: bool = False
    max_ops: int = DEFAULT_MAX_OPS
    trace: bool = False
    trace_uops: bool = False
    lint: bool = False
    check_races: bool = False
    origin: str = "network"


@dataclass
class NetworkReport:
    """The runs (one per input of a stacked batch), lint and race lines, and the files written."""

    runs: list[NetworkRun]
    warnings: list[str]
    races: list[str]
    written: list[Path]
    lint_summary: str = ""


def check_runnable(net: NetworkFile, origin: str) -> None:
    """Refuse, naming the nodes, a file whose host steps use operators this simulator cannot compute, and,
    naming the step, a VTA launch that reads a program input no binding fills (it would run on zeros)."""
    missing = [m for s in net.steps if isinstance(s, HostStep) for m in unknown_ops(s)]
    if missing:
        raise FormatError(f"{origin}: host node{'s' if len(missing) > 1 else ''} {', '.join(missing)}: not an "
                          "operator this vtasim computes (a newer vtasim may)")
    from vtasim.outputs.inputs import missing_inputs

    for k, step in enumerate(net.steps):
        if isinstance(step, VtaStep):
            unbound = missing_inputs(step.program, set(step.inputs.values()))
            if unbound:
                raise FormatError(f"{origin}: step {k + 1} (VTA launch '{step.name}') reads program tensor"
                                  f"{'s' if len(unbound) > 1 else ''} {', '.join(repr(t) for t in unbound[:5])} "
                                  "that no input binding fills (it would run on zeros)")


def _lookup(net: NetworkFile, name: str, names: list[str], what: str) -> str:
    """A model input or output by its name or its kernel-language spelling; ``what`` is the option
    (--input, --output) or, from Python, the word (input, output)."""
    if name in names:
        return name
    simple = {kernel_identifier(n): n for n in names}
    if name in simple:
        return simple[name]
    raise UsageError(f"{what} {name}: the network's {what.lstrip('-')}s are {', '.join(repr(n) for n in names)}")


class Samples:
    """One input's int8 values, one array per run, made when that run starts (from an array that may be
    mapped from its file): a data set runs in memory that does not grow with its size. ``new_axis`` when
    they came stacked on an axis before the model's own."""

    def __init__(self, pieces: np.ndarray, tensor: NetTensor | None, new_axis: bool, where: str):
        self.pieces, self.tensor, self.new_axis, self.where = pieces, tensor, new_axis, where

    def __len__(self) -> int:
        return len(self.pieces)

    def __getitem__(self, k: int) -> np.ndarray:
        piece = self.pieces[k]
        if self.tensor is None:
            return np.array(piece)
        if not np.all(np.isfinite(piece)):
            raise FormatError(f"{self.where}: sample {k} holds NaN or infinite values")
        return quantise(piece, self.tensor.exp, self.tensor.sixteenths)


def _batches(net: NetworkFile, name: str, array: np.ndarray, path: str) -> Samples:
    """The input's int8 values, one array per run."""
    shape = net.tensors[name].shape
    new_axis = False
    if array.shape == shape:
        pieces = array[None]
    elif array.ndim == len(shape) + 1 and array.shape[1:] == shape and array.shape[0]:
        pieces, new_axis = array, True
    elif array.ndim == len(shape) and array.shape[1:] == shape[1:] and array.shape[0] % shape[0] == 0 \
            and array.shape[0]:
        pieces = array.reshape((-1,) + shape)
    else:
        raise FormatError(f"{path}: input '{name}' must be {list(shape)} or N of them stacked on the first axis, "
                          f"got {list(array.shape)}")
    if array.dtype == np.int8:
        return Samples(pieces, None, new_axis, f"{path}: input '{name}'")
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.complexfloating):
        raise FormatError(f"{path}: input '{name}' holds {array.dtype}; give float (quantised here) or int8 values")
    return Samples(pieces, net.tensors[name], new_axis, f"{path}: input '{name}'")


def run_batches(net: NetworkFile, given: dict[str, Samples], max_ops: int = DEFAULT_MAX_OPS,
                before_step=None, origin: str = "network", launch=None) -> list[NetworkRun]:
    """One run per sample of the int8 ``given`` inputs (every model input needs the same number); VTA launches
    through ``launch`` (launches.run_network's; the simulator when None)."""
    counts = {len(v) for v in given.values()}
    if len(counts) > 1:
        raise FormatError(f"{origin}: the inputs hold different numbers of samples ({sorted(counts)})")
    current = [0]

    def hook(k, step, machine):
        current[0] = k
        if before_step is not None:
            before_step(k, step, machine)

    runs = []
    for k in range(counts.pop() if counts else 1):
        try:
            run = run_network(net, {n: v[k] for n, v in given.items()}, max_ops, hook,
                              **({"launch": launch} if launch is not None else {}))
        except SimFault as exc:
            raise located(net.steps[current[0]].program, exc) from None
        except FormatError as exc:
            raise FormatError(f"{origin}: {exc.message}") from None
        if runs and launch is None:  # the simulator's counters are reported for the first run; later runs keep
            for record in run.records:  # their outputs and times (a board's measurements are kept for each run)
                record.profile = None
        runs.append(run)
    return runs


def stacked(net: NetworkFile, runs: list[NetworkRun], name: str, int8: bool = False,
            new_axis: bool = False) -> np.ndarray:
    """A model output over every run, stacked as the inputs were (on the batch axis, or on a new first axis):
    float32 at its scale, or the int8 values."""
    values = np.stack([r.values[name] for r in runs]) if new_axis else \
        np.concatenate([r.values[name] for r in runs], axis=0)
    tensor = net.tensors[name]
    return values if int8 else dequantise(values, tensor.exp, sixteenths=tensor.sixteenths)


def int8_inputs(net: NetworkFile, arrays: dict[str, np.ndarray], origin: str,
                what: str = "--input") -> dict[str, Samples]:
    """Model inputs (float, quantised here, or int8) by name as the model or its kernel language names them."""
    given = {}
    for name, array in arrays.items():
        key = _lookup(net, name, net.inputs, what)
        given[key] = _batches(net, key, np.asarray(array), origin)
    return given


def run_network_file(net: NetworkFile, opts: NetworkOptions, out: TextIO | None = None,
                     launch=None) -> NetworkReport:
    """Run the network on the given files and write the outputs (only after every run succeeded); VTA
    launches through ``launch`` (a board's, vtasim.board.launch) or the simulator."""
    check_runnable(net, opts.origin)
    given: dict[str, Samples] = {}
    for name, path in opts.inputs:
        given.update(int8_inputs(net, {name: read_npy(path, mapped=True)}, path))  # samples read one by one
    for key in net.inputs:
        if key not in given:
            if not opts.zero_inputs:
                raise FormatError(f"{opts.origin}: the network reads '{key}' but no --input gives it; pass "
                                  f"--input {key}=FILE.npy (or --zero-inputs to run on zeros)")
            given[key] = Samples(np.zeros((1, *net.tensors[key].shape), np.int8), None, False, key)
    outputs = [(_lookup(net, name, net.outputs, "--output"), Path(path)) for name, path in opts.outputs]
    for _, path in outputs:
        check_writable(path, "the output")
    if opts.out_dir is not None:
        check_out_dir(opts.out_dir)
    observers = _Observers(net, opts, out)
    runs = run_batches(net, given, opts.max_ops, observers.attach, opts.origin, launch)
    new_axis = any(getattr(v, "new_axis", False) for v in given.values())
    arrays: dict[str, bytes] = {}

    def array(name: str) -> bytes:
        if name not in arrays:
            arrays[name] = npy_bytes(stacked(net, runs, name, opts.int8, new_axis))
        return arrays[name]

    files = [PendingFile(path, array(name)) for name, path in outputs]
    if opts.out_dir is not None:
        files += [PendingFile(opts.out_dir / file, array(name), in_dir=True)
                  for name, file in output_files(net.outputs).items()]
    write_files(files)
    warnings, summary = observers.lint_report()
    return NetworkReport(runs, warnings, observers.race_report(), [f.path for f in files], summary)


def output_files(names: list[str]) -> dict[str, str]:
    """The file each model output is written to in an output directory: NAME.npy where the name is a plain
    file name, else its kernel-language spelling (a model's names can hold anything: separators, '..',
    control characters); at most 100 characters before '.npy', and a suffix where two names would meet
    (on a case-insensitive file system too)."""
    files: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        stem = name if PLAIN_FILE_NAME.fullmatch(name) else kernel_identifier(name)[:100]
        files[name] = f"{unique(stem, taken, str.lower)}.npy"
    return files


class _Observers:
    """Traces, lint and race checks attached to each VTA launch as it starts."""

    def __init__(self, net: NetworkFile, opts: NetworkOptions, out: TextIO | None):
        self.net, self.opts = net, opts
        self.out = out if out is not None else sys.stdout
        self.linters: list = []
        self.checkers: list = []

    def attach(self, k: int, step, machine) -> None:
        if self.opts.trace:
            if machine is None:
                self.out.write(f"== step {k + 1}: host step '{step.name}': "
                               f"{', '.join(f'{n.op} {n.name!r}' for n in step.nodes)} ==\n")
                return
            from vtasim.outputs.trace import text_tracer, trace_header

            self.out.write(f"== step {k + 1}: VTA launch '{step.name}' ==\n")
            self.out.write(trace_header(step.program))
            machine.observe(text_tracer(self.out, machine.state, self.opts.trace_uops))
        if machine is None:
            return
        if self.opts.lint and len(self.linters) < len(self.net.programs):
            from vtasim.checks.lint import Linter

            self.linters.append((step, Linter(machine)))
        if self.opts.check_races and len(self.checkers) < len(self.net.programs):
            from vtasim.checks.races import RaceChecker

            self.checkers.append((step, RaceChecker(machine)))

    def lint_report(self) -> tuple[list[str], str]:
        if not self.opts.lint:
            return [], ""
        from vtasim.checks.lint import summary

        found, lines = [], []
        for step, linter in self.linters:
            warnings = linter.report()
            found += warnings
            lines += [f"{step.name}: {w.describe(step.program)}" for w in warnings]
        return lines, summary(found)

    def race_report(self) -> list[str]:
        return [f"{step.name}: {r.describe(step.program)}" for step, checker in self.checkers
                for r in checker.report()]

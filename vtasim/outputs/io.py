"""Moving data in and out of a simulated program: tensors, DRAM ranges, raw dumps."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vtasm.errors import FormatError, UsageError
from vtasm.fileio import npy_bytes, read_npy, same_file, write_atomic
from vtasm.program import Program


@dataclass(frozen=True)
class PendingFile:
    """An output computed by a run, written only once the whole run succeeded."""

    path: Path
    data: bytes | memoryview  # a DRAM range is a view of the machine's DRAM (written as it is at the end)
    in_dir: bool = False  # a result range in the output directory (created, with subdirectories, if missing)


def parse_assignment(text: str, option: str) -> tuple[str, str]:
    """'NAME=FILE' -> (NAME, FILE)."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise UsageError(f"{option} expects NAME=FILE.npy, got {text!r}")
    return name, path


def parse_dram_range(text: str) -> tuple[int, int, str]:
    """'ADDR:NBYTES:FILE' (integers in decimal or 0x hex) -> (addr, nbytes, file)."""
    parts = text.split(":", 2)
    if len(parts) != 3 or not parts[2]:
        raise UsageError(f"--dump-dram expects ADDR:NBYTES:FILE, got {text!r}")
    try:
        addr, nbytes = int(parts[0], 0), int(parts[1], 0)
    except ValueError:
        raise UsageError(f"--dump-dram expects integer ADDR and NBYTES, got {text!r}") from None
    if addr < 0 or nbytes < 0:
        raise UsageError(f"--dump-dram range must not be negative, got {text!r}")
    return addr, nbytes, parts[2]


def apply_inputs(program: Program, dram: np.ndarray, inputs: list[tuple[str, str]]) -> None:
    """Pack each NAME=FILE.npy into its tensor's segment in DRAM."""
    for name, path in inputs:
        tensor = program.tensor(name)
        seg = program.segment(name)
        data = tensor.pack(tensor.conform(read_npy(path), path))
        dram[seg.addr : seg.addr + len(data)] = np.frombuffer(data, dtype=np.uint8)


def collect_outputs(program: Program, dram: np.ndarray, outputs: list[tuple[str, str]]) -> list[PendingFile]:
    """Unpack each NAME=FILE.npy tensor from DRAM into a logical array file."""
    files = []
    for name, path in outputs:
        tensor = program.tensor(name)
        seg = program.segment(name)
        array = tensor.unpack(dram[seg.addr : seg.addr + tensor.nbytes].tobytes())
        files.append(PendingFile(Path(path), npy_bytes(array)))
    return files


def dram_slice(dram: np.ndarray, addr: int, nbytes: int, what: str) -> memoryview:
    """A DRAM range (a view, not a copy), or a FormatError naming ``what`` when it lies outside DRAM."""
    if addr + nbytes > dram.size:
        raise FormatError(f"{what}: bytes 0x{addr:x}..0x{addr + nbytes - 1:x} lie outside DRAM (0x{dram.size:x} bytes)")
    return dram[addr : addr + nbytes].data


def collect_dumps(program: Program, dram: np.ndarray, out_dir: Path) -> list[PendingFile]:
    """The program's own result ranges (raw-format 'dump'), as files in out_dir."""
    files = []
    for d in program.dumps:
        target = (out_dir / d.file).resolve()
        if out_dir.resolve() not in target.parents:
            raise FormatError(f"dump file {d.file!r} would leave the output directory")
        files.append(PendingFile(out_dir / d.file, dram_slice(dram, d.addr, d.nbytes, f"dump {d.file}"), True))
    return files


def check_writable(path: Path, what: str) -> None:
    """A FormatError unless ``path`` could be written: not a directory, its directory existing and writable."""
    parent = path.parent
    if path.is_dir():
        raise FormatError(f"{path}: cannot write {what}: it is a directory")
    if not parent.is_dir():
        state = "is not a directory" if parent.exists() else "does not exist"
        raise FormatError(f"{path}: cannot write {what}: {parent} {state}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise FormatError(f"{path}: cannot write {what}: {parent} is not writable")


def check_out_dir(out_dir: Path) -> None:
    """A FormatError unless ``out_dir`` is a directory or could be created as one."""
    existing = out_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing == out_dir and out_dir.is_dir():
        if not os.access(out_dir, os.W_OK | os.X_OK):
            raise FormatError(f"{out_dir}: cannot write the results: the directory is not writable")
    elif not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise FormatError(f"{out_dir}: cannot create the output directory: {existing} "
                          f"{'is not writable' if existing.is_dir() else 'is not a directory'}")


def write_files(files: list[PendingFile]) -> None:
    """Write every file atomically, first creating the missing directories of result ranges.

    When one write fails, the files and directories this call created are
    removed again before the error goes on: a failed run leaves nothing behind.
    """
    made: list[Path] = []
    created: list[Path] = []
    try:
        for f in files:
            if f.in_dir:
                _make_dirs(f.path.parent, made)
            new = not os.path.lexists(f.path)
            write_atomic(f.path, f.data)
            if new:
                created.append(f.path)
    except BaseException:
        for path in created:
            path.unlink(missing_ok=True)
        for d in reversed(made):
            try:
                d.rmdir()
            except OSError:
                pass
        raise


def _make_dirs(directory: Path, made: list[Path]) -> None:
    """Create ``directory`` and its missing parents, recording each one created in ``made``."""
    missing = [p for p in (directory, *directory.parents) if not p.exists()]
    try:
        for d in reversed(missing):
            d.mkdir()
            made.append(d)
    except OSError as exc:
        raise FormatError(f"{directory}: cannot create the output directory: {exc.strerror or exc}") from None


def default_out_dir(program_path: str | Path) -> Path:
    """Where result ranges go by default: next to the program, named after it ('k.vbin' -> 'k.out')."""
    p = Path(program_path)
    name = p.name[: -len(p.suffix)] if p.suffix and not p.is_dir() else p.name
    return p.parent / f"{name}.out"


def check_names(inputs, outputs, dram_dumps, program: str) -> None:
    """Refuse a tensor given twice, an output path used twice, or an output over the program."""
    seen: set[str] = set()
    for text in inputs:
        name = parse_assignment(text, "--input")[0]
        if name in seen:
            raise UsageError(f"--input {name} is given twice")
        seen.add(name)
    paths = [parse_assignment(t, "--output")[1] for t in outputs] + [parse_dram_range(t)[2] for t in dram_dumps]
    for i, path in enumerate(paths):
        if path in paths[:i]:
            raise UsageError(f"output file {path} is given twice")
        if same_file(path, program):
            raise UsageError(f"output file {path} is the program itself")

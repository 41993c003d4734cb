"""Moving data in and out of a simulated program: tensors, DRAM ranges, raw dumps."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vtasm.errors import FormatError, UsageError
from vtasm.fileio import npy_bytes, read_npy
from vtasm.program import Program


@dataclass(frozen=True)
class PendingFile:
    """An output computed by a run, written only once the whole run succeeded."""

    path: Path
    data: bytes


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


def dram_slice(dram: np.ndarray, addr: int, nbytes: int, what: str) -> bytes:
    """Bytes of a DRAM range, or a FormatError naming ``what`` when it lies outside DRAM."""
    if addr + nbytes > dram.size:
        raise FormatError(f"{what}: bytes 0x{addr:x}..0x{addr + nbytes - 1:x} lie outside DRAM (0x{dram.size:x} bytes)")
    return dram[addr : addr + nbytes].tobytes()


def collect_dumps(program: Program, dram: np.ndarray, out_dir: Path) -> list[PendingFile]:
    """The program's own result ranges (raw-format 'dump'), as files in out_dir."""
    files = []
    for d in program.dumps:
        target = (out_dir / d.file).resolve()
        if out_dir.resolve() not in target.parents:
            raise FormatError(f"dump file {d.file!r} would leave the output directory")
        files.append(PendingFile(out_dir / d.file, dram_slice(dram, d.addr, d.nbytes, f"dump {d.file}")))
    return files


def default_out_dir(program_path: str | Path) -> Path:
    """Where result ranges go by default: next to the program, named after it ('k.vbin' -> 'k.out')."""
    p = Path(program_path)
    name = p.name[: -len(p.suffix)] if p.suffix and not p.is_dir() else p.name
    return p.parent / f"{name}.out"

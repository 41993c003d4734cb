"""A model's external data, read only from inside the model's own folder.

ONNX lets a tensor keep its bytes in another file (``data_location`` =
EXTERNAL, with ``location``, ``offset`` and ``length`` entries). A model is
data from anywhere, so a location is a claim to check, not a path to follow:
it must be a relative name without NUL characters, whose real path (every
symlink and ``..`` resolved) lies inside the real folder of the model file,
and that names a regular file (a FIFO would block, a device never end, and
``/proc`` files lie about their size); the range it names must lie inside
that file and hold exactly the tensor's bytes. All of this is checked before
the file is opened (and the opened file checked again, so a file swapped in
between is refused too). The bytes are mapped, not read: a weight's pages are
read when a layer uses it.
"""

from __future__ import annotations

import mmap
import os
import stat
from pathlib import Path

import numpy as np

from vtasm.errors import ModelError, printable
from vtasm.formats.network import ONNX_DTYPES

EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL


def external_tensors(model) -> list[tuple[object, bool]]:
    """Every tensor of the model whose bytes live in another file, with whether it is an initialiser of the
    main graph (else a Constant node's value, in any graph)."""
    found = [(t, True) for t in model.graph.initializer if t.data_location == EXTERNAL]

    def graph_tensors(graph, main: bool) -> None:
        if not main:
            found.extend((t, False) for t in graph.initializer if t.data_location == EXTERNAL)
        for node in graph.node:
            for attr in node.attribute:
                if attr.HasField("t") and attr.t.data_location == EXTERNAL:
                    found.append((attr.t, False))
                found.extend((t, False) for t in attr.tensors if t.data_location == EXTERNAL)
                if attr.HasField("g"):
                    graph_tensors(attr.g, False)
                for sub in attr.graphs:
                    graph_tensors(sub, False)

    graph_tensors(model.graph, True)
    return found


# every external data file mapped, with its first byte's address (wire.release lets their pages go)
MAPS: list[tuple[mmap.mmap, int]] = []


def load_external(model, model_path: str | Path) -> dict[str, np.ndarray]:
    """The values of the model's initialisers kept in external files, mapped (by name); other external tensors
    (Constant nodes' values) get their bytes into the message. Every tensor loaded loses its external
    entries, so nothing else reads a location again. One-line ModelErrors name the tensor and what is wrong."""
    name = Path(model_path).name
    folder = Path(os.path.realpath(os.path.dirname(os.path.abspath(model_path))))
    arrays: dict[str, np.ndarray] = {}
    maps: dict[Path, mmap.mmap] = {}
    for tensor, initialiser in external_tensors(model):
        where = f"{name}: tensor '{tensor.name}'"
        entries = {e.key: e.value for e in tensor.external_data}
        file = _contained(entries.get("location", ""), folder, where)
        if tensor.data_type not in ONNX_DTYPES:
            raise ModelError(f"{where}: external data of ONNX element type {tensor.data_type}, which the importer "
                             "does not read")
        dtype = np.dtype(ONNX_DTYPES[tensor.data_type])
        count = 1
        for d in tensor.dims:
            if d < 0:
                raise ModelError(f"{where}: a negative dimension {d}")
            count *= d
        need = count * dtype.itemsize
        view = maps.get(file)
        if view is None:
            view = maps[file] = _map(file, where)
            if view is not None and len(view):
                MAPS.append((view, np.frombuffer(view, np.uint8, 1).ctypes.data))
        size = len(view) if view is not None else 0
        offset = _number(entries.get("offset", "0"), "offset", where)
        length = _number(entries["length"], "length", where) if "length" in entries else size - offset
        if offset + length > size:
            raise ModelError(f"{where}: its external data, bytes {offset:,}..{offset + length:,} of "
                             f"{entries['location']!r}, lies past the file's end ({size:,} bytes)")
        if length != need:
            raise ModelError(f"{where}: {length:,} bytes of external data, but its shape {list(tensor.dims)} of "
                             f"{dtype.name} needs {need:,}")
        values = (np.frombuffer(view, dtype, count, offset) if count else np.zeros(0, dtype)).reshape(
            tuple(tensor.dims))
        if not dtype.isnative:
            values = values.astype(dtype.newbyteorder("="))
        del tensor.external_data[:]
        tensor.data_location = 0
        if initialiser:
            arrays[tensor.name] = values
        else:
            tensor.raw_data = values.astype(dtype, copy=False).tobytes()
    return arrays


def _contained(location: str, folder: Path, where: str) -> Path:
    """The real path of an external-data location, refused unless it is a relative name inside ``folder``."""
    if not location:
        raise ModelError(f"{where}: external data without a location")
    shown = printable(location, keep="")[:120]
    if "\0" in location:
        raise ModelError(f"{where}: external data location '{shown}' holds a NUL character")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or (len(location) > 1 and location[1] == ":"):
        raise ModelError(f"{where}: external data location '{shown}' is an absolute path; a model may only read "
                         "files in its own folder")
    real = Path(os.path.realpath(folder / location))
    if real == folder or folder not in real.parents:
        raise ModelError(f"{where}: external data location '{shown}' leads outside the model's folder "
                         f"({folder}); a model may only read files in its own folder")
    try:
        info = os.stat(real)
    except OSError as exc:
        raise ModelError(f"{where}: cannot read external data '{shown}': {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ModelError(f"{where}: external data location '{shown}' is not a regular file")
    return real


def _map(file: Path, where: str) -> mmap.mmap | None:
    """The file mapped read-only (None when empty), checked again once open (a FIFO or device swapped in
    after the check is refused, never read)."""
    try:
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ModelError(f"{where}: cannot read external data {file.name!r}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ModelError(f"{where}: external data {file.name!r} is not a regular file")
        if info.st_size == 0:
            return None
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


def _number(text: str, key: str, where: str) -> int:
    if not text.isdigit():
        raise ModelError(f"{where}: external data {key} {text[:40]!r} is not a non-negative integer")
    return int(text)

"""Reading an ONNX file without holding its weights twice.

``onnx.load`` reads the whole file into one bytes object and parses it into
a protobuf message that keeps its own copy of every tensor's bytes; turning
the initialisers into numpy arrays then makes a third. For a VGG (550 MB of
weights) that peaked above 1.1 GB before the import had done anything.

``read_model`` walks the file's protobuf wire format instead (memory-mapped,
so only the few bytes of field headers are read), cuts the ``raw_data`` of
every large initialiser out of the message it hands to the protobuf parser,
and maps each cut tensor straight from the file. The
message it returns is the model as ``onnx.load`` gives it, minus those bytes
(external data is mapped from files inside the model's folder: external.py); the arrays come with it by
initialiser name, mapped from the file rather than read: their pages are read
when a layer uses them and ``release`` lets them go when it is done, so a
network's float weights need not all be in memory at once. Anything the walk does not expect (a text-format model, a
truncated file) goes to ``onnx.load`` unchanged, which reports it as before.

Field numbers are ONNX's (onnx.proto): ModelProto.graph = 7,
GraphProto.initializer = 5, TensorProto.dims = 1, data_type = 2,
raw_data = 9.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # numpy 1.x
    from numpy import byte_bounds

from vtasm.errors import FormatError, ModelError
from vtasm.fileio import open_regular
from vtasm.formats.network import ONNX_DTYPES

from .external import MAPS as EXTERNAL_MAPS
from .external import load_external

CUT_BYTES = 1 << 16  # raw_data of at least this many bytes is read into an array rather than parsed
MODEL_GRAPH, GRAPH_INITIALIZER, TENSOR_DATA_TYPE, TENSOR_RAW_DATA = 7, 5, 2, 9
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
# ONNX element types whose raw bytes are plain little-endian numpy values


class WireError(Exception):
    """The bytes are not the protobuf wire format this reader walks."""


def read_model(path: str | Path):
    """The model at ``path`` as an onnx ModelProto whose large initialisers carry no bytes, and those
    initialisers' values as read-only arrays mapped from the file, by name."""
    import onnx

    path = str(path)
    try:
        with open_regular(path, "model") as f:  # a FIFO or a device is refused before it is read
            view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        stripped, cuts = _strip_model(view)
    except FormatError as exc:
        raise ModelError(exc.message) from None
    except (WireError, ValueError):  # not binary protobuf as expected (or an empty file): onnx says why
        model = onnx.load(path, load_external_data=False)
        return model, load_external(model, path)
    model = onnx.load_model_from_string(stripped)
    del stripped
    inits = model.graph.initializer
    arrays = {}
    if cuts:
        _MAPS.append((view, np.frombuffer(view, np.uint8, 1).ctypes.data))
    for index, offset, nbytes in cuts:
        tensor = inits[index]
        arrays[tensor.name] = _mapped_tensor(view, tensor, offset, nbytes, Path(path).name)
    arrays.update(load_external(model, path))  # only from inside the model's folder (external.py)
    return model, arrays


# every file mapping that arrays came from, with its first byte's address (for release)
_MAPS: list[tuple[mmap.mmap, int]] = []


def release(values: np.ndarray) -> None:
    """Let the pages of a weight mapped from its model file go from memory (read again from the file, from
    the page cache, if it is used again); nothing for any other array. The import calls it once it is
    done with a layer's float weights, so that they are resident one layer at a time."""
    owner = values
    while isinstance(owner, np.ndarray):
        owner = owner.base
    if isinstance(owner, memoryview):
        owner = owner.obj
    found = next((start for m, start in _MAPS + EXTERNAL_MAPS if m is owner), None)
    if found is None or not values.size or not hasattr(owner, "madvise"):
        return
    low, high = byte_bounds(values)
    first = (low - found) // mmap.PAGESIZE * mmap.PAGESIZE
    last = min(high - found, len(owner))
    owner.madvise(mmap.MADV_DONTNEED, first, last - first)


def release_all() -> None:
    """Let every mapped model file's pages go from memory (what the import read is re-read from the page
    cache if something reads it again): once a model is quantised, its float weights are no longer used, and
    a compile should not keep a VGG's 550 MB of them resident."""
    for view, _ in _MAPS + EXTERNAL_MAPS:
        if not view.closed and len(view) and hasattr(view, "madvise"):
            view.madvise(mmap.MADV_DONTNEED, 0, len(view))


def _mapped_tensor(view: mmap.mmap, tensor, offset: int, nbytes: int, name: str) -> np.ndarray:
    dtype = np.dtype(ONNX_DTYPES[tensor.data_type])
    shape = tuple(int(d) for d in tensor.dims)
    count = int(np.prod(shape, dtype=np.int64))
    if count * dtype.itemsize != nbytes:
        raise ModelError(f"{name}: initialiser '{tensor.name}' holds {nbytes} bytes of data but its shape "
                         f"{list(shape)} of {dtype.name} needs {count * dtype.itemsize}")
    values = np.frombuffer(view, dtype, count, offset).reshape(shape)
    if not dtype.isnative:  # a big-endian machine: converted, in memory
        return values.astype(dtype.newbyteorder("="))
    return values


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _fields(buf, pos: int, end: int):
    """(field number, wire type, field start, value start, value end) of each field in buf[pos:end]."""
    while pos < end:
        start = pos
        tag, pos = _varint(buf, pos, end)
        number, kind = tag >> 3, tag & 7
        if kind == VARINT:
            _, stop = _varint(buf, pos, end)
        elif kind == FIXED64:
            stop = pos + 8
        elif kind == FIXED32:
            stop = pos + 4
        elif kind == LENGTH:
            size, pos = _varint(buf, pos, end)
            stop = pos + size
        else:  # groups: not in ONNX
            raise WireError(f"wire type {kind}")
        if stop > end or number == 0:
            raise WireError("field beyond its message")
        yield number, kind, start, pos, stop
        pos = stop


def _strip_model(buf) -> tuple[bytes, list[tuple[int, int, int]]]:
    """The model's bytes without its large raw_data, and (initialiser index, file offset, bytes) of each cut."""
    pieces: list = []
    cuts: list[tuple[int, int, int]] = []
    seen = 0  # initialisers before this graph field (a file may split the graph; the parser merges the parts)
    for number, kind, start, begin, stop in _fields(buf, 0, len(buf)):
        if number == MODEL_GRAPH and kind == LENGTH:
            graph, count = _strip_graph(buf, begin, stop, seen, cuts)
            seen += count
            pieces += [_encode_varint(MODEL_GRAPH << 3 | LENGTH), _encode_varint(len(graph)), graph]
        else:
            pieces.append(buf[start:stop])
    return b"".join(pieces), cuts


def _strip_graph(buf, pos: int, end: int, first: int, cuts: list[tuple[int, int, int]]) -> tuple[bytes, int]:
    """A GraphProto's bytes with its initialisers stripped (cuts appended, numbered from ``first``), and how
    many initialisers it holds."""
    pieces: list = []
    count = 0
    for number, kind, start, begin, stop in _fields(buf, pos, end):
        if number == GRAPH_INITIALIZER and kind == LENGTH:
            tensor, cut = _strip_tensor(buf, begin, stop)
            if cut is not None:
                cuts.append((first + count, *cut))
                pieces += [_encode_varint(GRAPH_INITIALIZER << 3 | LENGTH), _encode_varint(len(tensor)), tensor]
            else:
                pieces.append(buf[start:stop])
            count += 1
        else:
            pieces.append(buf[start:stop])
    return b"".join(pieces), count


def _strip_tensor(buf, pos: int, end: int) -> tuple[bytes, tuple[int, int] | None]:
    """A TensorProto's bytes without its raw_data and (offset, bytes) of that data, when it is large and of
    a plain numeric type; else (b"", None): the tensor stays as it is."""
    data_type = None
    raw = None
    kept: list = []
    for number, kind, start, begin, stop in _fields(buf, pos, end):
        if number == TENSOR_DATA_TYPE and kind == VARINT:
            data_type, _ = _varint(buf, begin, stop)
        if number == TENSOR_RAW_DATA and kind == LENGTH and stop - begin >= CUT_BYTES:
            raw = (begin, stop - begin)
            continue
        kept.append(buf[start:stop])
    if raw is None or data_type not in ONNX_DTYPES:
        return b"", None
    return b"".join(kept), raw

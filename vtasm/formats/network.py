"""A network in one file: VTA programs, the host steps between their launches, and the tensors they pass.

An imported model whose operators VTA cannot all compute runs as VTA's own
runtime ran it: VTA launches for what VTA computes, the host CPU for the
rest. :class:`NetworkFile` holds that plan: every tensor passed between steps
is int8 at a scale 2**(exp + sixteenths / 16) (value = int8 * scale, which is
also how a float input is quantised and an output dequantised; the importer
gives the model's inputs and outputs powers of two), each VTA
step is a whole program with its tensors bound to the network's, and each
host step is a list of ONNX nodes computed in float32 (numerics in
``vtasim.host``). The file layout (docs/vbin.md): the .vbin header with its
own magic, then a NETW chunk (canonical JSON), one PROG chunk per program
(each the bytes of a .vbin) and a HOST chunk (the host steps' constants).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import numpy as np

from vtasm import budget
from vtasm.errors import FormatError
from vtasm.fileio import read_mapped, write_atomic
from vtasm.program import Program

from .chunks import ALIGN, framed, padding, read_chunks, read_header
from .jsonfields import get_int, get_list, get_object, get_str, parse_json
from .magic import NETWORK, is_network, network_file  # noqa: F401  (where callers have found them)
from .vbin import canonical_json, read_vbin, write_vbin

MAGIC = NETWORK
VERSION = 1
EXP_LIMIT = 126  # scales 2**-126 .. 2**126: normal float32 numbers
CONST_DTYPES = ("float32", "int64")


class Side(str, Enum):
    """Where a network's step runs: a VTA launch or the host CPU (the step kinds of the network file)."""

    VTA = "vta"
    HOST = "host"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def label(self) -> str:
        """The side as reports name it ('VTA', 'host')."""
        return "VTA" if self is Side.VTA else "host"


# ONNX's element types (TensorProto.DataType) whose values are plain little-endian numbers, by code: the
# importer reads initialisers and external data by it, the host's Cast converts to it
ONNX_DTYPES = {1: "<f4", 2: "u1", 3: "i1", 4: "<u2", 5: "<i2", 6: "<i4", 7: "<i8", 9: "?", 10: "<f2", 11: "<f8",
               12: "<u4", 13: "<u8"}
ONNX_OPSETS = (7, 21)  # the default-domain opsets the importer reads and the host steps follow


@dataclass(frozen=True)
class NetTensor:
    """A tensor passed between steps: int8 values at scale 2**(exp + sixteenths / 16), in its model shape."""

    name: str
    shape: tuple[int, ...]
    exp: int
    sixteenths: int = 0  # the scale's mantissa 2**(sixteenths / 16), 0..15 (the file omits 0)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass
class HostNode:
    """One ONNX operator the host computes: inputs are tensors or constants, shapes are static."""

    op: str
    name: str
    inputs: list[str]  # "" for an omitted optional input
    outputs: list[str]
    attrs: dict
    in_shapes: list[tuple[int, ...] | None]  # None where the input is omitted
    out_shapes: list[tuple[int, ...]]


@dataclass
class HostStep:
    """A run of host nodes between VTA launches: reads int8 ``inputs``, writes int8 ``outputs``."""

    name: str
    nodes: list[HostNode]
    inputs: list[str]
    outputs: list[str]

    kind = Side.HOST


@dataclass
class VtaStep:
    """One VTA launch: a whole program, its tensors bound to the network's (network name -> program name)."""

    name: str
    program: Program
    inputs: dict[str, str]
    outputs: dict[str, str]

    kind = Side.VTA


Step = VtaStep | HostStep


@dataclass
class NetworkFile:
    """The whole network: model inputs and outputs (their model names), tensors, steps in order, constants."""

    name: str
    opset: int
    inputs: list[str]
    outputs: list[str]
    tensors: dict[str, NetTensor]
    steps: list[Step]
    constants: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def programs(self) -> list[Program]:
        return [s.program for s in self.steps if isinstance(s, VtaStep)]

    def check(self, where: str) -> None:
        """FormatError naming the first step that reads what nothing wrote or binds what does not fit."""
        known = set(self.inputs)
        for name in self.inputs + self.outputs:
            if name not in self.tensors:
                raise FormatError(f"{where}: model tensor '{name}' is not in the tensor table")
        for name, t in self.tensors.items():  # the host holds every tensor it touches as float32
            budget.check(4 * t.size, f"{where}: tensor '{name}' {list(t.shape)} as float32")
        for step in self.steps:
            for node in step.nodes if isinstance(step, HostStep) else ():
                for shape in [*node.in_shapes, *node.out_shapes]:
                    if shape is not None:
                        budget.check(4 * math.prod(shape), f"{where}: host node '{node.name}' ({node.op}): "
                                     f"its {list(shape)} as float32")
        for k, step in enumerate(self.steps):
            at = f"{where}: step {k + 1} ({step.kind} '{step.name}')"
            if isinstance(step, VtaStep):
                for names, what in ((step.inputs, "input"), (step.outputs, "output")):
                    for net_name, prog_name in names.items():
                        _bound(self, step.program, net_name, prog_name, f"{at} {what}")
                reads, writes = list(step.inputs), list(step.outputs)
            else:
                local = set(step.inputs)
                for node in step.nodes:
                    for t in node.inputs:
                        if t and t not in local and t not in self.constants:
                            raise FormatError(f"{at}: node '{node.name}' reads '{t}', which is neither a step "
                                              "input, a constant nor written by an earlier node")
                    local.update(node.outputs)
                for t in step.outputs:
                    if t not in local:
                        raise FormatError(f"{at}: output '{t}' is written by none of its nodes")
                    if t not in self.tensors:
                        raise FormatError(f"{at}: output '{t}' is not in the tensor table")
                reads, writes = step.inputs, step.outputs
            for t in reads:
                if t not in known:
                    raise FormatError(f"{at} reads tensor '{t}' before any step writes it")
            known.update(writes)
        for t in self.outputs:
            if t not in known:
                raise FormatError(f"{where}: model output '{t}' is written by no step")


def _bound(net: NetworkFile, program: Program, net_name: str, prog_name: str, where: str) -> None:
    if net_name not in net.tensors:
        raise FormatError(f"{where} '{net_name}' is not in the tensor table")
    try:
        info = program.tensor(prog_name)
    except FormatError as exc:
        raise FormatError(f"{where} '{net_name}': the program has {exc.message}") from None
    if info.dtype != "int8" or math.prod(info.shape) != net.tensors[net_name].size:
        raise FormatError(f"{where} '{net_name}' {list(net.tensors[net_name].shape)} is bound to program tensor "
                          f"'{prog_name}', {info.dtype}{list(info.shape)} (int8 of the same size expected)")


# -- writing -------------------------------------------------------------------------------------------------------
def write_network(net: NetworkFile) -> bytes:
    """The file's bytes (deterministic)."""
    net.check("cannot write the network")
    blob, consts = bytearray(), []
    for name in sorted(net.constants):
        value = np.ascontiguousarray(net.constants[name])
        dtype = "int64" if np.issubdtype(value.dtype, np.integer) else "float32"
        data = value.astype(dtype).tobytes()
        consts.append({"name": name, "dtype": dtype, "shape": list(value.shape), "offset": len(blob),
                       "nbytes": len(data)})
        blob += data + bytes(padding(len(data)))
    programs: list[bytes] = []
    steps = []
    for step in net.steps:
        if isinstance(step, VtaStep):
            steps.append({"kind": Side.VTA.value, "name": step.name, "program": len(programs), "inputs": step.inputs,
                          "outputs": step.outputs})
            programs.append(write_vbin(step.program))
        else:
            steps.append({"kind": Side.HOST.value, "name": step.name, "inputs": step.inputs, "outputs": step.outputs,
                          "nodes": [_node_json(n) for n in step.nodes]})
    meta = {"name": net.name, "opset": net.opset, "inputs": net.inputs, "outputs": net.outputs,
            "tensors": [_tensor_json(t) for t in net.tensors.values()],
            "constants": consts, "steps": steps}
    chunks = [("NETW", canonical_json(meta))] + [("PROG", p) for p in programs] + [("HOST", bytes(blob))]
    return framed(MAGIC, VERSION, chunks)


def _tensor_json(t: NetTensor) -> dict:
    entry = {"name": t.name, "shape": list(t.shape), "exp": t.exp}
    return {**entry, "sixteenths": t.sixteenths} if t.sixteenths else entry


def _node_json(node: HostNode) -> dict:
    return {"op": node.op, "name": node.name, "inputs": node.inputs, "outputs": node.outputs, "attrs": node.attrs,
            "in_shapes": [None if s is None else list(s) for s in node.in_shapes],
            "out_shapes": [list(s) for s in node.out_shapes]}


def save_network(net: NetworkFile, path: str | Path) -> None:
    """Write the network file atomically (FormatError when it cannot be written)."""
    write_atomic(path, write_network(net))


# -- reading -------------------------------------------------------------------------------------------------------



def load_network(path: str | Path) -> NetworkFile:
    """Read and check a network file."""
    return read_network(read_mapped(path, "network file"), str(path))


def read_network(data: bytes, origin: str = "<network>") -> NetworkFile:
    """Parse and check a network file's bytes; FormatError names the first problem."""
    chunks = _chunks(bytes(data), origin)
    where = f"{origin}: NETW"
    meta = get_object(parse_json(chunks[0][1], where), where,
                      ("name", "opset", "inputs", "outputs", "tensors", "constants", "steps"))
    programs = [payload for tag, payload in chunks if tag == "PROG"]
    host = chunks[-1][1]
    tensors = {}
    for k, entry in enumerate(get_list(meta["tensors"], f"{where} tensors")):
        at = f"{where} tensors[{k}]"
        entry = get_object(entry, at, ("name", "shape", "exp"), ("sixteenths",))
        exp = _int(entry["exp"], f"{at} exp")
        if abs(exp) > EXP_LIMIT:
            raise FormatError(f"{at} exp: {exp} lies outside -{EXP_LIMIT}..{EXP_LIMIT}")
        sixteenths = _int(entry.get("sixteenths", 0), f"{at} sixteenths")
        if not 0 <= sixteenths < 16:
            raise FormatError(f"{at} sixteenths: {sixteenths} lies outside 0..15")
        name = get_str(entry["name"], f"{at} name")
        tensors[name] = NetTensor(name, _shape(entry["shape"], f"{at} shape"), exp, sixteenths)
    constants = {}
    for k, entry in enumerate(get_list(meta["constants"], f"{where} constants")):
        at = f"{where} constants[{k}]"
        entry = get_object(entry, at, ("name", "dtype", "shape", "offset", "nbytes"))
        dtype, shape = entry["dtype"], _shape(entry["shape"], f"{at} shape", allow_zero=True)
        if dtype not in CONST_DTYPES:
            raise FormatError(f"{at} dtype: {dtype!r} is not one of {', '.join(CONST_DTYPES)}")
        offset, nbytes = get_int(entry["offset"], f"{at} offset"), get_int(entry["nbytes"], f"{at} nbytes")
        if offset % ALIGN:
            raise FormatError(f"{at}: offset {offset} is not a multiple of {ALIGN} (constants are 8-byte aligned)")
        if nbytes != math.prod(shape) * np.dtype(dtype).itemsize or offset + nbytes > len(host):
            raise FormatError(f"{at}: {nbytes} bytes at offset {offset} do not hold {dtype}{list(shape)} inside "
                              f"the HOST chunk ({len(host)} bytes)")
        constants[get_str(entry["name"], f"{at} name")] = np.frombuffer(host, dtype, math.prod(shape),
                                                                         offset).reshape(shape)
    steps: list[Step] = []
    used = set()
    for k, entry in enumerate(get_list(meta["steps"], f"{where} steps")):
        at = f"{where} steps[{k}]"
        if not isinstance(entry, dict) or entry.get("kind") not in [s.value for s in Side]:
            raise FormatError(f"{at}: expected an object whose kind is 'vta' or 'host'")
        if entry["kind"] == Side.VTA:
            entry = get_object(entry, at, ("kind", "name", "program", "inputs", "outputs"))
            index = get_int(entry["program"], f"{at} program")
            if index >= len(programs) or index in used:
                raise FormatError(f"{at} program: {index} is not an unused PROG chunk (the file has "
                                  f"{len(programs)})")
            used.add(index)
            program = read_vbin(programs[index], f"{origin}: program {index + 1}")
            steps.append(VtaStep(get_str(entry["name"], f"{at} name"), program,
                                 _names(entry["inputs"], f"{at} inputs"), _names(entry["outputs"], f"{at} outputs")))
        else:
            entry = get_object(entry, at, ("kind", "name", "inputs", "outputs", "nodes"))
            nodes = [_node(n, f"{at} nodes[{j}]") for j, n in enumerate(get_list(entry["nodes"], f"{at} nodes"))]
            steps.append(HostStep(get_str(entry["name"], f"{at} name"), nodes, _strs(entry["inputs"], f"{at} inputs"),
                                  _strs(entry["outputs"], f"{at} outputs")))
    if len(used) != len(programs):
        raise FormatError(f"{origin}: {len(programs) - len(used)} PROG chunk(s) belong to no step")
    opset = get_int(meta["opset"], f"{where} opset", 1)
    if not ONNX_OPSETS[0] <= opset <= ONNX_OPSETS[1]:
        raise FormatError(f"{where} opset: {opset}; host steps follow opsets {ONNX_OPSETS[0]} to {ONNX_OPSETS[1]}")
    net = NetworkFile(get_str(meta["name"], f"{where} name"), opset, _strs(meta["inputs"], f"{where} inputs"),
                      _strs(meta["outputs"], f"{where} outputs"), tensors, steps, constants)
    net.check(origin)
    return net


def _chunks(data: bytes, origin: str) -> list[tuple[str, bytes]]:
    """The chunks (NETW, PROG..., HOST), their framing checked by the reader the .vbin uses."""
    count = read_header(data, MAGIC, VERSION, origin, "network file", "network file")
    if count < 2:
        raise FormatError(f"{origin}: a network file needs its NETW and HOST chunks (the header announces {count})")

    def tag_at(raw: bytes, k: int) -> str:
        tag = raw.decode("latin-1")
        expected = "NETW" if k == 0 else "HOST" if k == count - 1 else "PROG"
        if tag != expected:
            raise FormatError(f"{origin}: chunk {k + 1} is {tag!r} where {expected} belongs")
        return tag

    return [(tag, bytes(payload)) for tag, payload in read_chunks(data, count, origin, tag_at)]


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(f"{where}: expected an integer")
    return value


def _shape(value: object, where: str, allow_zero: bool = False) -> tuple[int, ...]:
    dims = get_list(value, where)
    return tuple(get_int(d, f"{where}[{k}]", 0 if allow_zero else 1) for k, d in enumerate(dims))


def _strs(value: object, where: str) -> list[str]:
    return [get_str(v, f"{where}[{k}]", allow_empty=True) for k, v in enumerate(get_list(value, where))]


def _names(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise FormatError(f"{where}: expected a JSON object")
    return {k: get_str(v, f"{where}.{k}") for k, v in value.items()}


def _node(value: object, where: str) -> HostNode:
    entry = get_object(value, where, ("op", "name", "inputs", "outputs", "attrs", "in_shapes", "out_shapes"))
    if not isinstance(entry["attrs"], dict):
        raise FormatError(f"{where} attrs: expected a JSON object")
    in_shapes = [None if s is None else _shape(s, f"{where} in_shapes[{k}]", True)
                 for k, s in enumerate(get_list(entry["in_shapes"], f"{where} in_shapes"))]
    out_shapes = [_shape(s, f"{where} out_shapes[{k}]", True)
                  for k, s in enumerate(get_list(entry["out_shapes"], f"{where} out_shapes"))]
    node = HostNode(get_str(entry["op"], f"{where} op"), get_str(entry["name"], f"{where} name"),
                    _strs(entry["inputs"], f"{where} inputs"), _strs(entry["outputs"], f"{where} outputs"),
                    entry["attrs"], in_shapes, out_shapes)
    if len(node.in_shapes) != len(node.inputs) or len(node.out_shapes) != len(node.outputs):
        raise FormatError(f"{where}: in_shapes/out_shapes do not match its inputs/outputs")
    return node

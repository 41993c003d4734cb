"""The checked program: the front end's output and the back end's input.

A kernel source (.vk) is parsed and checked into these dataclasses: every
tensor has a dtype and a logical shape, every expression node has its result
shape and dtype, names are resolved, local names are kept as nodes (a local
used twice is the same node object), and every node carries the source span it
came from, so later passes can report errors and annotate the assembly with
the line that produced each instruction.

Integer semantics are those of the hardware: tensors are int8 or int32;
element-wise arithmetic happens on int32 accumulator values (int8 operands are
sign-extended), wraps at 32 bits, shifts are arithmetic; storing to an int8
tensor keeps the low 8 bits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vtasm.errors import SourceSpan

INT8, INT32 = "int8", "int32"


@dataclass(frozen=True, eq=False)
class TensorDecl:
    """A kernel parameter (input), result (output), or a file-level constant."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    role: str  # "input" or "output" ("intermediate" and "slice" inside the compiler)
    span: SourceSpan
    slice_of: TensorDecl | None = None  # a channel slice of this tensor, written in place (concat)
    channel0: int = 0  # the slice's first channel in that tensor


# -- expression nodes -----------------------------------------------------------
# Every node has `shape`, `dtype` (its value type: int8 only for a plain int8
# tensor reference, int32 for anything computed) and `span`. Nodes are compared
# by identity (eq=False): a local name used twice refers to one node.


@dataclass(frozen=True, eq=False)
class Node:
    shape: tuple[int, ...]
    dtype: str
    span: SourceSpan


@dataclass(frozen=True, eq=False)
class TensorRef(Node):
    """A reference to an input tensor."""

    tensor: TensorDecl


@dataclass(frozen=True, eq=False)
class Const(Node):
    """An integer constant (shape ``()``), broadcast to whatever it meets."""

    value: int


@dataclass(frozen=True, eq=False)
class MatMul(Node):
    """``acc[n, o] = sum_k x[n, k] * w[o, k]`` (int8 x int8 -> int32, wrapping)."""

    x: Node  # int8 [N, K]
    w: Node  # int8 [O, K]


@dataclass(frozen=True, eq=False)
class Conv2d(Node):
    """NCHW activations, OIHW weights, zero padding, same stride on H and W.

    ``groups`` splits input and output channels into that many groups; weight
    shape is [OC, IC / groups, KH, KW].
    """

    x: Node  # int8 [N, IC, H, W]
    w: Node  # int8 [OC, IC/groups, KH, KW]
    stride: int
    pads: tuple[int, int, int, int]  # rows before (top), columns before (left), rows after, columns after
    groups: int

    @property
    def pad(self) -> int:
        """The padding before the first row (on every side when ``symmetric``)."""
        return self.pads[0]

    @property
    def symmetric(self) -> bool:
        """Whether the padding is the same on every side."""
        return len(set(self.pads)) == 1


@dataclass(frozen=True, eq=False)
class Flatten(Node):
    """``flatten(x)``: a tensor [N, C, H, W] read as the matrix [N, C*H*W] (C order), in place.

    Only a matrix product reads it: the weight is packed to match the tensor's
    tiled layout, so nothing is copied.
    """

    x: Node  # an int8 tensor [N, C, H, W]


@dataclass(frozen=True, eq=False)
class Concat(Node):
    """``concat(a, b, ...)``: int8 tensors joined along the channel axis (axis 1).

    Only as the whole value of an assignment: each part's producer writes its
    channel slice of the result in place.
    """

    parts: tuple[Node, ...]


@dataclass(frozen=True, eq=False)
class AvgWindow(Node):
    """``sum over the whole H x W image of x * multiplier``, per channel: the producer of ``global_avg_pool``.

    ``global_avg_pool(x)`` is ``AvgWindow(x) >> shift``; multiplier and shift
    approximate the division by H*W (exact when it is a power of two).
    """

    x: Node  # an int8 tensor [N, C, H, W]
    multiplier: int
    shift: int


@dataclass(frozen=True, eq=False)
class Pool(Node):
    """Max pooling, or sum pooling (``avg_pool`` is a sum then ``>> shift`` in the source).

    Padding is with ``pad_value`` (0 for sums; for max pooling the source says,
    default the int8 minimum -128 so padding never wins).
    """

    kind: str  # "max" or "sum"
    x: Node  # [N, C, H, W]
    size: int
    stride: int
    pad: int  # before the first row and column
    pad_value: int
    pad_end: int  # after the last row and column (only the output's size depends on it)


@dataclass(frozen=True, eq=False)
class Binary(Node):
    """Element-wise op on int32 values with numpy broadcasting.

    ``op`` is one of "add", "sub", "mul", "min", "max", "shr", "shl". Operands
    may be constants, tensors, or other nodes. Broadcasting follows numpy,
    except that a 1-D operand of length C against a 4-D NCHW value is per
    channel (shape [1, C, 1, 1]); the checker records the aligned shape of each
    operand in ``a_shape`` / ``b_shape`` (same rank as ``shape``, 1 where
    broadcast).
    """

    op: str
    a: Node
    b: Node
    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Cast(Node):
    """``int8(x)`` keeps the low 8 bits (sign-extended again in int32 arithmetic); ``int32(x)`` widens."""

    x: Node


@dataclass(frozen=True, eq=False)
class Call(Node):
    """A call of another kernel of the file; results come back through DRAM."""

    kernel: str
    args: tuple[Node, ...]
    result_index: int  # which output of the callee this node is


# -- kernels and schedules ------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """Optional overrides from a kernel's ``schedule { ... }`` block (None: let the compiler choose)."""

    tiles: dict[str, int] = field(default_factory=dict)  # axis name -> tile extent in elements
    order: tuple[str, ...] | None = None  # outer-to-inner loop order of tile loops
    threads: int | None = None  # virtual threads (1 or 2)
    span: SourceSpan | None = None
    spans: dict[str, SourceSpan] = field(default_factory=dict)  # where each setting was written


@dataclass(frozen=True)
class Assign:
    """``name = expr``: an output assignment, in source order."""

    target: TensorDecl
    value: Node
    span: SourceSpan


@dataclass(frozen=True)
class Kernel:
    name: str
    inputs: tuple[TensorDecl, ...]
    outputs: tuple[TensorDecl, ...]
    assigns: tuple[Assign, ...]  # one per output, in source order
    schedule: Schedule
    span: SourceSpan


@dataclass(frozen=True)
class CheckedFile:
    """All kernels of one source file, in source order."""

    path: str
    source: str
    kernels: tuple[Kernel, ...]

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)

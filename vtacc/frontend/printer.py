"""A readable dump of the checked program (``vtacc --emit checked``).

One line per computed node, numbered ``t1, t2, ...`` per kernel in the order
they are first needed, with its shape, dtype and source line. Tensor
references print as their names and constants as their values; a node used
twice (a local) is printed once.
"""

from __future__ import annotations

from .check_builtins import conv_padding
from .checked import (
    INT8,
    AvgWindow,
    Binary,
    Call,
    Cast,
    CheckedFile,
    Concat,
    Const,
    Conv2d,
    Flatten,
    Kernel,
    MatMul,
    Node,
    Pool,
    Schedule,
    TensorDecl,
    TensorRef,
)

_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "shl": "<<", "shr": ">>"}


def format_checked(checked: CheckedFile) -> str:
    """The whole file's checked IR as text (kernels separated by blank lines)."""
    return "\n\n".join(format_kernel(k) for k in checked.kernels) + "\n"


def format_kernel(kernel: Kernel) -> str:
    """One kernel: its header, one line per node, its result stores and its schedule."""
    params = ", ".join(_decl(d) for d in kernel.inputs)
    results = ", ".join(_decl(d) for d in kernel.outputs)
    if len(kernel.outputs) != 1:
        results = f"({results})"
    lines = [f"kernel {kernel.name}({params}) -> {results}  # {_where(kernel.span)}"]
    names: dict[int, str] = {}
    for assign in kernel.assigns:
        value = _operand(assign.value, names, lines)
        note = ""
        if assign.target.dtype == INT8 and assign.value.dtype != INT8:
            note = " (low 8 bits stored)"
        lines.append(f"  {assign.target.name} = {value} : {_type(assign.target.dtype, assign.target.shape)}{note}"
                     f"  # {_where(assign.span)}")
    schedule = _schedule(kernel.schedule)
    if schedule:
        lines.append(f"  {schedule}")
    return "\n".join(lines)


def _decl(d: TensorDecl) -> str:
    return f"{d.name}: {_type(d.dtype, d.shape)}"


def _type(dtype: str, shape: tuple[int, ...]) -> str:
    return f"{dtype}[{', '.join(map(str, shape))}]"


def _where(span) -> str:
    return f"{span.file}:{span.line}"


def _operand(node: Node, names: dict[int, str], lines: list[str]) -> str:
    """How a node appears as an operand: a tensor name, a constant, or ``tN`` (printing its line first)."""
    if isinstance(node, TensorRef):
        return node.tensor.name
    if isinstance(node, Const):
        return str(node.value)
    if id(node) not in names:
        text = _expression(node, names, lines)
        names[id(node)] = f"t{len(names) + 1}"
        lines.append(f"  {names[id(node)]} = {text} : {_type(node.dtype, node.shape)}  # {_where(node.span)}")
    return names[id(node)]


def _expression(node: Node, names: dict[int, str], lines: list[str]) -> str:
    def arg(n: Node) -> str:
        return _operand(n, names, lines)

    if isinstance(node, MatMul):
        return f"matmul({arg(node.x)}, {arg(node.w)})"
    if isinstance(node, Conv2d):
        padding = conv_padding(node.pads)
        return f"conv2d({arg(node.x)}, {arg(node.w)}, stride={node.stride}, {padding}, groups={node.groups})"
    if isinstance(node, Pool):
        end = f", pad_end={node.pad_end}" if node.pad_end != node.pad else ""
        return (f"{node.kind}_pool({arg(node.x)}, size={node.size}, stride={node.stride}, pad={node.pad}{end}, "
                f"pad_value={node.pad_value})")
    if isinstance(node, Concat):
        return f"concat({', '.join(arg(p) for p in node.parts)})"
    if isinstance(node, Flatten):
        return f"flatten({arg(node.x)})"
    if isinstance(node, AvgWindow):
        return f"window_sum({arg(node.x)}) * {node.multiplier}"
    if isinstance(node, Cast):
        return f"{node.dtype}({arg(node.x)})"
    if isinstance(node, Call):
        index = f"[{node.result_index}]" if node.result_index else ""
        return f"{node.kernel}({', '.join(arg(a) for a in node.args)}){index}"
    if isinstance(node, Binary):
        a, b = arg(node.a), arg(node.b)
        text = f"{a} {_SYMBOLS[node.op]} {b}" if node.op in _SYMBOLS else f"{node.op}({a}, {b})"
        spread = [f"{name} as [{', '.join(map(str, s))}]" for name, s, n in
                  ((a, node.a_shape, node.a), (b, node.b_shape, node.b))
                  if s != node.shape and not isinstance(n, Const)]
        return text + (f" ({'; '.join(spread)})" if spread else "")
    raise TypeError(f"unknown node {type(node).__name__}")  # pragma: no cover


def _schedule(schedule: Schedule) -> str:
    items = [f"tile_{axis} = {value}" for axis, value in schedule.tiles.items()]
    if schedule.threads is not None:
        items.append(f"threads = {schedule.threads}")
    if schedule.order is not None:
        items.append(f"order = ({', '.join(schedule.order)})")
    return f"schedule {{ {'; '.join(items)} }}" if items else ""

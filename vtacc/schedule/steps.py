"""The tiled schedule: a printable list of hardware steps, before encoding.

A step is one future instruction with symbolic DRAM operands (tensor name plus
element offset) and concrete SRAM indices. Steps come in groups, one per tile
(or per setup phase), each with a title and the source span that produced it;
the assembly printer turns groups into comment blocks and the source map.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vtasm.errors import SourceSpan

INP, WGT, ACC, UOP = "inp", "wgt", "acc", "uop"


@dataclass(frozen=True)
class Dma:
    """A 2-D DMA: ``y`` rows of ``x`` elements, rows ``stride`` apart in DRAM, packed in SRAM."""

    dram_elem: int
    y: int
    x: int
    stride: int
    sram: int
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)  # y_pad_0, y_pad_1, x_pad_0, x_pad_1

    @property
    def sram_elems(self) -> int:
        y0, y1, x0, x1 = self.pads
        return (y0 + self.y + y1) * (x0 + self.x + x1)


@dataclass(frozen=True)
class Kernel:
    """A micro-op kernel with its two hardware loops (factors: dst, src, wgt for outer and inner)."""

    uops: tuple[tuple[int, int, int], ...]
    iter_out: int
    iter_in: int
    dst: tuple[int, int]
    src: tuple[int, int]
    wgt: tuple[int, int] = (0, 0)

    @property
    def executions(self) -> int:
        return self.iter_out * self.iter_in * len(self.uops)

    def src_as_dst(self) -> Kernel:
        """The same kernel with every src index equal to its dst index (micro-ops and loop factors)."""
        if self.src == self.dst and all(u[1] == u[0] for u in self.uops):
            return self
        return Kernel(tuple((u[0], u[0], u[2]) for u in self.uops), self.iter_out, self.iter_in, self.dst, self.dst,
                      self.wgt)

    def indices(self, which: int) -> tuple[int, int]:
        """Lowest and highest index of field ``which`` (0 dst, 1 src, 2 wgt) over all executions."""
        factors = (self.dst, self.src, self.wgt)[which]
        uops = self.uops
        if len(uops) == 1:
            lo = hi = uops[0][which]
        else:
            values = [u[which] for u in uops]
            lo, hi = min(values), max(values)
        return lo, hi + (self.iter_out - 1) * factors[0] + (self.iter_in - 1) * factors[1]


@dataclass(frozen=True)
class Load:
    """A DMA from a tensor in DRAM into a buffer."""

    buffer: str  # INP, WGT or ACC
    tensor: str
    dma: Dma


@dataclass(frozen=True)
class Store:
    """A DMA from the accumulator to a tensor in DRAM (low 8 bits kept)."""

    tensor: str
    dma: Dma


@dataclass(frozen=True)
class Gemm:
    """A GEMM instruction (or an accumulator reset)."""

    kernel: Kernel
    reset: bool = False


@dataclass(frozen=True)
class Alu:
    """An ALU instruction, with an immediate or a tensor operand."""

    kernel: Kernel
    op: str  # min, max, add, shr, mul
    imm: int | None = None  # None: tensor operand (src indexes the accumulator)

    def __post_init__(self) -> None:
        if self.imm is not None:  # the 2021 Chisel design reads an immediate's operand at src: keep src == dst
            object.__setattr__(self, "kernel", self.kernel.src_as_dst())


Step = Load | Store | Gemm | Alu


@dataclass
class Group:
    """Steps of one tile or phase, with a title for the assembly comment."""

    title: str
    span: SourceSpan | None
    steps: list[Step] = field(default_factory=list)


def format_step(step: Step) -> str:
    """One line describing a step (for ``vtacc --emit schedule``)."""
    if isinstance(step, Load):
        d = step.dma
        pads = f" pad={list(d.pads)}" if any(d.pads) else ""
        return f"load {step.buffer}[{d.sram}..{d.sram + d.sram_elems - 1}] <- {step.tensor}@{d.dram_elem} " \
               f"{d.y}x{d.x} stride {d.stride}{pads}"
    if isinstance(step, Store):
        d = step.dma
        return f"store acc[{d.sram}..{d.sram + d.y * d.x - 1}] -> {step.tensor}@{d.dram_elem} {d.y}x{d.x} " \
               f"stride {d.stride}"
    k = step.kernel
    lo, hi = k.indices(0)
    what = "gemm reset" if isinstance(step, Gemm) and step.reset else (
        "gemm" if isinstance(step, Gemm) else f"alu {step.op}" + (f" imm {step.imm}" if step.imm is not None else ""))
    return f"{what} acc[{lo}..{hi}] {len(k.uops)} uops x {k.iter_out}x{k.iter_in} = {k.executions} executions"


def format_groups(groups: list[Group]) -> str:
    """The whole tiled schedule as text."""
    lines = []
    for g in groups:
        where = f"  # {g.span.file}:{g.span.line}" if g.span else ""
        lines.append(f"{g.title}{where}")
        lines += [f"    {format_step(s)}" for s in g.steps]
    return "\n".join(lines) + "\n"

"""How fast a whole program could run on its design: the work its arithmetic needs, against the bus.

Each result (operator) needs, on the compute stage, in the profile's cycles:

- GEMM: its multiply-accumulates as the model states them (logical shapes: no
  channel padding, no repeated work), BATCH x BLOCK_IN x BLOCK_OUT of them an
  execution (``gemm.per_execution`` cycles);
- identity moves: every int8 element that must reach the accumulator (a
  pooling's input, an int8 operand of an epilogue) passes through the GEMM
  core once, BATCH x BLOCK_OUT of them an execution (portable code has no
  8-bit accumulator loads);
- resets: every accumulator row a GEMM fills is zeroed once (a product's
  rows, before a max pooling folded into it; the rows a pooling's int8
  input is moved into), at ``gemm.reset_per_execution``;
- ALU: a pooling's window takes K*K - 1 tensor operations per output row;
  any other result's epilogue, the operations the program runs for it (the
  expression's own work: a shift, a bias, a clip; a max pooling folded into
  a convolution, its folds as run);

and on the bus, its compulsory bytes (every input, weight and bias byte read
once, every output byte written once; roofline.py). The compute stage runs
the results one after another, so the network's compute need is their sum;
reads and writes have channels of their own, so its memory need is the larger
of the two sums over the bus. The network's bound is the larger need, and the
fraction reached is that bound over the cycles the program takes; a result
loses what its cycles exceed its own larger need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vtacc.compiler import Compiled
from vtacc.frontend import checked as ck
from vtacc.schedule.layouts import ACT
from vtacc.schedule.operators import GemmProducer, PoolProducer

from .roofline import roofline_points


@dataclass
class Need:
    """One result's needed work (module docstring) and the cycles it took."""

    name: str
    label: str
    macs: int
    gemm: float  # executions of the arithmetic, identity moves apart
    identity: float
    resets: float
    alu_cycles: float
    compute: float  # cycles
    reads: float  # compulsory bytes (reads counted slower where the weight bank is)
    writes: int
    memory: float  # cycles
    cycles: int  # what the result took in the program

    @property
    def bound(self) -> float:
        return max(self.compute, self.memory)

    @property
    def loss(self) -> float:
        return max(0.0, self.cycles - self.bound)


@dataclass
class NetworkBound:
    """A program's needs, result by result, and the cycles it takes."""

    needs: list[Need]
    compute: float
    memory: float
    cycles: int

    @property
    def bound(self) -> float:
        return max(self.compute, self.memory)

    @property
    def fraction(self) -> float:
        return self.bound / self.cycles if self.cycles else 0.0


def _elements(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _macs(p: GemmProducer) -> int:
    """The multiply-accumulates the model states (logical shapes)."""
    node = p.conv_node
    if isinstance(node, ck.Conv2d):
        _, icg, kh, kw = node.w.shape
        return _elements(node.shape) * icg * kh * kw
    if isinstance(node, ck.MatMul):
        return _elements(node.shape) * node.w.shape[1]
    return _elements(node.x.shape)  # global_avg_pool's window sum: each element once


def network_bound(compiled: Compiled) -> NetworkBound:
    """Every result's needs and the program's (module docstring)."""
    cfg, profile = compiled.cfg, compiled.profile
    points = {p.name: p for p in roofline_points(compiled)}
    per_exec = cfg.batch * cfg.block_in * cfg.block_out
    lanes = cfg.batch * cfg.block_out
    needs = []
    for planned in compiled.planned:
        op = planned.op
        point = points.get(op.out.name)
        if point is None:
            continue
        out_rows = _elements(op.out.logical) / lanes
        identity = sum(_elements(t.logical) for t in op.operands.values() if t.kind == ACT) / lanes
        macs, gemm, resets = 0, 0.0, 0.0
        alu_cycles = point.alu_cycles
        p = op.producer
        if isinstance(p, GemmProducer):
            macs = _macs(p)
            gemm, resets = macs / per_exec, _elements(p.conv_node.shape) / lanes  # the product's accumulators
        elif isinstance(p, PoolProducer):
            if p.x.kind == ACT:  # the int8 input moved into a zeroed accumulator region
                identity += _elements(p.node.x.shape) / lanes
                resets = _elements(p.node.x.shape) / lanes
            alu_cycles = (p.size * p.size - 1) * out_rows * profile.alu_tensor_per_execution
        compute = ((gemm + identity) * profile.gemm_per_execution + resets * profile.gemm_reset_per_execution
                   + alu_cycles)
        needs.append(Need(op.out.name, point.label, macs, gemm, identity, resets, alu_cycles, compute,
                          point.bus_read_bytes, point.write_bytes, point.memory_bound, point.cycles))
    compute = sum(n.compute for n in needs)
    memory = max(sum(n.reads for n in needs), sum(n.writes for n in needs)) / profile.bus_bytes
    return NetworkBound(needs, compute, memory, compiled.timed.report.cycles)


def bound_text(nb: NetworkBound, profile_name: str) -> list[str]:
    """--explain lines: the network's bound and what reaches it, then each result's loss, largest first."""
    def total(field: str) -> float:
        return sum(getattr(n, field) for n in nb.needs)

    lines = [f"  bound ({profile_name}): {nb.bound:,.0f} cycles, {nb.fraction:.1%} reached: compute "
             f"{nb.compute:,.0f} (GEMM {total('gemm'):,.0f} executions for {total('macs'):,.0f} MACs, identity "
             f"moves {total('identity'):,.0f}, resets {total('resets'):,.0f}, ALU {total('alu_cycles'):,.0f} "
             f"cycles), memory {nb.memory:,.0f}"]
    losing = sorted((n for n in nb.needs if n.loss >= 1), key=lambda n: -n.loss)
    if losing:
        lines.append("  lost to the bound: " + ", ".join(f"{n.name} {n.loss:,.0f}" for n in losing[:8])
                     + (f" and {len(losing) - 8} more" if len(losing) > 8 else ""))
    return lines

"""``vtacc --explain``: what the compiler chose and what it costs.

Figures are read off the generated program, not the cost model: instruction
and micro-op counts, the highest SRAM element each buffer uses, and the DRAM
bytes the loads and stores move (counted as the reference profiler counts
them) against the compulsory minimum (every input, weight and output byte
moved once); then the cycles the timing model predicts for the program under
the compiler's profile, and per result its bounds (roofline.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from vtacc.compiler import Compiled, compulsory_bytes
from vtacc.frontend import checked as ck
from vtacc.schedule.operators import GemmProducer, PoolProducer
from vtacc.schedule.scheduler import IDENTITY, NEG_IDENTITY
from vtacc.schedule.steps import WGT
from vtasm import isa
from vtasm.portability import portable_uop_entries

from .bound import bound_text, network_bound
from .roofline import roofline_points, roofline_text


def traffic(compiled: Compiled) -> dict[str, int]:
    """DRAM bytes moved by the program's loads and stores, per memory type (as the profiler counts)."""
    cfg = compiled.cfg
    out: Counter = Counter()
    for insn in compiled.program.instructions:
        if insn.kind not in ("load", "store") or not insn["x_size"]:
            continue
        mtype = insn["memory_type"]
        name = isa.MEM_TYPE_NAMES.get(mtype, str(mtype))
        elem = cfg.acc_elem_bytes if name == "acc8" else isa.elem_bytes(cfg, mtype)
        out[name] += insn["x_size"] * insn["y_size"] * elem
    return dict(out)


def _producer_text(p) -> str:
    if isinstance(p, GemmProducer):
        n, oc, oh, ow = p.out_dims
        _, ic, ih, iw = p.x.dims
        if p.kh == p.kw == 1 and ih == iw == 1:
            if p.w_data is not None:  # global_avg_pool over its pixels (schedule/operators._pixel_sum)
                return f"global_avg_pool as {p.groups} grouped sums of {ic // p.groups} pixel values -> {oc} channels"
            return f"matmul {n} x {ic} by {ic} -> {oc}"
        groups = f", {p.groups} groups" if p.groups > 1 else ""
        if p.w.spread is not None:
            g, width = p.w.spread
            groups = (f", {g} groups of {p.w.logical[1]} channels on block-diagonal weight tiles {width} wide "
                      f"({1 - p.useful_fraction:.1%} of the multiplies wasted on zeros)")
        node = p.conv_node
        pad = p.pad if not isinstance(node, ck.Conv2d) or node.symmetric else list(node.pads)
        text = (f"conv2d {p.kh}x{p.kw} stride {p.stride} pad {pad}{groups}, {ic} -> {oc} channels, "
                f"{ih}x{iw} -> {oh}x{ow}")
        if p.x.patches is not None:  # the source's convolution, read as its windows (schedule/patches.py)
            k, stride, pad = p.x.patches
            c, h, w = p.x.logical[1:]
            text += (f" (the source's {k}x{k} stride {stride} pad {pad} convolution of {c} channels over {h}x{w}, "
                     f"its input read as {k}x{k} patches: {ic} channels)")
        if p.w_data is not None:
            text = f"global_avg_pool as a depthwise {text}"
        if p.pool is not None:
            _, _, ph, pw = p.node.shape
            text += f", then {_window_text(p.node)} in the accumulator (before the epilogue) -> {ph}x{pw}"
        return text
    if isinstance(p, PoolProducer):
        return _window_text(p.node)
    return "element-wise only"


def _window_text(node) -> str:
    """A pooling's window as --explain names it (padding after the last row when it differs from before)."""
    kind = "max pooling" if node.kind == "max" else "sum pooling (avg_pool: sum, then the shift)"
    end = f" pad_end {node.pad_end}" if node.pad_end != node.pad else ""
    return f"{kind} {node.size}x{node.size} stride {node.stride} pad {node.pad}{end}"


def explain(compiled: Compiled) -> str:
    """The --explain report."""
    cfg = compiled.cfg
    prog = compiled.program
    k = compiled.kernel
    lines = [f"kernel {k.name} ({Path(k.span.file).name}:{k.span.line}), configuration {cfg.describe()}"]
    for p in compiled.planned:
        op = p.op
        lines.append(f"  {op.out.name}: {_producer_text(op.producer)}  [{Path(op.span.file).name}:{op.span.line}]")
        lines.append(f"    tiling: {p.tiling.describe(cfg)}")
    used = {"inp": -1, "wgt": -1, "acc": -1, "uop": -1}
    for e in compiled.generated.emitted:
        for buf, _lo, hi in e.access.reads + e.access.writes:
            if buf in used:
                used[buf] = max(used[buf], hi)
    depth = {"inp": cfg.inp_depth, "wgt": cfg.wgt_depth, "acc": cfg.acc_depth,
             "uop": portable_uop_entries(cfg.uop_depth)}  # the micro-op entries every measured design holds
    lines.append("  buffer occupancy (highest element used / depth): " + ", ".join(
        f"{b} {used[b] + 1}/{depth[b]} ({100 * (used[b] + 1) // depth[b]}%)" for b in used))
    stages = Counter(i.stage for i in prog.instructions)
    stats = compiled.generated.stats
    lines.append(f"  instructions: {len(prog.instructions)} (load stage {stages['load']}, compute stage "
                 f"{stages['compute']}, store stage {stages['store']}); micro-ops: {len(prog.uops)} in "
                 f"{stats['kernels']} kernels, {_count(stats['uop_loads'], 'load')}")
    gemm = sum(isa.counted_executions(i) for i in prog.instructions if i.kind == "gemm" and not i["reset"])
    alu = sum(isa.counted_executions(i) for i in prog.instructions if i.kind == "alu")
    moving = _identity_executions(compiled)
    how = f"; {moving:,} of them move int8 data through +-identity weights" if moving else ""
    lines.append(f"  micro-op executions: GEMM {gemm:,} ({gemm * cfg.batch * cfg.block_in * cfg.block_out:,} "
                 f"MACs{how}), ALU {alu:,}")
    moved = traffic(compiled)
    uop_bytes = moved.pop("uop", 0)
    total = sum(moved.values())
    minimum = compulsory_bytes(compiled)
    parts = ", ".join(f"{name} {n:,}" for name, n in sorted(moved.items()))
    lines.append(f"  DRAM bytes moved: {total:,} ({parts}), plus {uop_bytes:,} bytes of micro-ops")
    lines.append(f"  compulsory minimum: {minimum:,} (every input, weight and output byte once); "
                 f"ratio {total / minimum:.2f}x")
    report = compiled.timed.report
    lines.append(f"  predicted ({report.profile}, memory latency {compiled.profile.latency}): "
                 f"{report.cycles:,} cycles = {report.seconds * 1e6:,.2f} us at {report.clock_mhz:g} MHz; "
                 f"GEMM {report.gemm_utilisation:.1%} of peak, {report.gops:.2f} GOPS of {report.peak_gops:.1f}")
    lines += bound_text(network_bound(compiled), report.profile)
    lines += roofline_text(roofline_points(compiled))
    return "\n".join(lines) + "\n"


IDENTITY_TENSORS = {f"dram:{IDENTITY}", f"dram:{NEG_IDENTITY}"}


def _identity_executions(compiled: Compiled) -> int:
    """GEMM executions whose weights are the +-identity tiles vtacc loads to move int8 data into the accumulator
    (they count as MACs for the GEMM core, but compute nothing)."""
    identity = np.zeros(compiled.cfg.wgt_depth, dtype=bool)  # weight elements that hold an identity tile now
    count = 0
    for e in compiled.generated.emitted:
        insn = e.insn
        if insn.kind == "load":
            moved = any(buf in IDENTITY_TENSORS for buf, _, _ in e.access.reads)
            for buf, lo, hi in e.access.writes:
                if buf == WGT:
                    identity[lo : hi + 1] = moved
        elif insn.kind == "gemm" and not insn["reset"]:
            weights = [(lo, hi) for buf, lo, hi in e.access.reads if buf == WGT]
            if weights and all(identity[lo : hi + 1].all() for lo, hi in weights):
                count += isa.counted_executions(insn)
    return count


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"

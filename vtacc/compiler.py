"""The compiler pipeline: checked kernel -> operators -> tiled schedule -> program.

Each pass lives in its own module and can be run alone; this one strings them
together and keeps what ``--emit`` and ``--explain`` show.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import astuple, dataclass, field
from pathlib import Path

import numpy as np

from vtacc.backend.codegen import Generated, generate, identity_bytes
from vtacc.forked import forked_map
from vtacc.frontend import checked as ck
from vtacc.schedule.cost import CostModel
from vtacc.schedule.dma import zero_rows
from vtacc.schedule.epilogue import Needs, analyse, constant_name
from vtacc.schedule.layouts import ACT, BIAS, WGT, DramTensor, dram_tensor
from vtacc.schedule.operators import GemmProducer, Operator, PoolProducer, TensorTable, build_operator
from vtacc.schedule.patches import lay_out_patches
from vtacc.schedule.problem import problem_of
from vtacc.schedule.scheduler import (
    IDENTITY,
    NEG_IDENTITY,
    schedule_operator,
    tile_count,
    weight_slot_elems,
    weight_slots,
)
from vtacc.schedule.steps import WGT as WGT_BUFFER
from vtacc.schedule.steps import Gemm, Group, Load, Store
from vtacc.schedule.tiling import Tiling, choose_tiling
from vtasim.timing.profile import Profile, load_profile
from vtasim.timing.run import TimingResult, time_program
from vtasm import isa
from vtasm.collector import fewer_collections
from vtasm.config import VTAConfig
from vtasm.errors import CompileError, FormatError

_TILE_KEYS = {"n": "n", "oc": "c", "o": "c", "h": "h", "w": "w", "ic": "ic", "k": "ic"}


@dataclass
class Planned:
    """One operator with its needs and chosen tiling."""

    op: Operator
    needs: Needs
    tiling: Tiling
    groups: range = range(0)  # its step groups (Emitted.group values of its instructions)


@dataclass
class _Search:
    """One operator, built, and what its tiling search reads (operators with the same key share a tiling)."""

    op: Operator
    needs: Needs
    key: tuple
    fixed: dict
    threads: int | None
    order: str | None
    extra: int
    span: object


@dataclass(frozen=True)
class Unit:
    """One output assignment to compile, with the kernel and schedule it comes from."""

    kernel: ck.Kernel
    assign: ck.Assign


@dataclass
class Compiled:
    """Everything a compilation produced: the program and the choices behind it (for --explain, --emit)."""

    kernel: ck.Kernel
    cfg: VTAConfig
    planned: list[Planned]
    tensors: list[DramTensor]
    generated: Generated
    extras: dict = field(default_factory=dict)
    profile: Profile = field(default_factory=load_profile)  # the hardware profile the tiles were chosen for
    _timed: TimingResult | None = field(default=None, repr=False)

    @property
    def program(self):
        return self.generated.program

    @property
    def groups(self) -> list[Group]:
        return self.generated.groups

    @property
    def timed(self) -> TimingResult:
        """The program timed by the full timing model under the compiler's profile (computed once, on demand)."""
        if self._timed is None:
            self._timed = time_program(self.program, self.profile)
        return self._timed


def _fixed_tiles(schedule: ck.Schedule, cfg: VTAConfig, op) -> dict[str, int]:
    """The schedule's tile sizes for one operator, in tile units (channel blocks, batch tiles, pixels)."""
    fixed: dict[str, int] = {}
    written: dict[str, str] = {}
    gemm = isinstance(op.producer, GemmProducer)
    spatial = len(op.out.logical) == 4
    for key, value in schedule.tiles.items():
        name = f"tile_{key.removeprefix('tile_')}"
        span = schedule.spans.get(name, schedule.span)
        axis = _TILE_KEYS.get(key.removeprefix("tile_"))
        if axis is None:
            raise CompileError(f"unknown schedule key {name}", span)
        if axis in written:
            raise CompileError(f"{name} and {written[axis]} both set the same tile", span)
        written[axis] = name
        if axis in ("h", "w") and not spatial:
            raise CompileError(f"{name} does not apply: result {op.out.name} has no rows and columns", span)
        if axis == "ic" and not gemm:
            raise CompileError(f"{name} does not apply: {op.out.name} has no matmul or conv2d to split", span)
        unit = {"n": cfg.batch, "c": cfg.block_out, "ic": cfg.block_in}.get(axis, 1)
        if value % unit:
            raise CompileError(f"{name} = {value} is not a multiple of {unit} "
                               f"({'BATCH' if axis == 'n' else 'BLOCK'} of configuration {cfg.describe()})", span)
        fixed[axis] = value // unit
    return fixed


def _order(schedule: ck.Schedule) -> str | None:
    """'weights' (channel groups outermost) or 'inputs' (spatial tiles outermost), as the schedule says.

    The tiler nests the input-channel (reduction) loop innermost, so an order
    only decides whether output channels come before or after rows, columns
    and batch.
    """
    if not schedule.order:
        return None
    names = list(schedule.order)
    span = schedule.spans.get("order", schedule.span)
    channel = next((i for i, n in enumerate(names) if n in ("oc", "o")), None)
    spatial = [i for i, n in enumerate(names) if n in ("h", "w", "n")]
    reduction = [i for i, n in enumerate(names) if n in ("ic", "k")]
    if channel is None:
        raise CompileError("order must place the output-channel axis (oc or o) among the others, e.g. "
                           "order = (oc, h)", span)
    if any(r < channel for r in reduction) or any(r < s for r in reduction for s in spatial):
        raise CompileError("the input-channel (reduction) axis is always the innermost loop; put ic / k last",
                           span)
    return "inputs" if spatial and spatial[0] < channel else "weights"


# about what a sampled confirmation times (sampled_cycles) per run: instructions, and DRAM bytes (the timing
# model's work grows with the bursts)
SAMPLE_INSTRUCTIONS = 300
SAMPLE_BYTES = 1 << 22


def compile_units(entry: ck.Kernel, units: list[Unit], cfg: VTAConfig, source_name: str,
                  profile: Profile | None = None, threads: int | None = None,
                  params: dict[str, np.ndarray] | None = None, jobs: int | None = None) -> Compiled:
    """Compile output assignments (in order) into one program whose inputs and outputs are ``entry``'s.

    Tiles are chosen by the cycles predicted under ``profile`` (default: the
    timing model's default profile). ``threads`` sets the virtual threads of
    every operator whose schedule does not (to compare latency hiding).
    Distinct operators' searches run side by side on up to ``jobs`` processes
    (vtacc.forked: None, the cores), the program the same either way.
    """
    with fewer_collections():
        return _compile_units(entry, units, cfg, source_name, profile, threads, params, jobs)


def _compile_units(entry: ck.Kernel, units: list[Unit], cfg: VTAConfig, source_name: str,
                   profile: Profile | None, threads: int | None, params: dict[str, np.ndarray] | None,
                   jobs: int | None) -> Compiled:
    """The phases: check, build each operator and its tiling search, search, schedule, lay out the tensors,
    generate."""
    profile = profile or load_profile()
    _check_program(entry, units, cfg)
    table = TensorTable(cfg)
    for decl in entry.inputs:
        table.tensors.setdefault(decl.name, None)  # keep parameter order; kinds come from use
    constant_tensors: dict[str, DramTensor] = {}
    constant_data: dict[str, bytes] = {}
    searches = _searches(entry, units, table, cfg, threads, constant_tensors, constant_data)
    # the confirmations time an operator alone, with only the tensors it moves (sampled_cycles): every
    # operator's search can run once all are built
    all_tensors = _program_tensors(entry, table, cfg, constant_tensors, constant_data, True, True)[0]
    model = CostModel(cfg, profile)

    def choose(search: _Search) -> Tiling:
        def confirm(candidate: Tiling) -> int:
            """The candidate's operator alone, timed by the full timing model (a sample of its tiles)."""
            return sampled_cycles(search.op, candidate, search.needs, cfg, all_tensors, profile, source_name)

        return choose_tiling(search.op, search.needs, cfg, search.fixed, search.threads, search.order,
                             search.extra, search.span, model, confirm)

    distinct: dict[tuple, _Search] = {}
    for search in searches:
        distinct.setdefault(search.key, search)
    started = time.perf_counter()
    chosen = dict(zip(distinct, forked_map(choose, list(distinct.values()), jobs), strict=True))
    searched = time.perf_counter()
    groups, planned = _plan(searches, chosen, cfg)
    tensors, constants = _program_tensors(entry, table, cfg, constant_tensors, constant_data,
                                          any(p.needs.identity for p in planned),
                                          any(p.needs.neg_identity for p in planned))
    if params:
        tensors = [_embed(t, params[t.name], constants) if t.name in params else t for t in tensors]
    zeros, zero_data = zero_rows(_loads(groups), cfg)
    tensors += zeros
    constants.update(zero_data)
    outputs = [o.name for o in entry.outputs]
    scheduled = time.perf_counter()
    generated = generate(groups, tensors, constants, outputs, cfg, Path(source_name).name)
    seconds = {"search": searched - started, "schedule": scheduled - searched,
               "generate": time.perf_counter() - scheduled}  # wall time of each phase (benchmarks read it)
    return Compiled(entry, cfg, planned, tensors, generated, extras={"seconds": seconds}, profile=profile)


def _check_program(entry: ck.Kernel, units: list[Unit], cfg: VTAConfig) -> None:
    """CompileError for what vtacc does not compile: other element widths, names it reserves, tensors
    beyond the DRAM a program addresses."""
    if cfg.inp_width != 8 or cfg.wgt_width != 8 or cfg.acc_width != 32:
        raise CompileError(f"vtacc compiles for 8-bit inputs and weights and 32-bit accumulators; configuration "
                           f"{cfg.describe()} has {cfg.inp_width}/{cfg.wgt_width}/{cfg.acc_width}", entry.span)
    for decl in entry.inputs + entry.outputs + tuple(u.assign.target for u in units):
        if decl.name.startswith("__"):
            raise CompileError(f"names beginning with '__' are reserved for the compiler's constants; rename "
                               f"{decl.name}", decl.span)
    _check_dram_need(entry.inputs + entry.outputs + tuple(u.assign.target for u in units))


def _searches(entry: ck.Kernel, units: list[Unit], table: TensorTable, cfg: VTAConfig, threads: int | None,
              constant_tensors: dict[str, DramTensor], constant_data: dict[str, bytes]) -> list[_Search]:
    """Each unit's operator and what its tiling search reads; the weights and the wide constants it uses
    join ``constant_tensors`` and ``constant_data``."""
    searches: list[_Search] = []
    operators = [build_operator(unit.kernel, unit.assign, table) for unit in units]
    # a first layer over the program's own input of few channels reads it as patches (schedule/patches.py)
    lay_out_patches(operators, {d.name for d in entry.inputs}, table.tensors, cfg)
    for unit, op in zip(units, operators, strict=True):
        if isinstance(op.producer, GemmProducer) and op.producer.w_data is not None:
            constant_tensors.setdefault(op.producer.w.name, op.producer.w)
            constant_data.setdefault(op.producer.w.name, op.producer.w_data)
        schedule = unit.kernel.schedule
        needs = analyse(op.expr, op.producer.node if op.producer else None, op.operands)
        channels = op.out.dims[1]
        for value in needs.constants:  # constants too wide for an immediate: int32 vectors in DRAM
            name = f"{constant_name(value)}_{channels}"
            if name not in constant_tensors:
                constant_tensors[name] = dram_tensor(name, "int32", (channels,), BIAS, cfg, constant=True)
                constant_data[name] = constant_tensors[name].tensor_info().pack(
                    np.full(channels, value, dtype=np.int32))
            op.constants[value] = constant_tensors[name]
        if isinstance(op.producer, PoolProducer) and op.producer.x.kind == ACT:
            needs.identity = True  # int8 windows reach the accumulator through the GEMM core
        extra = sum(t.nbytes for t in {id(t): t for t in op.operands.values()}.values())
        fixed, order = _fixed_tiles(schedule, cfg, op), _order(schedule)
        # operators alike in every figure the search reads get the same tiling (a network repeats its blocks)
        key = (problem_of(op, cfg), type(op.producer).__name__, astuple(dataclasses.replace(needs, biases=(
            len(needs.biases),))), tuple(sorted(fixed.items())), schedule.threads or threads, order, extra,
            _operand_kinds(op))
        searches.append(_Search(op, needs, key, fixed, schedule.threads or threads, order, extra,
                                schedule.span or op.span))
    return searches


def _plan(searches: list[_Search], chosen: dict[tuple, Tiling], cfg: VTAConfig) -> tuple[list[Group], list[Planned]]:
    """The operators scheduled in order with their tilings, an operator after one without weights loading
    its first tiles' weights ahead where the buffer has room."""
    groups: list[Group] = []
    planned: list[Planned] = []
    preloads: dict[int, int] = {}  # operator -> how many of its first tiles load their weights ahead
    top = 0  # the weight buffer's highest element in use since the last operator with weights of its own
    for k, search in enumerate(searches):
        tiling = chosen[search.key]
        first = len(groups)
        slot = weight_slot_elems(search.op, tiling, cfg)
        preload = (0, 0)
        if k and slot and planned[-1].op.producer is not None and not _has_weights(planned[-1]):
            # above what the operator before the pooling and this one's own rotating slots take
            floor = max(top, weight_slots(search.op, tiling, search.needs, cfg))
            count = min((cfg.wgt_depth - floor) // slot, tile_count(search.op, tiling, cfg)[0])
            if count > 0:
                preload = (cfg.wgt_depth - count * slot, count)
                preloads[k] = count
        groups += schedule_operator(search.op, tiling, search.needs, cfg, preload=preload)
        planned.append(Planned(search.op, search.needs, tiling, range(first, len(groups))))
        used = max((hi + 1 for _, hi in _weight_ranges(groups[g] for g in planned[-1].groups)), default=0)
        top = used if _has_weights(planned[-1]) else max(top, used)
    return _preload_weights(groups, planned, preloads), planned


def _has_weights(p: Planned) -> bool:
    """Whether an operator loads weights of its own: not a pooling, nor a global average pool's multiplier
    tiles (the compiler's, a few elements), nor identity tiles."""
    return isinstance(p.op.producer, GemmProducer) and p.op.producer.w_data is None


def _preload_weights(groups: list[Group], planned: list[Planned], preloads: dict[int, int]) -> list[Group]:
    """The program's groups with the preloaded weight tiles of each operator in ``preloads`` (its operator
    number -> how many of its first tiles have slots of their own at the top of the buffer) moved before
    the last tiles of the nearest operator with weights of its own ahead of it (a pooling, with none,
    and any element-wise operator lie between); ``planned``'s ranges renumbered.

    The load stage issues in program order, and a pooling's loads all wait
    for the stores of the operator before it (its input goes through DRAM),
    with the weight buffer idle. The weights of the operator after the pooling,
    read-only, load instead into the free top of the buffer while the
    operator before the pooling computes its last tiles (after its last loads,
    so neither its tiles nor the pooling's input wait for them). ResNet-18's
    classifier, bound by its 512 KB of weights, so streams 43 % of them early.
    """
    places: dict[int, tuple[int, list]] = {}  # group index -> (operator, moved loads) to put before it
    for k, count in preloads.items():
        moved = [st for g in planned[k].groups for st in groups[g].steps  # its first ``count`` tiles' weights
                 if isinstance(st, Load) and st.buffer == WGT_BUFFER and st.tensor not in (IDENTITY, NEG_IDENTITY)]
        moved = moved[:count]
        ahead = next((planned[j] for j in range(k - 2, -1, -1) if _has_weights(planned[j])), None)
        if not moved or ahead is None:
            continue
        base = min(st.dma.sram for st in moved)
        at = max(ahead.groups.start, ahead.groups.stop - ahead.tiling.threads)  # its last tiles' groups
        between = _weight_ranges(groups[g] for g in range(at, planned[k].groups.start))
        if all(hi < base for _, hi in between):
            places[at] = (k, moved)
    if not places:
        return groups
    moving = {id(st) for _, moved in places.values() for st in moved}
    out: list[Group] = []
    renumber: dict[int, int] = {}
    for g, group in enumerate(groups):
        if g in places:
            k, moved = places[g]
            out.append(Group(f"{planned[k].op.out.name}: its first weight tiles, loaded ahead", planned[k].op.span,
                             moved))
        renumber[g] = len(out)
        out.append(Group(group.title, group.span, [st for st in group.steps if id(st) not in moving]))
    for p in planned:  # an inserted group belongs to the operator whose groups it sits among
        p.groups = range(renumber[p.groups.start] if p.groups.start not in places else
                         renumber[p.groups.start] - 1, renumber[p.groups.stop - 1] + 1)
    return out


def _weight_ranges(groups) -> list[tuple[int, int]]:
    """The weight buffer ranges the groups' steps load or read."""
    found = []
    for group in groups:
        for st in group.steps:
            if isinstance(st, Load) and st.buffer == WGT_BUFFER:
                found.append((st.dma.sram, st.dma.sram + st.dma.sram_elems - 1))
            elif isinstance(st, Gemm) and not st.reset:
                found.append(st.kernel.indices(2))
    return found


def sampled_cycles(op: Operator, t: Tiling, needs: Needs, cfg: VTAConfig, tensors: list[DramTensor],
                   profile: Profile, source_name: str = "") -> int:
    """An operator's cycles under a tiling by the full timing model, without generating it whole.

    A small operator is generated and timed whole. A larger one is timed on
    its first 2k tiles (k whole periods of its schedule, about
    SAMPLE_INSTRUCTIONS instructions or SAMPLE_BYTES bytes of DRAM traffic,
    whichever is fewer): what the second k tiles took, from the cycle the
    first k were done to the cycle all 2k were, is their cost once the
    pipeline is full, and the rest of the tiles are counted at that rate.
    """
    tiles, period = tile_count(op, t, cfg)
    per_tile = min(tiles * SAMPLE_INSTRUCTIONS // max(t.instructions, 1), tiles * SAMPLE_BYTES // max(t.dram_bytes, 1))
    k = max(1, per_tile // period) * period  # whole periods
    limit = None if 3 * k >= tiles else 2 * k
    groups = schedule_operator(op, t, needs, cfg, limit)
    # the tensors it moves (the program's others would only be zeroed DRAM: every segment starts on a page, so
    # leaving them out moves no transfer across a burst boundary)
    used = {step.tensor for group in groups for step in group.steps if isinstance(step, (Load, Store))}
    zeros = zero_rows(_loads(groups), cfg)[0]
    generated = generate(groups, [x for x in tensors if x.name in used] + zeros, {}, [], cfg, source_name)
    timing = time_program(generated.program, profile, record=False)
    if limit is None:
        return timing.report.cycles
    setup = len(groups) - limit  # the constants' group, if any, comes first
    halfway = setup + k  # the first group of the second k tiles
    done_k = max(x.end for x, e in zip(timing.timeline.insns, generated.emitted, strict=False)
                 if e.group is not None and e.group < halfway)
    done = timing.report.cycles
    return done + round((tiles - 2 * k) * (done - done_k) / k)


def _loads(groups: list[Group]):
    """Every load step of the groups, in order."""
    return (st for group in groups for st in group.steps if isinstance(st, Load))


def _operand_kinds(op) -> tuple:
    """The shapes, types and kinds of an operator's operands, in order (part of its tiling's key)."""
    return tuple((t.kind, t.dtype, t.dims, t.view, t.spread, t.slice_of is not None) for t in op.operands.values())


def _check_dram_need(decls: tuple[ck.TensorDecl, ...]) -> None:
    """Refuse tensors that together need more DRAM than a VTA program addresses, before any tiling work."""
    sizes = {d.name: (d, int(np.prod(d.shape, dtype=object)) * np.dtype(d.dtype).itemsize) for d in decls}
    total = sum(n for _, n in sizes.values())
    if total > isa.MAX_DRAM_BYTES:
        decl, n = max(sizes.values(), key=lambda dn: dn[1])
        raise CompileError(f"the tensors need {total:,} bytes of DRAM, more than the {isa.MAX_DRAM_BYTES:,} (4 GiB) a "
                           f"VTA program addresses; the largest is {decl.name} {decl.dtype}{list(decl.shape)} "
                           f"({n:,} bytes)", decl.span)


def _program_tensors(entry: ck.Kernel, table: TensorTable, cfg: VTAConfig, constant_tensors: dict[str, DramTensor],
                     constant_data: dict[str, bytes], identity: bool, neg_identity: bool
                     ) -> tuple[list[DramTensor], dict[str, bytes]]:
    """Every DRAM tensor of the program so far (parameters, results, constants) and the constants' bytes."""
    decls = {d.name: d for d in entry.inputs + entry.outputs}
    tensors = [t if t is not None else dram_tensor(n, decls[n].dtype, decls[n].shape, ACT, cfg)
               for n, t in table.tensors.items()]
    constants: dict[str, bytes] = dict(constant_data)
    tensors += constant_tensors.values()
    if identity:
        tensors.append(dram_tensor(IDENTITY, "int8", (cfg.block_out, cfg.block_in), WGT, cfg, constant=True))
        constants[IDENTITY] = identity_bytes(cfg)
    if neg_identity:
        tensors.append(dram_tensor(NEG_IDENTITY, "int8", (cfg.block_out, cfg.block_in), WGT, cfg, constant=True))
        constants[NEG_IDENTITY] = identity_bytes(cfg, negate=True)
    return tensors, constants


def _embed(tensor: DramTensor, value: np.ndarray, constants: dict[str, bytes]) -> DramTensor:
    """An input given its value at compile time: its packed bytes become program data."""
    info = tensor.tensor_info()
    try:
        constants[tensor.name] = info.pack(info.conform(np.asarray(value), f"value of {tensor.name}"))
    except FormatError as exc:
        raise CompileError(exc.message) from None
    return dataclasses.replace(tensor, constant=True)


def compulsory_bytes(compiled: Compiled) -> int:
    """Every input, weight and output byte moved once (constants excluded)."""
    return sum(t.nbytes for t in compiled.tensors if not t.constant)

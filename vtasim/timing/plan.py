"""What each instruction asks of the hardware, independent of the data.

An instruction becomes a :class:`Work` item: the module that runs it, the
token queues it pops and pushes, and either a fixed number of cycles (GEMM,
ALU, NOPs, FINISH) or a list of DMA bursts with the idle cycles (padding)
before each and after the last. Everything is derived from the instruction
fields, the configuration's element sizes and the hardware profile.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtasm import budget, isa
from vtasm.config import VTAConfig
from vtasm.encoding import Instruction

from .names import CLIENTS
from .profile import Profile

LOAD, COMPUTE, STORE = 0, 1, 2
MODULES = isa.STAGES  # in this order: LOAD, COMPUTE, STORE index it

# Token queues, named by direction: producer to consumer (vtasm's table); a Work names them by index.
QUEUES = isa.QUEUES
_QUEUE_INDEX = {q: i for i, q in enumerate(QUEUES)}

# Read clients of the memory engine (names.CLIENTS, whose order these indices follow).
FETCH, UOP, INP, WGT, ACC = range(len(CLIENTS))

_MEM_CLIENT = {isa.MEM_TYPES["uop"]: UOP, isa.MEM_TYPES["inp"]: INP, isa.MEM_TYPES["wgt"]: WGT,
               isa.MEM_TYPES["acc"]: ACC, isa.MEM_TYPES["acc8"]: ACC}

EXEC, READ, WRITE, SYNC, FINISH = "exec", "read", "write", "sync", "finish"


@dataclass
class Work:
    """One instruction as the timing model sees it."""

    index: int
    module: int
    kind: str  # EXEC, READ, WRITE, SYNC or FINISH
    pops: tuple[int, ...]
    pushes: tuple[int, ...]
    cycles: int = 0  # EXEC, SYNC, FINISH: cycles from start to done
    client: int = -1  # READ: the memory engine client
    bursts: tuple[int, ...] = ()  # READ/WRITE: beats of each burst, in order
    gaps: tuple[int, ...] = ()  # idle cycles before each burst (padding written without DRAM traffic)
    tail: int = 0  # idle cycles after the last burst
    setup: int = 0  # READ/WRITE: cycles from the start to the first request (the profile's dma.*_fixed)
    row_starts: frozenset[int] = frozenset()  # READ: the bursts that begin a row past the first; WRITE: that
    # begin a command past the first (it waits for the answers of the ones before)
    rows: frozenset[int] = frozenset()  # WRITE: the bursts that begin a row past the first, when every row is a
    # transfer of its own (memory.row_setup)
    busy: tuple[int, ...] = ()  # WRITE: cycles each burst keeps the data channel busy
    bytes: int = 0  # DRAM bytes moved
    executions: int = 0  # GEMM/ALU micro-op executions
    macs: int = 0  # GEMM multiply-accumulates
    unit: str = ""  # EXEC: "gemm" or "alu"
    variant: bool = False  # EXEC: a GEMM reset, or an ALU operation with an immediate
    lead: int = 0  # EXEC: cycles before its end that it pushes its tokens (alu.token_lead)


# Per module: the (flag, queue index) pairs it may pop and push, the previous stage's side first.
_SIDES = [tuple(tuple((k, _QUEUE_INDEX[table[k]]) for k in flags if table[k])
                for flags in (("pop_prev", "pop_next"), ("push_prev", "push_next")))
          for table in (isa.STAGE_QUEUES[m] for m in MODULES)]


def _tokens(insn: Instruction, module: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The queues (indices into QUEUES) an instruction pops and pushes, the previous stage's side first."""
    f = insn.fields
    pops, pushes = _SIDES[module]
    return tuple([q for k, q in pops if f.get(k)]), tuple([q for k, q in pushes if f.get(k)])


def _split(beats: int, profile: Profile, addr: int) -> list[int]:
    """A row of ``beats`` beats at byte address ``addr`` cut into bursts."""
    out = []
    limit = profile.burst_beats
    boundary = profile.burst_boundary_bytes // profile.bus_bytes if profile.burst_boundary_bytes else 0
    beat = addr // profile.bus_bytes
    while beats > 0:
        n = min(beats, limit)
        if boundary:
            n = min(n, boundary - beat % boundary)
        out.append(n)
        beats -= n
        beat += n
    return out


def _read_work(w: Work, insn: Instruction, cfg: VTAConfig, profile: Profile, before: int = 0) -> None:
    f = insn.fields
    mem = f["memory_type"]
    bus = profile.bus_bytes
    if mem == isa.MEM_TYPES["uop"]:
        n = f["x_size"]
        w.setup = profile.dma_uop_fixed
        beats = -(-n * cfg.uop_elem_bytes // profile.dma_uop_beat_bytes)
        _room(w.index, before, 1, beats, profile)
        w.bursts = tuple(_split(beats, profile, f["dram_base"] * cfg.uop_elem_bytes))
        w.gaps = (0,) * len(w.bursts)
        w.bytes = n * cfg.uop_elem_bytes
        return
    w.setup = {isa.MEM_TYPES["inp"]: profile.dma_inp_fixed, isa.MEM_TYPES["wgt"]: profile.dma_wgt_fixed}.get(
        mem, profile.dma_acc_fixed)
    elem = isa.elem_bytes(cfg, mem) or cfg.acc_elem_bytes  # an ACC_8BIT element is BATCH x BLOCK_OUT bytes
    per = -(-elem // bus)  # beats per element
    x, y, stride = f["x_size"], f["y_size"], f["x_stride"]
    _room(w.index, before, y, x * per, profile)
    top, left, right, bottom = _padding(f, per, profile)
    if profile.burst_boundary_bytes:  # bursts depend on each row's address
        bursts, gaps, starts = [], [], set()
        pending = top
        for row in range(y):
            pending += left
            if row:
                starts.add(len(bursts))
            for i, n in enumerate(_split(x * per, profile, (f["dram_base"] + row * stride) * elem)):
                bursts.append(n)
                gaps.append(pending if i == 0 else 0)
                pending = 0
            pending += right
        tail = pending
    else:  # every row is cut the same way: build the lists by repetition
        row = _split(x * per, profile, 0)
        bursts = row * y
        starts = {k * len(row) for k in range(1, y)}
        between = [right + left] + [0] * (len(row) - 1)
        gaps = between * y
        if gaps:
            gaps[0] = top + left
        tail = right if y else top
    w.bursts, w.gaps, w.tail = tuple(bursts), tuple(gaps), tail + bottom
    w.row_starts = frozenset(starts)
    w.bytes = x * y * elem


def _padding(f: dict, per: int, profile: Profile) -> tuple[int, int, int, int]:
    """Cycles of a load's padding runs: the rows above, each row's left and right, the rows below. A run costs a
    cycle per element (dma.pad_by_element) or per beat (``per`` beats an element), and dma.pad_run more when
    it is not empty (a loop of its own on the HLS cores)."""
    width = f["x_pad_0"] + f["x_size"] + f["x_pad_1"]
    unit = 1 if profile.dma_pad_by_element else per

    def run(elements: int) -> int:
        return elements * unit + (profile.dma_pad_run if elements else 0)

    return run(f["y_pad_0"] * width), run(f["x_pad_0"]), run(f["x_pad_1"]), run(f["y_pad_1"] * width)


def _empty_call(insn: Instruction, cfg: VTAConfig, profile: Profile) -> int:
    """Cycles of a LOAD or STORE of x_size 0 on a design whose cores run it as any other (dma.empty_is_call: the
    HLS cores call their function for it): the type's fixed cost, each of its y_size rows' setup (a memcpy of
    nothing, no request) and its padding, as a transfer of that type pays them."""
    f = insn.fields
    mem = f["memory_type"]
    if insn.opcode == isa.OPCODES["store"]:
        fixed = profile.dma_out_fixed
    else:
        fixed = {isa.MEM_TYPES["uop"]: profile.dma_uop_fixed, isa.MEM_TYPES["inp"]: profile.dma_inp_fixed,
                 isa.MEM_TYPES["wgt"]: profile.dma_wgt_fixed}.get(mem, profile.dma_acc_fixed)
    if insn.opcode == isa.OPCODES["store"] or mem == isa.MEM_TYPES["uop"]:
        return 1 + fixed + f["y_size"] * profile.row_setup
    top, left, right, bottom = _padding(f, -(-(isa.elem_bytes(cfg, mem) or cfg.acc_elem_bytes) // profile.bus_bytes),
                                        profile)
    return 1 + fixed + f["y_size"] * (profile.row_setup + left + right) + top + bottom


def _write_work(w: Work, insn: Instruction, cfg: VTAConfig, profile: Profile, before: int = 0) -> None:
    f = insn.fields
    elem = isa.elem_bytes(cfg, isa.MEM_TYPES["out"])
    per = -(-elem // profile.bus_bytes)
    x, y, stride = f["x_size"], f["y_size"], f["x_stride"]
    _room(w.index, before, y, x * per, profile)
    bursts, busy, commands, rows = [], [], set(), set()
    for row in range(y):
        addr = (f["dram_base"] + row * stride) * elem
        left = x * per
        if row:
            rows.add(len(bursts))
        while left > 0:  # a row is one command or more; the store waits for each command's answers
            n = min(left, profile.write_command_beats)
            commands.add(len(bursts))
            for b in _split(n, profile, addr):
                bursts.append(b)
                busy.append(b + profile.store_bubble * (-(-b // per) - 1))
            addr += n * profile.bus_bytes
            left -= n
    w.bursts, w.busy, w.gaps = tuple(bursts), tuple(busy), (0,) * len(bursts)
    w.row_starts = frozenset(commands - {0})
    w.rows = frozenset(rows) & w.row_starts if profile.row_setup else frozenset()
    w.setup = profile.dma_out_fixed
    w.bytes = x * y * elem


BURST_BYTES = 400  # what one planned burst costs the timing model at most (its figures and timeline events)


def _room(index: int, before: int, rows: int, beats: int, profile: Profile) -> None:
    """Refuse, before its lists are built, a transfer whose bursts (``rows`` of ``beats`` beats, at least one
    burst a row) would take the bursts planned ``before`` it past the memory budget."""
    total = before + rows * (beats // max(1, profile.burst_beats) + 2)
    budget.check(BURST_BYTES * total, f"the timing model of instructions 0..{index} ({total:,} DMA bursts or more)")


def plan(instructions: list[Instruction], cfg: VTAConfig, profile: Profile) -> list[Work]:
    """The timing view of every instruction of a program."""
    out = []
    macs_per_exec = cfg.batch * cfg.block_in * cfg.block_out
    bursts = 0  # the bursts planned so far (_room)
    for index, insn in enumerate(instructions):
        f = insn.fields
        opcode = insn.opcode
        stage = insn.stage
        module = {"load": LOAD, "compute": COMPUTE, "store": STORE}.get(stage, COMPUTE)
        pops, pushes = _tokens(insn, module)
        w = Work(index, module, EXEC, pops, pushes)
        if opcode == isa.OPCODES["finish"]:
            w.kind, w.cycles = FINISH, profile.finish_cycles
        elif opcode in (isa.OPCODES["load"], isa.OPCODES["store"]) and f["x_size"] == 0:
            w.kind = SYNC
            w.cycles = _empty_call(insn, cfg, profile) if profile.dma_empty_is_call else profile.sync_cycles
        elif opcode == isa.OPCODES["load"]:
            w.kind, w.client = READ, _MEM_CLIENT.get(f["memory_type"], ACC)
            _read_work(w, insn, cfg, profile, bursts)
            bursts += len(w.bursts)
        elif opcode == isa.OPCODES["store"]:
            w.kind = WRITE
            _write_work(w, insn, cfg, profile, bursts)
            bursts += len(w.bursts)
        elif opcode in (isa.OPCODES["gemm"], isa.OPCODES["alu"]):
            w.unit = "gemm" if opcode == isa.OPCODES["gemm"] else "alu"
            w.executions = isa.executions(f)
            iterations = f["iter_out"] * f["iter_in"] if w.executions else 0
            w.variant = bool(f["reset"] if w.unit == "gemm" else f["use_imm"])
            w.cycles = execution_cycles(profile, w.unit, w.executions, iterations, w.variant)
            if w.unit == "alu":
                w.lead = min(profile.alu_token_lead, w.cycles)
            if w.unit == "gemm" and not f["reset"]:
                w.macs = w.executions * macs_per_exec
        out.append(w)
    return out


def execution_cycles(profile: Profile, unit: str, executions: int, iterations: int, variant: bool) -> int:
    """Cycles a GEMM (``variant``: a reset) or ALU (``variant``: with an immediate) instruction takes."""
    if unit == "gemm":
        per = profile.gemm_reset_per_execution if variant else profile.gemm_per_execution
        fixed, per_iteration = profile.gemm_fixed, profile.gemm_per_iteration
        drain = profile.gemm_reset_drain if variant else profile.gemm_drain
    else:
        per = profile.alu_imm_per_execution if variant else profile.alu_tensor_per_execution
        fixed, per_iteration, drain = profile.alu_fixed, profile.alu_per_iteration, profile.alu_drain
    return fixed + per * executions + per_iteration * iterations + (drain if executions > 1 else 0)

"""Predicted cycles of a candidate tiling, from the timing model's costs.

The tiler scores thousands of candidates per operator, too many to generate
and time each. This model describes one candidate by the instructions its
schedule emits per tile (input and weight loads per input-channel chunk, the
GEMM per chunk, the epilogue's ALU and GEMM passes, bias loads, stores) and
asks the timing model (vtasim.timing) what each costs on an idle machine:
loads and stores through the same plan and event engine that time a whole
program, GEMM and ALU instructions through the same formula. The stages then
overlap as the schedule lets them:

- one virtual thread: each chunk's loads wait for the GEMM before them and a
  tile's store for its epilogue, so a tile costs the sum of its parts;
- two: the load stage runs up to two chunks ahead of the GEMM core (two
  input and weight slots) and the store stage up to two tiles behind (two
  accumulator slots); the first few tiles are played out through these
  hand-overs and later ones repeat the steady period.

Memory contention between the stages is ignored here; the compiler times the
chosen program with the full model, which does not ignore it.
"""

from __future__ import annotations

import math

from vtasim.timing.plan import execution_cycles
from vtasim.timing.profile import Profile
from vtasim.timing.run import instruction_cycles
from vtasm import isa
from vtasm.config import VTAConfig
from vtasm.encoding import make_instruction

from .convolution import chunk_window
from .dma import box_dmas
from .epilogue import Needs
from .kernels import copies_needed
from .pooling import separable_tap
from .problem import Problem, conv_problem, pooled_region

EPILOGUE_PARTS = 4  # the scheduler splits the last tile's epilogue and store into up to this many parts

INP, WGT, ACC, OUT = (isa.MEM_TYPES[m] for m in ("inp", "wgt", "acc", "out"))


class CostModel:
    """Predicts cycles for tilings under one hardware profile (instruction costs cached by shape)."""

    def __init__(self, cfg: VTAConfig, profile: Profile):
        self.cfg, self.profile = cfg, profile
        self._dma: dict[tuple, int] = {}
        # the parts of a tiling's cost that many candidates share (an operator's thousands of candidates
        # differ in a few sizes each): by the sizes they depend on
        self._epilogues: dict[tuple, tuple[int, int]] = {}
        self._inputs: dict[tuple, int] = {}

    def dma(self, mem: int, rows: int, cols: int, pads: tuple[int, int, int, int] = (0, 0, 0, 0)) -> int:
        """Cycles of a LOAD (or, for ``OUT``, a STORE) of ``rows`` rows of ``cols`` elements with ``pads``
        (y_pad_0, y_pad_1, x_pad_0, x_pad_1) around them (each instruction also pays the module's gap before
        the next, as GEMM and ALU instructions do)."""
        if rows <= 0 or cols <= 0:
            return 0
        key = (mem, rows, cols, pads)
        if key not in self._dma:
            kind = "store" if mem == OUT else "load"
            y0, y1, x0, x1 = pads
            insn = make_instruction(kind, memory_type=mem, sram_base=0, dram_base=0, y_size=rows, x_size=cols,
                                    x_stride=cols, y_pad_0=y0, y_pad_1=y1, x_pad_0=x0, x_pad_1=x1)
            self._dma[key] = instruction_cycles(insn, self.cfg, self.profile) + self.profile.insn_gap
        return self._dma[key]

    def box(self, mem: int, dims: tuple[int, int, int, int], extent: tuple[int, int, int, int]) -> int:
        """Cycles of the DMAs that move a box of a packed tensor, cut as the scheduler cuts it (dma.box_dmas)."""
        return sum(self.dma(mem, d.y, d.x) for d in box_dmas(dims, (0, 0, 0, 0), extent, 0))

    def gemm(self, executions: int, iterations: int, reset: bool = False) -> int:
        return execution_cycles(self.profile, "gemm", executions, iterations, reset) + self.profile.insn_gap

    def alu(self, executions: int, imm: bool) -> int:
        return execution_cycles(self.profile, "alu", executions, 1, imm) + self.profile.insn_gap

    def tiling_cycles(self, sh: Problem, needs: Needs, tn: int, toc: int, th: int, tw: int, tic: int, order: str,
                      resident: bool, threads: int, producer: str) -> int:
        """Predicted cycles of one operator under a tiling (``producer``: 'gemm', 'pool' or '')."""
        e = tn * toc * th * tw
        tiles_sp = math.ceil(sh.n_t / tn) * math.ceil(sh.oh / th) * math.ceil(sh.ow / tw)
        oc_groups = math.ceil(sh.oc_t / toc)
        tiles = sh.groups * oc_groups * tiles_sp
        th_in, tw_in = (th - 1) * sh.stride + sh.kh, (tw - 1) * sh.stride + sh.kw
        kk = sh.kh * sh.kw
        chunk_load, chunk_gemm, chunks = 0.0, 0, 1  # per chunk: load-stage and GEMM cycles
        tile_load = first_extra = reset = 0  # per tile, before its first chunk; once, before everything
        folds = 0  # a pooled convolution's folds of its window region into the output slot
        if producer == "gemm":
            gp, gth, gtw = sh, th, tw  # the convolution's problem and tile
            if sh.pool:
                rows, cols, gth, gtw = pooled_region(sh, th, tw)
                gp = conv_problem(sh)
                folds = self._folds(sh.pool, tn * toc, gth, th, tw, e)
            nic = sh.ic_t if order == "inputs" else tic
            chunks = math.ceil(sh.ic_t / nic)
            chunk_load = self._input_loads(gp, tn, nic, gth, gtw)
            whole_w = self.dma(WGT, toc, sh.ic_t * kk)
            if order == "inputs":
                chunk_load /= oc_groups  # an input tile serves every channel group
                tile_load = whole_w
            elif resident:
                tile_load, first_extra = whole_w / tiles_sp, whole_w
            else:
                chunk_load += self.dma(WGT, toc, nic * kk)
            chunk_gemm = self.gemm(tn * toc * nic * kk * gth * gtw, tn * toc * gtw)
            if sh.pool:  # the window region and the output slot zeroed; no partial sums
                copies, reset = 0, self.gemm(tn * toc * rows * cols, 1, reset=True) + self.gemm(e, 1, reset=True)
            else:
                copies = copies_needed(e, nic * kk)  # partial sums: reset with the tile, added back by the ALU
                reset = self.gemm(e, 1, reset=True) + (self.gemm(e * copies, 1, reset=True) if copies else 0)
        elif producer == "pool":
            chunk_load = tn * toc * self.dma(INP, th_in, tw_in)
            # the window moved into a zeroed region (pooling.py), the output slot zeroed
            chunk_gemm = self.gemm(tn * toc * th_in * tw_in, 1)
            reset = self.gemm(tn * toc * th_in * tw_in, 1, reset=True) + self.gemm(e, 1, reset=True)
            chunk_gemm += self._folds((sh.kh, sh.stride, sh.pad), tn * toc, th_in, th, tw, e)
        epilogue, store = self._epilogue(sh, needs, tn, toc, th, tw)
        if producer == "gemm":
            epilogue += copies * self.alu(e, imm=False) + folds
        last_epilogue, last_store = epilogue, store  # the last tile's epilogue runs in parts (scheduler)
        if tn == 1 and toc >= 2 and needs.acc_slots == 1:
            parts = min(toc, EPILOGUE_PARTS)
            part_epilogue, last_store = self._epilogue(sh, needs, tn, toc // parts, th, tw)
            last_epilogue = parts * part_epilogue
        p = self.profile  # the hand-overs' tokens: load to GEMM and back, core to store and back
        tokens = (p.token_latency, p.g2l_latency, p.token_latency, p.s2g_latency)
        if threads == 1:
            return int(first_extra + tiles * (tile_load + chunks * (chunk_load + chunk_gemm + tokens[0] + tokens[1])
                                              + reset + epilogue + store + tokens[2] + tokens[3])
                       + last_epilogue + last_store - epilogue - store)
        return int(_pipelined(tiles, chunks, chunk_load, chunk_gemm, tile_load, first_extra, reset,
                              (epilogue, last_epilogue), (store, last_store), tokens))

    def _folds(self, pool: tuple[int, int, int], planes: int, image_rows: int, th: int, tw: int, e: int) -> int:
        """ALU cycles of a pooling tile's folds (pooling.py): separably, the row taps over the window's
        ``image_rows``, the column taps and a copy; else one fold per window position."""
        k, stride, pad = pool
        if separable_tap(k, stride, pad) is not None:
            return ((k - 1) * self.alu(planes * image_rows * tw, imm=False) + (k - 1) * self.alu(e, imm=False)
                    + self.alu(e, imm=False))
        return k * k * self.alu(e, imm=False)

    def _epilogue(self, sh: Problem, needs: Needs, tn: int, toc: int, th: int, tw: int) -> tuple[int, int]:
        """Cycles of a tile's epilogue (ALU and GEMM passes, whole-tile operand loads) and of its store."""
        key = (sh, needs.alu_passes, needs.alu_tensor_passes, needs.gemm_passes, needs.tile_loads, tn, toc, th, tw)
        found = self._epilogues.get(key)
        if found is None:
            found = self._epilogues[key] = self._epilogue_of(sh, needs, tn, toc, th, tw)
        return found

    def _epilogue_of(self, sh: Problem, needs: Needs, tn: int, toc: int, th: int, tw: int) -> tuple[int, int]:
        e = tn * toc * th * tw
        epilogue = (needs.alu_passes * self.alu(e, imm=True) + needs.alu_tensor_passes * self.alu(e, imm=False)
                    + needs.gemm_passes * self.gemm(e, 1) + needs.tile_loads * self.dma(ACC, tn * toc * th, tw))
        return epilogue, self.box(OUT, (sh.n_t, sh.groups * sh.oc_t, sh.oh, sh.ow), (tn, toc, th, tw))

    def _input_loads(self, sh: Problem, tn: int, nic: int, th: int, tw: int) -> int:
        """Load-stage cycles of one chunk's input window (with halo), cut into DMAs as the scheduler cuts it."""
        key = (sh, tn, nic, th, tw)
        found = self._inputs.get(key)
        if found is None:
            found = self._inputs[key] = sum(self.dma(INP, d.y, d.x, d.pads) for d in chunk_window(sh, tn, nic, th, tw))
        return found


def _pipelined(tiles: int, chunks: int, load: float, gemm: int, tile_load: float, first_extra: int, reset: int,
               epilogue: tuple[int, int], store: tuple[int, int], tokens: tuple[int, int, int, int] = (0, 0, 0, 0),
               sample: int = 4) -> float:
    """Cycles of a two-thread schedule: three stages handing over through two slots each.

    Chunks rotate through two input (and weight) slots: a chunk's loads wait
    for the GEMM two chunks back to free its slot. Tiles alternate two
    accumulator slots: a tile's reset waits for the store two tiles back.
    The first ``sample`` tiles are played out; later ones repeat the last
    tile's period. ``epilogue`` and ``store``: of every tile, and of the last
    one (whose parts overlap). ``tokens``: the cycles from a push to its pop
    load to GEMM, GEMM to load, core to store and store to core.
    """
    l2g, g2l, g2s, s2g = tokens
    # This loop runs for every candidate tiling: plain comparisons, not max() (``b if b > a else a`` is
    # max(a, b), the same value).
    loaded = 0.0  # load-stage end of the last chunk
    freed0 = freed1 = 0.0  # GEMM end of the last two chunks (older first)
    stored0 = stored1 = 0.0  # store end of the last two tiles
    core = 0.0
    played = min(tiles, sample)
    for k in range(played):
        last = k == tiles - 1
        ready = stored0 + s2g if k > 1 else 0
        core = (ready if ready > core else core) + reset
        for c in range(chunks):
            extra = (tile_load + (first_extra if k == 0 else 0)) if c == 0 else 0
            freed = freed0 + g2l if freed0 else 0
            end = (freed if freed > loaded else loaded) + load + extra
            loaded = end
            core = (end + l2g if end + l2g > core else core) + gemm
            freed0, freed1 = freed1, core
        core += epilogue[last]
        stored0, stored1 = stored1, (stored1 if stored1 > core + g2s else core + g2s) + store[last]
    if played == tiles:
        return stored1
    period = stored1 - stored0 if played > 1 else stored1
    return stored1 + (tiles - played) * period + epilogue[1] - epilogue[0] + store[1] - store[0]

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
- two: the load stage runs a chunk ahead of the GEMM core and the store
  stage a tile behind, so the operator costs what its busiest stage spends,
  plus filling the stages before that one (the first chunk's loads) and
  draining the ones after it (the last tile's epilogue and store).

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

from .dma import box_dmas
from .epilogue import Needs
from .problem import Problem, window_cols

INP, WGT, ACC, OUT = (isa.MEM_TYPES[m] for m in ("inp", "wgt", "acc", "out"))


class CostModel:
    """Predicts cycles for tilings under one hardware profile (instruction costs cached by shape)."""

    def __init__(self, cfg: VTAConfig, profile: Profile):
        self.cfg, self.profile = cfg, profile
        self._dma: dict[tuple, int] = {}

    def dma(self, mem: int, rows: int, cols: int) -> int:
        """Cycles of a LOAD (or, for ``OUT``, a STORE) of ``rows`` rows of ``cols`` elements."""
        if rows <= 0 or cols <= 0:
            return 0
        key = (mem, rows, cols)
        if key not in self._dma:
            kind = "store" if mem == OUT else "load"
            insn = make_instruction(kind, memory_type=mem, sram_base=0, dram_base=0, y_size=rows, x_size=cols,
                                    x_stride=cols)
            self._dma[key] = instruction_cycles(insn, self.cfg, self.profile)
        return self._dma[key]

    def box(self, mem: int, dims: tuple[int, int, int, int], extent: tuple[int, int, int, int]) -> int:
        """Cycles of the DMAs that move a box of a packed tensor, cut as the scheduler cuts it (dma.box_dmas)."""
        return sum(self.dma(mem, d.y, d.x) for d in box_dmas(dims, (0, 0, 0, 0), extent, 0))

    def gemm(self, executions: int, iterations: int, reset: bool = False) -> int:
        return execution_cycles(self.profile, "gemm", executions, iterations, reset)

    def alu(self, executions: int, imm: bool) -> int:
        return execution_cycles(self.profile, "alu", executions, 1, imm)

    def tiling_cycles(self, sh: Problem, needs: Needs, tn: int, toc: int, th: int, tw: int, tic: int, order: str,
                      resident: bool, threads: int, producer: str) -> int:
        """Predicted cycles of one operator under a tiling (``producer``: 'gemm', 'pool' or '')."""
        e = tn * toc * th * tw
        tiles_sp = math.ceil(sh.n_t / tn) * math.ceil(sh.oh / th) * math.ceil(sh.ow / tw)
        oc_groups = math.ceil(sh.oc_t / toc)
        tiles = sh.groups * oc_groups * tiles_sp
        th_in, tw_in = (th - 1) * sh.stride + sh.kh, (tw - 1) * sh.stride + sh.kw
        if producer == "gemm":
            tw_in = window_cols(sh, tw)
        kk = sh.kh * sh.kw
        load = compute = 0  # per tile, on the load stage and the compute stage
        first_load = 0  # what the compute stage waits for before the first GEMM
        last_gemm = 0  # the compute stage's work after the last load of a tile arrives (besides the epilogue)
        chunks = 1
        if producer == "gemm":
            nic = sh.ic_t if order == "inputs" else tic
            chunks = math.ceil(sh.ic_t / nic)
            x_chunk = self._input_loads(sh, tn, nic, th_in, tw_in)
            w_chunk = 0 if resident or order == "inputs" else self.dma(WGT, toc, nic * kk)
            executions = tn * toc * nic * kk * th * tw
            g_chunk = self.gemm(executions, tn * toc * tw)
            w_tile = 0
            if order == "inputs":
                x_chunk = x_chunk / oc_groups  # an input tile serves every channel group
                w_tile = self.dma(WGT, toc, sh.ic_t * kk)
            elif resident:
                w_tile = self.dma(WGT, toc, sh.ic_t * kk) / tiles_sp
            per_chunk_load = x_chunk + w_chunk
            load += chunks * per_chunk_load + w_tile
            first_load = per_chunk_load + (self.dma(WGT, toc, sh.ic_t * kk) if resident or order == "inputs" else 0)
            compute += self.gemm(e, 1, reset=True) + chunks * g_chunk
            last_gemm = g_chunk
        elif producer == "pool":
            load += tn * toc * self.dma(INP, th_in, tw_in)
            first_load = load
            compute += self.gemm(tn * toc * th_in * tw_in, 1) + kk * self.alu(e, imm=False)
        # the epilogue: ALU and GEMM passes over the tile, bias vectors, whole-tile operand loads
        epilogue = (needs.alu_passes * self.alu(e, imm=True) + needs.alu_tensor_passes * self.alu(e, imm=False)
                    + needs.gemm_passes * self.gemm(e, 1))
        operand_load = needs.tile_loads * self.dma(ACC, tn * toc * th, tw)
        store = self.box(OUT, (sh.n_t, sh.groups * sh.oc_t, sh.oh, sh.ow), (tn, toc, th, tw))
        compute += epilogue + operand_load
        if threads == 1:
            return int(tiles * (load + compute + store))
        # a three-stage pipeline: its busiest stage's total, plus filling the stages before it and
        # draining the ones after it
        return int(max(tiles * load + last_gemm + epilogue + operand_load + store,
                       first_load + tiles * compute + store,
                       first_load + compute + tiles * store))

    def _input_loads(self, sh: Problem, tn: int, nic: int, th_in: int, tw_in: int) -> float:
        """Load-stage cycles of one chunk's input window (with halo), cut into DMAs as the scheduler cuts it."""
        rows, cols = min(th_in, sh.ih), min(tw_in, sh.iw)
        if sh.pad:  # one DMA per channel plane whose padding fields supply the border (dma.padded_plane_dma)
            return tn * nic * self.dma(INP, rows, cols)
        return self.box(INP, (sh.n_t, sh.groups * sh.ic_t, sh.ih, sh.iw), (tn, nic, rows, cols))

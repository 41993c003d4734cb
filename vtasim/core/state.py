"""The machine state: DRAM and the four on-chip buffers.

Each SRAM buffer is one byte array of (depth, element bytes) with a typed view
of the same memory (inp as [depth, BATCH, BLOCK_IN], wgt as [depth, BLOCK_OUT,
BLOCK_IN], acc as [depth, BATCH, BLOCK_OUT]), so loads copy bytes and compute
reads lanes. Micro-ops are kept decoded (dst, src, wgt arrays) next to their
raw words; ``uop_generation`` changes whenever micro-ops are loaded, which
lets the GEMM/ALU units cache the index plans they derive from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vtasm import budget, isa
from vtasm.columns import stream_bytes
from vtasm.config import VTAConfig
from vtasm.errors import FormatError
from vtasm.fileio import pieces
from vtasm.program import Program, first_overlap

_INT = {8: np.int8, 16: np.int16, 32: np.int32}


def int_dtype(bits: int) -> np.dtype:
    """The little-endian signed numpy dtype of a lane width."""
    return np.dtype(_INT[bits]).newbyteorder("<")


@dataclass
class MachineState:
    """DRAM, the four on-chip buffers, and decoded micro-ops (see the module docstring)."""

    cfg: VTAConfig
    dram: np.ndarray
    inp_bytes: np.ndarray
    wgt_bytes: np.ndarray
    acc_bytes: np.ndarray
    uop_words: np.ndarray
    uop_dst: np.ndarray
    uop_src: np.ndarray
    uop_wgt: np.ndarray
    uop_generation: int = 0
    wgt_generation: int = 0
    inp_generation: int = 0  # changes whenever inputs are loaded (inp_as caches a float copy per generation)
    # typed views, filled in __post_init__
    inp: np.ndarray = field(init=False)
    wgt: np.ndarray = field(init=False)
    acc: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        c = self.cfg
        self.inp = self.inp_bytes.view(int_dtype(c.inp_width)).reshape(c.inp_depth, c.batch, c.block_in)
        self.wgt = self.wgt_bytes.view(int_dtype(c.wgt_width)).reshape(
            c.wgt_depth, c.block_out, c.block_in
        )
        self.acc = self.acc_bytes.view(int_dtype(c.acc_width)).reshape(c.acc_depth, c.batch, c.block_out)

    def buffer_bytes(self, memory_type: int) -> np.ndarray | None:
        """The byte array an instruction of this memory type loads into."""
        return {
            isa.MEM_TYPES["inp"]: self.inp_bytes,
            isa.MEM_TYPES["wgt"]: self.wgt_bytes,
            isa.MEM_TYPES["acc"]: self.acc_bytes,
            isa.MEM_TYPES["uop"]: self.uop_words.view(np.uint8).reshape(-1, 4),
        }.get(memory_type)

    def inp_as(self, ftype: type) -> np.ndarray:
        """The input buffer converted to ``ftype`` (cached until inputs are loaded again)."""
        cached = self.__dict__.get("_inp_float")
        if cached is None or cached[0] != self.inp_generation or cached[1].dtype != ftype:
            cached = self.__dict__["_inp_float"] = (self.inp_generation, self.inp.astype(ftype))
        return cached[1]

    def refresh_uops(self, start: int, stop: int) -> None:
        """Re-decode micro-op slots [start, stop) after their words changed."""
        words = self.uop_words[start:stop].astype(np.int64)
        for f in isa.layout("uop", self.cfg):
            values = (words >> f.offset) & ((1 << f.width) - 1)
            getattr(self, f"uop_{f.name.split('_')[0]}")[start:stop] = values
        self.uop_generation += 1


def check_dram(program: Program) -> int:
    """The DRAM size, after checking that everything the program places fits in it."""
    size = program.dram_size()
    regions = [(f"segment {s.name}", s.addr, s.end) for s in program.segments]
    regions += [("micro-op table", program.uop_addr, program.uop_end),
                ("instruction stream", program.insn_addr, program.insn_end)]
    for what, start, end in regions:
        if end > start and end > size:
            raise FormatError(f"{what} (bytes 0x{start:x}..0x{end - 1:x}) does not fit the program's DRAM "
                              f"of {size:#x} bytes")
    if size > isa.MAX_DRAM_BYTES:
        raise FormatError(f"the program needs {size:#x} bytes of DRAM; the simulator models at most "
                          f"{isa.MAX_DRAM_BYTES:#x} (4 GiB)")
    budget.check(size, f"the program's DRAM ({size:#x} bytes)")
    return size


def new_state(program: Program) -> MachineState:
    """A machine with zeroed buffers and the program's DRAM image loaded."""
    cfg = program.config
    dram = np.zeros(check_dram(program), dtype=np.uint8)
    apart = first_overlap([(s.addr, s.end) for s in program.segments]) is None  # no segment over another
    for seg in program.segments:
        if apart and seg.zero:
            continue  # declared zero by its file: DRAM already is
        for offset, piece in pieces(seg.data):  # a mapped file's pages are let go as they are copied
            data = np.frombuffer(piece, dtype=np.uint8)
            if apart and not data.any():
                continue  # DRAM starts zeroed and untouched: a zero piece need not touch its pages
            dram[seg.addr + offset : seg.addr + offset + len(piece)] = data
    from vtasm.encoding import codec_for

    codec = codec_for(cfg)
    uop_data = codec.encode_uops(program.uops)
    dram[program.uop_addr : program.uop_addr + len(uop_data)] = np.frombuffer(uop_data, dtype=np.uint8)
    insn_data = stream_bytes(program.instructions, cfg)
    dram[program.insn_addr : program.insn_addr + len(insn_data)] = np.frombuffer(insn_data, dtype=np.uint8)
    depth = cfg.uop_depth
    return MachineState(
        cfg=cfg,
        dram=dram,
        inp_bytes=np.zeros((cfg.inp_depth, cfg.inp_elem_bytes), dtype=np.uint8),
        wgt_bytes=np.zeros((cfg.wgt_depth, cfg.wgt_elem_bytes), dtype=np.uint8),
        acc_bytes=np.zeros((cfg.acc_depth, cfg.acc_elem_bytes), dtype=np.uint8),
        uop_words=np.zeros(depth, dtype="<u4"),
        uop_dst=np.zeros(depth, dtype=np.int64),
        uop_src=np.zeros(depth, dtype=np.int64),
        uop_wgt=np.zeros(depth, dtype=np.int64),
    )

"""A slow, plain reference interpreter written from isa.md sections 1, 4 and 5.

Deliberately independent of vtasim: plain ints and lists, one element and one
lane at a time, instructions executed strictly in program order (a correctly
synchronised program's results do not depend on the interleaving; the token
counts are still tracked, and a pop that program order cannot satisfy is an
error of the test program, not of the machine).
"""

from __future__ import annotations

from dataclasses import dataclass, field

OPCODE_LOAD, OPCODE_STORE, OPCODE_GEMM, OPCODE_FINISH, OPCODE_ALU = 0, 1, 2, 3, 4
MEM_UOP, MEM_WGT, MEM_INP, MEM_ACC, MEM_OUT, MEM_ACC8 = 0, 1, 2, 3, 4, 5
ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR, ALU_MUL = 0, 1, 2, 3, 4

COUNTERS = (
    "inp_load_nbytes",
    "wgt_load_nbytes",
    "acc_load_nbytes",
    "uop_load_nbytes",
    "out_store_nbytes",
    "gemm_counter",
    "alu_counter",
)

# isa.md section 5: the queue behind each flag, per stage (None: the stage cannot have the flag)
QUEUE_OF = {
    "load": {"pop_prev": None, "pop_next": "g2l", "push_prev": None, "push_next": "l2g"},
    "compute": {"pop_prev": "l2g", "pop_next": "s2g", "push_prev": "g2l", "push_next": "g2s"},
    "store": {"pop_prev": "g2s", "pop_next": None, "push_prev": "s2g", "push_next": None},
}


class BadProgram(Exception):
    """The test program is not one the reference accepts (out of bounds, bad tokens, ...)."""


def wrap(value: int, bits: int) -> int:
    """The two's complement value of the low ``bits`` bits."""
    half = 1 << (bits - 1)
    return ((value + half) % (1 << bits)) - half


def to_signed(data: bytes) -> int:
    return int.from_bytes(data, "little", signed=True)


@dataclass
class Geometry:
    """Sizes derived from the LOG_* values of a configuration (isa.md section 1)."""

    log: dict

    def __post_init__(self) -> None:
        g = self.log
        self.batch = 1 << g["LOG_BATCH"]
        self.block = 1 << g["LOG_BLOCK"]
        self.inp_bits = 1 << g["LOG_INP_WIDTH"]
        self.wgt_bits = 1 << g["LOG_WGT_WIDTH"]
        self.acc_bits = 1 << g["LOG_ACC_WIDTH"]
        self.out_bits = self.inp_bits
        self.log_uop_depth = g["LOG_UOP_BUFF_SIZE"] - 5 + 3
        self.log_inp_depth = g["LOG_INP_BUFF_SIZE"] - g["LOG_BATCH"] - g["LOG_BLOCK"] - g["LOG_INP_WIDTH"] + 3
        self.log_wgt_depth = g["LOG_WGT_BUFF_SIZE"] - 2 * g["LOG_BLOCK"] - g["LOG_WGT_WIDTH"] + 3
        self.log_acc_depth = g["LOG_ACC_BUFF_SIZE"] - g["LOG_BATCH"] - g["LOG_BLOCK"] - g["LOG_ACC_WIDTH"] + 3
        self.depth = {
            "uop": 1 << self.log_uop_depth,
            "inp": 1 << self.log_inp_depth,
            "wgt": 1 << self.log_wgt_depth,
            "acc": 1 << self.log_acc_depth,
        }
        # values per element and bits per value of each memory type
        self.lanes = {
            MEM_INP: (self.batch * self.block, self.inp_bits),
            MEM_WGT: (self.block * self.block, self.wgt_bits),
            MEM_ACC: (self.batch * self.block, self.acc_bits),
            MEM_OUT: (self.batch * self.block, self.out_bits),
            MEM_ACC8: (self.batch * self.block, 8),
        }

    def elem_bytes(self, mem: int) -> int:
        if mem == MEM_UOP:
            return 4
        n, bits = self.lanes[mem]
        return n * bits // 8

    def uop_fields(self) -> list[tuple[str, int]]:
        """(name, width) of the micro-op fields, from bit 0 up."""
        src = max(self.log_acc_depth, self.log_inp_depth)
        return [("dst", self.log_acc_depth), ("src", src), ("wgt", self.log_wgt_depth)]

    def encode_uop(self, dst: int, src: int, wgt: int) -> bytes:
        word, pos = 0, 0
        for (_, width), value in zip(self.uop_fields(), (dst, src, wgt), strict=True):
            assert 0 <= value < (1 << width)
            word |= value << pos
            pos += width
        return word.to_bytes(4, "little")

    def decode_uop(self, data: bytes) -> tuple[int, int, int]:
        word, pos, out = int.from_bytes(data, "little"), 0, []
        for _, width in self.uop_fields():
            out.append((word >> pos) & ((1 << width) - 1))
            pos += width
        return tuple(out)


def stage_of(opcode: int, mem: int) -> str:
    if opcode == OPCODE_STORE:
        return "store"
    if opcode == OPCODE_LOAD and mem in (MEM_INP, MEM_WGT):
        return "load"
    return "compute"


@dataclass
class Reference:
    """Reference machine state: DRAM bytes, SRAM buffers as dicts of lane lists, counters."""

    geo: Geometry
    dram: bytearray
    sram: dict = field(default_factory=lambda: {"inp": {}, "wgt": {}, "acc": {}, "uop": {}})
    counters: dict = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    queues: dict = field(default_factory=lambda: dict.fromkeys(("l2g", "g2l", "s2g", "g2s"), 0))

    # -- SRAM access with bounds ---------------------------------------------
    def read(self, buf: str, index: int) -> list[int] | tuple:
        self._check(buf, index)
        zero = (0, 0, 0) if buf == "uop" else [0] * self._lane_count(buf)
        return self.sram[buf].get(index, zero)

    def write(self, buf: str, index: int, value) -> None:
        self._check(buf, index)
        self.sram[buf][index] = value

    def _lane_count(self, buf: str) -> int:
        return self.geo.lanes[{"inp": MEM_INP, "wgt": MEM_WGT, "acc": MEM_ACC}[buf]][0]

    def _check(self, buf: str, index: int) -> None:
        if not 0 <= index < self.geo.depth[buf]:
            raise BadProgram(f"{buf} index {index} out of range")

    # -- DRAM elements -------------------------------------------------------
    def dram_element(self, mem: int, element: int):
        size = self.geo.elem_bytes(mem)
        start = element * size
        if start < 0 or start + size > len(self.dram):
            raise BadProgram(f"DRAM element {element} of type {mem} outside DRAM")
        data = bytes(self.dram[start : start + size])
        if mem == MEM_UOP:
            return self.geo.decode_uop(data)
        n, bits = self.geo.lanes[mem]
        step = bits // 8
        return [to_signed(data[k * step : (k + 1) * step]) for k in range(n)]

    # -- instructions --------------------------------------------------------
    def load(self, f: dict) -> None:
        mem = f["memory_type"]
        if f["x_size"] == 0:
            return
        buf = {MEM_UOP: "uop", MEM_WGT: "wgt", MEM_INP: "inp", MEM_ACC: "acc", MEM_ACC8: "acc"}[mem]
        zero = (0, 0, 0) if mem == MEM_UOP else [0] * self._lane_count(buf)
        row_len = f["x_pad_0"] + f["x_size"] + f["x_pad_1"]
        index = f["sram_base"]
        for _ in range(f["y_pad_0"] * row_len):
            self.write(buf, index, zero)
            index += 1
        for r in range(f["y_size"]):
            for _ in range(f["x_pad_0"]):
                self.write(buf, index, zero)
                index += 1
            for c in range(f["x_size"]):
                # ACC_8BIT: int8 values read as signed ints are already sign-extended
                self.write(buf, index, self.dram_element(mem, f["dram_base"] + r * f["x_stride"] + c))
                index += 1
            for _ in range(f["x_pad_1"]):
                self.write(buf, index, zero)
                index += 1
        for _ in range(f["y_pad_1"] * row_len):
            self.write(buf, index, zero)
            index += 1
        counted = self.geo.elem_bytes(MEM_ACC if mem == MEM_ACC8 else mem)
        key = {MEM_UOP: "uop", MEM_WGT: "wgt", MEM_INP: "inp", MEM_ACC: "acc", MEM_ACC8: "acc"}[mem]
        self.counters[f"{key}_load_nbytes"] += f["x_size"] * f["y_size"] * counted

    def store(self, f: dict) -> None:
        if f["x_size"] == 0:
            return
        size = self.geo.elem_bytes(MEM_OUT)
        step = self.geo.out_bits // 8
        for r in range(f["y_size"]):
            for c in range(f["x_size"]):
                values = self.read("acc", f["sram_base"] + r * f["x_size"] + c)
                data = b"".join(
                    (wrap(v, self.geo.out_bits) % (1 << self.geo.out_bits)).to_bytes(step, "little") for v in values
                )
                start = (f["dram_base"] + r * f["x_stride"] + c) * size
                if start + size > len(self.dram):
                    raise BadProgram("STORE outside DRAM")
                self.dram[start : start + size] = data
        self.counters["out_store_nbytes"] += f["x_size"] * f["y_size"] * size

    def executions(self, f: dict):
        """(dst, src, wgt) of every micro-op execution, in loop order."""
        for i in range(f["iter_out"]):
            for j in range(f["iter_in"]):
                for u in range(f["uop_bgn"], f["uop_end"]):
                    dst, src, wgt = self.read("uop", u)
                    yield (
                        dst + i * f["dst_factor_out"] + j * f["dst_factor_in"],
                        src + i * f["src_factor_out"] + j * f["src_factor_in"],
                        wgt + i * f.get("wgt_factor_out", 0) + j * f.get("wgt_factor_in", 0),
                    )

    def gemm(self, f: dict) -> None:
        g = self.geo
        for acc_i, inp_i, wgt_i in self.executions(f):
            if f["reset"]:
                self.write("acc", acc_i, [0] * (g.batch * g.block))
                continue
            acc = list(self.read("acc", acc_i))
            inp, wgt = self.read("inp", inp_i), self.read("wgt", wgt_i)
            for b in range(g.batch):
                for o in range(g.block):
                    total = acc[b * g.block + o]
                    for k in range(g.block):
                        total += inp[b * g.block + k] * wgt[o * g.block + k]
                    acc[b * g.block + o] = wrap(total, g.acc_bits)
            self.write("acc", acc_i, acc)
        if not f["reset"]:
            self.counters["gemm_counter"] += f["iter_out"] * f["iter_in"] * (f["uop_end"] - f["uop_bgn"])

    def alu(self, f: dict) -> None:
        bits = self.geo.acc_bits
        op, imm = f["alu_opcode"], wrap(f["imm"], 16)
        for dst, src, _ in self.executions(f):
            x = self.read("acc", dst)
            y = [imm] * len(x) if f["use_imm"] else self.read("acc", src)
            self.write("acc", dst, [alu_op(op, a, b, bits) for a, b in zip(x, y, strict=True)])
        self.counters["alu_counter"] += f["iter_out"] * f["iter_in"] * (f["uop_end"] - f["uop_bgn"])

    def tokens(self, f: dict, stage: str, when: str) -> None:
        for flag, queue in QUEUE_OF[stage].items():
            if not f.get(flag) or not flag.startswith(when):
                continue
            if queue is None:
                raise BadProgram(f"{flag} on the {stage} stage")
            if when == "pop":
                if self.queues[queue] == 0:
                    raise BadProgram(f"pop of empty {queue}: program order does not satisfy the tokens")
                self.queues[queue] -= 1
            else:
                self.queues[queue] += 1

    def run(self, instructions: list[dict]) -> None:
        for f in instructions:
            opcode = f["opcode"]
            stage = stage_of(opcode, f.get("memory_type", 0))
            self.tokens(f, stage, "pop")
            if opcode == OPCODE_FINISH:
                return
            if opcode == OPCODE_LOAD:
                self.load(f)
            elif opcode == OPCODE_STORE:
                self.store(f)
            elif opcode == OPCODE_GEMM:
                self.gemm(f)
            elif opcode == OPCODE_ALU:
                self.alu(f)
            else:
                raise BadProgram(f"opcode {opcode}")
            self.tokens(f, stage, "push")
        raise BadProgram("no FINISH")


def alu_op(op: int, x: int, y: int, bits: int) -> int:
    """One lane of an ALU operation (isa.md section 4)."""
    if op == ALU_MIN:
        return min(x, y)
    if op == ALU_MAX:
        return max(x, y)
    if op == ALU_ADD:
        return wrap(x + y, bits)
    if op == ALU_MUL:
        return wrap(x * y, bits)
    if op == ALU_SHR:
        # x86 shifts take the count modulo 32 (the reference is built for x86)
        return x >> (y % 32) if y >= 0 else wrap(x << ((-y) % 32), bits)
    raise BadProgram(f"ALU opcode {op}")


def initial_dram(program, geo: Geometry) -> bytearray:
    """DRAM before a run: the program's segments and its micro-op table."""
    ends = [s.addr + len(s.data) for s in program.segments]
    ends += [program.uop_addr + 4 * len(program.uops), program.insn_addr + 16 * len(program.instructions)]
    ends += [d.addr + d.nbytes for d in program.dumps]
    size = program.dram_bytes if program.dram_bytes is not None else max(ends)
    dram = bytearray(size)
    for seg in program.segments:
        dram[seg.addr : seg.addr + len(seg.data)] = seg.data
    for k, u in enumerate(program.uops):
        at = program.uop_addr + 4 * k
        dram[at : at + 4] = geo.encode_uop(u.dst_idx, u.src_idx, u.wgt_idx)
    return dram


def run_reference(program) -> Reference:
    """Run a vtasm Program: DRAM from its segments and micro-op table, then its instructions."""
    geo = Geometry(program.config.log_values())
    ref = Reference(geo, initial_dram(program, geo))
    ref.run([dict(insn.fields) for insn in program.instructions])
    return ref

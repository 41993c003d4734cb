"""Compiled code computes the same numbers on the HLS and Chisel designs as on the behavioral simulator.

``hardware_designs.DesignReference`` runs a program as isa.md section 7 says
each design does (stale accumulator reads, the 2021 design's immediate
operand at src, the output buffer STORE reads, ...). The kernels of the
issue that found the differences (3x3 and strided 1x1 convolutions, max,
average and global average pooling, a residual add, a dense layer with two
output blocks per tile, a depthwise convolution) are compiled as vtacc does
today and must give, on every design, the bytes vtasim gives. Hand-built
programs that break a rule show the interpreter is not blind to them.
"""

from __future__ import annotations

import numpy as np
import pytest

from vtasim.checks.lint import Linter
from vtasim.core.machine import Machine
from vtasm.config import default_config

from .hardware_designs import run_design
from .vtacc.harness import compile_source
from .vtasim.builders import ACC, ADD, SHR, UOP, Image, alu, chain, int32_bytes, load, store, uops

DESIGNS = ("hls", "chisel-2019", "chisel-2021")

KERNELS = {
    "conv3x3": ("kernel k(x: int8[1, 16, 6, 6], w: int8[32, 16, 3, 3], b: int32[32]) -> y: int8[1, 32, 6, 6] "
                "{ y = clip((conv2d(x, w, pad=1) >> 7) + b, -128, 127) }"),
    "conv1x1_stride2": ("kernel k(x: int8[1, 32, 8, 8], w: int8[16, 32, 1, 1]) -> y: int8[1, 16, 4, 4] "
                        "{ y = relu(conv2d(x, w, stride=2) >> 6) }"),
    "max_pool": "kernel k(x: int8[1, 16, 8, 8]) -> y: int8[1, 16, 4, 4] { y = max_pool(x, 3, 2, 1) }",
    "avg_pool": "kernel k(x: int8[1, 16, 8, 8]) -> y: int8[1, 16, 4, 4] { y = avg_pool(x, 2) }",
    "global_avg_pool": "kernel k(x: int8[1, 32, 7, 7]) -> y: int8[1, 32, 1, 1] { y = global_avg_pool(x) }",
    "residual_add": ("kernel k(x: int8[1, 16, 6, 6], s: int8[1, 16, 6, 6]) -> y: int8[1, 16, 6, 6] "
                     "{ y = clip(x + s, -128, 127) }"),
    "dense": ("kernel k(x: int8[1, 512], w: int8[256, 512], b: int32[256]) -> y: int8[1, 256] "
              "{ y = clip((dense(x, w) >> 8) + b, -128, 127) }"),
    "depthwise": ("kernel k(x: int8[1, 32, 6, 6], w: int8[32, 1, 3, 3]) -> y: int8[1, 32, 6, 6] "
                  "{ y = clip(conv2d(x, w, pad=1, groups=32) >> 5, -128, 127) }"),
}


def random_inputs(program, rng) -> dict[str, bytes]:
    inputs = {}
    for info in program.tensors:
        if info.name == "y":
            continue
        low, high = (-300, 300) if info.dtype == "int32" else (-128, 128)
        array = rng.integers(low, high, info.shape).astype(info.dtype)
        inputs[info.name] = info.pack(array)
    return inputs


def output(program, dram) -> bytes:
    seg, info = program.segment("y"), program.tensor("y")
    return bytes(dram[seg.addr:seg.addr + info.nbytes])


@pytest.mark.parametrize("name", KERNELS)
def test_compiled_kernels_compute_the_same_on_every_design(name):
    program = compile_source(KERNELS[name], default_config()).program
    inputs = random_inputs(program, np.random.default_rng(len(name)))
    machine = Machine(program)
    for tensor, data in inputs.items():
        seg = program.segment(tensor)
        machine.state.dram[seg.addr:seg.addr + len(data)] = np.frombuffer(data, dtype=np.uint8)
    expected = output(program, machine.run().state.dram)
    assert any(expected)
    for design in DESIGNS:
        assert output(program, run_design(program, design, inputs)) == expected, design


# -- the interpreter sees what breaks a rule ------------------------------------------------------------


def acc_program(table, body, acc=(5, 7, 9)):
    """LOAD UOP, LOAD ACC (the values broadcast to every lane), body, STORE acc[0..len(acc) - 1]."""
    cfg = default_config()
    img = Image(cfg)
    lanes = cfg.batch * cfg.block_out
    img.add("acc", int32_bytes([v for v in acc for _ in range(lanes)]))
    out = img.add("y", bytes(lanes * len(acc)))
    insns = [load(UOP, 0, img.uop_elem(), len(table)), load(ACC, 0, img.elem("acc", ACC), len(acc)), *body,
             store(0, out // lanes, len(acc))]
    program = img.program(chain(insns), uops(*table))
    return program, out, lanes


def stored(program, out, lanes, dram, count=3) -> list[int]:
    return [int.from_bytes(dram[out + k * lanes:out + k * lanes + 1], "little", signed=True) for k in range(count)]


def lint_rules(program) -> list[str]:
    machine = Machine(program)
    linter = Linter(machine)
    machine.run()
    return sorted(w.rule for w in linter.report())


def test_three_additions_into_one_element_in_a_row():
    # acc[0] += 1 three times in one instruction: 5 + 3 in the behavioral simulator; the HLS design's executions
    # each read the 5 (one increment survives), the 2021 design's third sees the first (two survive)
    program, out, lanes = acc_program(((0, 0, 0),), [alu(ADD, 0, 1, (1, 3), imm=1)])
    machine = Machine(program)
    assert stored(program, out, lanes, machine.run().state.dram)[0] == 8
    got = {d: stored(program, out, lanes, run_design(program, d, {}))[0] for d in DESIGNS}
    assert got == {"hls": 6, "chisel-2019": 8, "chisel-2021": 7}
    assert lint_rules(program) == ["acc-distance", "stale-store"]  # the store also reads acc[1..2], never written


def test_an_immediate_operand_read_at_src():
    # acc[2] = acc[2] + 1 with the micro-op's src at 0: the 2021 design computes acc[0] + 1 = 6
    program, out, lanes = acc_program(((2, 0, 0),), [alu(ADD, 0, 1, imm=1)])
    assert {d: stored(program, out, lanes, run_design(program, d, {}))[2] for d in DESIGNS} == {
        "hls": 10, "chisel-2019": 10, "chisel-2021": 6}
    assert lint_rules(program) == ["imm-src", "stale-store"]


def test_a_store_of_loaded_values_reads_the_output_buffer():
    # acc[1..2] were loaded but only acc[0] was written by the ALU: the designs store zeros for the rest
    program, out, lanes = acc_program(((0, 0, 0),), [alu(SHR, 0, 1, imm=0)])
    assert stored(program, out, lanes, run_design(program, "hls", {})) == [5, 0, 0]
    assert stored(program, out, lanes, Machine(program).run().state.dram) == [5, 7, 9]
    assert lint_rules(program) == ["stale-store"]

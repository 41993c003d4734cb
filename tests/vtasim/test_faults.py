"""Every program fault is a one-line SimFault (exit code 3) naming instruction, stage and values."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from vtasim.cli import main
from vtasim.core.machine import run_program
from vtasm.encoding import Instruction
from vtasm.errors import SimFault
from vtasm.formats.vbin import save_vbin

from .builders import (
    ACC,
    ACC8,
    ADD,
    INP,
    OUT,
    UOP,
    WGT,
    Image,
    alu,
    config,
    finish,
    gemm,
    load,
    matmul_program,
    store,
    uops,
)

CFG = config("default")
INP_DEPTH, WGT_DEPTH, ACC_DEPTH, UOP_DEPTH = 2048, 1024, 2048, 8192  # isa.md section 1, default


def test_default_depths_are_the_documented_ones():
    assert (CFG.inp_depth, CFG.wgt_depth, CFG.acc_depth, CFG.uop_depth) == (INP_DEPTH, WGT_DEPTH, ACC_DEPTH,
                                                                            UOP_DEPTH)


def program(insns, table=()):
    """A 4 KiB data segment at 0x1000 (element DATA[mem] of each type), then ``table`` and ``insns``."""
    img = Image(CFG)
    img.add("data", bytes(4096))
    if table:
        insns = [load(UOP, 0, img.uop_elem(), len(table)), *insns]
    return img.program(insns, table)


DATA = {mem: 0x1000 // size for mem, size in {INP: 16, WGT: 256, ACC: 64, UOP: 4, ACC8: 16, OUT: 16}.items()}


def fault_of(prog, **kwargs) -> str:
    with pytest.raises(SimFault) as info:
        run_program(prog, **kwargs)
    assert info.value.exit_code == 3
    message = str(info.value)
    assert "\n" not in message
    return message


def assert_names(message: str, *parts: str) -> None:
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"


# -- loads and stores ---------------------------------------------------------


@pytest.mark.parametrize("mem, depth, stage, name", [
    (INP, INP_DEPTH, "load", "inp"), (WGT, WGT_DEPTH, "load", "wgt"),
    (ACC, ACC_DEPTH, "compute", "acc"), (ACC8, ACC_DEPTH, "compute", "acc"), (UOP, UOP_DEPTH, "compute", "uop"),
])
def test_load_overflowing_the_buffer(mem, depth, stage, name):
    msg = fault_of(program([load(mem, depth - 1, DATA[mem], 2), finish()]))
    assert_names(msg, "instruction 0", f"{stage} stage", name, str(depth - 1), str(depth))


def test_load_overflowing_the_buffer_through_padding():
    # 1 element plus one padding row of 3 after it: elements depth-2 .. depth+1
    msg = fault_of(program([load(INP, INP_DEPTH - 2, 256, 1, pad=(0, 1, 1, 1)), finish()]))
    assert_names(msg, "instruction 0", "load stage", str(INP_DEPTH - 2), str(INP_DEPTH + 3))


def test_store_reading_past_the_accumulator():
    msg = fault_of(program([store(ACC_DEPTH - 2, 256, 1, 3), finish()]))
    assert_names(msg, "instruction 0", "store stage", "acc", str(ACC_DEPTH - 2), str(ACC_DEPTH))


@pytest.mark.parametrize("mem", [INP, WGT, ACC, UOP, ACC8])
def test_load_outside_dram(mem):
    prog = program([load(mem, 0, 0, 1), finish()])
    size = prog.dram_size()
    elem = {INP: 16, WGT: 256, ACC: 64, UOP: 4, ACC8: 16}[mem]
    prog.instructions[0].fields["dram_base"] = size // elem
    msg = fault_of(prog)
    assert_names(msg, "instruction 0", "DRAM", f"0x{size // elem * elem:x}", f"0x{size - 1:x}")


def test_load_rows_running_past_dram_end():
    prog = program([load(INP, 0, 0, 2, 3, 0), finish()])
    size = prog.dram_size()
    prog.instructions[0].fields.update(dram_base=size // 16 - 4, x_stride=3)  # row 2 ends 2 elements past
    msg = fault_of(prog)
    assert_names(msg, "instruction 0", "load stage", "DRAM", f"0x{size + 63:x}")


def test_store_outside_dram():
    prog = program([store(0, 0, 2), finish()])
    size = prog.dram_size()
    prog.instructions[0].fields["dram_base"] = size // 16 - 1
    msg = fault_of(prog)
    assert_names(msg, "instruction 0", "store stage", "DRAM", f"0x{size + 15:x}")


@pytest.mark.parametrize("pad", [(1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 2)])
def test_store_with_padding(pad):
    insn = store(0, 256, 1)
    insn.fields.update(zip(("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"), pad, strict=True))
    msg = fault_of(program([insn, finish()]))
    assert_names(msg, "instruction 0", "store stage", "pad", str(max(pad)))


@pytest.mark.parametrize("mem", [UOP, WGT, INP, ACC, ACC8, 6, 7])
def test_store_of_memory_type_other_than_out(mem):
    msg = fault_of(program([store(0, 256, 1, mem=mem), finish()]))
    assert_names(msg, "instruction 0", "store stage", "OUT", str(mem))


@pytest.mark.parametrize("mem", [OUT, 6, 7])
def test_load_of_unknown_memory_type(mem):
    msg = fault_of(program([load(mem, 0, 256, 1), finish()]))
    assert_names(msg, "instruction 0", "compute stage", f"memory type {mem}")


# -- GEMM and ALU indices -------------------------------------------------------


def test_gemm_inp_index_out_of_range_after_loop_arithmetic():
    msg = fault_of(program([gemm(0, 1, (1, 3), src=(0, 1)), finish()], uops((0, INP_DEPTH - 2, 0))))
    assert_names(msg, "instruction 1", "compute stage", "GEMM", "inp", str(INP_DEPTH), "iteration (0, 2)")


def test_gemm_wgt_index_out_of_range_after_loop_arithmetic():
    msg = fault_of(program([gemm(0, 1, (3, 1), wgt=(1, 0)), finish()], uops((0, 0, WGT_DEPTH - 2))))
    assert_names(msg, "instruction 1", "compute stage", "wgt", str(WGT_DEPTH), "iteration (2, 0)")


@pytest.mark.parametrize("reset", [0, 1])
def test_gemm_acc_index_out_of_range_after_loop_arithmetic(reset):
    table = uops((0, 0, 0), (ACC_DEPTH - 5, 0, 0))
    msg = fault_of(program([gemm(0, 2, (2, 1), dst=(5, 0), reset=reset), finish()], table))
    assert_names(msg, "instruction 1", "compute stage", "acc", str(ACC_DEPTH), "iteration (1, 0), micro-op 1")


@pytest.mark.parametrize("which, uop, factors", [
    ("dst", (ACC_DEPTH - 3, 0, 0), {"dst": (0, 1)}),
    ("src", (0, ACC_DEPTH - 3, 0), {"src": (0, 1)}),
])
def test_alu_index_out_of_range(which, uop, factors):
    msg = fault_of(program([alu(ADD, 0, 1, (1, 5), **factors), finish()], uops(uop)))
    assert_names(msg, "instruction 1", "compute stage", "ALU add", which, str(ACC_DEPTH), "iteration (0, 3)")


@pytest.mark.parametrize("insn", [gemm(UOP_DEPTH - 1, UOP_DEPTH + 1), alu(ADD, UOP_DEPTH - 2, UOP_DEPTH + 3, imm=1)])
def test_micro_op_range_beyond_the_buffer(insn):
    msg = fault_of(program([insn, finish()]))
    assert_names(msg, "instruction 0", "compute stage", "micro-op", str(insn["uop_bgn"]), str(insn["uop_end"] - 1))


def test_unknown_opcode():
    raw = bytes([6]) + bytes(15)
    msg = fault_of(program([Instruction(kind="raw", fields={"opcode": 6}, raw=raw), finish()]))
    assert_names(msg, "instruction 0", "opcode 6")


@pytest.mark.parametrize("op", [5, 6, 7])
def test_unknown_alu_opcode(op):
    msg = fault_of(program([alu(op, 0, 1, imm=1), finish()]))
    assert_names(msg, "instruction 0", "compute stage", f"ALU opcode {op}")


# -- flags and the pipeline -----------------------------------------------------


@pytest.mark.parametrize("insn, stage, flag", [
    (load(INP, 0, 256, 1, pop_prev=1), "load", "pop_prev"),
    (load(WGT, 0, 16, 1, push_prev=1), "load", "push_prev"),
    (store(0, 256, 1, pop_next=1), "store", "pop_next"),
    (store(0, 256, 1, push_next=1), "store", "push_next"),
])
def test_flag_the_stage_cannot_have(insn, stage, flag):
    msg = fault_of(program([insn, finish()]))
    assert_names(msg, "instruction 0", f"{stage} stage", flag)


def test_deadlock_names_waiting_instructions_queues_and_tokens():
    insns = [load(INP, 0, 256, 1, push_next=1), store(0, 256, 1, pop_prev=1), finish(pop_next=1)]
    msg = fault_of(program(insns))
    assert_names(msg, "deadlock", "instruction 2", "compute stage", "s2g", "instruction 1", "store stage", "g2s",
                 "l2g=1", "g2l=0", "s2g=0", "g2s=0")


def test_deadlock_of_a_single_waiting_instruction():
    msg = fault_of(program([gemm(0, 1, pop_prev=1), finish()]))
    assert_names(msg, "deadlock", "instruction 0", "GEMM", "l2g", "l2g=0")


def test_missing_finish():
    msg = fault_of(program([load(INP, 0, 256, 1), alu(ADD, 0, 1, imm=1)]))
    assert_names(msg, "FINISH")


@pytest.mark.parametrize("after", [alu(ADD, 0, 1, imm=1), load(INP, 0, 256, 1), store(0, 256, 1)])
def test_instructions_left_after_finish(after):
    msg = fault_of(program([finish(), after]))
    assert_names(msg, "instruction 0", "FINISH", "1")


def test_exhausted_operation_budget():
    prog = program([alu(ADD, 0, 1, (4, 5), imm=1), finish()])
    run_program(prog, max_ops=22)  # 20 micro-op executions plus 2 instructions
    assert_names(fault_of(prog, max_ops=21), "instruction 1", "FINISH", "21")
    assert_names(fault_of(prog, max_ops=20), "instruction 0", "ALU", "20")


# -- through the command line ---------------------------------------------------

FAULTY_TAIL = [alu(ADD, 0, 1, (1, 3), dst=(0, ACC_DEPTH // 2))]  # the third execution leaves the accumulator


def run_cli(tmp_path, prog, *args):
    path = tmp_path / "prog.vbin"
    save_vbin(prog, path)
    return CliRunner().invoke(main, ["run", str(path), *args])


def test_cli_fault_exit_code_message_and_no_outputs(tmp_path):
    out = tmp_path / "y.npy"
    dump = tmp_path / "dump.bin"
    out_dir = tmp_path / "results"
    result = run_cli(tmp_path, matmul_program(extra=FAULTY_TAIL), "--output", f"y={out}", "--dump-dram",
                     f"0x1000:16:{dump}", "--out-dir", str(out_dir), "--profile", "--zero-inputs")
    assert result.exit_code == 3, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert_names(lines[0], "instruction 9", "compute stage", "acc", str(ACC_DEPTH))
    assert result.stdout == ""
    assert not out.exists() and not dump.exists()
    assert not out_dir.exists() or not any(out_dir.iterdir())
    assert not (tmp_path / "prog.out").exists()


def test_cli_deadlock_exit_code(tmp_path):
    result = run_cli(tmp_path, program([gemm(0, 1, pop_prev=1), finish()]))
    assert result.exit_code == 3
    assert "deadlock" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_cli_max_ops(tmp_path):
    prog = program([alu(ADD, 0, 1, (4, 5), imm=1), finish()])
    assert run_cli(tmp_path, prog, "--max-ops", "22").exit_code == 0
    result = run_cli(tmp_path, prog, "--max-ops", "20")
    assert result.exit_code == 3
    assert "instruction 0" in result.stderr

"""The race checker (missing tokens) and the portability lint (isa.md section 7)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vtasim.checks.lint import Linter
from vtasim.checks.races import RaceChecker
from vtasim.core.machine import Machine

from . import randprog
from .builders import (
    ACC,
    ACC8,
    ADD,
    INP,
    MAX,
    MIN,
    MUL,
    SHR,
    UOP,
    WGT,
    Image,
    alu,
    chain,
    config,
    finish,
    gemm,
    int32_bytes,
    load,
    matmul_program,
    nop,
    store,
    uops,
)

CFG = config("default")


def races(program):
    machine = Machine(program)
    checker = RaceChecker(machine)
    machine.run()
    return checker.report()


def race_pairs(program):
    return {(r.buffer, r.first, r.second) for r in races(program)}


# -- races ------------------------------------------------------------------------


def gemm_store_program(drop: str | None = None, reload: bool = False):
    """0 LOAD UOP, 1 LOAD INP, 2 GEMM, 3 STORE (, reload: 4 NOP, 5 LOAD INP of the stored bytes), FINISH.

    ``drop`` removes one token: "inp" (LOAD INP -> GEMM), "acc" (GEMM -> STORE)
    or "dram" (STORE -> the reloading LOAD INP).
    """
    img = Image(CFG)
    x = img.add("x", bytes(range(16)))
    y = img.add("y", bytes(16))
    insns = [
        load(UOP, 0, img.uop_elem(), 1),
        load(INP, 0, x // 16, 1, push_next=int(drop != "inp")),
        gemm(0, 1, pop_prev=int(drop != "inp"), push_next=int(drop != "acc")),
        store(0, y // 16, 1, pop_prev=int(drop != "acc"), push_prev=1),
    ]
    if reload:
        sync = drop != "dram"
        insns += [nop("compute", pop_next=1, push_prev=int(sync)), load(INP, 1, y // 16, 1, pop_next=int(sync)),
                  finish()]
    else:
        insns.append(finish(pop_next=1))
    return img.program(insns, uops((0, 0, 0)))


@pytest.mark.parametrize("reload", [False, True])
def test_correct_programs_have_no_races(reload):
    assert races(gemm_store_program(reload=reload)) == []
    assert races(matmul_program()) == []


def test_load_to_gemm_without_token_is_a_race():
    found = races(gemm_store_program("inp"))
    assert [(r.buffer, r.first, r.first_access, r.second, r.second_access) for r in found] == [
        ("inp", 1, "writes", 2, "reads")
    ]
    text = found[0].describe(gemm_store_program("inp"))
    assert "instruction 1" in text and "instruction 2" in text and "inp[0..0]" in text


def test_gemm_before_its_loads_without_token_is_a_race():
    # the GEMM (2) may run before the loads (3, 4) it should wait for
    assert race_pairs(matmul_program(racy=True)) == {("inp", 2, 3), ("wgt", 2, 4)}


def test_store_reading_acc_without_waiting_is_a_race():
    assert race_pairs(gemm_store_program("acc")) == {("acc", 2, 3)}


def test_load_of_stored_dram_without_token_is_a_race():
    found = races(gemm_store_program("dram", reload=True))
    assert [(r.buffer, r.first, r.second) for r in found] == [("dram", 3, 5)]
    assert "DRAM bytes" in found[0].describe(gemm_store_program("dram", reload=True))


def test_finish_that_waits_for_no_store_is_a_race():
    """FINISH tells the host the results are in DRAM; without popping the STORE's token it may come first."""
    program = gemm_store_program()
    early = program.instructions[:-1] + [finish()]  # FINISH no longer pops the store's token
    found = races(type(program)(**{**program.__dict__, "instructions": early}))
    assert [(r.buffer, r.first, r.first_access, r.second) for r in found] == [("dram", 3, "writes", 4)]
    assert "ends the program" in found[0].describe(program)


@settings(max_examples=30, deadline=None)
@given(randprog.bodies(), randprog.seeds)
def test_token_chained_random_programs_have_no_races(body, seed):
    assert races(randprog.build(config("batch2"), body, seed)) == []


# -- lint -----------------------------------------------------------------------------


def lint(program) -> list[str]:
    machine = Machine(program)
    linter = Linter(machine)
    machine.run()
    return sorted(w.rule for w in linter.report())


def lint_program(table=((0, 0, 0), (1, 1, 1)), acc=(7, 7, 7, 7), acc_mem=ACC, pads=None, body=None,
                 stored=2):
    """LOAD UOP, LOAD ACC 0..3, LOAD INP 0..1, LOAD WGT 0..1, GEMM 0..1 (touching acc 0, 1), body, STORE.

    ``pads`` maps a memory type to the padding of its load; the values of acc
    are broadcast to every lane of their element.
    """
    pads = pads or {}
    img = Image(CFG)
    lanes = CFG.batch * CFG.block_out
    img.add("inp", bytes(32))
    img.add("wgt", bytes(512))
    img.add("acc", int32_bytes([v for v in acc for _ in range(lanes)]))
    img.add("acc8", bytes(len(acc) * lanes))
    out = img.add("out", bytes(16 * 8))
    acc_seg = "acc8" if acc_mem == ACC8 else "acc"
    insns = [
        load(UOP, 0, img.uop_elem(), len(table), pad=pads.get(UOP, (0, 0, 0, 0))),
        load(acc_mem, 0, img.elem(acc_seg, acc_mem), len(acc), pad=pads.get(ACC, (0, 0, 0, 0))),
        load(INP, 0, img.elem("inp", INP), 2, pad=pads.get(INP, (0, 0, 0, 0))),
        load(WGT, 0, img.elem("wgt", WGT), 2, pad=pads.get(WGT, (0, 0, 0, 0))),
        gemm(0, 2),
        *(body or []),
        store(0, out // 16, stored),
    ]
    return img.program(chain(insns), uops(*table))


def test_clean_program_has_no_warnings():
    assert lint(lint_program()) == []


def test_mul_is_flagged():
    assert lint(lint_program(body=[alu(MUL, 0, 2, imm=3)])) == ["mul"]
    assert lint(lint_program(body=[alu(MUL, 0, 2)])) == ["mul"]


def test_acc_8bit_load_is_flagged():
    assert lint(lint_program(acc_mem=ACC8)) == ["acc8"]


@pytest.mark.parametrize("imm, flagged", [(0, False), (15, False), (-16, False), (16, True), (-17, True),
                                          (31, True), (-32768, True)])
def test_shift_by_immediate_outside_five_bits_is_flagged(imm, flagged):
    assert lint(lint_program(body=[alu(SHR, 0, 2, imm=imm)])) == (["shift-range"] if flagged else [])


@pytest.mark.parametrize("amounts, rules", [
    ((15, 0), []), ((0, 3), []), ((16, 0), ["shift-range"]), ((1 << 20, 1), ["shift-range"]),
    ((15, -16), ["shift-negative-tensor"]),  # the Chisel designs shift right only by tensor amounts
    ((0, -17), ["shift-negative-tensor", "shift-range"]),
])
def test_shift_by_tensor_values_outside_five_bits_is_flagged(amounts, rules):
    table = ((0, 0, 0), (1, 1, 1), (0, 2, 0))
    body = [alu(SHR, 2, 3, (1, 2), dst=(0, 1), src=(0, 1))]  # acc[0..1] >>= acc[2..3]
    prog = lint_program(table, acc=(7, 7, *amounts), body=body)
    assert lint(prog) == rules


@pytest.mark.parametrize("mem, flagged", [(WGT, True), (UOP, True), (INP, False), (ACC, False)])
def test_padding_ignored_by_hardware_is_flagged_on_wgt_and_uop_only(mem, flagged):
    pad = (0, 1, 0, 0) if mem == ACC else (0, 0, 0, 1)  # ACC: a padding row after acc 0..3
    assert lint(lint_program(pads={mem: pad})) == (["pad-ignored"] if flagged else [])


def test_storing_loaded_but_untouched_accumulators_is_flagged():
    assert lint(lint_program(stored=3)) == ["stale-store"]
    assert lint(lint_program(stored=3, acc_mem=ACC8)) == ["acc8", "stale-store"]


def test_copy_through_the_alu_makes_a_store_portable():
    table = ((0, 0, 0), (1, 1, 1), (2, 2, 0), (3, 3, 0))
    assert lint(lint_program(table, body=[alu(SHR, 2, 4, imm=0)], stored=4)) == []


def test_consecutive_micro_ops_with_the_same_destination_break_both_rules():
    assert lint(lint_program(table=((0, 0, 0), (0, 1, 1)), stored=1)) == ["acc-distance", "uop-list-hazard"]


def test_same_destination_far_apart_or_not_executed_is_not_flagged():
    table = ((0, 0, 0), (1, 1, 1), (2, 0, 0), (0, 1, 0))  # 0 1 2 0: three apart
    assert lint(lint_program(table=table, body=[gemm(0, 4)])) == []
    assert lint(lint_program(table=((0, 0, 0), (1, 1, 1), (5, 0, 0), (5, 0, 0)))) == []


CLEAN = ((0, 0, 0), (1, 1, 1))  # the kernel of lint_program's own GEMM


def kernel_warnings(table, iters=(1, 1), dst=(0, 0), use_alu=False, src=None):
    """The lint's warnings on one more GEMM (or ALU shift by 0) over the micro-ops ``table``, after the clean one.

    The ALU's src is its dst unless ``src`` gives the src factors of a tensor operation.
    """
    end = len(CLEAN) + len(table)
    if use_alu:
        table = tuple((d, d if src is None else s, w) for d, s, w in table)
        insn = alu(SHR, len(CLEAN), end, iters, dst, dst if src is None else src, imm=0 if src is None else None)
    else:
        insn = gemm(len(CLEAN), end, iters, dst)
    program = lint_program(CLEAN + tuple(table), body=[insn])
    machine = Machine(program)
    linter = Linter(machine)
    machine.run()
    return [(w.rule, w.describe(program)) for w in linter.report()]


@pytest.mark.parametrize("use_alu", [False, True])
def test_a_destination_two_micro_ops_back_in_the_list_is_refused_by_the_runtime(use_alu):
    (rule, text), (rule2, text2) = kernel_warnings(((0, 0, 0), (1, 1, 1), (0, 1, 0)), use_alu=use_alu)
    assert rule == "acc-distance" and "2 executions later" in text and "(breaks on hls)" in text
    assert rule2 == "uop-list-hazard"
    assert "micro-ops 2 and 4 (one apart in the list) both write acc[0]" in text2 and "runtime refuses" in text2


def test_the_list_rule_looks_at_the_list_not_at_the_executions():
    # a reset reads nothing, so writing one element twice in a row is harmless: the runtime refuses it all the same
    end = len(CLEAN) + 3
    reset = gemm(len(CLEAN), end, reset=1)
    assert lint(lint_program(CLEAN + ((0, 0, 0), (1, 1, 1), (0, 0, 0)), body=[reset])) == ["uop-list-hazard"]
    # executions 0 | 0: the list is fine, the executions are not
    assert [r for r, _ in kernel_warnings(((0, 0, 0),), (1, 2))] == ["acc-distance"]


@pytest.mark.parametrize("use_alu", [False, True])
@pytest.mark.parametrize("table, iters, dst, where, distance", [
    (((0, 0, 0),), (1, 2), (0, 0), "micro-op 2 of iteration (0, 0) writes acc[0] and the next execution, "
     "micro-op 2 of iteration (0, 1)", 1),
    (((0, 0, 0),), (2, 1), (0, 0), "micro-op 2 of iteration (0, 0) writes acc[0] and the next execution, "
     "micro-op 2 of iteration (1, 0)", 1),
    (((0, 0, 0), (1, 1, 1)), (1, 2), (0, 1), "micro-op 3 of iteration (0, 0) writes acc[1] and the next execution, "
     "micro-op 2 of iteration (0, 1)", 1),
    (((0, 0, 0), (1, 1, 1)), (2, 2), (1, 0), "micro-op 3 of iteration (0, 1) writes acc[1] and the next execution, "
     "micro-op 2 of iteration (1, 0)", 1),
    (((0, 0, 0), (1, 1, 1)), (1, 2), (0, 0), "micro-op 2 of iteration (0, 0) writes acc[0] and 2 executions later, "
     "micro-op 2 of iteration (0, 1)", 2),
    (((0, 0, 0),), (2, 2), (1, 1), "micro-op 2 of iteration (0, 1) writes acc[1] and the next execution, "
     "micro-op 2 of iteration (1, 0)", 1),
    (((0, 0, 0),), (3, 1), (1, 0), None, 0),  # 0 1 2
    (((0, 0, 0),), (2, 3), (1, 1), "micro-op 2 of iteration (0, 1) writes acc[1] and 2 executions later, "
     "micro-op 2 of iteration (1, 0)", 2),  # 0 1 2 1 2 3
])
def test_executions_closer_than_three_on_one_element_are_flagged(table, iters, dst, where, distance, use_alu):
    found = kernel_warnings(table, iters, dst, use_alu)
    if distance == 0:
        assert found == []
        return
    (rule, text), = found
    assert rule == "acc-distance" and where in text
    designs = "hls" if distance == 2 else ("chisel-2021, hls" if use_alu else "chisel-2019, hls")
    assert text.endswith(f"(breaks on {designs})")


@pytest.mark.parametrize("table, iters, dst", [
    (((0, 0, 0), (1, 1, 1)), (2, 2), (2, 0)),  # 0 1 0 1 2 3 2 3: two apart
    (((0, 0, 0), (1, 1, 1), (2, 0, 0)), (2, 1), (0, 0)),  # 0 1 2 0 1 2
])
def test_resets_read_nothing_so_only_the_list_rule_applies(table, iters, dst):
    end = len(CLEAN) + len(table)
    program = lint_program(CLEAN + tuple(table), body=[gemm(len(CLEAN), end, iters, dst, reset=1)])
    assert lint(program) == []


def test_executions_that_move_on_are_not_flagged():
    assert kernel_warnings(((0, 0, 0),), (2, 2), (2, 1)) == []  # 0 1 2 3
    assert kernel_warnings(((0, 0, 0), (1, 1, 1), (2, 0, 0)), (2, 1), (0, 0)) == []  # 0 1 2 0 1 2
    assert kernel_warnings(((0, 0, 0),), (0, 2), (0, 0)) == []  # no executions


def test_an_alu_reading_a_source_written_just_before_is_flagged():
    # acc[k + 1] = acc[k + 1] + acc[k] for k = 0, 1, 2: a prefix sum, each source written by the execution before
    table = ((1, 0, 0),)
    (rule, text), = kernel_warnings(table, (1, 3), (0, 1), use_alu=True, src=(0, 1))
    assert rule == "acc-distance" and "via src" in text and text.endswith("(breaks on chisel-2021, hls)")
    # the same sum with sources three elements back reads nothing written in the last two executions
    assert kernel_warnings(((3, 0, 0),), (1, 3), (0, 1), use_alu=True, src=(0, 1)) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=5), st.integers(0, 3), st.integers(0, 3),
       st.integers(0, 2), st.integers(0, 2))
def test_lint_matches_both_rules_spelled_out(dsts, iter_out, iter_in, f_out, f_in):
    assume(max(dsts) + max(0, iter_out - 1) * f_out + max(0, iter_in - 1) * f_in <= 3)
    runtime = any(d in dsts[max(0, t - 2):t] for t, d in enumerate(dsts))
    executions = [d + i * f_out + j * f_in for i in range(iter_out) for j in range(iter_in) for d in dsts]
    close = any(a == b for k in (1, 2) for a, b in zip(executions, executions[k:], strict=False))
    rules = [r for r, _ in kernel_warnings([(d, 0, 0) for d in dsts], (iter_out, iter_in), (f_out, f_in))]
    assert rules == ["acc-distance"] * close + ["uop-list-hazard"] * runtime


@pytest.mark.parametrize("src, flagged", [(0, True), (2, False)])
def test_an_immediate_alu_whose_src_is_not_its_dst_is_flagged(src, flagged):
    program = lint_program(CLEAN + ((2, src, 0),), body=[alu(SHR, 2, 3, imm=1)])  # acc[2] >>= 1
    assert lint(program) == (["imm-src"] if flagged else [])


def test_an_immediate_alu_with_loop_factors_unlike_dst_is_flagged():
    program = lint_program(CLEAN + ((2, 2, 0),), body=[alu(SHR, 2, 3, (1, 2), dst=(0, 1), src=(0, 0), imm=1)])
    assert lint(program) == ["imm-src"]
    same = lint_program(CLEAN + ((2, 2, 0),), body=[alu(SHR, 2, 3, (1, 2), dst=(0, 1), src=(0, 1), imm=1)])
    assert lint(same) == []


@pytest.mark.parametrize("op, imm, noted", [(ADD, -1, True), (MAX, -128, True), (MIN, 5, False), (SHR, -3, False)])
def test_negative_immediates_are_a_note_for_the_2019_core(op, imm, noted):
    machine = Machine(lint_program(body=[alu(op, 0, 2, imm=imm)]))
    linter = Linter(machine)
    machine.run()
    found = linter.report()
    assert [w.rule for w in found] == (["imm-zero-extend"] if noted else [])
    assert all(w.note for w in found)


def queue_program(pushes: int):
    """``pushes`` loads each push l2g before any compute instruction pops."""
    img = Image(CFG)
    x = img.add("x", bytes(16))
    insns = [load(INP, k, x // 16, 1, push_next=1) for k in range(pushes)]
    insns += [nop("compute", pop_prev=1) for _ in range(pushes)]
    return img.program([*insns, finish()])


def test_token_queue_deeper_than_hardware_is_flagged():
    assert lint(queue_program(8)) == []
    assert lint(queue_program(9)) == ["queue-depth-sim"]  # a note: the HLS simulation top holds 8
    # the Chisel designs' 8-bit counters hold 255 (and the note stays)
    assert lint(queue_program(256)) == ["queue-depth", "queue-depth-sim"]

"""The profile keys that tell the three designs apart, each on a hand-computed case.

One instruction on an idle machine (vtasim.timing.run.instruction_cycles: from
its start to its end). By the rules of docs/timing.md, a load's first request
goes out ``1 + dma.<type>_fixed`` cycles after its start and a burst of L beats
accepted in cycle c ends in ``c + read_setup + N + L - 1``; a store's burst
accepted in c sends data from ``c + write_setup``, one beat per cycle plus
``store_bubble`` after each output element, and is answered
``write_response + N`` cycles after its last beat. The expected values below
are worked out from those rules, not by running the model.
"""

from __future__ import annotations

import pytest

from tests.vtasim.builders import ACC, INP, UOP, WGT, finish, load, nop, store
from vtasim.timing.engine import simulate
from vtasim.timing.plan import execution_cycles, plan
from vtasim.timing.profile import load_profile, with_overrides
from vtasim.timing.run import instruction_cycles
from vtasm.config import default_config
from vtasm.errors import ConfigError

CFG = default_config()  # input elements of 16 bytes (2 beats), weights of 256 (32 beats), outputs of 16


def _profile(**values):
    return with_overrides(load_profile("chisel-2019"), values)  # read_setup 2, write_setup 1, response 2, N 16


def test_dma_fixed_delays_the_first_request():
    insn = load(INP, 0, 0, 4)
    p = _profile()
    assert instruction_cycles(insn, CFG, p) == 1 + p.read_setup + p.latency + 8 - 1
    assert instruction_cycles(insn, CFG, _profile(dma_inp_fixed=7)) == 1 + 7 + p.read_setup + p.latency + 8 - 1
    assert instruction_cycles(insn, CFG, _profile(dma_wgt_fixed=7)) == instruction_cycles(insn, CFG, p)


def test_the_micro_op_port_width_sets_the_beats():
    insn = load(UOP, 0, 0, 10)  # 40 bytes: 5 beats of 8 bytes, 10 of 4
    p = _profile()
    assert instruction_cycles(insn, CFG, p) == 1 + p.read_setup + p.latency + 5 - 1
    assert instruction_cycles(insn, CFG, _profile(dma_uop_beat_bytes=4)) == 1 + p.read_setup + p.latency + 10 - 1


def test_rows_one_at_a_time_weights_too():
    insn = load(WGT, 0, 0, 1, y=3)  # three rows of 32 beats
    p = _profile(reads_in_flight=16, client_reads_in_flight=16)
    overlapped = instruction_cycles(insn, CFG, p)
    # requests at s + 1, s + 2, s + 3; the data bus is the limit: 96 beats from s + 1 + read_setup + N
    assert overlapped == 1 + p.read_setup + p.latency + 96 - 1
    serial = instruction_cycles(insn, CFG, with_overrides(p, {"row_setup": 5}))
    # each row waits for the last beat of the one before, plus row_setup, before its request; the first row waits
    # row_setup after the start too (every row a memcpy of its own)
    assert serial == 1 + 5 + 3 * (p.read_setup + p.latency + 32 - 1) + 2 * (1 + 5)


def test_a_slow_weight_client_takes_its_beats_at_its_rate():
    insn = load(WGT, 0, 0, 1)
    p = _profile(wgt_beat_cycles=2)
    assert instruction_cycles(insn, CFG, p) == 1 + p.read_setup + p.latency + 2 * 32 - 1


def test_padding_by_beat_or_by_element():
    insn = load(INP, 0, 0, 4, pad=(0, 0, 1, 1))  # one element of padding on each side of the row
    p = _profile()
    by_beat = instruction_cycles(insn, CFG, p)
    assert by_beat == 1 + 2 + p.read_setup + p.latency + 8 - 1 + 2  # 2 beats of padding before and after
    assert instruction_cycles(insn, CFG, _profile(dma_pad_by_element=1)) == by_beat - 2


@pytest.mark.parametrize("command", [16, 32, 64, 128])
def test_a_store_waits_for_its_answers_once_per_command(command):
    insn = store(0, 0, 64)  # 128 beats: 8 bursts of 16 beats (8 elements, 7 bubbles: 23 cycles each)
    p = _profile(burst_beats=16)
    per_burst = instruction_cycles(insn, CFG, with_overrides(p, {"write_command_beats": 16}))
    # alone, every burst is accepted the cycle after the answer to the one before
    one = p.write_setup + 23 - 1 + p.write_response + p.latency
    assert per_burst == 1 + 8 * one + 7
    # within a command the next burst is accepted the cycle after the last one's data, not after its answer:
    # write_response + N saved for every burst that does not begin a command
    merged = 8 - 128 // command
    got = instruction_cycles(insn, CFG, with_overrides(p, {"write_command_beats": command}))
    assert got == per_burst - merged * (p.write_response + p.latency)


def test_the_new_keys_are_checked():
    with pytest.raises(ConfigError, match="read_priority must list"):
        _profile(read_priority=("fetch", "inp"))
    with pytest.raises(ConfigError, match="pad_by_element must be 0 or 1"):
        _profile(dma_pad_by_element=2)
    with pytest.raises(ConfigError, match="write_command_beats must be at least 1"):
        _profile(write_command_beats=0)


def test_an_acc8_load_moves_batch_x_block_out_bytes_an_element():
    """An ACC_8BIT element is BATCH x BLOCK_OUT bytes (isa.md), 16 on the default configuration: 2 beats, as the
    functional simulator moves it (the timing model once took the 64 bytes of an int32 accumulator element)."""
    from tests.vtasim.builders import ACC8

    p = _profile()
    assert CFG.batch * CFG.block_out == 16
    assert instruction_cycles(load(ACC8, 0, 0, 4), CFG, p) == 1 + p.dma_acc_fixed + p.read_setup + p.latency + 4 * 2 - 1


def _timeline(insns, p):
    return simulate(plan(insns, CFG, p), p)


def test_an_empty_transfer_is_a_nop_or_a_call_of_its_core():
    """x_size 0: the Chisel modules skip the transfer (sync_cycles); the HLS cores call their function for it,
    which pays the type's fixed cost and each (empty) row's setup, with no memory request."""
    p = _profile(sync_cycles=3, dma_inp_fixed=7, dma_acc_fixed=9, row_setup=5)
    assert instruction_cycles(nop("load"), CFG, p) == 3
    assert instruction_cycles(load(ACC, 0, 0, 0, y=2), CFG, p) == 3
    call = with_overrides(p, {"dma_empty_is_call": 1})
    assert instruction_cycles(nop("load"), CFG, call) == 1 + 7
    assert instruction_cycles(load(ACC, 0, 0, 0, y=2), CFG, call) == 1 + 9 + 2 * 5
    assert instruction_cycles(nop("store"), CFG, with_overrides(call, {"dma_out_fixed": 4})) == 1 + 4
    assert not _timeline([load(ACC, 0, 0, 0, y=2), finish()], call).transfers[1:]  # only the fetch reads


def test_padding_during_the_reads_hides_behind_the_latency():
    insn = load(INP, 0, 0, 4, pad=(1, 1, 1, 1))  # 8 beats; 6 + 6 + 2 elements of padding
    for n, expected in ((0, 14 + 8), (16, 1 + 2 + 16 + 8 - 1)):
        p = _profile(dma_pad_by_element=1, dma_pad_during_reads=1, latency=n)
        assert instruction_cycles(insn, CFG, p) == expected  # the padding, then the data; or the data's arrival


def test_a_streaming_fetch_dispatches_each_instruction_as_it_arrives():
    insns = [nop("compute") for _ in range(4)] + [finish()]
    p = _profile(fetch_chunk=128, sync_cycles=10)
    chunked = _timeline(insns, p).insns
    first = p.fetch_start + p.read_setup + p.latency  # the first beat of the chunk
    assert chunked[0].ready == first + 10 + 1  # 5 instructions of 2 beats, then dispatched the next cycle
    streamed = _timeline(insns, with_overrides(p, {"fetch_overlap": 1})).insns
    assert streamed[0].ready == first + 2 + 1
    assert [t.start for t in streamed[1:4]] == [streamed[0].start + 10 * k for k in (1, 2, 3)]


def test_the_store_tokens_own_latency():
    insns = [nop("store", push_prev=1), finish(pop_next=1)]
    for latency in (1, 6):
        times = _timeline(insns, _profile(s2g_latency=latency)).insns
        assert times[1].start == max(times[1].ready, times[0].end + latency)
    assert _timeline(insns, _profile(s2g_latency=6)).cycles > _timeline(insns, _profile(s2g_latency=1)).cycles


def test_a_reset_gemm_has_its_own_drain():
    p = _profile(gemm_drain=6, gemm_reset_drain=0)
    assert execution_cycles(p, "gemm", 16, 16, False) == 16 * p.gemm_per_execution + 6
    assert execution_cycles(p, "gemm", 16, 16, True) == 16 * p.gemm_reset_per_execution


def test_an_alu_instruction_may_push_its_tokens_before_its_end():
    from tests.vtasim.builders import alu

    insns = [alu(0, 0, 1, iters=(1, 4), imm=1, push_next=1), store(0, 0, 1, pop_prev=1), finish()]
    for lead in (0, 3):
        p = _profile(alu_token_lead=lead)
        times = _timeline(insns, p).insns
        assert times[1].start == max(times[1].ready, times[0].end - lead + p.token_latency)
        assert times[1].start == times[0].end - lead + p.token_latency  # the store waited for the token

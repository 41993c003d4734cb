"""The timing model on hand-computed cases, and its profiles.

The expected cycle counts below are worked out by hand from the rules in
docs/timing.md (a read burst of L beats accepted in cycle c delivers its first
beat in c + read_setup + N and its last L - 1 cycles later; fetch dispatches
one instruction per cycle after its burst; a token pushed in cycle t can be
popped from t + token_latency), not by running the model.
"""

from __future__ import annotations

import pytest

from tests.vtasim.builders import ADD, OUT, UOP, alu, chain, finish, gemm, load, store
from vtasim.timing.engine import simulate
from vtasim.timing.plan import plan
from vtasim.timing.profile import BUILTIN, load_profile, parse_override, with_overrides
from vtasim.timing.run import time_program
from vtasm.config import default_config
from vtasm.errors import ConfigError, SimFault
from vtasm.program import Program


def _cycles(insns, latency: int) -> int:
    cfg = default_config()
    p = with_overrides(load_profile("chisel-2019"), {"latency": latency})
    return simulate(plan(insns, cfg, p), p).cycles


@pytest.mark.parametrize("latency", [0, 16, 64])
@pytest.mark.parametrize("n", [1, 10])
def test_uop_load_then_gemm(latency, n):
    p = load_profile("chisel-2019")
    assert (p.read_setup, p.fetch_start, p.fetch_dispatch, p.insn_gap, p.gemm_fixed) == (2, 0, 1, 0, 0)
    insns = [load(UOP, 0, 0, 1), gemm(0, 1, (1, n)), finish()]
    # fetch: 3 instructions = 6 beats accepted at 0, last beat 2 + N + 5, dispatched at N + 8, N + 9, N + 10
    # uop load: visible N + 9, starts then, requests at N + 10, its one beat lands at (N + 10) + 2 + N
    uop_end = 2 * latency + 12
    gemm_cycles = p.gemm_per_execution * n + (p.gemm_drain if n > 1 else 0)
    assert _cycles(insns, latency) == uop_end + gemm_cycles + p.finish_cycles


@pytest.mark.parametrize("latency", [0, 16, 64])
def test_store_then_finish_waits_for_the_acknowledgement(latency):
    p = load_profile("chisel-2019")
    insns = chain([store(0, 0, 2, mem=OUT)])  # store pushes to compute, FINISH pops it
    assert len(insns) == 2
    # fetch: 4 beats, last beat N + 5; store dispatched N + 6 (visible N + 7), FINISH N + 7
    # the write is accepted at N + 8; 2 elements of 2 beats with one bubble between = 5 data cycles
    first = latency + 8 + p.write_setup
    last = first + 2 * 2 + p.store_bubble - 1
    ack = last + p.write_response + latency
    assert _cycles(insns, latency) == ack + p.token_latency + p.finish_cycles


def test_two_loads_share_one_read_port():
    """Two back-to-back 16-element input loads cost two full bursts (one read in flight at a time)."""
    p = load_profile("chisel-2019")
    one = _cycles(chain([load(2, 0, 0, 16)]), 16)
    two = _cycles(chain([load(2, 0, 0, 16), load(2, 16, 16, 16)]), 16)
    # the second load starts when the first ends, requests one cycle later and gets its last beat
    # read_setup + N + 31 cycles after that; the fetch burst is 2 beats longer (one more instruction)
    assert two - one == 2 + 1 + p.read_setup + 16 + 31


def test_timing_does_not_depend_on_data():
    cfg = default_config()
    insns = [load(UOP, 0, 0, 1), gemm(0, 1, (4, 4)), finish()]
    from vtasm.encoding import MicroOp
    from vtasm.program import Segment

    a = Program(cfg, insns, [MicroOp(0, 0, 0)], segments=[Segment("x", 0x1000, bytes(64))])
    b = Program(cfg, insns, [MicroOp(0, 0, 0)], segments=[Segment("x", 0x1000, bytes(range(64)))])
    p = load_profile()
    assert time_program(a, p).report.cycles == time_program(b, p).report.cycles


def test_cycles_grow_with_memory_latency():
    insns = chain([load(2, 0, 0, 64, y=4), gemm(0, 1, (4, 4)), store(0, 0, 4)])
    values = [_cycles(insns, n) for n in (0, 8, 16, 64, 256)]
    assert values == sorted(values) and len(set(values)) == len(values)


def test_deadlock_is_a_fault_naming_the_waiting_module():
    insns = [gemm(0, 1, (1, 1), pop_prev=1), finish()]
    with pytest.raises(SimFault, match="compute at instruction 0 waits on l2g"):
        _cycles(insns, 16)


def test_report_adds_up():
    cfg = default_config()
    insns = chain([load(2, 0, 0, 16), gemm(0, 1, (4, 4)), store(0, 0, 4)])
    from vtasm.encoding import MicroOp

    report = time_program(Program(cfg, insns, [MicroOp(0, 0, 0)]), load_profile()).report
    for name in ("load", "compute", "store"):
        m = report.modules[name]
        assert m["busy"] + m["token"] + m["memory"] + m["idle"] == report.cycles
    assert report.macs == 16 * cfg.batch * cfg.block_in * cfg.block_out
    assert report.as_dict()["cycles"] == report.cycles and isinstance(report.as_dict()["cycles"], int)


def test_work_past_finish_is_not_counted_in_the_run_and_is_reported():
    """A FINISH that pops no token from the store stage can end the run with the STORE still going: the
    store's time is counted up to the end of the run (the four figures still add up) and reported."""
    cfg = default_config()
    from vtasm.encoding import MicroOp

    body = chain([load(2, 0, 0, 16), gemm(0, 1, (4, 4)), store(0, 0, 64)])
    early = [*body[:-1], finish()]  # FINISH waits for nothing
    report = time_program(Program(cfg, early, [MicroOp(0, 0, 0)]), load_profile()).report
    for name in ("fetch", "load", "compute", "store"):
        m = report.modules[name]
        assert m["busy"] + m["token"] + m["memory"] + m["idle"] == report.cycles
    assert report.modules["store"]["after_finish"] == 1
    assert "still running when FINISH ended the run" in report.text()
    waited = time_program(Program(cfg, body, [MicroOp(0, 0, 0)]), load_profile()).report
    assert waited.modules["store"]["after_finish"] == 0 and waited.cycles > report.cycles
    assert report.write_bytes == 0 < waited.write_bytes  # bytes still on their way at FINISH are not in the run


def test_utilisation_against_peak_by_hand():
    """A lone 16-execution GEMM: 16 x 256 MACs; peak is 256 MACs per 4 cycles, so 16 * 4 / cycles."""
    cfg = default_config()
    from vtasm.encoding import MicroOp

    p = load_profile("chisel-2019")
    gemm_only = time_program(Program(cfg, [load(UOP, 0, 0, 1), gemm(0, 1, (4, 4)), finish()],
                                     [MicroOp(0, 0, 0)]), p).report
    assert gemm_only.gemm_utilisation == pytest.approx(16 * 4 / gemm_only.cycles)
    assert gemm_only.peak_gops == pytest.approx(2 * 256 / 4 * 100e6 / 1e9)  # 12.8 at 100 MHz
    assert gemm_only.alu_utilisation == 0.0
    # 12 ALU executions with an immediate: at best one per 5 cycles, 16 lanes each
    alu_run = time_program(Program(cfg, [load(UOP, 0, 0, 1), alu(ADD, 0, 1, (3, 4), imm=1), finish()],
                                   [MicroOp(0, 0, 0)]), p).report
    assert alu_run.alu_utilisation == pytest.approx(12 * 5 / alu_run.cycles)
    assert alu_run.as_dict()["alu"]["lane_ops"] == 12 * 16


# -- profiles -----------------------------------------------------------------


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_profiles_load(name):
    p = load_profile(name)
    assert p.name == name and p.clock_mhz > 0 and p.bus_bytes >= 8


def test_profile_file_errors(tmp_path):
    text = (tmp_path / "base.toml")
    from importlib import resources

    base = resources.files("vtasim.timing").joinpath("profiles/chisel-2019.toml").read_text()
    text.write_text(base.replace("[gemm]", "[gemm]\nspeed = 3"))
    with pytest.raises(ConfigError, match="unknown profile key gemm.speed"):
        load_profile(str(text))
    text.write_text(base.replace("bus_bytes = 8", "bus_bytes = 12"))
    with pytest.raises(ConfigError, match="power of two"):
        load_profile(str(text))
    text.write_text(base.replace("latency = 16", "latency = -1"))
    with pytest.raises(ConfigError, match="memory.latency must be at least 0"):
        load_profile(str(text))
    text.write_text(base.replace("[alu]", "[alu"))
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_profile(str(text))
    text.write_text(base.replace("clock_mhz", 'fitted = ["gemm.fixed", "gemm.speed"]\nclock_mhz'))
    with pytest.raises(ConfigError, match=r"fitted must list profile keys .*gemm.speed"):
        load_profile(str(text))
    with pytest.raises(ConfigError, match="no such profile"):
        load_profile(str(tmp_path / "missing.toml"))


def test_overrides():
    assert parse_override("memory.latency=64") == ("latency", 64)
    assert parse_override("latency=64") == ("latency", 64)
    assert parse_override("clock_mhz=250.5") == ("clock_mhz", 250.5)
    assert parse_override("gemm.drain=3") == ("gemm_drain", 3)
    with pytest.raises(ConfigError, match="ambiguous"):
        parse_override("drain=3")
    with pytest.raises(ConfigError, match="unknown profile key"):
        parse_override("memory.speed=3")
    with pytest.raises(ConfigError, match="expected a number"):
        parse_override("latency=fast")
    with pytest.raises(ConfigError, match="must be at least 1"):
        with_overrides(load_profile(), {"bus_bytes": 0})
    assert with_overrides(load_profile(), {"clock_mhz": 200}).clock_mhz == 200.0


def test_the_fitted_keys_are_declared_in_the_profiles_and_name_real_keys():
    """The keys a profile's values were fitted on are data in its file (timing_fit.py's default)."""
    from vtasim.timing.profile import profile_keys

    assert load_profile("chisel-2019").fitted == ()
    for name in ("hls", "chisel-2021"):
        fitted = load_profile(name).fitted
        assert "memory.write_setup" in fitted and set(fitted) <= set(profile_keys())
    assert "memory.row_setup" in load_profile("hls").fitted

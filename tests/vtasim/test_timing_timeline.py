"""The timing model's pictures: the Chrome trace (trace-event JSON) and the Gantt chart (PNG)."""

from __future__ import annotations

import json
import sys
from collections import defaultdict

import pytest

from vtacc.frontend.check import check_source
from vtacc.program_builder import compile_file
from vtasim.timing.chrome_trace import MODULE_TIDS, TRACKS, chrome_trace, write_chrome_trace
from vtasim.timing.gantt import draw_gantt
from vtasim.timing.plan import QUEUES
from vtasim.timing.profile import load_profile, with_overrides
from vtasim.timing.run import time_program
from vtasm.config import default_config
from vtasm.encoding import MicroOp
from vtasm.errors import UsageError
from vtasm.formats.dump import format_header
from vtasm.program import Program, Segment

from .builders import ACC, ADD, INP, PAGE, REPO, UOP, WGT, alu, chain, gemm, load, nop, store

# Every kind of instruction once, in token order (chain adds the flags and FINISH).
KINDS = chain([load(INP, 0, PAGE // 16, 4), load(WGT, 0, 2 * PAGE // 256, 1), nop("load"),
               load(UOP, 0, 3 * PAGE // 4, 1), load(ACC, 0, 4 * PAGE // 64, 1), gemm(0, 1, iters=(2, 2)),
               alu(ADD, 0, 1, imm=3), nop("compute"), store(0, 5 * PAGE // 16, 1), nop("store")])
KIND_NAMES = ["LOAD INP", "LOAD WGT", "NOP-MEMORY-STAGE", "LOAD UOP", "LOAD ACC", "GEMM", "ALU - add imm",
              "NOP-COMPUTE-STAGE", "STORE", "NOP-STORE-STAGE", "FINISH"]


@pytest.fixture(scope="module")
def kinds() -> Program:
    segments = [Segment("x", PAGE, bytes(64)), Segment("w", 2 * PAGE, bytes(256)), Segment("b", 4 * PAGE, bytes(64)),
                Segment("y", 5 * PAGE, bytes(16))]
    return Program(default_config(), KINDS, [MicroOp(0, 0, 0)], segments=segments, uop_addr=3 * PAGE,
                   insn_addr=6 * PAGE)


@pytest.fixture(scope="module")
def compiled() -> Program:
    path = REPO / "examples" / "conv2d.vk"
    return compile_file(check_source(path.read_text(), "conv2d.vk"), default_config()).program


@pytest.fixture(scope="module", params=["kinds", "compiled"])
def program(request) -> Program:
    return request.getfixturevalue(request.param)


def trace_of(program: Program, profile=None) -> tuple[dict, object]:
    result = time_program(program, profile or load_profile())
    return chrome_trace(result, program), result


def insn_slices(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"]
            if e["ph"] == "X" and e["tid"] in MODULE_TIDS.values() and e["cat"] != "token wait"]


def test_every_event_is_a_well_formed_trace_event(program):
    trace, _ = trace_of(program)
    assert json.loads(json.dumps(trace)) == trace
    assert trace["traceEvents"]
    for e in trace["traceEvents"]:
        assert {"ph", "ts", "pid", "tid", "name"} <= e.keys(), e
        assert e["ph"] in ("X", "C", "M")
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["ts"] >= 0
            assert e["args"]["end_cycle"] - e["args"]["start_cycle"] == e["args"]["cycles"] >= 0


def test_one_slice_per_instruction_with_its_index(program):
    trace, result = trace_of(program)
    slices = insn_slices(trace)
    assert sorted(e["args"]["index"] for e in slices) == list(range(len(program.instructions)))
    for e in slices:
        it = result.timeline.insns[[i.index for i in result.timeline.insns].index(e["args"]["index"])]
        assert (e["args"]["start_cycle"], e["args"]["end_cycle"]) == (it.start, it.end)
        assert e["tid"] == MODULE_TIDS[it.module]
        assert e["args"]["token_wait"] == it.start - it.ready and e["args"]["memory_wait"] == it.mem_wait


def test_slices_on_one_track_never_overlap(program):
    trace, _ = trace_of(program)
    tracks = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            tracks[e["tid"]].append(e)
    assert set(tracks) <= set(TRACKS)
    for events in tracks.values():
        events.sort(key=lambda e: (e["args"]["start_cycle"], e["args"]["end_cycle"]))
        for a, b in zip(events, events[1:], strict=False):
            assert a["args"]["end_cycle"] <= b["args"]["start_cycle"], (a, b)
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-9, (a, b)


def test_timestamps_are_microseconds_at_the_profiles_clock(compiled):
    profile = with_overrides(load_profile(), {"clock_mhz": 150.0})
    trace, result = trace_of(compiled, profile)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            assert e["ts"] == pytest.approx(e["args"]["start_cycle"] / 150.0, abs=1e-6)
            assert e["ts"] + e["dur"] == pytest.approx(e["args"]["end_cycle"] / 150.0, abs=1e-6)
    assert trace["otherData"]["cycles"] == result.timeline.cycles


def test_token_waits_are_slices_before_the_instruction(compiled):
    trace, result = trace_of(compiled)
    waits = {e["args"]["index"]: e for e in trace["traceEvents"] if e.get("cat") == "token wait"}
    waited = {it.index: it for it in result.timeline.insns if it.start > it.ready}
    assert waits and set(waits) == set(waited)
    for index, e in waits.items():
        assert (e["args"]["start_cycle"], e["args"]["end_cycle"]) == (waited[index].ready, waited[index].start)
        assert e["name"].startswith("wait ")


def test_memory_bursts_are_slices_named_by_client(program):
    trace, result = trace_of(program)
    bursts = [e for e in trace["traceEvents"] if e.get("cat") == "burst"]
    assert len(bursts) == len(result.timeline.transfers)
    for e in bursts:
        assert TRACKS[e["tid"]] == ("memory write" if e["name"] == "out" else "memory read")
        assert e["name"] in ("fetch", "uop", "inp", "wgt", "acc", "out")
    assert {e["name"] for e in bursts} >= {"fetch", "out"}


def test_token_counters_one_per_queue_and_never_negative(program):
    trace, _ = trace_of(program)
    counters = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "C":
            counters[e["name"]].append((e["ts"], e["args"]["tokens"]))
    assert set(counters) == {f"{q} queue" for q in QUEUES}
    for steps in counters.values():
        assert all(count >= 0 for _, count in steps)
        assert [t for t, _ in steps] == sorted({t for t, _ in steps})  # one value per time, in order


def test_tracks_are_named(program):
    trace, _ = trace_of(program)
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert set(names.values()) == {"fetch", "load", "compute", "store", "memory read", "memory write"}


def test_names_are_the_runtime_dumps(kinds):
    trace, _ = trace_of(kinds)
    slices = sorted(insn_slices(trace), key=lambda e: e["args"]["index"])
    assert [e["name"] for e in slices] == KIND_NAMES
    assert all(e["name"] == format_header(kinds.instructions[e["args"]["index"]]).rstrip(":") for e in slices)
    assert [e["cat"] for e in slices] == ["load inp", "load wgt", "sync", "uop", "acc", "gemm", "alu", "sync",
                                         "store", "sync", "finish"]


def test_dram_addresses_are_named_by_segment(kinds):
    trace, _ = trace_of(kinds)
    dram = {e["name"]: e["args"].get("dram") for e in insn_slices(trace)}
    assert dram["LOAD INP"] == "x+0x0" and dram["LOAD WGT"] == "w+0x0" and dram["LOAD ACC"] == "b+0x0"
    assert dram["LOAD UOP"] == "uops+0x0" and dram["STORE"] == "y+0x0"
    assert dram["GEMM"] is None and dram["NOP-MEMORY-STAGE"] is None


def test_compiled_programs_carry_source_lines_and_tensor_names(compiled):
    trace, _ = trace_of(compiled)
    tensors = {t.name for t in compiled.tensors} | {"uops"}
    slices = insn_slices(trace)
    assert sum("source" in e["args"] for e in slices) == len(compiled.source_map) >= len(slices) - 1
    for e in slices:
        loc = compiled.source_map.get(e["args"]["index"])
        assert e["args"].get("source") == (None if loc is None else f"conv2d.vk:{loc.line}")
        if e["name"].startswith(("LOAD", "STORE")):
            name, _, offset = e["args"]["dram"].partition("+0x")
            assert name in tensors and int(offset, 16) >= 0


def test_write_chrome_trace_writes_the_json(compiled, tmp_path):
    result = time_program(compiled, load_profile())
    path = tmp_path / "t.json"
    write_chrome_trace(result, compiled, path)
    assert json.loads(path.read_text()) == chrome_trace(result, compiled)


@pytest.mark.parametrize("name", ["kinds", "compiled"])
def test_gantt_png_is_written(name, request, tmp_path):
    program = request.getfixturevalue(name)
    path = tmp_path / "g.png"
    draw_gantt(time_program(program, load_profile()), program, path, title=name)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert 20_000 < len(data) < 2_000_000


def test_gantt_without_matplotlib_says_what_to_install(kinds, tmp_path, monkeypatch):
    for module in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, module, None)  # import fails as if it were not installed
    path = tmp_path / "g.png"
    with pytest.raises(UsageError, match=r"pip install 'vta-toolchain\[plot\]'") as err:
        draw_gantt(time_program(kinds, load_profile()), kinds, path)
    assert "\n" not in str(err.value) and not path.exists()


def test_crowded_rows_show_each_kinds_share_of_every_pixel():
    """A row with more bars than pixels is drawn by share: the cycles each kind covers in every pixel
    (checked by hand), so short busy bars no longer hide the long token waits between them."""
    import numpy as np

    from vtasim.timing.gantt import _coverage

    bars = [(0, 5, "gemm", 0), (8, 12, "gemm", 2), (3, 9, "token wait", -1)]
    edges, shares = _coverage(bars, 4.0)
    assert edges.tolist() == [0, 4, 8, 12]
    assert np.allclose(shares["gemm"], [1.0, 0.25, 1.0])
    assert np.allclose(shares["token wait"], [0.25, 1.0, 0.25])


LAYERED = """
kernel inner(x: int8[1, 16, 8, 8], w: int8[16, 16, 3, 3]) -> y: int8[1, 16, 8, 8] {
    y = clip(conv2d(x, w, pad=1) >> 8, 0, 127)
}

kernel main(x: int8[1, 16, 8, 8], w1: int8[16, 16, 3, 3], w2: int8[16, 16, 3, 3]) -> y: int8[1, 16, 4, 4] {
    t = inner(x, w1)
    y = max_pool(inner(t, w2), 2, stride=2, pad=0)
}
"""


def _drawn_gantt(program: Program, path, monkeypatch):
    """The figure draw_gantt saves (kept for inspection) and the timing result it drew."""
    from matplotlib.figure import Figure

    saved, save = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: (saved.append(fig), save(fig, *a, **k))[1])
    result = time_program(program, load_profile())
    draw_gantt(result, program, path)
    return saved[0], result


def test_gantt_marks_where_each_layer_starts_with_its_name(tmp_path, monkeypatch):
    program = compile_file(check_source(LAYERED, "layered.vk"), default_config()).program
    fig, result = _drawn_gantt(program, tmp_path / "g.png", monkeypatch)
    timeline = fig.axes[0]
    names = [t.get_text() for t in timeline.texts if "(line" in t.get_text()]
    # one kernel's line twice (two calls, two results), then the pooling's line
    assert names == ["inner_y (line 3)", "inner_y_2 (line 3)", "y (line 8)"]
    firsts = {}
    for it in sorted(result.timeline.insns, key=lambda it: it.index):
        line = program.source_map[it.index].line if it.index in program.source_map else None
        firsts.setdefault(line, it.start)
    marked = sorted({line.get_xdata()[0] for line in timeline.lines if len(set(line.get_xdata())) == 1})
    assert marked[0] == firsts[3] and marked[-1] == firsts[8] and len(marked) == 3
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    boxes = [t.get_window_extent(renderer) for t in timeline.texts if "(line" in t.get_text()]
    assert not any(a.overlaps(b) for k, a in enumerate(boxes) for b in boxes[k + 1:])


def test_gantt_layer_names_closer_than_their_width_are_staggered_or_left_out():
    from vtasim.timing.gantt import _MARK_LEVELS, _stagger

    marks = [(10 * k, f"layer_{k}_y (line {k})") for k in range(40)]  # ten cycles apart: a pixel at 1 cycle/px
    placed = _stagger(marks, 1.0)
    assert 3 <= len(placed) < 40 and {p[2] for p in placed} == set(range(_MARK_LEVELS))
    for level in range(_MARK_LEVELS):
        spans = sorted((c, c + 7 * len(n)) for c, n, lv, _ in placed if lv == level)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))

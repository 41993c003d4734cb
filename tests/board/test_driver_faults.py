"""The driver faults a board would punish, injected into the driver: the emulated board shows each one
(wrong data or a clear protocol error, never silence)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.vtasm.paths import REPO
from vtacc.frontend.check import check_source
from vtacc.program_builder import compile_file
from vtasim.board import registers as r
from vtasim.board import relocate
from vtasim.board.device import Board, DeviceError
from vtasim.board.emulated import reset
from vtasim.board.errors import DeviceTimeout
from vtasim.board.launch import BoardLauncher
from vtasim.board.protocols import ChiselProtocol, HlsProtocol
from vtasim.runs.session import run_arrays
from vtasm.config import default_config

from .harness import DESIGNS, bitstream


@pytest.fixture(scope="module")
def vadd():
    path = REPO / "examples" / "vadd.vk"
    return compile_file(check_source(path.read_text(), str(path)), default_config()).program


def _inputs(program, seed):
    rng = np.random.default_rng(seed)
    return {n: rng.integers(-100, 100, program.tensor(n).shape).astype(np.int32) for n in ("a", "b")}


def _want(program, inputs):
    return run_arrays(program, inputs, ["c"])[0]["c"]


def _run(program, design, tmp_path, inputs, prepare=None):
    reset()
    with Board(design, "emulated", bitstream(tmp_path, design), timeout=0.5) as board:
        launcher = BoardLauncher(board)
        if prepare is not None:
            prepare(board, launcher)
        return launcher(program, inputs, ["c"])[0]["c"]


@pytest.mark.parametrize("design", DESIGNS)
def test_the_driver_as_written_gives_the_right_data(vadd, design, tmp_path):
    inputs = _inputs(vadd, 0)
    assert np.array_equal(_run(vadd, design, tmp_path, inputs), _want(vadd, inputs))


@pytest.mark.parametrize("design", DESIGNS)
def test_a_missing_flush_leaves_the_device_on_old_data(vadd, design, tmp_path):
    first, second = _inputs(vadd, 1), _inputs(vadd, 2)
    reset()
    with Board(design, "emulated", bitstream(tmp_path, design)) as board:
        launcher = BoardLauncher(board)
        assert np.array_equal(launcher(vadd, first, ["c"])[0]["c"], _want(vadd, first))
        launcher.loaded[id(vadd)].buffer.flush = lambda: None  # the driver forgets to flush the new inputs
        got = launcher(vadd, second, ["c"])[0]["c"]
    assert not np.array_equal(got, _want(vadd, second))
    assert np.array_equal(got, _want(vadd, first))  # the device computed on what it last saw


@pytest.mark.parametrize("design", DESIGNS)
def test_a_missing_flush_of_the_program_is_a_clear_error(vadd, design, tmp_path):
    def skip_flush(board, launcher):
        real = board.load

        def load(program, origin="program"):
            loaded = real(program, origin)
            loaded.buffer.flush = lambda: None
            return loaded
        board.load = load

    # the device reads the zeros the memory held: no FINISH, so it waits for ever, as the hardware would
    with pytest.raises(DeviceTimeout, match="did not finish within 0.5 s"):
        _run(vadd, design, tmp_path, _inputs(vadd, 3), skip_flush)


@pytest.mark.parametrize("design", DESIGNS)
def test_a_missing_invalidate_reads_stale_results(vadd, design, tmp_path):
    def skip_invalidate(board, launcher):
        real = board.load

        def load(program, origin="program"):
            loaded = real(program, origin)
            loaded.buffer.invalidate = lambda: None
            return loaded
        board.load = load

    inputs = _inputs(vadd, 4)
    got = _run(vadd, design, tmp_path, inputs, skip_invalidate)
    assert not np.array_equal(got, _want(vadd, inputs))
    assert not got.any()  # the CPU still sees the zeros it wrote before the run


@pytest.mark.parametrize("design", DESIGNS)
def test_a_wrong_element_unit_in_the_relocation_is_caught(vadd, design, tmp_path, monkeypatch):
    real = relocate.element_sizes
    monkeypatch.setattr(relocate, "element_sizes", lambda columns: (real(columns) > 0).astype(real(columns).dtype))
    with pytest.raises(DeviceError, match="outside every buffer"):
        _run(vadd, design, tmp_path, _inputs(vadd, 5))


def test_an_hls_register_written_after_the_start_is_a_protocol_error(vadd, tmp_path):
    class Late(HlsProtocol):
        def start(self, insn_addr, insn_count):
            super().start(insn_addr, insn_count)
            self.mmio[r.FETCH.name].write(r.FETCH.ports["insn_count"], insn_count)  # after the start: too late

    def late(board, launcher):
        board._protocol = Late(board._protocol.mmio)

    with pytest.raises(DeviceError, match="written while a run is in progress"):
        _run(vadd, "hls", tmp_path, _inputs(vadd, 6), late)


def test_hls_workers_started_without_auto_restart_are_a_protocol_error(vadd, tmp_path):
    class Once(HlsProtocol):
        def start(self, insn_addr, insn_count):
            super().start(insn_addr, insn_count)
            self.mmio[r.STORE.name].write(r.AP_CTRL, r.AP_START)  # auto-restart dropped

    def once(board, launcher):
        board._protocol = Once(board._protocol.mmio)

    with pytest.raises(DeviceError, match="store_0 was started without auto-restart"):
        _run(vadd, "hls", tmp_path, _inputs(vadd, 7), once)


def test_a_chisel_pointer_written_after_launch_is_a_protocol_error(vadd, tmp_path):
    class Late(ChiselProtocol):
        def start(self, insn_addr, insn_count):
            super().start(insn_addr, insn_count)
            self.vcr.write(r.VCR.pointer("insns"), insn_addr)

    def late(board, launcher):
        board._protocol = Late(board._protocol.vcr)

    with pytest.raises(DeviceError, match="written while a run is in progress"):
        _run(vadd, "chisel-2021", tmp_path, _inputs(vadd, 8), late)


def test_hls_fetch_started_before_its_address_is_set_reads_outside_memory(vadd, tmp_path):
    class Early(HlsProtocol):
        def start(self, insn_addr, insn_count):
            fetch = self.mmio[r.FETCH.name]
            fetch.write(r.FETCH.ports["insn_count"], insn_count)
            super().start(0, insn_count)  # the address never written: the stream is read from 0

    def early(board, launcher):
        board._protocol = Early(board._protocol.mmio)

    with pytest.raises(DeviceError, match="instruction stream .* outside every buffer"):
        _run(vadd, "hls", tmp_path, _inputs(vadd, 9), early)


def test_the_emulated_memory_is_contiguous_away_from_zero_behind_a_write_back_cache():
    from vtasim.board.emulated import allocate, board

    reset()
    buffer = allocate(shape=(8192,), dtype=np.uint8)
    base = buffer.physical_address
    assert base not in (0, 4096) and base % 4096 == 0
    device = board().dram.device[base - board().dram.base:][:8192]
    buffer[:100] = 7
    assert not device.any()  # written by the CPU, not flushed: invisible to the device
    buffer.flush()
    assert device[:100].tolist() == [7] * 100 and not device[100:].any()
    device[200:300] = 9  # the device writes
    assert not buffer[200:300].any()  # invisible until invalidated
    buffer.invalidate()
    assert buffer[200:300].tolist() == [9] * 100
    buffer.freebuffer()
    with pytest.raises(RuntimeError, match="freed"):
        buffer.flush()

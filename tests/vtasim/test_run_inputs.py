"""`vtasim run`: every input tensor the program reads must be given, and a failed run leaves nothing behind."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from click.testing import CliRunner

from vtasim.cli import main
from vtasim.outputs.inputs import missing_inputs, read_tensors
from vtasim.outputs.io import PendingFile, write_files
from vtasm import isa
from vtasm.asm.assembler import assemble_file
from vtasm.errors import FormatError
from vtasm.formats.vbin import save_vbin
from vtasm.program import TensorInfo

from .builders import ACC, INP, REPO, UOP, WGT, Image, config, finish, load, matmul_program, store

VADD = REPO / "examples" / "vadd.vasm"


def run(path, *args):
    return CliRunner().invoke(main, ["run", str(path), *args])


def one_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def vadd(tmp_path):
    save_vbin(assemble_file(VADD), tmp_path / "v.vbin")
    a = np.arange(1024, dtype=np.int32).reshape(1, 1024)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", -a // 2)
    return tmp_path


# -- which tensors are inputs -------------------------------------------------------


def tensor(name: str) -> TensorInfo:
    return TensorInfo(name, "int8", (1, 16), (1, 16))


def stream_program(insns_of, data: dict[str, bytes] | None = None):
    """Tensors x, t, y, k (16 bytes each, one INP/OUT element) and the stream insns_of(element address)."""
    img = Image(config("default"))
    for name in ("x", "t", "y", "k"):
        img.add(name, (data or {}).get(name, bytes(16)), tensor(name))
    return img.program([*insns_of(lambda name: img.elem(name, INP)), finish()])


def test_inputs_are_the_tensors_read_before_any_store_writes_them():
    program = stream_program(lambda at: [
        load(INP, 0, at("x"), 1),  # x: only read -> input
        store(0, at("t"), 1),  # t: written, then read back -> intermediate
        load(INP, 1, at("t"), 1),
        load(INP, 2, at("y"), 1),  # y: read, then written in place -> input
        store(0, at("y"), 1),
        load(INP, 3, at("k"), 1),  # k: read, carries its own data
    ], {"k": b"\x01" * 16})
    assert read_tensors(program) == ["x", "y", "k"]
    assert missing_inputs(program, set()) == ["x", "y"]
    assert missing_inputs(program, {"x"}) == ["y"]


def test_a_store_covering_part_of_a_tensor_leaves_the_rest_an_input():
    img = Image(config("default"))
    img.add("x", bytes(32), TensorInfo("x", "int8", (1, 32), (1, 16)))
    x = img.elem("x", INP)
    program = img.program([store(0, x, 1), load(INP, 0, x, 1), finish()])
    assert read_tensors(program) == []
    program = img.program([store(0, x, 1), load(INP, 0, x, 2), finish()])
    assert read_tensors(program) == ["x"]


def test_programs_without_a_tensor_table_have_no_inputs():
    program = dataclasses.replace(matmul_program(), tensors=[])
    assert read_tensors(program) == [] and missing_inputs(program, set()) == []


# -- through the command line --------------------------------------------------------


def test_missing_inputs_are_an_error_naming_each_of_them(vadd):
    result = run(vadd / "v.vbin")
    assert result.exit_code == 1
    line = one_line(result)
    assert "v.vbin: the program reads tensors A, B but" in line and "--zero-inputs" in line
    result = run(vadd / "v.vbin", "--input", f"A={vadd / 'a.npy'}")
    assert result.exit_code == 1
    assert "tensor B " in one_line(result)
    assert not (vadd / "v.out").exists()


def test_zero_inputs_runs_on_zeros(vadd):
    result = run(vadd / "v.vbin", "--zero-inputs", "--input", f"A={vadd / 'a.npy'}", "--output",
                 f"C={vadd / 'c.npy'}")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(np.load(vadd / "c.npy"), np.arange(1024).reshape(1, 1024).astype(np.int8))


def test_all_inputs_given(vadd):
    result = run(vadd / "v.vbin", "--input", f"A={vadd / 'a.npy'}", "--input", f"B={vadd / 'b.npy'}")
    assert result.exit_code == 0, result.stderr
    assert (vadd / "v.out" / "C.bin").exists()


def test_compiled_program_names_its_inputs_not_its_outputs(tmp_path):
    program = matmul_program()
    save_vbin(program, tmp_path / "mm.vbin")
    result = run(tmp_path / "mm.vbin")
    assert result.exit_code == 1
    assert "tensors x, w " in one_line(result)


def test_program_without_tensor_table_runs_on_its_own_data(tmp_path):
    save_vbin(dataclasses.replace(matmul_program(), tensors=[]), tmp_path / "raw.vbin")
    result = run(tmp_path / "raw.vbin")
    assert result.exit_code == 0, result.stderr


# -- a failed run leaves nothing behind ------------------------------------------------


def test_missing_input_writes_no_trace_and_no_results(vadd):
    result = run(vadd / "v.vbin", "--trace-file", str(vadd / "t.txt"), "--output", f"C={vadd / 'c.npy'}")
    assert result.exit_code == 1
    assert sorted(p.name for p in vadd.iterdir()) == ["a.npy", "b.npy", "v.vbin"]


def test_unwritable_output_is_refused_before_the_run_and_creates_no_out_dir(vadd):
    result = run(vadd / "v.vbin", "--input", f"A={vadd / 'a.npy'}", "--input", f"B={vadd / 'b.npy'}",
                 "--output", f"C={vadd / 'c.npy'}", "--output", f"C={vadd / 'nodir' / 'c.npy'}",
                 "--trace-file", str(vadd / "t.txt"))
    assert result.exit_code == 1
    assert "nodir" in one_line(result)
    assert result.stdout == ""
    assert sorted(p.name for p in vadd.iterdir()) == ["a.npy", "b.npy", "v.vbin"]


def test_unknown_output_tensor_is_refused_before_the_run(vadd):
    result = run(vadd / "v.vbin", "--zero-inputs", "--output", f"Z={vadd / 'z.npy'}", "--trace")
    assert result.exit_code == 1
    assert "no tensor named Z" in one_line(result) and result.stdout == ""
    assert not (vadd / "v.out").exists()


def test_out_dir_that_is_a_file_is_refused_before_the_run(vadd):
    (vadd / "v.out").write_text("not a directory")
    result = run(vadd / "v.vbin", "--zero-inputs", "--dump-dram", f"0x1000:4:{vadd / 'd.bin'}")
    assert result.exit_code == 1
    assert "v.out" in one_line(result)
    assert not (vadd / "d.bin").exists()


def test_a_fault_keeps_the_trace_but_makes_no_out_dir(tmp_path):
    from .test_faults import FAULTY_TAIL

    save_vbin(matmul_program(extra=FAULTY_TAIL), tmp_path / "prog.vbin")
    result = run(tmp_path / "prog.vbin", "--zero-inputs", "--trace-file", str(tmp_path / "t.txt"))
    assert result.exit_code == 3
    assert "INSTRUCTION 8: STORE" in (tmp_path / "t.txt").read_text()
    assert not (tmp_path / "prog.out").exists()


def test_write_files_removes_what_it_created_when_a_write_fails(tmp_path):
    (tmp_path / "old.bin").write_bytes(b"old")
    (tmp_path / "blocker").mkdir()
    files = [PendingFile(tmp_path / "new.bin", b"1"), PendingFile(tmp_path / "old.bin", b"2"),
             PendingFile(tmp_path / "out" / "sub" / "r.bin", b"3", True), PendingFile(tmp_path / "blocker", b"4")]
    with pytest.raises(FormatError, match="blocker"):
        write_files(files)
    assert sorted(os.listdir(tmp_path)) == ["blocker", "old.bin"]
    write_files(files[:3])
    assert (tmp_path / "out" / "sub" / "r.bin").read_bytes() == b"3"


def _read_before_written(program) -> list[str]:
    """The definition, byte by byte in program order (an independent reference for read_tensors)."""
    cfg = program.config
    owner = {}
    for t in program.tensors:
        seg = program.segment(t.name)
        owner.update({b: t.name for b in range(seg.addr, seg.end)})
    top = max((program.segment(t.name).end for t in program.tensors), default=0)
    written, found = set(), set()
    for insn in program.instructions:
        if insn.kind not in ("load", "store") or not insn["x_size"] or not insn["y_size"]:
            continue
        eb = isa.elem_bytes(cfg, isa.MEM_TYPES["out"] if insn.kind == "store" else insn["memory_type"])
        if eb is None:
            continue
        base, stride, width = insn["dram_base"] * eb, insn["x_stride"] * eb, insn["x_size"] * eb
        if base + (insn["y_size"] - 1) * stride + width > top:
            continue
        touched = {base + r * stride + c for r in range(insn["y_size"]) for c in range(width)}
        if insn.kind == "store":
            written |= touched
        else:
            found |= {owner[b] for b in touched - written if b in owner}
    return [t.name for t in program.tensors if t.name in found]


@pytest.mark.parametrize("seed", range(40))
def test_inputs_agree_with_the_definition_byte_by_byte(seed):
    """Random loads and stores over four tensors: strides, overlapping rows, rows across tensors, odd types."""
    rng = np.random.default_rng(seed)
    img = Image(config("default"))
    for name in ("x", "t", "y", "k"):
        img.add(name, bytes(64), TensorInfo(name, "int8", (1, 64), (1, 16)))
    first = img.elem("x", INP)
    insns = []
    for _ in range(int(rng.integers(1, 12))):
        at = first + int(rng.integers(0, 20))
        x, y, stride = int(rng.integers(0, 4)), int(rng.integers(0, 4)), int(rng.integers(0, 5))
        if rng.random() < 0.4:
            insns.append(store(0, at, x, y, stride))
        else:
            mem = int(rng.choice([INP, WGT, ACC, UOP, 5, 7]))
            insns.append(load(mem, 0, at, x, y, stride))
    program = img.program([*insns, finish()])
    assert read_tensors(program) == _read_before_written(program)


def test_result_ranges_are_written_only_when_no_output_takes_the_results_or_when_asked(vadd):
    """Issue 23, item 6: --output gives the results, so PROG.out/ is not written as well (unless --out-dir)."""
    given = ("--input", f"A={vadd / 'a.npy'}", "--input", f"B={vadd / 'b.npy'}", "--output", f"C={vadd / 'c.npy'}")
    assert run(vadd / "v.vbin", *given).exit_code == 0
    assert (vadd / "c.npy").exists() and not (vadd / "v.out").exists()
    assert run(vadd / "v.vbin", *given, "--out-dir", str(vadd / "asked")).exit_code == 0
    assert (vadd / "asked" / "C.bin").exists()

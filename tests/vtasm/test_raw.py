"""The raw interchange directory (raw-format.md) against the 30 conformance programs."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from vtasm.config import DEFAULT_CONFIG, config_from_dict, default_config
from vtasm.encoding import MicroOp, make_instruction
from vtasm.errors import FormatError
from vtasm.formats.raw import export_raw, import_raw, load_program
from vtasm.formats.vbin import read_vbin, write_vbin
from vtasm.program import DumpRange, Program, Segment, TensorInfo

from .paths import CONFORMANCE, require


def readme_table() -> dict[str, int]:
    """case -> instruction count, from the conformance README's table."""
    text = require(CONFORMANCE / "README.md").read_text()
    rows = re.findall(r"^\|\s*(\w+)\s*\|\s*(\d+)\s*\|", text, flags=re.MULTILINE)
    return {name: int(count) for name, count in rows}


CASES = sorted(p.name for p in CONFORMANCE.iterdir() if p.is_dir()) if CONFORMANCE.is_dir() else []


def normalized_layout(path: Path) -> dict:
    """A layout.json with hex strings as numbers and the documented defaults filled in."""
    layout = json.loads(path.read_text())

    def num(v):
        return int(v, 16) if isinstance(v, str) else v

    out = {
        "config": layout.get("config"),
        "insn_addr": num(layout["insn_addr"]),
        "uop_addr": num(layout.get("uop_addr", 0)),
        "insn_file": layout.get("insn_file", "insn.bin"),
        "segments": [{"file": s["file"], "addr": num(s["addr"])} for s in layout.get("segments", [])],
        "dump": [
            {"addr": num(d["addr"]), "nbytes": num(d["nbytes"]), "file": d["file"]} for d in layout.get("dump", [])
        ],
        "dram_bytes": num(layout.get("dram_bytes")),
    }
    if (path.parent / layout.get("uop_file", "uop.bin")).exists():
        out["uop_file"] = layout.get("uop_file", "uop.bin")
    return out


def program_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file() and p.suffix == ".bin"}


def test_all_thirty_cases_are_listed():
    table = readme_table()
    assert len(table) == 30
    assert sorted(table) == CASES


@pytest.mark.parametrize("case", CASES)
def test_import_export_reproduces_the_directory(case, tmp_path):
    src = CONFORMANCE / case
    program = import_raw(src)
    assert len(program.instructions) == readme_table()[case]
    assert len(program.uops) * 4 == (src / "uop.bin").stat().st_size
    assert program.source_map is None
    assert all(insn.raw is None for insn in program.instructions)  # real programs decode fully

    first = tmp_path / "first"
    export_raw(program, first)
    assert program_files(first) == program_files(src)
    assert normalized_layout(first / "layout.json") == normalized_layout(src / "layout.json")

    second = tmp_path / "second"
    export_raw(import_raw(first), second)
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name

    assert read_vbin(write_vbin(program)) == program


def test_exported_layout_is_pretty_json(tmp_path):
    export_raw(import_raw(require(CONFORMANCE / "16x16")), tmp_path)
    text = (tmp_path / "layout.json").read_text()
    assert text.startswith('{\n "config": {\n  "')
    assert text.endswith("}\n")


def tiny(**changes) -> Program:
    program = Program(
        config=default_config(),
        instructions=[
            make_instruction("load", memory_type=0, x_size=1, y_size=1, x_stride=1),
            make_instruction("finish"),
        ],
        uops=[MicroOp(0, 0, 0)],
        insn_addr=0x3000,
        uop_addr=0x2000,
        segments=[Segment("inp", 0x1000, bytes(16))],
        dumps=[DumpRange(0x1000, 16, "result.bin")],
    )
    for key, value in changes.items():
        setattr(program, key, value)
    return program


def write_dir(tmp_path: Path, layout: dict, files: dict[str, bytes]) -> Path:
    d = tmp_path / "prog"
    d.mkdir()
    (d / "layout.json").write_text(json.dumps(layout))
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d


INSN = bytes([3] + [0] * 15)  # FINISH


def test_hex_addresses_and_no_config(tmp_path):
    layout = {"insn_addr": "0x3000", "segments": [{"file": "w.bin", "addr": "0x2000"}], "dram_bytes": "0x10000"}
    d = write_dir(tmp_path, layout, {"insn.bin": INSN, "w.bin": b"\x01" * 8})
    program = import_raw(d)
    assert (program.insn_addr, program.segments[0].addr, program.dram_bytes) == (0x3000, 0x2000, 0x10000)
    assert program.uops == [] and program.config == default_config()
    other = config_from_dict(dict(DEFAULT_CONFIG, LOG_BATCH=1))
    assert import_raw(d, other).config == other  # no config in the layout: the tool's is used


def test_config_mismatch_is_refused(tmp_path):
    d = write_dir(tmp_path, {"config": DEFAULT_CONFIG, "insn_addr": 0}, {"insn.bin": INSN})
    other = config_from_dict(dict(DEFAULT_CONFIG, LOG_BLOCK=5))
    with pytest.raises(FormatError, match="refuse to run a stream encoded for a different configuration"):
        import_raw(d, other)
    with pytest.raises(FormatError, match="LOG_BLOCK=5"):
        load_program(d, other)
    assert import_raw(d, config_from_dict(dict(DEFAULT_CONFIG, TARGET="pynq"))).config == default_config()


@pytest.mark.parametrize("bad", ["../escape.bin", "/etc/hostname", "sub/../../escape.bin", ".."])
def test_import_rejects_paths_leaving_the_directory(tmp_path, bad):
    (tmp_path / "escape.bin").write_bytes(b"x")
    d = write_dir(tmp_path, {"insn_addr": 0, "segments": [{"file": bad, "addr": 4096}]}, {"insn.bin": INSN})
    with pytest.raises(FormatError, match="absolute path|leaves the directory"):
        import_raw(d)


def test_import_rejects_escaping_insn_and_dump_files(tmp_path):
    d = write_dir(tmp_path, {"insn_addr": 0, "insn_file": "../insn.bin"}, {"insn.bin": INSN})
    with pytest.raises(FormatError, match="insn_file: path '../insn.bin' leaves the directory"):
        import_raw(d)
    (d / "layout.json").write_text(json.dumps({"insn_addr": 0, "dump": [{"addr": 0, "nbytes": 4, "file": "/tmp/x"}]}))
    with pytest.raises(FormatError, match="dump\\[0\\].file: absolute path"):
        import_raw(d)


def test_import_rejects_symlink_escape(tmp_path):
    (tmp_path / "secret.bin").write_bytes(b"s")
    d = write_dir(tmp_path, {"insn_addr": 0, "segments": [{"file": "link.bin", "addr": 4096}]}, {"insn.bin": INSN})
    (d / "link.bin").symlink_to(tmp_path / "secret.bin")
    with pytest.raises(FormatError, match="leaves the directory"):
        import_raw(d)


@pytest.mark.parametrize("name", ["../out.bin", "/tmp/out.bin"])
def test_export_refuses_escaping_paths(tmp_path, name):
    with pytest.raises(FormatError):
        export_raw(tiny(segments=[Segment("inp", 0x1000, bytes(16), name)]), tmp_path / "out")
    assert not (tmp_path / "out.bin").exists()
    with pytest.raises(FormatError):
        export_raw(tiny(insn_file=name), tmp_path / "out2")
    with pytest.raises(FormatError):
        export_raw(tiny(dumps=[DumpRange(0, 4, name)]), tmp_path / "out3")


def test_export_refuses_two_files_with_one_name(tmp_path):
    with pytest.raises(FormatError, match="would overwrite"):
        export_raw(tiny(segments=[Segment("a", 0x1000, b"1", "x.bin"), Segment("b", 0x2000, b"2", "x.bin")]), tmp_path)
    with pytest.raises(FormatError, match="would overwrite"):
        export_raw(tiny(segments=[Segment("layout", 0x1000, b"1", "layout.json")]), tmp_path / "b")


def test_export_rules(tmp_path):
    export_raw(tiny(), tmp_path / "a")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["inp.bin", "insn.bin", "layout.json", "uop.bin"]
    layout = json.loads((tmp_path / "a" / "layout.json").read_text())
    assert layout == {
        "config": DEFAULT_CONFIG,
        "insn_addr": 0x3000,
        "uop_addr": 0x2000,
        "insn_file": "insn.bin",
        "uop_file": "uop.bin",
        "segments": [{"file": "inp.bin", "addr": 0x1000}],
        "dump": [{"addr": 0x1000, "nbytes": 16, "file": "result.bin"}],
    }
    export_raw(tiny(uops=[], dram_bytes=1 << 16), tmp_path / "b")
    assert not (tmp_path / "b" / "uop.bin").exists()
    layout = json.loads((tmp_path / "b" / "layout.json").read_text())
    assert "uop_file" not in layout and layout["dram_bytes"] == 1 << 16
    assert import_raw(tmp_path / "b").uops == []


def test_segment_names_from_file_names(tmp_path):
    segments = [
        {"file": f, "addr": 0x1000 * (i + 1)} for i, f in enumerate(["a.bin", "my-data.v2.bin", "a.dat", "9.bin"])
    ]
    files = {"insn.bin": INSN, "a.bin": b"1", "my-data.v2.bin": b"2", "a.dat": b"3", "9.bin": b"4"}
    program = import_raw(write_dir(tmp_path, {"insn_addr": 0, "segments": segments}, files))
    assert [(s.name, s.file) for s in program.segments] == [
        ("a", None),
        ("my_data_v2", "my-data.v2.bin"),
        ("a_dat", "a.dat"),
        ("seg_9", "9.bin"),
    ]
    export_raw(program, tmp_path / "again")
    assert program_files(tmp_path / "again") == {k: v for k, v in files.items() if k.endswith(".bin")}
    assert (tmp_path / "again" / "a.dat").read_bytes() == b"3"


def test_duplicate_names_are_numbered(tmp_path):
    d = tmp_path / "prog"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "a.bin").write_bytes(b"2")
    (d / "a.bin").write_bytes(b"1")
    (d / "insn.bin").write_bytes(INSN)
    segs = [{"file": "a.bin", "addr": 4096}, {"file": "sub/a.bin", "addr": 8192}]
    (d / "layout.json").write_text(json.dumps({"insn_addr": 0, "segments": segs}))
    program = import_raw(d)
    assert [(s.name, s.file) for s in program.segments] == [("a", None), ("a_2", "sub/a.bin")]
    export_raw(program, tmp_path / "out")
    assert (tmp_path / "out" / "sub" / "a.bin").read_bytes() == b"2"


@pytest.mark.parametrize(
    ("layout", "files", "message"),
    [
        ({"insn_addr": 0}, {"insn.bin": INSN * 2 + b"x"}, "not a whole number of 16-byte instructions"),
        ({"insn_addr": 0}, {"insn.bin": INSN, "uop.bin": b"\0" * 4}, "missing key 'uop_addr'"),
        ({"insn_addr": 0, "uop_addr": 0}, {"insn.bin": INSN, "uop.bin": b"\0" * 5}, "4-byte micro-ops"),
        ({"insn_addr": 0, "uop_file": "u.bin", "uop_addr": 0}, {"insn.bin": INSN}, "cannot read micro-op file"),
        ({"insn_addr": 0}, {}, "cannot read instruction file"),
        ({}, {"insn.bin": INSN}, "missing key 'insn_addr'"),
        ({"insn_addr": "12"}, {"insn.bin": INSN}, "hex string"),
        ({"insn_addr": "0xZZ"}, {"insn.bin": INSN}, "invalid hex"),
        ({"insn_addr": 0, "segment": []}, {"insn.bin": INSN}, "unknown key 'segment'"),
        ({"insn_addr": 0, "segments": [{"addr": 0}]}, {"insn.bin": INSN}, "missing key 'file'"),
        ({"insn_addr": 0, "segments": [{"file": "n.bin", "addr": 0}]}, {"insn.bin": INSN}, "cannot read segment"),
        ({"insn_addr": 0, "config": {"LOG_BATCH": 0}}, {"insn.bin": INSN}, "config: missing key"),
    ],
)
def test_bad_directories(tmp_path, layout, files, message):
    d = write_dir(tmp_path, layout, files)
    with pytest.raises(FormatError) as info:
        import_raw(d)
    assert message in info.value.render()
    assert "\n" not in info.value.render()


def test_bad_layout_json(tmp_path):
    d = tmp_path / "prog"
    d.mkdir()
    with pytest.raises(FormatError, match=r"not a raw program directory \(it has no layout.json"):
        import_raw(d)
    (d / "layout.json").write_text("{\n  'insn_addr': 0}")
    with pytest.raises(FormatError, match=r"layout.json:2:3: invalid JSON"):
        import_raw(d)


def test_overlapping_segments_are_refused_as_the_assembler_refuses_them(tmp_path):
    """A hand-edited layout that puts one segment inside another was imported, and the run then computed
    with whichever bytes were copied last; it is refused like `vtasm assemble` refuses it."""
    program = Program(default_config(), [make_instruction("finish")], [], insn_addr=0x8000, uop_addr=0x8000,
                      segments=[Segment("x", 0x1000, bytes(64)), Segment("w", 0x2000, bytes(64))])
    export_raw(program, tmp_path / "p")
    layout = json.loads((tmp_path / "p" / "layout.json").read_text())
    next(s for s in layout["segments"] if s["file"] == "w.bin")["addr"] = 0x1020
    (tmp_path / "p" / "layout.json").write_text(json.dumps(layout))
    with pytest.raises(FormatError, match=r"segment w \(0x1020\.\.0x1060\) overlaps segment x \(0x1000\.\.0x1040\)"):
        import_raw(tmp_path / "p")


def test_load_program_dispatches_on_directories(tmp_path):
    src = require(CONFORMANCE / "smm")
    shutil.copytree(src, tmp_path / "smm")
    assert load_program(tmp_path / "smm") == import_raw(src)


# -- the tensor table travels in layout.json -----------------------------------------------


def with_tensors() -> Program:
    segments = [Segment("x", 0x1000, bytes(16)), Segment("in-0", 0x2000, bytes(32)), Segment("y", 0x3000, b"\1" * 16)]
    tensors = [TensorInfo("in-0", "int8", (1, 32), (1, 16)), TensorInfo("x", "int8", (16,), (16,)),
               TensorInfo("y", "int32", (2, 2), (1, 1))]
    return tiny(segments=segments, tensors=tensors, insn_addr=0x5000, uop_addr=0x4000)


def test_export_import_keeps_the_tensor_table(tmp_path):
    program = with_tensors()
    export_raw(program, tmp_path / "a")
    layout = json.loads((tmp_path / "a" / "layout.json").read_text())
    assert layout["tensors"] == [  # in segment order, each naming its segment's file
        {"file": "x.bin", "name": "x", "dtype": "int8", "shape": [16], "tile": [16]},
        {"file": "in-0.bin", "name": "in-0", "dtype": "int8", "shape": [1, 32], "tile": [1, 16]},
        {"file": "y.bin", "name": "y", "dtype": "int32", "shape": [2, 2], "tile": [1, 1]},
    ]
    back = import_raw(tmp_path / "a")
    assert [s.name for s in back.segments] == ["x", "in-0", "y"]  # the tensors' names, not "in_0"
    assert sorted(back.tensors, key=lambda t: t.name) == sorted(program.tensors, key=lambda t: t.name)
    assert back.tensor("in-0").unpack(back.segment("in-0").data).shape == (1, 32)
    export_raw(back, tmp_path / "b")
    assert (tmp_path / "a" / "layout.json").read_bytes() == (tmp_path / "b" / "layout.json").read_bytes()
    assert read_vbin(write_vbin(back)).tensors == back.tensors


def test_layout_without_tensors_has_no_key(tmp_path):
    export_raw(tiny(), tmp_path / "a")
    assert "tensors" not in json.loads((tmp_path / "a" / "layout.json").read_text())
    assert import_raw(tmp_path / "a").tensors == []


def test_segment_named_by_its_tensor_takes_the_name_first(tmp_path):
    segs = [{"file": "a.bin", "addr": 4096}, {"file": "b.bin", "addr": 8192}]
    tensors = [{"file": "b.bin", "name": "a", "dtype": "int8", "shape": [4], "tile": [1]}]
    d = write_dir(tmp_path, {"insn_addr": 0, "segments": segs, "tensors": tensors},
                  {"insn.bin": INSN, "a.bin": b"1", "b.bin": b"2345"})
    program = import_raw(d)
    assert [(s.name, s.file) for s in program.segments] == [("a_2", "a.bin"), ("a", "b.bin")]
    assert program.tensor("a").unpack(program.segment("a").data).tolist() == [50, 51, 52, 53]


TENSOR = {"file": "t.bin", "name": "t", "dtype": "int8", "shape": [4], "tile": [1]}


@pytest.mark.parametrize(
    ("tensors", "message"),
    [
        ({"t": 1}, "tensors: expected a JSON array"),
        ([dict(TENSOR, file="u.bin")], "tensors[0].file: 'u.bin' is not the file of any segment"),
        ([{k: v for k, v in TENSOR.items() if k != "file"}], "tensors[0]: missing key 'file'"),
        ([dict(TENSOR, shape=[5])], "tensors[0]: tensor 't' packs to 5 bytes but its segment holds 4"),
        ([dict(TENSOR, dtype="float")], "unknown dtype 'float'"),
        ([TENSOR, dict(TENSOR, name="u")], "tensors[1].file: segment 't.bin' already has tensor 't'"),
        ([dict(TENSOR, extra=1)], "tensors[0]: unknown key 'extra'"),
    ],
)
def test_bad_tensor_tables(tmp_path, tensors, message):
    layout = {"insn_addr": 0, "segments": [{"file": "t.bin", "addr": 4096}], "tensors": tensors}
    d = write_dir(tmp_path, layout, {"insn.bin": INSN, "t.bin": b"1234"})
    with pytest.raises(FormatError) as info:
        import_raw(d)
    assert message in info.value.render() and "\n" not in info.value.render()


def test_one_file_in_two_segments_cannot_hold_a_tensor(tmp_path):
    layout = {"insn_addr": 0, "segments": [{"file": "t.bin", "addr": 4096}, {"file": "t.bin", "addr": 8192}],
              "tensors": [TENSOR]}
    d = write_dir(tmp_path, layout, {"insn.bin": INSN, "t.bin": b"1234"})
    with pytest.raises(FormatError, match="is the file of 2 segments"):
        import_raw(d)


def test_export_then_import_is_the_same_vbin_byte_for_byte(tmp_path):
    """Issue 23, item 4: the micro-op labels and the source map travel in layout.json (they were dropped)."""
    from .test_vbin import sample

    program = sample(source_map=True)
    assert program.uop_labels and program.source_map
    export_raw(program, tmp_path / "raw")
    layout = json.loads((tmp_path / "raw" / "layout.json").read_text())
    assert layout["uop_labels"] == [["gemm_k", 0], ["alu_k", 1]]
    assert layout["source_map"]
    assert write_vbin(import_raw(tmp_path / "raw")) == write_vbin(program)


def test_layout_labels_past_the_micro_ops_are_refused(tmp_path):
    from .test_vbin import sample

    export_raw(sample(source_map=False), tmp_path / "raw")
    path = tmp_path / "raw" / "layout.json"
    layout = json.loads(path.read_text())
    layout["uop_labels"] = [["far", 99]]
    path.write_text(json.dumps(layout))
    with pytest.raises(FormatError, match="uop_labels"):
        import_raw(tmp_path / "raw")

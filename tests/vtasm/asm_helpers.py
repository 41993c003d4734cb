"""Shared helpers of the assembler tests: assembling snippets, catching errors, random programs."""

from __future__ import annotations

import json
import textwrap
from pathlib import PurePosixPath

import pytest
from hypothesis import strategies as st

from vtasm import isa
from vtasm.asm.assembler import assemble
from vtasm.config import VTAConfig, config_from_dict, load_config
from vtasm.encoding import Instruction, MicroOp, codec_for
from vtasm.errors import AsmError
from vtasm.program import DTYPES, DumpRange, Program, Segment, SourceLoc, TensorInfo

from .paths import GOLDEN, require

ROUNDTRIP_CONFIGS = ("default", "batch2", "block8", "block32", "uop14")


def golden_config(name: str) -> VTAConfig:
    return load_config(require(GOLDEN / f"{name}.config.json"))


def golden_records(name: str) -> list[dict]:
    path = require(GOLDEN / f"{name}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()][1:]


def asm(text: str, **kwargs) -> Program:
    """Assemble an indented snippet as file k.vasm."""
    return assemble(textwrap.dedent(text), "k.vasm", **kwargs)


def insn_hex(program: Program, index: int = 0) -> str:
    return codec_for(program.config).encode(program.instructions[index]).hex()


def asm_error(text: str, **kwargs) -> AsmError:
    """The AsmError a snippet raises (fails the test if it assembles)."""
    with pytest.raises(AsmError) as info:
        asm(text, **kwargs)
    return info.value


def where(exc: AsmError) -> tuple[int, int, str]:
    """(line, column, message) of an error."""
    return exc.span.line, exc.span.column, exc.message


def caret_text(exc: AsmError) -> str:
    """The source text the caret underlines."""
    s = exc.span
    return s.source_line[s.column - 1 : s.column - 1 + s.length]


# -- random programs -------------------------------------------------------------------

_odd_names = st.sampled_from(["BATCH", "a.b", "x-y", "has space", 'q"uote', "back\\slash", "1st", "é", "tab\there"])
_identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
names = st.one_of(_identifiers, _odd_names, st.text(min_size=1, max_size=5))
texts = st.text(min_size=1, max_size=12)


def _inside_results_dir(name: str) -> bool:
    """The assembler's rule for .dump files: relative, no '..', not the directory itself."""
    path = PurePosixPath(name)
    return not path.is_absolute() and ".." not in path.parts and name != "."


dump_files = texts.filter(_inside_results_dir)


def _field_value(f: isa.PlacedField):
    return st.one_of(st.sampled_from([f.min_value, f.max_value, 0]), st.integers(f.min_value, f.max_value))


def _kind(cfg: VTAConfig, kind: str):
    fields = {f.name: _field_value(f) for f in isa.layout(kind, cfg)}
    fields["opcode"] = st.just(isa.KINDS[kind].opcode)
    if kind in ("load", "store"):
        fields["x_size"] = st.one_of(st.just(0), fields["x_size"])  # NOPs, maybe with stray fields
    return st.fixed_dictionaries(fields).map(lambda values: Instruction(kind, values))


def instructions(cfg: VTAConfig):
    """Any instruction: every kind with any field values, or 16 random bytes (often raw)."""
    raw = st.binary(min_size=16, max_size=16).map(codec_for(cfg).decode)
    return st.one_of([_kind(cfg, kind) for kind in isa.KINDS] + [raw])


def micro_ops(cfg: VTAConfig):
    """Micro-ops with any field values, and raw 32-bit words."""
    fields = [_field_value(f) for f in isa.layout("uop", cfg)]
    codec = codec_for(cfg)

    def raw(word: int) -> MicroOp:
        u = codec.decode_uop(word.to_bytes(4, "little"))
        return MicroOp(u.dst_idx, u.src_idx, u.wgt_idx, raw=word)

    return st.one_of(st.tuples(*fields).map(lambda v: MicroOp(*v)), st.integers(0, (1 << 32) - 1).map(raw))


@st.composite
def _segment_contents(draw, cfg: VTAConfig):
    if draw(st.booleans()):
        rank = draw(st.integers(1, 3))
        shape = tuple(draw(st.integers(1, 5)) for _ in range(rank))
        tile = tuple(draw(st.sampled_from([1, 2, cfg.batch, 3])) for _ in range(rank))
        tensor = TensorInfo("?", draw(st.sampled_from(list(DTYPES))), shape, tile, draw(st.sampled_from([1, 1, 2, 3])))
        size = tensor.nbytes
    else:
        tensor, size = None, draw(st.integers(0, 80))
    data = draw(st.binary(min_size=size, max_size=size))
    if draw(st.booleans()):
        data = data[: size // 2] + bytes(size - size // 2)  # trailing zeros
    return data, tensor


@st.composite
def programs(draw, cfg: VTAConfig) -> Program:
    """A valid Program (it writes as a .vbin) with arbitrary contents."""
    if draw(st.booleans()):
        extra = draw(st.dictionaries(texts.filter(lambda k: k not in cfg.log_values()), st.one_of(
            st.integers(-(2**40), 2**40), texts, st.booleans(), st.none(),
            st.floats(allow_nan=False, allow_infinity=False)), max_size=3))
        cfg = config_from_dict({**extra, **cfg.log_values()})
    insns = draw(st.lists(instructions(cfg), max_size=12))
    uops = draw(st.lists(micro_ops(cfg), max_size=6))
    seg_names = draw(st.lists(names, max_size=4, unique=True))
    contents = [draw(_segment_contents(cfg)) for _ in seg_names]
    # place everything in a shuffled order with random gaps (regions never overlap)
    sizes = [len(d) for d, _ in contents] + [4 * len(uops), 16 * len(insns)]
    order = draw(st.permutations(range(len(sizes))))
    addrs = [0] * len(sizes)
    pos = draw(st.integers(0, 0x3000))
    for i in order:
        pos += draw(st.sampled_from([0, 4, 16, 0x1000, 0x40]))
        addrs[i] = pos
        pos += sizes[i]
    segments, tensors = [], []
    for name, (data, tensor), addr in zip(seg_names, contents, addrs, strict=False):
        segments.append(Segment(name, addr, data, draw(st.one_of(st.none(), texts))))
        if tensor is not None:
            tensors.append(TensorInfo(name, tensor.dtype, tensor.shape, tensor.tile, tensor.repeat))
    dumps = []
    for _ in range(draw(st.integers(0, 2))):
        named = [seg for seg in segments if _inside_results_dir(f"{seg.name}.bin")]  # names usable as files
        if named and draw(st.booleans()):
            seg = draw(st.sampled_from(named))
            dumps.append(DumpRange(seg.addr, len(seg.data), f"{seg.name}.bin"))
        else:
            dumps.append(DumpRange(draw(st.integers(0, 2**34)), draw(st.integers(0, 4096)), draw(dump_files)))
    label_names = draw(st.lists(names, max_size=4, unique=True))
    indices = sorted(draw(st.integers(0, len(uops))) for _ in label_names)
    source_map = None
    if draw(st.booleans()):
        locs = st.builds(SourceLoc, st.sampled_from(["a.vk", "b.vasm", "dir/c d.vk"]), st.integers(0, 10**6))
        source_map = {i: draw(locs) for i in range(len(insns)) if draw(st.integers(0, 5))}
    return Program(
        config=cfg,
        instructions=insns,
        uops=uops,
        insn_addr=addrs[-1],
        uop_addr=addrs[-2],
        segments=segments,
        tensors=tensors,
        dumps=dumps,
        uop_labels=dict(zip(label_names, indices, strict=True)),
        source_map=source_map,
        dram_bytes=draw(st.one_of(st.none(), st.integers(0, 2**36))),
        insn_file=draw(st.one_of(st.just("insn.bin"), texts)),
        uop_file=draw(st.one_of(st.just("uop.bin"), texts)),
    )

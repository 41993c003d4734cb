"""The JSON chunks of a .vbin: META (everything but the bytes) and SMAP (source map).

:func:`build_meta` and :func:`smap_to_json` turn a Program into plain JSON
values; :func:`meta_from_json` and :func:`smap_from_json` check such values
field by field and raise one FormatError line naming the first problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain

import numpy as np

from vtasm.config import VTAConfig, config_from_dict
from vtasm.errors import ConfigError, FormatError
from vtasm.program import DTYPES, DumpRange, Program, SourceLoc, TensorInfo

from .jsonfields import get_int, get_list, get_object, get_str

META_KEYS = (
    "config",
    "counts",
    "dram_bytes",
    "dumps",
    "insn_addr",
    "insn_file",
    "segments",
    "tensors",
    "uop_addr",
    "uop_file",
    "uop_labels",
)


@dataclass(frozen=True)
class SegmentEntry:
    """One segment as META describes it: where its bytes sit in the DATA chunk (none when ``zero``)."""

    name: str
    addr: int
    size: int
    offset: int
    file: str | None
    zero: bool = False  # declared, not stored: every byte is 0

    @property
    def stored(self) -> int:
        """Bytes the segment takes in the DATA chunk."""
        return 0 if self.zero else self.size


def all_zero(data: bytes | memoryview) -> bool:
    """Whether every byte is 0 (such a segment is declared in META, not stored)."""
    return len(data) > 0 and not np.frombuffer(data, dtype=np.uint8).any()


@dataclass
class Meta:
    """The checked contents of a META chunk."""

    config: VTAConfig
    insn_addr: int
    uop_addr: int
    dram_bytes: int | None
    insn_file: str
    uop_file: str
    segments: list[SegmentEntry]
    tensors: list[TensorInfo]
    dumps: list[DumpRange]
    uop_labels: dict[str, int]
    n_insns: int
    n_uops: int


def build_meta(program: Program) -> dict:
    """The META JSON value of a program."""
    segments = []
    offset = 0
    for seg in program.segments:
        entry = {"name": seg.name, "addr": seg.addr, "size": len(seg.data), "offset": offset, "file": seg.file}
        if all_zero(seg.data):
            entry["zero"] = True
        else:
            offset += len(seg.data)
        segments.append(entry)
    seg_order = {seg.name: i for i, seg in enumerate(program.segments)}
    return {
        "config": program.config.to_dict(),
        "insn_addr": program.insn_addr,
        "uop_addr": program.uop_addr,
        "dram_bytes": program.dram_bytes,
        "insn_file": program.insn_file,
        "uop_file": program.uop_file,
        "segments": segments,
        # canonical orders (what the disassembler prints): tensors by segment, labels by index
        "tensors": [_tensor_entry(t) for t in sorted(program.tensors, key=lambda t: seg_order.get(t.name, 1 << 30))],
        "dumps": [{"addr": d.addr, "nbytes": d.nbytes, "file": d.file} for d in program.dumps],
        "uop_labels": [[name, index] for name, index in sorted(program.uop_labels.items(), key=lambda kv: kv[1])],
        "counts": {"insns": len(program.instructions), "uops": len(program.uops)},
    }


def meta_from_json(value: object, where: str) -> Meta:
    """Check a META JSON value and return its contents."""
    obj = get_object(value, where, META_KEYS)
    try:
        config = config_from_dict(obj["config"], f"{where} config")
    except ConfigError as exc:
        raise FormatError(exc.message) from None
    counts = get_object(obj["counts"], f"{where} counts", ("insns", "uops"))
    n_insns = get_int(counts["insns"], f"{where} counts.insns")
    n_uops = get_int(counts["uops"], f"{where} counts.uops")
    dram = obj["dram_bytes"]
    segments = _segments(obj["segments"], f"{where} segments")
    return Meta(
        config=config,
        insn_addr=get_int(obj["insn_addr"], f"{where} insn_addr"),
        uop_addr=get_int(obj["uop_addr"], f"{where} uop_addr"),
        dram_bytes=None if dram is None else get_int(dram, f"{where} dram_bytes"),
        insn_file=get_str(obj["insn_file"], f"{where} insn_file"),
        uop_file=get_str(obj["uop_file"], f"{where} uop_file"),
        segments=segments,
        tensors=_tensors(obj["tensors"], segments, f"{where} tensors"),
        dumps=_dumps(obj["dumps"], f"{where} dumps"),
        uop_labels=_labels(obj["uop_labels"], n_uops, f"{where} uop_labels"),
        n_insns=n_insns,
        n_uops=n_uops,
    )


def _segments(value: object, where: str) -> list[SegmentEntry]:
    out: list[SegmentEntry] = []
    names: set[str] = set()
    offset = 0
    for i, item in enumerate(get_list(value, where)):
        at = f"{where}[{i}]"
        obj = get_object(item, at, ("name", "addr", "size", "offset", "file"), ("zero",))
        if "zero" in obj and obj["zero"] is not True:
            raise FormatError(f"{at}.zero: expected true (absent for a segment whose bytes are stored)")
        name = get_str(obj["name"], f"{at}.name")
        if name in names:
            raise FormatError(f"{at}: duplicate segment name '{name}'")
        names.add(name)
        entry = SegmentEntry(
            name=name,
            addr=get_int(obj["addr"], f"{at}.addr"),
            size=get_int(obj["size"], f"{at}.size"),
            offset=get_int(obj["offset"], f"{at}.offset"),
            file=None if obj["file"] is None else get_str(obj["file"], f"{at}.file"),
            zero="zero" in obj,
        )
        if entry.offset != offset:
            raise FormatError(
                f"{at}: segment '{name}' has offset {entry.offset} but the segments before it end at {offset}"
            )
        offset += entry.stored
        out.append(entry)
    return out


def _dims(value: object, where: str) -> tuple[int, ...]:
    dims = tuple(get_int(v, f"{where}[{i}]", minimum=1) for i, v in enumerate(get_list(value, where)))
    if not dims:
        raise FormatError(f"{where}: must have at least one dimension")
    return dims


def _tensor_entry(t: TensorInfo) -> dict:
    entry = {"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "tile": list(t.tile)}
    if t.repeat != 1:
        entry["repeat"] = t.repeat
    if t.view is not None:
        entry["view"] = list(t.view)
    if t.groups is not None:
        entry["groups"] = list(t.groups)
    if t.patches is not None:
        entry["patches"] = list(t.patches)
    return entry


OPTIONAL_TENSOR_KEYS = ("repeat", "view", "groups", "patches")  # a tensor entry's optional keys (raw.py too)


def _tensors(value: object, segments: list[SegmentEntry], where: str) -> list[TensorInfo]:
    sizes = {seg.name: seg.size for seg in segments}
    out: list[TensorInfo] = []
    for i, item in enumerate(get_list(value, where)):
        at = f"{where}[{i}]"
        obj = get_object(item, at, ("name", "dtype", "shape", "tile"), OPTIONAL_TENSOR_KEYS)
        name = get_str(obj["name"], f"{at}.name")
        if any(t.name == name for t in out):
            raise FormatError(f"{at}: duplicate tensor name '{name}'")
        dtype = get_str(obj["dtype"], f"{at}.dtype")
        if dtype not in DTYPES:
            raise FormatError(f"{at}: unknown dtype '{dtype}' (expected one of {', '.join(DTYPES)})")
        shape, tile = _dims(obj["shape"], f"{at}.shape"), _dims(obj["tile"], f"{at}.tile")
        repeat = get_int(obj.get("repeat", 1), f"{at}.repeat")
        if repeat < 1:
            raise FormatError(f"{at}.repeat: must be at least 1, got {repeat}")
        view = _dims(obj["view"], f"{at}.view") if "view" in obj else None
        groups = _dims(obj["groups"], f"{at}.groups") if "groups" in obj else None
        if groups is not None and len(groups) != 2:
            raise FormatError(f"{at}.groups: must be [G, width], got {list(groups)}")
        patches = None
        if "patches" in obj:
            where = f"{at}.patches"
            values = get_list(obj["patches"], where)
            patches = tuple(get_int(v, f"{where}[{k}]", minimum=0) for k, v in enumerate(values))
            if len(patches) != 3:
                raise FormatError(f"{where}: must be [K, stride, pad], got {list(patches)}")
        tensor = TensorInfo(name, dtype, shape, tile, repeat, view, groups, patches)  # type: ignore[arg-type]
        problem = tensor.layout_problem()
        if problem is not None:
            raise FormatError(f"{at}: {problem}")
        if name not in sizes:
            raise FormatError(f"{at}: tensor '{name}' has no segment of the same name")
        if tensor.nbytes != sizes[name]:
            raise FormatError(
                f"{at}: tensor '{name}' packs to {tensor.nbytes} bytes but its segment holds {sizes[name]}"
            )
        out.append(tensor)
    return out


def _dumps(value: object, where: str) -> list[DumpRange]:
    out = []
    for i, item in enumerate(get_list(value, where)):
        at = f"{where}[{i}]"
        obj = get_object(item, at, ("addr", "nbytes", "file"))
        out.append(
            DumpRange(
                get_int(obj["addr"], f"{at}.addr"),
                get_int(obj["nbytes"], f"{at}.nbytes"),
                get_str(obj["file"], f"{at}.file"),
            )
        )
    return out


def _labels(value: object, n_uops: int, where: str) -> dict[str, int]:
    labels: dict[str, int] = {}
    for i, item in enumerate(get_list(value, where)):
        at = f"{where}[{i}]"
        pair = get_list(item, at)
        if len(pair) != 2:
            raise FormatError(f"{at}: expected [name, index]")
        name = get_str(pair[0], f"{at} name")
        index = get_int(pair[1], f"{at} index")
        if index > n_uops:
            raise FormatError(f"{at}: label '{name}' points at micro-op {index} but there are {n_uops}")
        if name in labels:
            raise FormatError(f"{at}: duplicate label '{name}'")
        labels[name] = index
    return labels


def smap_to_json(source_map: dict[int, SourceLoc]) -> dict:
    """The SMAP JSON value: file names in order of first use, entries sorted by instruction."""
    files: list[str] = []
    index: dict[str, int] = {}
    entries = []
    for insn in sorted(source_map):
        loc = source_map[insn]
        if loc.file not in index:
            index[loc.file] = len(files)
            files.append(loc.file)
        entries.append([insn, index[loc.file], loc.line])
    return {"files": files, "entries": entries}


def _plain_smap(entries: list, n_insns: int, files: list[str]) -> dict[int, SourceLoc] | None:
    """The source map of well-formed entries, checked in bulk; None when any entry needs the detailed check.

    Entries that share a file and line share one SourceLoc.
    """
    if not entries:
        return {}
    if set(map(type, entries)) != {list} or set(map(len, entries)) != {3}:
        return None
    if set(map(type, chain.from_iterable(entries))) != {int}:
        return None
    try:
        table = np.array(entries, dtype=np.int64)
    except OverflowError:
        return None
    if table.min() < 0 or table[:, 0].max() >= n_insns or table[:, 1].max() >= len(files):
        return None
    if (np.diff(table[:, 0]) <= 0).any():
        return None
    span = int(table[:, 2].max()) + 1
    keys, which = np.unique(table[:, 1] * span + table[:, 2], return_inverse=True)
    locs = [SourceLoc(files[k // span], k % span) for k in keys.tolist()]
    return dict(zip(table[:, 0].tolist(), [locs[k] for k in which.tolist()], strict=True))


class LazySourceMap(Mapping):
    """A SMAP chunk read on first use (a FormatError then if it is malformed): most runs never look."""

    def __init__(self, payload: bytes, n_insns: int, where: str):
        self._payload, self._n, self._where = payload, n_insns, where
        self._map: dict[int, SourceLoc] | None = None

    def _loaded(self) -> dict[int, SourceLoc]:
        if self._map is None:
            from .jsonfields import parse_json

            self._map = smap_from_json(parse_json(self._payload, self._where), self._n, self._where)
        return self._map

    def __getitem__(self, index: int) -> SourceLoc:
        return self._loaded()[index]

    def __iter__(self):
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())


def smap_from_json(value: object, n_insns: int, where: str) -> dict[int, SourceLoc]:
    """Check a SMAP JSON value and return the source map."""
    obj = get_object(value, where, ("files", "entries"))
    files = [
        get_str(f, f"{where} files[{i}]") for i, f in enumerate(get_list(obj["files"], f"{where} files"))
    ]
    entries = get_list(obj["entries"], f"{where} entries")
    fast = _plain_smap(entries, n_insns, files)
    if fast is not None:
        return fast
    out: dict[int, SourceLoc] = {}
    previous = -1
    for i, item in enumerate(entries):
        at = f"{where} entries[{i}]"
        entry = get_list(item, at)
        if len(entry) != 3:
            raise FormatError(f"{at}: expected [insn_index, file_index, line]")
        insn = get_int(entry[0], f"{at} insn_index")
        file_index = get_int(entry[1], f"{at} file_index")
        line = get_int(entry[2], f"{at} line")
        if insn >= n_insns:
            raise FormatError(f"{at}: instruction {insn} does not exist (there are {n_insns})")
        if insn <= previous:
            raise FormatError(f"{at}: entries must be sorted by instruction index without repeats")
        if file_index >= len(files):
            raise FormatError(f"{at}: file index {file_index} but there are {len(files)} files")
        out[insn] = SourceLoc(files[file_index], line)
        previous = insn
    return out

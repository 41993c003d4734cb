"""The raw interchange directory (docs/raw.md): binaries plus layout.json.

:func:`import_raw` reads a directory written by any VTA tool; :func:`export_raw`
writes one. Import then export reproduces the same binary files byte for byte
and a layout.json with the same values; export, import, export is byte
identical. Every path named by a layout stays inside its directory.
:func:`load_program` opens either form (a .vbin file or a raw directory).

Besides the standard keys, a layout may carry the program's tensor
table (``tensors``: the META entries of vbin.md, each with the ``file`` of
its segment), its micro-op labels (``uop_labels``, as in META) and its
source map (``source_map``, as the SMAP chunk), so that a .vbin exported and
imported again is the same file, byte for byte; other tools ignore the keys.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath, PureWindowsPath

from vtasm.columns import decode_stream, stream_bytes
from vtasm.config import VTAConfig, config_from_dict, default_config
from vtasm.encoding import codec_for
from vtasm.errors import ConfigError, FormatError
from vtasm.fileio import read_bytes, read_mapped, write_atomic
from vtasm.names import unique
from vtasm.program import DumpRange, Program, Segment, TensorInfo, first_overlap

from .jsonfields import get_int, get_list, get_object, get_str, parse_json
from .magic import is_network
from .meta import OPTIONAL_TENSOR_KEYS, SegmentEntry, _labels, _tensor_entry, _tensors, smap_from_json, smap_to_json
from .vbin import check_config_matches, config_difference, is_vbin, read_vbin

LAYOUT = "layout.json"
LAYOUT_KEYS = ("config", "insn_addr", "uop_addr", "insn_file", "uop_file", "segments", "dump", "dram_bytes",
               "tensors", "uop_labels", "source_map")
DEFAULT_INSN_FILE = "insn.bin"
DEFAULT_UOP_FILE = "uop.bin"

# Built-in constants of the assembly language: a segment may not take these names.
_RESERVED = frozenset(
    "BATCH BLOCK_IN BLOCK_OUT BLOCK INP_ELEM WGT_ELEM ACC_ELEM OUT_ELEM ACC8_ELEM UOP_ELEM "
    "UOP_DEPTH INP_DEPTH WGT_DEPTH ACC_DEPTH".split()
)


def inside(directory: Path, rel: str, where: str) -> Path:
    """The path of ``rel`` in ``directory``; FormatError if it is absolute or escapes."""
    if not rel or "\x00" in rel:
        raise FormatError(f"{where}: invalid file name {rel!r}")
    if PurePosixPath(rel).is_absolute() or PureWindowsPath(rel).is_absolute() or PureWindowsPath(rel).drive:
        raise FormatError(
            f"{where}: absolute path {rel!r} is not allowed (paths are relative to the directory)"
        )
    base = directory.resolve()
    target = (base / rel).resolve()
    if target == base or base not in target.parents:
        raise FormatError(f"{where}: path {rel!r} leaves the directory")
    return target


def _read_config(layout: dict, cfg: VTAConfig | None, where: str, fallback: VTAConfig | None) -> VTAConfig:
    if "config" not in layout:
        if cfg is not None:
            return cfg
        return fallback if fallback is not None else default_config()
    try:
        own = config_from_dict(layout["config"], f"{where} config")
    except ConfigError as exc:
        raise FormatError(exc.message) from None
    if cfg is not None:
        key = config_difference(own, cfg)
        if key is not None:
            raise FormatError(
                f"{where}: refuse to run a stream encoded for a different configuration "
                f"(layout has {key}={own.log_values()[key]}, --config gives {key}={cfg.log_values()[key]})"
            )
    return own


def _segment_name(file: str, taken: set[str]) -> str:
    stem = PurePosixPath(file).name
    if stem.endswith(".bin"):
        stem = stem[: -len(".bin")]
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "seg"
    if name[0].isdigit() or name in _RESERVED:
        name = f"seg_{name}"
    return unique(name, taken)


def import_raw(directory: str | Path, cfg: VTAConfig | None = None,
               fallback: VTAConfig | None = None) -> Program:
    """Read a raw directory into a Program.

    ``cfg`` is an explicit configuration (--config): the layout's own config must
    match it. ``fallback`` is used when the layout carries no config and no
    ``cfg`` is given (the CLIs pass ./vta_config.json); else the default.
    """
    d = Path(directory)
    lpath = d / LAYOUT
    where = str(lpath)
    if not d.is_dir():
        raise FormatError(f"{d}: not a directory")
    if not lpath.exists():
        raise FormatError(f"{d}: not a raw program directory (it has no {LAYOUT}; `vtasm export --raw` writes one)")
    layout = get_object(parse_json(read_bytes(lpath, "layout"), where), where, ("insn_addr",), LAYOUT_KEYS)
    config = _read_config(layout, cfg, where, fallback)
    codec = codec_for(config)

    insn_file = get_str(layout.get("insn_file", DEFAULT_INSN_FILE), f"{where} insn_file")
    insn_data = read_bytes(inside(d, insn_file, f"{where} insn_file"), "instruction file")
    if len(insn_data) % 16:
        raise FormatError(
            f"{d / insn_file}: {len(insn_data)} bytes is not a whole number of 16-byte instructions"
        )
    instructions = decode_stream(insn_data, codec.cfg)
    uop_file = get_str(layout.get("uop_file", DEFAULT_UOP_FILE), f"{where} uop_file")
    uops = _read_uops(d, layout, uop_file, codec, where)
    segments, tensors = _read_segments(d, layout, where)
    dumps = _read_dumps(d, layout, where)

    dram = layout.get("dram_bytes")
    insn_addr = get_int(layout["insn_addr"], f"{where} insn_addr", allow_hex=True)
    uop_addr = get_int(layout.get("uop_addr", 0), f"{where} uop_addr", allow_hex=True)
    _check_apart([(f"segment {s.name}", s.addr, s.end) for s in segments]
                 + [("micro-op table", uop_addr, uop_addr + 4 * len(uops)),
                    ("instruction stream", insn_addr, insn_addr + 16 * len(instructions))], where)
    return Program(
        config=config,
        instructions=instructions,
        uops=uops,
        insn_addr=insn_addr,
        uop_addr=uop_addr,
        segments=segments,
        tensors=tensors,
        dumps=dumps,
        uop_labels=_labels(layout.get("uop_labels", []), len(uops), f"{where} uop_labels"),
        source_map=None if layout.get("source_map") is None else smap_from_json(
            layout["source_map"], len(instructions), f"{where} source_map"),
        dram_bytes=None if dram is None else get_int(dram, f"{where} dram_bytes", allow_hex=True),
        insn_file=insn_file,
        uop_file=uop_file,
    )


def _read_uops(d: Path, layout: dict, uop_file: str, codec, where: str) -> list:
    """The micro-op table, when the layout names its file or the default one exists."""
    uop_path = inside(d, uop_file, f"{where} uop_file")
    if "uop_file" not in layout and not uop_path.exists():
        return []
    uop_data = read_bytes(uop_path, "micro-op file")
    if len(uop_data) % 4:
        raise FormatError(f"{uop_path}: {len(uop_data)} bytes is not a whole number of 4-byte micro-ops")
    if "uop_addr" not in layout:
        raise FormatError(f"{where}: missing key 'uop_addr' (required when {uop_file} exists)")
    return codec.decode_uops(uop_data)  # keeps every word as read (stray bits in ``raw``)


def _read_segments(d: Path, layout: dict, where: str) -> tuple[list[Segment], list]:
    """The DRAM segments (named by the tensors they hold, the layout's name, or their file) and the tensors."""
    placed: list[tuple[str, int, bytes]] = []
    given: dict[str, str] = {}  # segment file -> the name the layout gives it (this toolchain's own key)
    for i, item in enumerate(get_list(layout.get("segments", []), f"{where} segments")):
        at = f"{where} segments[{i}]"
        obj = get_object(item, at, ("file", "addr"), ("name",))
        file = get_str(obj["file"], f"{at}.file")
        addr = get_int(obj["addr"], f"{at}.addr", allow_hex=True)
        if "name" in obj:
            name = get_str(obj["name"], f"{at}.name")
            if name in given.values() or name in _RESERVED:
                raise FormatError(f"{at}.name: {name!r} is {'reserved' if name in _RESERVED else 'taken'}")
            given[file] = name
        placed.append((file, addr, read_mapped(inside(d, file, f"{at}.file"), "segment file")))
    named, tensors = _read_tensors(layout.get("tensors", []), placed, f"{where} tensors")
    segments: list[Segment] = []
    taken = set(named.values()) | set(given.values())
    for file, addr, data in placed:
        name = named.get(file) or given.get(file) or _segment_name(file, taken)
        segments.append(Segment(name, addr, data, None if f"{name}.bin" == file else file))
    return segments, tensors


def _read_dumps(d: Path, layout: dict, where: str) -> list[DumpRange]:
    """The DRAM ranges to dump after a run, each to a file inside the directory."""
    dumps = []
    for i, item in enumerate(get_list(layout.get("dump", []), f"{where} dump")):
        at = f"{where} dump[{i}]"
        obj = get_object(item, at, ("addr", "nbytes", "file"))
        file = get_str(obj["file"], f"{at}.file")
        inside(d, file, f"{at}.file")
        dumps.append(DumpRange(get_int(obj["addr"], f"{at}.addr", allow_hex=True),
                               get_int(obj["nbytes"], f"{at}.nbytes", allow_hex=True), file))
    return dumps


def _check_apart(regions: list[tuple[str, int, int]], where: str) -> None:
    """Refuse two non-empty DRAM regions that overlap, as the assembler does (the later one is named first)."""
    pair = first_overlap([(lo, hi) for _, lo, hi in regions])
    if pair is not None:
        (a, a_lo, a_hi), (b, b_lo, b_hi) = regions[pair[0]], regions[pair[1]]
        raise FormatError(f"{where}: {b} (0x{b_lo:x}..0x{b_hi:x}) overlaps {a} (0x{a_lo:x}..0x{a_hi:x})")


def _read_tensors(value: object, placed: list[tuple[str, int, bytes]],
                  where: str) -> tuple[dict[str, str], list[TensorInfo]]:
    """The layout's tensor table: segment file -> tensor name, and the checked tensors.

    Each entry is a META tensor entry plus the ``file`` of its segment, which
    takes the tensor's name.
    """
    uses: dict[str, int] = {}
    for file, _, _ in placed:
        uses[file] = uses.get(file, 0) + 1
    named: dict[str, str] = {}
    entries = []
    for i, item in enumerate(get_list(value, where)):
        at = f"{where}[{i}]"
        obj = dict(get_object(item, at, ("file", "name", "dtype", "shape", "tile"), OPTIONAL_TENSOR_KEYS))
        file = get_str(obj.pop("file"), f"{at}.file")
        if file not in uses:
            raise FormatError(f"{at}.file: {file!r} is not the file of any segment")
        if uses[file] > 1:
            raise FormatError(f"{at}.file: {file!r} is the file of {uses[file]} segments; a tensor needs one")
        if file in named:
            raise FormatError(f"{at}.file: segment {file!r} already has tensor '{named[file]}'")
        named[file] = get_str(obj["name"], f"{at}.name")
        entries.append(obj)
    sizes = [SegmentEntry(named[file], addr, len(data), 0, file) for file, addr, data in placed if file in named]
    return named, _tensors(entries, sizes, where)


def layout_of(program: Program) -> dict:
    """The layout.json value export_raw writes for a program."""
    layout: dict = {
        "config": program.config.to_dict(),
        "insn_addr": program.insn_addr,
        "uop_addr": program.uop_addr,
        "insn_file": program.insn_file,
    }
    if program.uops:
        layout["uop_file"] = program.uop_file
    layout["segments"] = [{"file": seg.file_name, "addr": seg.addr,
                           **({"name": seg.name} if seg.file and seg.name != _segment_name(seg.file, set()) else {})}
                          for seg in program.segments]  # a name its file would not give it is kept
    layout["dump"] = [{"addr": r.addr, "nbytes": r.nbytes, "file": r.file} for r in program.dumps]
    if program.dram_bytes is not None:
        layout["dram_bytes"] = program.dram_bytes
    if program.uop_labels:
        layout["uop_labels"] = [[name, index] for name, index in
                                sorted(program.uop_labels.items(), key=lambda kv: kv[1])]
    if program.source_map:
        layout["source_map"] = smap_to_json(program.source_map)
    if program.tensors:
        order = {seg.name: i for i, seg in enumerate(program.segments)}
        layout["tensors"] = [{"file": program.segment(t.name).file_name, **_tensor_entry(t)}
                             for t in sorted(program.tensors, key=lambda t: order.get(t.name, len(order)))]
    return layout


def export_raw(program: Program, directory: str | Path, overwrite: bool = False) -> None:
    """Write a program as a raw directory (each file atomically, layout.json last).

    The micro-op file (and the ``uop_file`` key) is written only when the
    program has micro-ops; everything else is always written.
    """
    d = Path(directory)
    codec = codec_for(program.config)
    files: list[tuple[str, bytes]] = [(program.insn_file, stream_bytes(program.instructions, program.config))]
    if program.uops:
        files.append((program.uop_file, codec.encode_uops(program.uops)))
    files += [(seg.file_name, seg.data) for seg in program.segments]
    targets: dict[Path, str] = {inside(d, LAYOUT, "export"): LAYOUT}
    planned = []
    for rel, data in files:
        target = inside(d, rel, "export")
        if target in targets:
            raise FormatError(f"export: {rel!r} would overwrite {targets[target]!r}")
        targets[target] = rel
        planned.append((target, data))
    for r in program.dumps:
        inside(d, r.file, "export: dump file")
    text = json.dumps(layout_of(program), indent=1) + "\n"
    if d.is_dir() and any(d.iterdir()) and not overwrite:
        raise FormatError(f"{d}: directory is not empty; export into a new or empty directory "
                          "(or use --force to write over it)")
    try:
        d.mkdir(parents=True, exist_ok=True)
        for target, data in planned:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, data)
        write_atomic(d / LAYOUT, text)
    except OSError as exc:
        raise FormatError(f"{d}: cannot write raw directory: {exc.strerror or exc}") from None


def load_program(path: str | Path, cfg: VTAConfig | None = None, fallback: VTAConfig | None = None,
                 lazy_source_map: bool = False) -> Program:
    """Open a .vbin file or a raw directory; ``cfg`` (from --config) must match the program's.

    ``fallback`` configures a raw directory whose layout has no config (see
    import_raw); ``lazy_source_map`` defers reading a .vbin's source map to its first use.
    """
    p = Path(path)
    if p.is_dir():
        return import_raw(p, cfg, fallback)
    data = read_mapped(p, "program")
    if is_network(data):
        raise FormatError(f"{p}: a network file (VTA launches with host steps between them), not one program; "
                          f"vtasim run {p} runs it, vtasm dump {p} lists its launches")
    if not is_vbin(data):
        raise FormatError(f"{p}: not a .vbin file (bad magic) nor a raw directory{_next_step(p)}")
    program = read_vbin(data, str(p), lazy_source_map)
    if cfg is not None:
        check_config_matches(program, cfg)
    return program


def _next_step(path: Path) -> str:
    """What to run on a source file given where a program was expected."""
    suffix = path.suffix.lower()
    if suffix == ".vasm":
        return f"; it looks like assembly: vtasm assemble {path} -o {path.with_suffix('.vbin')}"
    if suffix in (".vk", ".onnx"):
        what = "kernel language" if suffix == ".vk" else "an ONNX model"
        return f"; it looks like {what}: vtacc {path} -o {path.with_suffix('.vbin')}"
    return ""


__all__ = ["export_raw", "import_raw", "inside", "layout_of", "load_program"]

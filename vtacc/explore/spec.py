"""An exploration spec (TOML) read into the points of its design space.

A spec names workloads (``[[workload]]``: a ``.vk`` or ``.onnx`` file, or a
single layer), the configuration space (``[config]``: each ``LOG_*`` value as
a number, a list, or ``{from, to, step}``), hardware (``[[hardware]]``: a
profile and overrides such as ``bus_bytes = [8, 16]``) and schedule settings
(``[schedule]``: ``threads``). Every combination is one :class:`Point`; its
key is a digest of everything that decides its result, the toolchain's own
source included, so a finished point is never computed twice and a stale
one never reused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from vtasim.timing.names import DEFAULT
from vtasim.timing.profile import Profile, load_profile, parse_override
from vtasm.config import DEFAULT_CONFIG, LOG_KEYS
from vtasm.errors import ConfigError, SpecError, VtaError

from .layers import layer_source

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_TOP_KEYS = {"title", "workload", "config", "hardware", "schedule"}
_SCHEDULE_KEYS = {"threads"}


@dataclass(frozen=True)
class Workload:
    """A program to compile at every point: kernel-language text and the kernel to compile."""

    name: str
    source: str
    filename: str  # the name compile messages use
    kernel: str | None
    origin: str  # where it came from: a file path or the layer it describes

    @property
    def digest(self) -> str:
        return hashlib.sha256(f"{self.kernel}\0{self.source}".encode()).hexdigest()


@dataclass(frozen=True)
class Hardware:
    """A base profile and the overrides of one hardware variant."""

    profile: Profile
    overrides: tuple[tuple[str, int | float], ...]

    @property
    def label(self) -> str:
        text = self.profile.name
        return text + "".join(f" {attr}={value:g}" for attr, value in self.overrides)

    def value(self, attr: str):
        """An overridden value, else the base profile's."""
        return dict(self.overrides).get(attr, getattr(self.profile, attr))


@dataclass(frozen=True)
class Point:
    """One workload on one configuration, hardware variant and schedule setting."""

    workload: Workload
    config: tuple[tuple[str, int], ...]  # every LOG_* value
    hardware: Hardware
    threads: int | None
    key: str

    @property
    def config_label(self) -> str:
        """A short name: batch x block, then the four buffer sizes as log2 bytes."""
        c = dict(self.config)
        block = 1 << c["LOG_BLOCK"]
        return (f"{1 << c['LOG_BATCH']}x{block}x{block} inp{c['LOG_INP_BUFF_SIZE']} "
                f"wgt{c['LOG_WGT_BUFF_SIZE']} acc{c['LOG_ACC_BUFF_SIZE']} uop{c['LOG_UOP_BUFF_SIZE']}"
                + ("" if (c["LOG_INP_WIDTH"], c["LOG_WGT_WIDTH"], c["LOG_ACC_WIDTH"]) == (3, 3, 5) else
                   f" w{1 << c['LOG_INP_WIDTH']}/{1 << c['LOG_WGT_WIDTH']}/{1 << c['LOG_ACC_WIDTH']}"))


@dataclass(frozen=True)
class Spec:
    """A spec read and expanded."""

    path: Path
    title: str
    workloads: list[Workload]
    points: list[Point]


class _Lines:
    """Where each key of a TOML text is (line numbers for messages); tomllib keeps no positions."""

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([\w.\-\"]+)\s*\]\]?")
    _KEY = re.compile(r"^\s*(\"[^\"]*\"|[\w.\-]+)\s*=")

    def __init__(self, path: Path, text: str):
        self.path = path
        self.found: dict[tuple[str, int, str], int] = {}
        table, index, seen = "", 0, {}
        for number, line in enumerate(text.splitlines(), 1):
            if m := self._HEADER.match(line):
                table = m.group(2).strip('"')
                index = seen.get(table, -1) + 1 if m.group(1) == "[[" else 0
                seen[table] = index
                self.found.setdefault((table, index, ""), number)
            elif m := self._KEY.match(line):
                self.found.setdefault((table, index, m.group(1).strip('"')), number)

    def where(self, table: str, index: int = 0, key: str = "", named: bool = True) -> str:
        """``file:line: [table] key`` for a message, at the key's line (the table's when it has none);
        without the key's name when ``named`` is false (the message names it)."""
        line = self.found.get((table, index, key)) or self.found.get((table, index, ""))
        head = f"{self.path}:{line}" if line else str(self.path)
        name = {"workload": f"[[workload]] #{index + 1}", "hardware": f"[[hardware]] #{index + 1}"}.get(
            table, f"[{table}]" if table else "")
        key = key if named else ""
        return f"{head}: {name} {key}".rstrip() if name or key else head


# Modules of this room that never change a row's values (drawing, storing, scheduling, the command line).
_NOT_IN_ROWS = {"pareto.py", "results.py", "sweep.py", "cli.py"}


def fingerprint() -> str:
    """A digest of the toolchain's source: a point computed by other code is a different point."""
    digest = hashlib.sha256()
    here = Path(__file__).resolve().parent
    root = here.parents[1]
    for package in ("vtasm", "vtasim", "vtacc"):
        for path in sorted((root / package).rglob("*")):
            if path.parent == here and path.name in _NOT_IN_ROWS:
                continue
            if path.suffix in (".py", ".lark", ".toml") and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _axis(value, where: str, kind: str = "integer") -> list:
    """A value, a list of values, or (integers) an inclusive range ``{from, to, step}``."""
    if isinstance(value, dict):
        unknown = set(value) - {"from", "to", "step"}
        if unknown or not {"from", "to"} <= set(value):
            raise SpecError(f"{where}: a range is {{from = A, to = B}} with an optional step, got {value!r}")
        step = value.get("step", 1)
        parts = [value["from"], value["to"], step]
        if any(isinstance(v, bool) or not isinstance(v, int) for v in parts) or step <= 0 or parts[1] < parts[0]:
            raise SpecError(f"{where}: a range needs integers with from <= to and a positive step, got {value!r}")
        return list(range(parts[0], parts[1] + 1, step))
    items = value if isinstance(value, list) else [value]
    number = (int, float) if kind == "number" else int
    if not items or any(isinstance(v, bool) or not isinstance(v, number) for v in items):
        raise SpecError(f"{where}: expected {'a number' if kind == 'number' else 'an integer'}, a list of them "
                        f"or {{from, to}}, got {value!r}")
    return list(dict.fromkeys(items))


def _workloads(data: list, base: Path, lines: _Lines) -> list[Workload]:
    if not isinstance(data, list) or not data:
        raise SpecError(f"{lines.where('')}: a spec needs at least one [[workload]]")
    out, names = [], set()
    for i, table in enumerate(data):
        where = lines.where("workload", i)
        if "layer" in table:
            name = table.get("name") or f"{table['layer']}{i + 1}"
            source = layer_source(str(name), table, lambda key, i=i: lines.where("workload", i, key, named=False))
            workload = Workload(str(name), source, f"{name}.vk", None, f"layer {table['layer']}")
        elif "file" in table:
            workload = _file_workload(table, base, lines, i)
        else:
            raise SpecError(f"{where}: a workload needs file = \"NAME.vk|NAME.onnx\" or layer = \"conv2d|dense|"
                            "max_pool\"")
        if workload.name in names:
            raise SpecError(f"{lines.where('workload', i, 'name')}: a second workload named {workload.name!r}")
        names.add(workload.name)
        out.append(workload)
    return out


def _file_workload(table: dict, base: Path, lines: _Lines, i: int) -> Workload:
    where = lines.where("workload", i)
    unknown = set(table) - {"file", "name", "kernel", "calibrate"}
    if unknown:
        raise SpecError(f"{where}: unknown key {sorted(unknown)[0]!r} (a file workload has file, name, kernel, "
                        "calibrate)")
    path = base / str(table["file"])
    name = str(table.get("name") or path.stem)
    kernel = table.get("kernel")
    if path.suffix.lower() == ".onnx":
        from vtacc.onnx import import_model

        if kernel is not None:
            raise SpecError(f"{lines.where('workload', i, 'kernel')}: an ONNX model compiles as a whole")
        calibrate = table.get("calibrate")
        try:
            imported = import_model(path, None if calibrate is None else base / str(calibrate))
        except VtaError as exc:
            raise SpecError(f"{where}: {exc.render()}") from None
        return Workload(name, imported.source, path.with_suffix(".vk").name, None, str(path))
    if "calibrate" in table:
        raise SpecError(f"{lines.where('workload', i, 'calibrate')}: calibrate is for .onnx models")
    try:
        source = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise SpecError(f"{lines.where('workload', i, 'file')}: cannot read {path}: {reason}") from None
    from vtacc.frontend.check import check_source
    from vtacc.program_builder import pick_entry

    try:  # checked once here, as an ONNX model is imported once: a mistake is one error, not every point refused
        pick_entry(check_source(source, str(path)), None if kernel is None else str(kernel))
    except VtaError as exc:
        raise SpecError(f"{where}: {exc.render()}") from None
    return Workload(name, source, path.name, None if kernel is None else str(kernel), str(path))


def _configs(data: dict, base: Path, lines: _Lines) -> list[tuple[tuple[str, int], ...]]:
    if not isinstance(data, dict):
        raise SpecError(f"{lines.where('config')}: [config] must be a table")
    start = dict(DEFAULT_CONFIG)
    if "base" in data:
        path = base / str(data["base"])
        try:
            start = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SpecError(f"{lines.where('config', 0, 'base')}: cannot read {path}: {exc}") from None
        if not isinstance(start, dict) or any(k not in start for k in LOG_KEYS):
            raise SpecError(f"{lines.where('config', 0, 'base')}: {path} is not a vta_config.json with every LOG_*")
    axes = {}
    for key in LOG_KEYS:
        axes[key] = _axis(data.get(key, start[key]), lines.where("config", 0, key))
    for key in data:
        if key not in LOG_KEYS and key != "base":
            raise SpecError(f"{lines.where('config', 0, key)}: unknown key (the configuration space has "
                            f"base and {', '.join(LOG_KEYS)})")
    return [tuple(zip(LOG_KEYS, values, strict=True)) for values in itertools.product(*axes.values())]


def _hardware(data: list, base: Path, lines: _Lines) -> list[Hardware]:
    if not isinstance(data, list) or not data:
        raise SpecError(f"{lines.where('')}: [[hardware]] must be a list of tables")
    out = []
    for i, table in enumerate(data):
        name = str(table.get("profile", DEFAULT))
        spec = name if not name.endswith(".toml") else str(base / name)
        try:
            profile = load_profile(spec)
        except ConfigError as exc:
            raise SpecError(f"{lines.where('hardware', i, 'profile')}: {exc.render()}") from None
        axes: dict[str, list] = {}
        for key, value in table.items():
            if key == "profile":
                continue
            where = lines.where("hardware", i, key)
            values = _axis(value, where, "number")
            try:
                attrs = {parse_override(f"{key}={v!r}")[0] for v in values}
            except ConfigError as exc:
                raise SpecError(f"{where}: {exc.render().removeprefix('--set ')}") from None
            axes[attrs.pop()] = values
        for combo in itertools.product(*axes.values()):
            out.append(Hardware(profile, tuple(zip(axes, combo, strict=True))))
    return out


def _threads(data: dict, lines: _Lines) -> list[int | None]:
    if not isinstance(data, dict):
        raise SpecError(f"{lines.where('schedule')}: [schedule] must be a table")
    for key in data:
        if key not in _SCHEDULE_KEYS:
            raise SpecError(f"{lines.where('schedule', 0, key)}: unknown schedule setting (known: threads)")
    if "threads" not in data:
        return [None]
    values = _axis(data["threads"], lines.where("schedule", 0, "threads"))
    if any(v not in (1, 2) for v in values):
        raise SpecError(f"{lines.where('schedule', 0, 'threads')}: VTA has one or two virtual threads, got "
                        f"{data['threads']!r}")
    return values


def point_key(workload: Workload, config, hardware: Hardware, threads: int | None, toolchain: str) -> str:
    """The digest of everything that decides a point's row."""
    identity = {"workload": workload.digest, "name": workload.name, "config": list(config),
                "profile": dataclasses.asdict(hardware.profile), "overrides": list(hardware.overrides),
                "threads": threads, "toolchain": toolchain}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


def load_spec(path: str | Path) -> Spec:
    """Read a spec and expand it into points (SpecError names the file, line and key at fault)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise SpecError(f"{path}: cannot read the spec: {reason}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        where = f"{path}:{m.group(1)}:{m.group(2)}" if m else f"{path}:{len(text.splitlines()) or 1}"
        raise SpecError(f"{where}: invalid TOML: {re.sub(r' [(]at .*[)]$', '', str(exc))}") from None
    lines = _Lines(path, text)
    for key in data:
        if key not in _TOP_KEYS:
            raise SpecError(f"{lines.where('', 0, key)}: unknown key (a spec has {', '.join(sorted(_TOP_KEYS))})")
    base = path.parent
    workloads = _workloads(data.get("workload"), base, lines)
    configs = _configs(data.get("config", {}), base, lines)
    hardware = _hardware(data.get("hardware", [{}]), base, lines)
    threads = _threads(data.get("schedule", {}), lines)
    toolchain = fingerprint()
    points = [Point(w, c, h, t, point_key(w, c, h, t, toolchain))
              for h, c, t, w in itertools.product(hardware, configs, threads, workloads)]
    return Spec(path, str(data.get("title", path.stem)), workloads, points)

"""Hardware profiles: every cost the timing model uses, as data.

A profile is a small TOML file (see ``profiles/``) of cycle costs, bus and
memory parameters and the clock. Element sizes are not in it: they come from
the VTA configuration, so one profile serves every configuration. Users load
a built-in profile by name or their own file, and override single values
with ``section.key=value`` (or a bare key when it is unique).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

from vtasm.errors import ConfigError

from .names import BUILTIN, CLIENTS, DEFAULT
from .profile_keys import BY_ATTR, BY_SPELLING, KEYS, SECTIONS, markdown_table


def _toml():
    """The TOML reader (imported on first use: runs without timing never need it)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib


@dataclass(frozen=True)
class Profile:
    """The costs of one VTA hardware design (cycles unless said otherwise): the name, description and clock,
    then one field per profile key, in the order and with the meaning profile_keys.KEYS gives them."""

    name: str
    description: str
    clock_mhz: float
    bus_bytes: int
    burst_beats: int
    burst_boundary_bytes: int
    latency: int
    reads_in_flight: int
    client_reads_in_flight: int
    read_setup: int
    write_setup: int
    write_response: int
    store_bubble: int
    wgt_beat_cycles: int
    row_setup: int
    store_row_setup: int
    read_priority: tuple[str, ...]
    write_command_beats: int
    dma_uop_fixed: int
    dma_inp_fixed: int
    dma_wgt_fixed: int
    dma_acc_fixed: int
    dma_out_fixed: int
    dma_pad_by_element: int
    dma_pad_run: int
    dma_pad_during_reads: int
    dma_empty_is_call: int
    dma_uop_beat_bytes: int
    fetch_chunk: int
    fetch_start: int
    fetch_dispatch: int
    fetch_overlap: int
    fetch_gap: int
    queue_depth: int
    insn_gap: int
    sync_cycles: int
    token_latency: int
    g2l_latency: int
    s2g_latency: int
    finish_cycles: int
    gemm_per_execution: int
    gemm_reset_per_execution: int
    gemm_drain: int
    gemm_reset_drain: int
    gemm_per_iteration: int
    gemm_fixed: int
    alu_imm_per_execution: int
    alu_tensor_per_execution: int
    alu_drain: int
    alu_per_iteration: int
    alu_fixed: int
    alu_token_lead: int
    # the keys (section.key) whose values were fitted to measurements, not measured or read off the design
    # (benchmarks/timing_fit.py fits these by default)
    fitted: tuple[str, ...] = ()


_TOP = ("name", "description", "clock_mhz", "fitted")


def _key_of(attr: str) -> str:
    """The ``section.key`` spelling of an attribute (for messages and --set)."""
    key = BY_ATTR.get(attr)
    return key.spelt if key is not None else attr


def _flatten(data: dict, origin: str) -> dict:
    out = {}
    for key, value in data.items():
        if key in _TOP:
            out[key] = value
        elif key in SECTIONS and isinstance(value, dict):
            for sub, v in value.items():
                known = BY_SPELLING.get(f"{key}.{sub}")
                if known is None:
                    raise ConfigError(f"{origin}: unknown profile key {key}.{sub}")
                out[known.attr] = v
        else:
            raise ConfigError(f"{origin}: unknown profile key {key}")
    return out


_FIELD_TYPES = {f.name: f.type for f in fields(Profile)}


def _check(values: dict, origin: str) -> Profile:
    missing = [_key_of(name) for name in _FIELD_TYPES if name not in values and name != "fitted"]
    if missing:
        raise ConfigError(f"{origin}: profile lacks {', '.join(missing)}")
    for name, value in values.items():
        typ = _FIELD_TYPES[name]
        where = f"{origin}: {_key_of(name)}"
        if name in ("read_priority", "fitted"):
            continue
        if typ == "str":
            if not isinstance(value, str):
                raise ConfigError(f"{where} must be a string")
        elif typ == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(f"{where} must be a positive number, got {value!r}")
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{where} must be an integer, got {value!r}")
            low = BY_ATTR[name].least
            if value < low:
                raise ConfigError(f"{where} must be at least {low}, got {value}")
    order = values["read_priority"]
    if not isinstance(order, (tuple, list)) or sorted(order) != sorted(CLIENTS):
        raise ConfigError(f"{origin}: memory.read_priority must list {', '.join(CLIENTS)} once each, got {order!r}")
    values["read_priority"] = tuple(order)
    fitted = values.get("fitted", ())
    known = {_key_of(name) for name in _FIELD_TYPES} - set(_TOP)
    if not isinstance(fitted, (tuple, list)) or any(k not in known for k in fitted):
        wrong = [k for k in fitted if k not in known] if isinstance(fitted, (tuple, list)) else fitted
        raise ConfigError(f"{origin}: fitted must list profile keys (section.key), got {wrong!r}")
    values["fitted"] = tuple(fitted)
    for attr in ("fetch_overlap", "dma_empty_is_call", "dma_pad_during_reads"):
        if values[attr] not in (0, 1):
            raise ConfigError(f"{origin}: {_key_of(attr)} must be 0 or 1, got {values[attr]}")
    if values["dma_pad_by_element"] not in (0, 1):
        raise ConfigError(f"{origin}: dma.pad_by_element must be 0 or 1, got {values['dma_pad_by_element']}")
    if values["bus_bytes"] & (values["bus_bytes"] - 1):
        raise ConfigError(f"{origin}: memory.bus_bytes must be a power of two, got {values['bus_bytes']}")
    boundary = values["burst_boundary_bytes"]
    if boundary and boundary % values["bus_bytes"]:
        raise ConfigError(f"{origin}: memory.burst_boundary_bytes must be a multiple of memory.bus_bytes")
    return Profile(**{k: float(v) if _FIELD_TYPES[k] == "float" else v for k, v in values.items()})


def _parse(text: str, origin: str) -> dict:
    try:
        data = _toml().loads(text)
    except _toml().TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: invalid TOML: {exc}") from None
    return _flatten(data, origin)


@cache
def _builtin_text(name: str) -> str:
    """A built-in profile's TOML, read on first use (a run without timing never reads it; a compile reads
    only the one it is for). The files are package data beside this module (as native.py's C source is),
    so a plain read finds them without importlib.resources and what it imports."""
    return Path(__file__).with_name("profiles").joinpath(f"{name}.toml").read_text("utf-8")


def load_profile(spec: str | None = None) -> Profile:
    """A built-in profile by name, or a TOML file by path (default: names.DEFAULT, the HLS design)."""
    spec = spec or DEFAULT
    if spec in BUILTIN:
        return _check(_parse(_builtin_text(spec), f"profile {spec}"), f"profile {spec}")
    path = Path(spec)
    if not path.is_file():
        raise ConfigError(f"{spec}: no such profile (built in: {', '.join(BUILTIN)}; or a .toml file)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{spec}: cannot read profile: {exc}") from None
    return _check(_parse(text, spec), spec)


def parse_override(text: str) -> tuple[str, float | int | tuple[str, ...]]:
    """``section.key=value`` (or ``key=value`` when unique) as (attribute, number)."""
    if "=" not in text:
        raise ConfigError(f"--set {text}: expected KEY=VALUE, e.g. memory.latency=64")
    key, _, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    if "." in key:
        section, _, sub = key.partition(".")
        if key not in BY_SPELLING:
            raise ConfigError(f"--set {text}: unknown profile key {key}")
        attr = BY_SPELLING[key].attr
    else:
        matches = [k for k in KEYS if k.name == key]
        if key == "clock_mhz":
            attr = key
        elif len(matches) != 1:
            known = "unknown" if not matches else "ambiguous (" + ", ".join(k.spelt for k in matches) + ")"
            raise ConfigError(f"--set {text}: {known} profile key {key}")
        else:
            attr = matches[0].attr
    if attr == "read_priority":  # a list of client names: fetch,inp,wgt,uop,acc
        return attr, tuple(name.strip() for name in raw.split(","))
    if raw.lower() in ("true", "false"):
        raise ConfigError(f"--set {text}: expected a number")
    try:
        value: float | int = int(raw, 0)
    except ValueError:
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"--set {text}: expected a number, got {raw!r}") from None
    return attr, value


def with_overrides(profile: Profile, overrides: dict[str, float | int]) -> Profile:
    """The profile with some values replaced, checked like a file."""
    if not overrides:
        return profile
    values = dataclasses.asdict(profile)
    values.update(overrides)
    if "clock_mhz" in overrides:
        values["clock_mhz"] = float(values["clock_mhz"]) if isinstance(values["clock_mhz"], int) else values[
            "clock_mhz"]
    return _check(values, f"profile {profile.name} with overrides")


def profile_keys() -> list[str]:
    """Every ``section.key`` a profile has, for help texts."""
    return [k.spelt for k in KEYS]


def resolve_profile(spec: str | None, mem_latency: int | None = None, sets: tuple[str, ...] = ()) -> Profile:
    """A profile by name or file, with ``--mem-latency`` and ``--set KEY=VALUE`` overrides applied."""
    overrides = dict(parse_override(text) for text in sets)
    if mem_latency is not None:
        overrides["latency"] = mem_latency
    return with_overrides(load_profile(spec or DEFAULT), overrides)


def values_table() -> str:
    """docs/timing.md's table: every key, its meaning and its value in each built-in profile."""
    return markdown_table([load_profile(name) for name in BUILTIN])


if __name__ == "__main__":
    print(values_table(), end="")

"""Single-layer workloads: a layer described in a spec, written as a kernel-language source."""

from __future__ import annotations

from collections.abc import Callable

from vtacc.frontend.names import kernel_name
from vtasm.errors import SpecError

Where = Callable[[str], str]  # a key of the workload's table -> "spec.toml:LINE: [[workload]] #N" at its line

# layer kind -> (required keys, optional keys with defaults)
LAYERS: dict[str, tuple[tuple[str, ...], dict]] = {
    "conv2d": (("input", "out_channels", "kernel_size"),
               {"stride": 1, "pad": 0, "groups": 1, "shift": 8, "bias": True, "relu": True}),
    "dense": (("input", "out_features"), {"shift": 8, "relu": True}),
    "max_pool": (("input", "size"), {"stride": None, "pad": 0}),
}


def _ints(where: Where, key: str, value, count: int | None = None) -> list[int]:
    items = value if isinstance(value, list) else [value]
    if not items or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in items):
        raise SpecError(f"{where(key)}: {key} must be a positive integer{' or a list of them' if count else ''}, "
                        f"got {value!r}")
    if count is not None and len(items) != count:
        raise SpecError(f"{where(key)}: {key} must list {count} sizes, got {value!r}")
    return items


def _flag(where: Where, key: str, value) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{where(key)}: {key} must be true or false, got {value!r}")
    return value


def layer_source(name: str, table: dict, where: Where) -> str:
    """The kernel source of one layer table (``layer = "conv2d"`` and its sizes); ``where`` places a key's
    line in messages."""
    kind = table.get("layer")
    if kind not in LAYERS:
        raise SpecError(f"{where('layer')}: layer must be one of {', '.join(LAYERS)}, got {kind!r}")
    required, optional = LAYERS[kind]
    known = {"layer", "name", *required, *optional}
    for key in table:
        if key not in known:
            raise SpecError(f"{where(key)}: unknown key {key!r} for a {kind} layer (known: "
                            f"{', '.join(sorted(known))})")
    for key in required:
        if key not in table:
            raise SpecError(f"{where('')}: a {kind} layer needs {key}")
    args = {**optional, **{k: v for k, v in table.items() if k in optional}}
    ident = kernel_name(name.lower())
    if kind == "conv2d":
        return _conv(ident, table, args, where)
    if kind == "dense":
        return _dense(ident, table, args, where)
    return _pool(ident, table, args, where)


def _conv(ident: str, table: dict, args: dict, where: Where) -> str:
    n, c, h, w = _ints(where, "input", table["input"], 4)
    oc = _ints(where, "out_channels", table["out_channels"])[0]
    size = table["kernel_size"]
    kh, kw = _ints(where, "kernel_size", size, 2) if isinstance(size, list) else _ints(where, "kernel_size", size) * 2
    stride = _ints(where, "stride", args["stride"])[0]
    groups = _ints(where, "groups", args["groups"])[0]
    pad = args["pad"]
    if isinstance(pad, bool) or not isinstance(pad, int) or pad < 0:
        raise SpecError(f"{where('pad')}: pad must be a non-negative integer, got {pad!r}")
    if c % groups or oc % groups:
        raise SpecError(f"{where('groups')}: groups={groups} must divide the input channels ({c}) and "
                        f"out_channels ({oc})")
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    if oh <= 0 or ow <= 0:
        raise SpecError(f"{where('kernel_size')}: a {kh}x{kw} kernel does not fit a {h}x{w} input padded by {pad}")
    shift = _shift(where, args["shift"])
    bias = _flag(where, "bias", args["bias"])
    low = 0 if _flag(where, "relu", args["relu"]) else -128
    conv = f"conv2d(x, w, stride={stride}, pad={pad}{f', groups={groups}' if groups > 1 else ''})"
    value = f"({conv} >> {shift})" if shift else conv
    if bias:
        value = f"{value} + b"
    inputs = f"x: int8[{n}, {c}, {h}, {w}], w: int8[{oc}, {c // groups}, {kh}, {kw}]"
    inputs += f", b: int32[{oc}]" if bias else ""
    return (f"kernel {ident}({inputs}) -> y: int8[{n}, {oc}, {oh}, {ow}] {{\n"
            f"    y = clip({value}, {low}, 127)\n}}\n")


def _dense(ident: str, table: dict, args: dict, where: Where) -> str:
    n, k = _ints(where, "input", table["input"], 2)
    o = _ints(where, "out_features", table["out_features"])[0]
    shift = _shift(where, args["shift"])
    low = 0 if _flag(where, "relu", args["relu"]) else -128
    value = f"matmul(x, w) >> {shift}" if shift else "matmul(x, w)"
    return (f"kernel {ident}(x: int8[{n}, {k}], w: int8[{o}, {k}]) -> y: int8[{n}, {o}] {{\n"
            f"    y = clip({value}, {low}, 127)\n}}\n")


def _pool(ident: str, table: dict, args: dict, where: Where) -> str:
    n, c, h, w = _ints(where, "input", table["input"], 4)
    size = _ints(where, "size", table["size"])[0]
    stride = size if args["stride"] is None else _ints(where, "stride", args["stride"])[0]
    pad = args["pad"]
    if isinstance(pad, bool) or not isinstance(pad, int) or not 0 <= pad < size:
        raise SpecError(f"{where('pad')}: pad must be an integer from 0 to size - 1, got {pad!r}")
    oh, ow = (h + 2 * pad - size) // stride + 1, (w + 2 * pad - size) // stride + 1
    if oh <= 0 or ow <= 0:
        raise SpecError(f"{where('size')}: a {size}x{size} window does not fit a {h}x{w} input padded by {pad}")
    return (f"kernel {ident}(x: int8[{n}, {c}, {h}, {w}]) -> y: int8[{n}, {c}, {oh}, {ow}] {{\n"
            f"    y = max_pool(x, {size}, stride={stride}, pad={pad})\n}}\n")


def _shift(where: Where, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 31:
        raise SpecError(f"{where('shift')}: shift must be an integer from 0 to 31, got {value!r}")
    return value

"""Typed access to parsed JSON for the binary formats (.vbin META, raw layout.json).

Each helper checks one value and raises a one-line :class:`FormatError` that
says where the value sits (``where``) and what was expected.
"""

from __future__ import annotations

import json

from vtasm.errors import FormatError, printable


def parse_json(data: bytes, where: str) -> object:
    """Decode UTF-8 JSON bytes; any decoding problem becomes a FormatError."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{where}: not valid UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{where}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise FormatError(f"{where}: invalid JSON: nested too deeply") from None
    except FormatError as exc:  # a key given twice (_unique_keys)
        raise FormatError(f"{where}: invalid JSON: {exc.message}") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise FormatError(f"{where}: invalid JSON: {' '.join(str(exc).split())[:100]}") from None
    _check_strings(value, where)
    return value


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are each given once (json keeps the last of repeated keys silently)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise FormatError(f"the key '{printable(key)[:60]}' appears twice in one object")
    return out


def _check_strings(value: object, where: str) -> None:
    """Refuse a string (or key) that holds a control character, a line break or a lone surrogate: the
    formats' names reach terminals and generated text, where such characters would act, not show."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += item.keys()
            stack += item.values()
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str) and not item.isprintable():
            raise FormatError(f"{where}: the string '{printable(item)[:80]}' holds a character that is not "
                              "printable (a control character, line break or lone surrogate)")


def get_object(value: object, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """A JSON object holding every ``required`` key and no key outside ``required + optional``."""
    if not isinstance(value, dict):
        raise FormatError(f"{where}: expected a JSON object, got {_kind(value)}")
    for key in required:
        if key not in value:
            raise FormatError(f"{where}: missing key '{key}'")
    allowed = set(required) | set(optional)
    for key in value:
        if key not in allowed:
            raise FormatError(f"{where}: unknown key '{key}'")
    return value


def get_list(value: object, where: str) -> list:
    """A JSON array."""
    if not isinstance(value, list):
        raise FormatError(f"{where}: expected a JSON array, got {_kind(value)}")
    return value


def get_int(value: object, where: str, minimum: int = 0, allow_hex: bool = False) -> int:
    """An integer at least ``minimum``; with ``allow_hex`` also a string such as "0x1000"."""
    if allow_hex and isinstance(value, str):
        text = value.strip()
        if not text.lower().startswith("0x"):
            raise FormatError(f"{where}: expected an integer or a hex string '0x...', got {value!r}")
        try:
            value = int(text[2:], 16)
        except ValueError:
            raise FormatError(f"{where}: invalid hex number {text!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(f"{where}: expected an integer, got {_kind(value)}")
    if value < minimum:
        raise FormatError(f"{where}: must be at least {minimum}, got {value}")
    return value


def get_str(value: object, where: str, allow_empty: bool = False) -> str:
    """A JSON string (non-empty unless ``allow_empty``)."""
    if not isinstance(value, str):
        raise FormatError(f"{where}: expected a string, got {_kind(value)}")
    if not value and not allow_empty:
        raise FormatError(f"{where}: must not be empty")
    return value


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__

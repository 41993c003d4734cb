"""Seeded, structure-aware mutations of the toolchain's input formats.

Every mutator takes a ``random.Random`` and the bytes (or model) of a valid seed and returns the mutated
input with a short description of what it changed. A case is reproducible from its family and number:
``case_rng(family, k)`` seeds the generator with the string ``"family:k"``.

The chunked formats (.vbin, network file) are mutated mostly *inside* their chunks, with every CRC-32
recomputed afterwards, so the mutation reaches the parser of the payload instead of stopping at the CRC
check; a smaller share damages the framing itself (flipped bytes, truncation, lengths, counts, padding).

Regenerate one case by hand, e.g.::

    python -m tests.fuzz.mutators vbin 17 SEEDDIR/vadd.vbin /tmp/case.vbin
"""

from __future__ import annotations

import copy
import json
import math
import random
import struct
import zlib
from collections.abc import Callable

HEADER = struct.Struct("<8sII")
PROBE = "vta-fuzz-escape-probe.bin"  # a file name a mutation asks a tool to write outside its output folder
ABS_PROBE = f"/tmp/{PROBE}"
CHUNK = struct.Struct("<4sIQ")


def case_rng(family: str, k: int) -> random.Random:
    return random.Random(f"{family}:{k}")


# -- framing ----------------------------------------------------------------------------------------------------


def split(data: bytes) -> tuple[bytes, int, list[tuple[bytes, bytes]]]:
    """The magic, version and chunks (tag, payload) of a valid chunked file."""
    magic, version, count = HEADER.unpack_from(data, 0)
    pos, chunks = HEADER.size, []
    for _ in range(count):
        tag, _, length = CHUNK.unpack_from(data, pos)
        chunks.append((tag, data[pos + CHUNK.size : pos + CHUNK.size + length]))
        pos += CHUNK.size + length + (-length % 8)
    return magic, version, chunks


def frame(magic: bytes, version: int, chunks: list[tuple[bytes, bytes]], count: int | None = None) -> bytes:
    """The file of these chunks, every CRC-32 computed (``count`` overrides the header's chunk count)."""
    out = [HEADER.pack(magic, version, len(chunks) if count is None else count)]
    for tag, payload in chunks:
        out += [CHUNK.pack(tag, zlib.crc32(payload), len(payload)), payload, bytes(-len(payload) % 8)]
    return b"".join(out)


def chunk_offsets(data: bytes) -> list[int]:
    """The offset of each chunk header of a valid file."""
    _, _, count = HEADER.unpack_from(data, 0)
    pos, offsets = HEADER.size, []
    for _ in range(count):
        offsets.append(pos)
        _, _, length = CHUNK.unpack_from(data, pos)
        pos += CHUNK.size + length + (-length % 8)
    return offsets


def mutate_framing(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """Damage the framing of a chunked file (magic, version, count, tags, lengths, CRCs, padding, size)."""
    offsets = chunk_offsets(data)
    buf = bytearray(data)
    choice = rng.randrange(11)
    if choice == 0:
        n = rng.randint(1, 8)
        for _ in range(n):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        return bytes(buf), f"{n} random bit flips"
    if choice == 1:
        cut = rng.randrange(len(data))
        return data[:cut], f"truncated to {cut} bytes"
    if choice == 2:
        extra = rng.choice([bytes(8), b"\x00", b"garbage!", bytes(rng.randrange(256) for _ in range(40))])
        return data + extra, f"{len(extra)} bytes appended"
    if choice == 3:
        count = rng.choice([0, 1, 2, 3, 6, 255, 2**16, 2**31, 2**32 - 1])
        struct.pack_into("<I", buf, 12, count)
        return bytes(buf), f"chunk count {count}"
    if choice == 4:
        version = rng.choice([0, 2, 2**32 - 1])
        struct.pack_into("<I", buf, 8, version)
        return bytes(buf), f"version {version}"
    k = rng.randrange(len(offsets))
    at = offsets[k]
    if choice == 5:
        length = rng.choice([0, 1, 7, 9, 2**31, 2**32, 2**40, 2**63, 2**64 - 1])
        struct.pack_into("<Q", buf, at + 8, length)
        return bytes(buf), f"chunk {k + 1} length {length}"
    if choice == 6:
        _, _, length = CHUNK.unpack_from(data, at)
        delta = rng.choice([-16, -8, -1, 1, 8, 16])
        struct.pack_into("<Q", buf, at + 8, max(0, length + delta))
        return bytes(buf), f"chunk {k + 1} length {length}{delta:+d}"
    if choice == 7:
        tag = rng.choice([b"META", b"INSN", b"UOPS", b"DATA", b"SMAP", b"NETW", b"PROG", b"HOST", b"\x00\x00\x00\x00",
                          b"\xff\xfe\x1b[", b"meta"])
        buf[at : at + 4] = tag
        return bytes(buf), f"chunk {k + 1} tag {tag!r}"
    if choice == 8:
        struct.pack_into("<I", buf, at + 4, rng.randrange(2**32))
        return bytes(buf), f"chunk {k + 1} CRC replaced"
    if choice == 9:
        _, _, length = CHUNK.unpack_from(data, at)
        pad = -length % 8
        if pad:
            buf[at + CHUNK.size + length + rng.randrange(pad)] = rng.randrange(1, 256)
            return bytes(buf), f"chunk {k + 1} padding not zero"
        magic = rng.choice([b"VTA\x00VBIN", b"VTA\x00VNET", b"VTA\x00VBIM", b"\x89PNG\r\n\x1a\n", b"PK\x03\x04"])
        return magic + data[8:], f"magic {magic!r}"
    # a chunk dropped, repeated or moved (CRCs stay valid)
    magic, version, chunks = split(data)
    how = rng.choice(["drop", "repeat", "swap"])
    if how == "drop":
        del chunks[k]
    elif how == "repeat":
        chunks.insert(k, chunks[k])
    else:
        j = rng.randrange(len(chunks))
        chunks[k], chunks[j] = chunks[j], chunks[k]
    return frame(magic, version, chunks), f"chunk {k + 1} {how}"


# -- JSON payloads ----------------------------------------------------------------------------------------------


class Raw:
    """JSON text put in place of a value as is (what json.dumps cannot write: deep nesting, huge numbers)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Raw({self.text[:40]!r}{'...' if len(self.text) > 40 else ''})"


DEEP = 100_000
HOSTILE_INTS = [-1, -(2**31), -(2**63), 0, 1, 2**31 - 1, 2**31, 2**32, 2**40, 2**53 + 1, 2**63 - 1, 2**63, 2**64,
                10**30, 10**100]
HOSTILE_FLOATS = [0.5, -0.0, 1e30, -1e30, 1e308, math.inf, -math.inf, math.nan, 5e-324]
HOSTILE_STRINGS = ["", " ", "x" * 100_000, "a\nb", "line\r\nbreak", "\x00", "\x1b[31mred\x1b[0m", "\x9b2J",
                   "\ud800", "\udfff\ud800", "é", "\u202eevil", "../../etc/passwd", "/etc/passwd", "}", "#", "'\"",
                   "int8", "NaN", "1", "null", "\x7f", "\ufeff"]
HOSTILE_RAW = [Raw("[" * DEEP + "]" * DEEP), Raw('{"a":' * DEEP + "1" + "}" * DEEP), Raw("9" * 5000),
               Raw("-" + "9" * 5000), Raw("1e99999"), Raw("-1e99999"), Raw("1" + "0" * 400 + ".5"),
               Raw("[" + ",".join(["1"] * 200_000) + "]"), Raw("1E400"), Raw("\"\\ud800\\udc00\\udbff\"")]


def hostile_value(rng: random.Random) -> object:
    """A JSON value no reader should trust."""
    family = rng.randrange(7)
    if family == 0:
        return rng.choice(HOSTILE_INTS)
    if family == 1:
        return rng.choice(HOSTILE_FLOATS)
    if family == 2:
        return rng.choice(HOSTILE_STRINGS)
    if family == 3:
        return rng.choice(HOSTILE_RAW)
    if family == 4:
        return rng.choice([None, True, False, [], {}, [None], [[]], {"": None}, [-1], [0], [2**40, 2**40]])
    if family == 5:
        return [rng.choice(HOSTILE_INTS) for _ in range(rng.randint(1, 5))]
    return {rng.choice(HOSTILE_STRINGS[:8]): rng.choice(HOSTILE_INTS)}


def dumps(value: object, canonical: bool = True) -> bytes:
    """JSON text of ``value`` with every Raw put in as is (NaN/Infinity as Python writes them)."""
    raws: list[str] = []

    def prepare(v: object) -> object:
        if isinstance(v, Raw):
            raws.append(v.text)
            return f"@@RAW{len(raws) - 1}@@"
        if isinstance(v, dict):
            return {k: prepare(x) for k, x in v.items()}
        if isinstance(v, list):
            return [prepare(x) for x in v]
        return v

    text = json.dumps(prepare(value), sort_keys=canonical, separators=(",", ":") if canonical else None)
    for k, raw in enumerate(raws):
        text = text.replace(f'"@@RAW{k}@@"', raw, 1)
    return text.encode("utf-8", "surrogatepass")


def paths_of(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every path (a tuple of keys and indices) to a value inside ``value``, the root excluded."""
    found = []
    if isinstance(value, dict):
        for k, v in value.items():
            found.append((*prefix, k))
            found += paths_of(v, (*prefix, k))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            found.append((*prefix, k))
            found += paths_of(v, (*prefix, k))
    return found


def get_at(value: object, path: tuple) -> object:
    for key in path:
        value = value[key]
    return value


def set_at(value: object, path: tuple, new: object) -> None:
    get_at(value, path[:-1])[path[-1]] = new


def show(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "<root>"


def short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def mutate_json_value(rng: random.Random, doc: object) -> tuple[object, str]:
    """One generic mutation of a JSON document: a value replaced, a key dropped or added, a list changed."""
    doc = copy.deepcopy(doc)
    paths = paths_of(doc)
    path = rng.choice(paths)
    parent = get_at(doc, path[:-1])
    choice = rng.randrange(10)
    if choice < 6:
        new = hostile_value(rng)
        set_at(doc, path, new)
        return doc, f"{show(path)} = {short(new)}"
    if choice == 6 and isinstance(parent, dict):
        del parent[path[-1]]
        return doc, f"{show(path)} removed"
    if choice == 7 and isinstance(parent, dict):
        key = rng.choice(["extra", "", "\x1b[2J", "zero", "repeat", "__proto__"])
        parent[key] = hostile_value(rng)
        return doc, f"{show(path[:-1])} gets key {key!r}"
    if choice == 8 and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[path[-1]]))
        return doc, f"{show(path[:-1])} repeats its element {path[-1]}"
    target = get_at(doc, path)
    if isinstance(target, list):
        set_at(doc, path, [])
        return doc, f"{show(path)} = []"
    if isinstance(target, int) and not isinstance(target, bool):
        new = rng.choice([target + 1, target - 1, -target, target * 2**20, target + 2**32])
        set_at(doc, path, new)
        return doc, f"{show(path)} = {new}"
    set_at(doc, path, None)
    return doc, f"{show(path)} = null"


def mutate_json_text(rng: random.Random, text: bytes) -> tuple[bytes, str]:
    """Damage JSON text itself: bad UTF-8, a BOM, truncation, duplicate keys, other documents."""
    choice = rng.randrange(8)
    if choice == 0:
        at = rng.randrange(len(text))
        return text[:at] + b"\xff\xfe" + text[at:], "invalid UTF-8 inside"
    if choice == 1:
        return b"\xef\xbb\xbf" + text, "UTF-8 BOM before the JSON"
    if choice == 2:
        cut = rng.randrange(len(text))
        return text[:cut], f"JSON cut after {cut} bytes"
    if choice == 3:
        key_end = text.index(b":")
        return text[:1] + text[1:key_end] + b":null," + text[1:], "the first key twice (first null)"
    if choice == 4:
        return rng.choice([b"", b"null", b"[]", b"1", b'"META"', b"{}", b"{" * 50, b"\x00" * 8, text + b"x",
                           text + b" ", text.replace(b":", b": ", 3), text.upper()]), "JSON replaced"
    if choice == 5:
        at = rng.randrange(len(text))
        return text[:at] + bytes([rng.randrange(256)]) + text[at + 1 :], f"byte {at} of the JSON replaced"
    if choice == 6:
        digits = [i for i, b in enumerate(text) if 0x30 <= b <= 0x39]
        if digits:
            at = rng.choice(digits)
            return text[:at] + b"9" * rng.choice([3, 12, 25, 5000]) + text[at:], f"digits inserted at {at}"
    return text.replace(b"}", b"," + b'"pad":' + b"[" * 10_000 + b"]" * 10_000 + b"}", 1), "deep list added"


# -- .vbin ------------------------------------------------------------------------------------------------------


def _vbin_targeted(rng: random.Random, meta: dict, pick: int | None = None) -> tuple[dict, str]:
    """A mutation of META aimed at what a reader or a simulator might trust: sizes, addresses, the
    configuration (buffer sizes, widths), tensor views, labels; number ``pick`` of them, or a random one."""
    meta = copy.deepcopy(meta)
    options = _vbin_options(rng, meta)
    description, apply = options[pick % len(options)] if pick is not None else rng.choice(options)
    apply()
    return meta, description


def _vbin_options(rng: random.Random, meta: dict) -> list[tuple[str, Callable[[], None]]]:
    """The targeted mutations of ``meta`` (each changes it in place when called)."""
    big = rng.choice([2**31, 2**32, 2**40, 2**48, 2**62, 2**63, 2**64, 10**20, -1, -4096])
    seg = rng.randrange(len(meta["segments"]))
    tensor = rng.randrange(len(meta["tensors"]))
    options: list[tuple[str, Callable[[], None]]] = [
        (f"segments[{seg}].size = {big}", lambda: meta["segments"][seg].__setitem__("size", big)),
        (f"segments[{seg}].size = {big} (zero)", lambda: meta["segments"][seg].update(size=big, zero=True)),
        (f"segments[{seg}].addr = {big}", lambda: meta["segments"][seg].__setitem__("addr", big)),
        (f"segments[{seg}].offset = {big}", lambda: meta["segments"][seg].__setitem__("offset", big)),
        (f"segments[{seg}].zero = false", lambda: meta["segments"][seg].__setitem__("zero", False)),
        (f"segments[{seg}].zero = 1", lambda: meta["segments"][seg].__setitem__("zero", 1)),
        (f"segments[{seg}].name duplicated", lambda: meta["segments"][seg].__setitem__(
            "name", meta["segments"][seg - 1]["name"])),
        (f"segments[{seg}].file = '../{PROBE}'", lambda: meta["segments"][seg].__setitem__("file", f"../{PROBE}")),
        (f"segments[{seg}].file = '{ABS_PROBE}'", lambda: meta["segments"][seg].__setitem__("file", ABS_PROBE)),
        (f"segments[{seg}].file = 'insn.bin'", lambda: meta["segments"][seg].__setitem__("file", "insn.bin")),
        (f"segments[{seg}].file = 'layout.json'", lambda: meta["segments"][seg].__setitem__("file", "layout.json")),
        ("insn_file = '../" + PROBE + "'", lambda: meta.__setitem__("insn_file", f"../{PROBE}")),
        ("uop_file = '" + ABS_PROBE + "'", lambda: meta.__setitem__("uop_file", ABS_PROBE)),
        ("uop_file = 'a/b'", lambda: meta.__setitem__("uop_file", "a/b")),
        (f"dram_bytes = {big}", lambda: meta.__setitem__("dram_bytes", big)),
        ("dram_bytes = 1", lambda: meta.__setitem__("dram_bytes", 1)),
        (f"insn_addr = {big}", lambda: meta.__setitem__("insn_addr", big)),
        (f"uop_addr = {big}", lambda: meta.__setitem__("uop_addr", big)),
        (f"counts.insns = {big}", lambda: meta["counts"].__setitem__("insns", big)),
        (f"counts.uops = {big}", lambda: meta["counts"].__setitem__("uops", big)),
        (f"dumps[0].nbytes = {big}", lambda: meta["dumps"][0].__setitem__("nbytes", big)),
        (f"dumps[0].addr = {big}", lambda: meta["dumps"][0].__setitem__("addr", big)),
        (f"dumps[0].file = '../{PROBE}'", lambda: meta["dumps"][0].__setitem__("file", f"../{PROBE}")),
        (f"dumps[0].file = '{ABS_PROBE}'", lambda: meta["dumps"][0].__setitem__("file", ABS_PROBE)),
        ("dumps[0].file = '.'", lambda: meta["dumps"][0].__setitem__("file", ".")),
        ("dumps[0].file = 'a\\x1b[2Jb'", lambda: meta["dumps"][0].__setitem__("file", "a\x1b[2Jb")),
        (f"tensors[{tensor}].shape = [{big}, {big}]", lambda: meta["tensors"][tensor].__setitem__("shape", [big, big])),
        (f"tensors[{tensor}].shape = [2**31, 2**31] (tile kept)", lambda: meta["tensors"][tensor].__setitem__(
            "shape", [2**31, 2**31])),
        (f"tensors[{tensor}].tile = [0, 16]", lambda: meta["tensors"][tensor].__setitem__("tile", [0, 16])),
        (f"tensors[{tensor}].tile = [1]", lambda: meta["tensors"][tensor].__setitem__("tile", [1])),
        (f"tensors[{tensor}].shape = []", lambda: meta["tensors"][tensor].update(shape=[], tile=[])),
        (f"tensors[{tensor}].dtype = 'float64'", lambda: meta["tensors"][tensor].__setitem__("dtype", "float64")),
        (f"tensors[{tensor}].dtype = 'object'", lambda: meta["tensors"][tensor].__setitem__("dtype", "object")),
        (f"tensors[{tensor}].repeat = {big}", lambda: meta["tensors"][tensor].__setitem__("repeat", big)),
        (f"tensors[{tensor}].view = [{big}]", lambda: meta["tensors"][tensor].__setitem__("view", [big])),
        (f"tensors[{tensor}].view = [0, 0]", lambda: meta["tensors"][tensor].__setitem__("view", [0, 0])),
        (f"tensors[{tensor}].groups = [0, 0]", lambda: meta["tensors"][tensor].__setitem__("groups", [0, 0])),
        (f"tensors[{tensor}].groups = [3, 16]", lambda: meta["tensors"][tensor].__setitem__("groups", [3, 16])),
        (f"tensors[{tensor}].patches = [0, 0, 0]", lambda: meta["tensors"][tensor].__setitem__(
            "patches", [0, 0, 0])),
        (f"tensors[{tensor}].patches = [3, 1, {big}]", lambda: meta["tensors"][tensor].__setitem__(
            "patches", [3, 1, big])),
        (f"tensors[{tensor}].name = 'nosuch'", lambda: meta["tensors"][tensor].__setitem__("name", "nosuch")),
        (f"tensors[{tensor}].name = '\\x1b[31m'", lambda: meta["tensors"][tensor].__setitem__("name", "\x1b[31m")),
        ("uop_labels[0] = ['alu0', -1]", lambda: meta["uop_labels"].__setitem__(0, ["alu0", -1])),
        (f"uop_labels[0] = ['alu0', {big}]", lambda: meta["uop_labels"].__setitem__(0, ["alu0", big])),
        ("uop_labels[0] = ['x']", lambda: meta["uop_labels"].__setitem__(0, ["x"])),
        ("uop_labels[0] = 'alu0'", lambda: meta["uop_labels"].__setitem__(0, "alu0")),
        ("uop_labels duplicated", lambda: meta["uop_labels"].append(meta["uop_labels"][0])),
        ("config = {}", lambda: meta.__setitem__("config", {})),
        ("config = 'default'", lambda: meta.__setitem__("config", "default")),
    ]
    for key, values in (("LOG_ACC_BUFF_SIZE", [0, 1, 25, 31, 40, 64, 200, -1, 17.0, "17"]),
                        ("LOG_INP_BUFF_SIZE", [0, 28, 31, 40, -3, 2**40]),
                        ("LOG_WGT_BUFF_SIZE", [0, 30, 33, 63]),
                        ("LOG_UOP_BUFF_SIZE", [0, 2, 30, 40]),
                        ("LOG_BATCH", [0, 5, 8, 16, 32, -1]),
                        ("LOG_BLOCK", [0, 1, 6, 8, 12, 20]),
                        ("LOG_ACC_WIDTH", [0, 3, 6, 7, 10]),
                        ("LOG_INP_WIDTH", [0, 2, 4, 5, 7]),
                        ("LOG_WGT_WIDTH", [0, 2, 4, 5, 7]),
                        ("TARGET", ["", "pynq", 1, None, "\x1b[31m"]),
                        ("HW_VER", ["", "9.9.9", 0.2, None])):
        for value in values:
            options.append((f"config.{key} = {value!r}", lambda k=key, v=value: meta["config"].__setitem__(k, v)))
    options.append(("config without LOG_BLOCK", lambda: meta["config"].pop("LOG_BLOCK")))
    return options


def vbin_targeted_count(data: bytes) -> int:
    """How many targeted META mutations the .vbin ``data`` has (``mutate_vbin_targeted`` takes k modulo it)."""
    return len(_vbin_options(random.Random(0), json.loads(split(data)[2][0][1])))


def mutate_vbin_targeted(rng: random.Random, data: bytes, k: int) -> tuple[bytes, str]:
    """Targeted META mutation number ``k`` (every one of them over k = 0, 1, ...), CRCs recomputed."""
    magic, version, chunks = split(data)
    meta, what = _vbin_targeted(rng, json.loads(chunks[0][1]), pick=k)
    chunks[0] = (b"META", dumps(meta))
    return frame(magic, version, chunks), f"META {what}"


def mutate_vbin(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A mutated .vbin: framing damage (1 in 5), else a mutation inside one chunk with the CRCs recomputed."""
    if rng.random() < 0.2:
        out, what = mutate_framing(rng, data)
        return out, f"framing: {what}"
    magic, version, chunks = split(data)
    tags = [t for t, _ in chunks]
    index = {t: k for k, t in enumerate(tags)}
    roll = rng.random()
    if roll < 0.55:
        meta = json.loads(chunks[index[b"META"]][1])
        sub = rng.random()
        if sub < 0.5:
            meta, what = _vbin_targeted(rng, meta)
            payload = dumps(meta)
        elif sub < 0.85:
            meta, what = mutate_json_value(rng, meta)
            payload = dumps(meta)
        else:
            payload, what = mutate_json_text(rng, chunks[index[b"META"]][1])
        chunks[index[b"META"]] = (b"META", payload)
        return frame(magic, version, chunks), f"META {what}"
    if roll < 0.7 and b"SMAP" in index:
        smap = json.loads(chunks[index[b"SMAP"]][1])
        if rng.random() < 0.3:
            smap = rng.choice([{"entries": [[0, 0, -1]], "files": ["a"]}, {"entries": [[99, 0, 1]], "files": ["a"]},
                               {"entries": [[0, 5, 1]], "files": ["a"]}, {"entries": [[1, 0, 1], [0, 0, 1]],
                                                                          "files": ["a"]},
                               {"entries": [[0, 0, 2**70]], "files": ["\x1b[2J"]},
                               {"entries": [[0, 0, 1]] * 3, "files": ["a"]}, {"entries": [], "files": []},
                               {"entries": [[0, 0, 1, 1]], "files": ["a"]}])
            what = f"= {short(smap)}"
        else:
            smap, what = mutate_json_value(rng, smap)
        chunks[index[b"SMAP"]] = (b"SMAP", dumps(smap))
        return frame(magic, version, chunks), f"SMAP {what}"
    tag = rng.choice([b"INSN", b"INSN", b"UOPS", b"DATA"])
    payload = bytearray(chunks[index[tag]][1])
    sub = rng.randrange(4)
    if sub == 0 and payload:
        n = rng.randint(1, 6)
        for _ in range(n):
            payload[rng.randrange(len(payload))] = rng.randrange(256)
        what = f"{n} random bytes"
    elif sub == 1 and payload:
        word = 16 if tag == b"INSN" else 4
        at = rng.randrange(len(payload) // word) * word
        payload[at : at + word] = rng.choice([b"\xff" * word, bytes(word), bytes(rng.randrange(256) for _ in
                                                                               range(word))])
        what = f"word at {at} replaced"
    elif sub == 2:
        cut = rng.randrange(len(payload) + 1)
        payload = payload[:cut]
        what = f"cut to {cut} bytes"
    else:
        payload += bytes(rng.choice([1, 4, 16, 4096]))
        what = "grown"
    chunks[index[tag]] = (tag, bytes(payload))
    return frame(magic, version, chunks), f"{tag.decode()} {what} (CRC recomputed)"


# -- network files ---------------------------------------------------------------------------------------------


ATTR_VALUES = [0, -1, 2**31, 2**63, 10**30, 1e30, -1e30, math.inf, -math.inf, math.nan, 0.5, "5", "", None, True,
               [], [1, 2], {"a": 1}, "\x1b[31m", Raw("9" * 5000)]


def _network_targeted(rng: random.Random, netw: dict, hostlen: int, pick: int | None = None) -> tuple[dict, str]:
    """A mutation of NETW aimed at what the reader or a host step might trust; number ``pick``, or random."""
    netw = copy.deepcopy(netw)
    options = _network_options(rng, netw, hostlen)
    description, apply = options[pick % len(options)] if pick is not None else rng.choice(options)
    apply()
    return netw, description


def network_targeted_count(data: bytes) -> int:
    chunks = split(data)[2]
    return len(_network_options(random.Random(0), json.loads(chunks[0][1]), len(chunks[-1][1])))


def mutate_network_targeted(rng: random.Random, data: bytes, k: int) -> tuple[bytes, str]:
    """Targeted NETW mutation number ``k`` (every one of them over k = 0, 1, ...), CRCs recomputed."""
    magic, version, chunks = split(data)
    netw, what = _network_targeted(rng, json.loads(chunks[0][1]), len(chunks[-1][1]), pick=k)
    chunks[0] = (b"NETW", dumps(netw))
    return frame(magic, version, chunks), f"NETW {what}"


def _network_options(rng: random.Random, netw: dict, hostlen: int) -> list[tuple[str, Callable[[], None]]]:
    tensors, steps = netw["tensors"], netw["steps"]
    host_steps = [s for s in steps if s["kind"] == "host"]
    vta_steps = [s for s in steps if s["kind"] == "vta"]
    nodes = [n for s in host_steps for n in s["nodes"]]
    t = rng.choice(tensors)
    node = rng.choice(nodes)
    step = rng.choice(steps)
    hstep = rng.choice(host_steps)
    vstep = rng.choice(vta_steps)
    shape = rng.choice([[10**12], [0], [-1], [2**31, 2**31], [], [1, 16, 8, 8, 1, 1], [2**62], "x", [1.5], [None],
                        [1, 0, 8, 8], [10**6, 10**6, 10**6]])
    exp = rng.choice([127, -127, 1000, -1000, 1.5, 1e30, True, "3", None, 2**63, math.nan])
    attr_value = rng.choice(ATTR_VALUES)
    attr_key = rng.choice(list(node["attrs"]) + ["bogus"]) if node["attrs"] else "bogus"
    const = rng.choice(netw["constants"]) if netw["constants"] else None
    options: list[tuple[str, Callable[[], None]]] = [
        (f"tensor {t['name']} shape = {short(shape)}", lambda: t.__setitem__("shape", shape)),
        (f"tensor {t['name']} exp = {exp!r}", lambda: t.__setitem__("exp", exp)),
        (f"tensor {t['name']} removed", lambda: tensors.remove(t)),
        (f"tensor {t['name']} twice, second with shape [3]", lambda: tensors.append({**t, "shape": [3]})),
        (f"node {node['name']} attrs.{attr_key} = {short(attr_value)}",
         lambda: node["attrs"].__setitem__(attr_key, attr_value)),
        (f"node {node['name']} attrs = {{}}", lambda: node.__setitem__("attrs", {})),
        (f"node {node['name']} op = 'Foo'", lambda: node.__setitem__("op", "Foo")),
        (f"node {node['name']} op = 'Loop'", lambda: node.__setitem__("op", "Loop")),
        (f"node {node['name']} op = ''", lambda: node.__setitem__("op", "")),
        (f"node {node['name']} op = 'Reshape'", lambda: node.__setitem__("op", "Reshape")),
        (f"node {node['name']} op = 'Softmax'", lambda: node.__setitem__("op", "Softmax")),
        (f"node {node['name']} op = 'LRN'", lambda: node.__setitem__("op", "LRN")),
        (f"node {node['name']} op = 'Transpose'", lambda: node.__setitem__("op", "Transpose")),
        (f"node {node['name']} op = 'Gather'", lambda: node.__setitem__("op", "Gather")),
        (f"node {node['name']} op = 'Resize'", lambda: node.__setitem__("op", "Resize")),
        (f"node {node['name']} op = 'Expand'", lambda: node.__setitem__("op", "Expand")),
        (f"node {node['name']} op = '\\x1b[31mX'", lambda: node.__setitem__("op", "\x1b[31mX")),
        (f"node {node['name']} inputs = ['nosuch']", lambda: node.__setitem__("inputs", ["nosuch"])),
        (f"node {node['name']} inputs doubled", lambda: node.update(inputs=node["inputs"] * 2,
                                                                     in_shapes=node["in_shapes"] * 2)),
        (f"node {node['name']} inputs = []", lambda: node.update(inputs=[], in_shapes=[])),
        (f"node {node['name']} outputs = []", lambda: node.update(outputs=[], out_shapes=[])),
        (f"node {node['name']} in_shapes[0] = {short(shape)}", lambda: node["in_shapes"].__setitem__(0, shape)),
        (f"node {node['name']} out_shapes[0] = {short(shape)}", lambda: node["out_shapes"].__setitem__(0, shape)),
        (f"node {node['name']} out_shapes[0] = [1, 10, 10**9]",
         lambda: node["out_shapes"].__setitem__(0, [1, 10, 10**9])),
        (f"node {node['name']} outputs = its inputs", lambda: node.__setitem__("outputs", list(node["inputs"]))),
        (f"node {node['name']} name = '\\x1b[2J'", lambda: node.__setitem__("name", "\x1b[2J")),
        (f"host step {hstep['name']} inputs = ['nosuch']", lambda: hstep.__setitem__("inputs", ["nosuch"])),
        (f"host step {hstep['name']} outputs = []", lambda: hstep.__setitem__("outputs", [])),
        (f"host step {hstep['name']} nodes = []", lambda: hstep.__setitem__("nodes", [])),
        (f"host step {hstep['name']} nodes repeated", lambda: hstep.__setitem__("nodes", hstep["nodes"] * 2)),
        (f"vta step {vstep['name']} inputs = {{'nosuch': 'x'}}", lambda: vstep.__setitem__("inputs", {"nosuch": "x"})),
        (f"vta step {vstep['name']} outputs bound to 'nosuch'", lambda: vstep.__setitem__(
            "outputs", {k: "nosuch" for k in vstep["outputs"]})),
        (f"vta step {vstep['name']} program = {big_of(rng)}", lambda: vstep.__setitem__("program", big_of(rng))),
        (f"vta step {vstep['name']} program = '0'", lambda: vstep.__setitem__("program", "0")),
        (f"step {step['name']} kind = 'python'", lambda: step.__setitem__("kind", "python")),
        (f"step {step['name']} moved first", lambda: (steps.remove(step), steps.insert(0, step))),
        (f"step {step['name']} removed", lambda: steps.remove(step)),
        ("steps reversed", lambda: steps.reverse()),
        ("inputs = ['nosuch']", lambda: netw.__setitem__("inputs", ["nosuch"])),
        ("inputs = []", lambda: netw.__setitem__("inputs", [])),
        ("inputs twice", lambda: netw.__setitem__("inputs", netw["inputs"] * 2)),
        ("outputs = ['nosuch']", lambda: netw.__setitem__("outputs", ["nosuch"])),
        ("outputs = []", lambda: netw.__setitem__("outputs", [])),
        ("outputs = ['../../x']", lambda: netw.__setitem__("outputs", ["../../x"])),
        (f"opset = {exp!r}", lambda: netw.__setitem__("opset", exp)),
        ("opset = 0", lambda: netw.__setitem__("opset", 0)),
        ("opset = 10**9", lambda: netw.__setitem__("opset", 10**9)),
        ("name = '\\x1b[2J\\n'", lambda: netw.__setitem__("name", "\x1b[2J\n")),
        ("constant float32[10**12] added", lambda: netw["constants"].append(
            {"name": "big", "dtype": "float32", "shape": [10**12], "offset": 0, "nbytes": 4 * 10**12})),
        ("constant with offset -8 added", lambda: netw["constants"].append(
            {"name": "neg", "dtype": "float32", "shape": [2], "offset": -8, "nbytes": 8})),
        ("constant with offset past HOST added", lambda: netw["constants"].append(
            {"name": "far", "dtype": "float32", "shape": [2], "offset": hostlen + 8, "nbytes": 8})),
        ("constant with dtype int8 added", lambda: netw["constants"].append(
            {"name": "i8", "dtype": "int8", "shape": [1], "offset": 0, "nbytes": 1})),
        ("constant with shape [0] added", lambda: netw["constants"].append(
            {"name": "empty", "dtype": "int64", "shape": [0], "offset": 0, "nbytes": 0})),
        ("constant with offset 3 (unaligned) added", lambda: netw["constants"].append(
            {"name": "odd", "dtype": "float32", "shape": [1], "offset": 3, "nbytes": 4})),
        ("constant named like a tensor", lambda: netw["constants"].append(
            {"name": netw["inputs"][0], "dtype": "float32", "shape": [1], "offset": 0, "nbytes": 4})),
    ]
    if const is not None:
        options += [
            (f"constant {const['name']} offset = {big_of(rng)}", lambda: const.__setitem__("offset", big_of(rng))),
            (f"constant {const['name']} nbytes + 4", lambda: const.__setitem__("nbytes", const["nbytes"] + 4)),
            (f"constant {const['name']} shape = {short(shape)}", lambda: const.__setitem__("shape", shape)),
            (f"constant {const['name']} dtype = 'int64'", lambda: const.__setitem__("dtype", "int64")),
            (f"constant {const['name']} dtype = 'object'", lambda: const.__setitem__("dtype", "object")),
            (f"constant {const['name']} dtype = '<f4'", lambda: const.__setitem__("dtype", "<f4")),
            (f"constant {const['name']} shape [1, 16, 8, 8] -> [1, 16, 64]", lambda: const.__setitem__(
                "shape", [1, 16, 64])),
        ]
    return options


def big_of(rng: random.Random) -> int:
    return rng.choice([-1, 2, 99, 2**31, 2**63, 2**64])


def mutate_network(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A mutated network file: framing damage (1 in 8), a mutated PROG chunk (a .vbin, 1 in 8), the HOST
    chunk changed (1 in 16), else NETW: a targeted change (shapes, exps, attributes, ops, bindings,
    constants), a generic JSON mutation or damaged JSON text; CRCs recomputed."""
    roll = rng.random()
    if roll < 0.125:
        out, what = mutate_framing(rng, data)
        return out, f"framing: {what}"
    magic, version, chunks = split(data)
    if roll < 0.25:
        progs = [k for k, (t, _) in enumerate(chunks) if t == b"PROG"]
        k = rng.choice(progs)
        payload, what = mutate_vbin(rng, chunks[k][1])
        chunks[k] = (b"PROG", payload)
        return frame(magic, version, chunks), f"PROG chunk {k}: {what}"
    if roll < 0.31:
        host = chunks[-1][1]
        new = rng.choice([host[:-4], host + bytes(8), bytes(len(host)), b"\xff" * len(host),
                          struct.pack("<f", math.nan) * (len(host) // 4) + host[len(host) // 4 * 4:]])
        chunks[-1] = (b"HOST", new)
        return frame(magic, version, chunks), f"HOST chunk {len(host)} -> {len(new)} bytes"
    netw = json.loads(chunks[0][1])
    sub = rng.random()
    if sub < 0.65:
        netw, what = _network_targeted(rng, netw, len(chunks[-1][1]))
        payload = dumps(netw)
    elif sub < 0.9:
        netw, what = mutate_json_value(rng, netw)
        payload = dumps(netw)
    else:
        payload, what = mutate_json_text(rng, chunks[0][1])
    chunks[0] = (b"NETW", payload)
    return frame(magic, version, chunks), f"NETW {what}"


# -- .npy -------------------------------------------------------------------------------------------------------


NPY_KINDS = 45  # the kinds of hostile .npy files mutate_npy makes


def npy_file(header: str | bytes, data: bytes = b"", version: tuple[int, int] = (1, 0),
             header_len: int | None = None) -> bytes:
    """A .npy file with this header text (padded as numpy pads it) and data."""
    text = header.encode("latin-1") if isinstance(header, str) else header
    size_fmt = "<H" if version[0] == 1 else "<I"
    prefix = 6 + 2 + struct.calcsize(size_fmt)
    pad = -(prefix + len(text) + 1) % 64
    text = text + b" " * pad + b"\n"
    n = len(text) if header_len is None else header_len
    return b"\x93NUMPY" + bytes(version) + struct.pack(size_fmt, n) + text + data


def mutate_npy(rng: random.Random, shape: tuple[int, ...], dtype: str = "<f4", pick: int | None = None,
               flip: float = 0.15) -> tuple[bytes, str]:
    """A hostile .npy meant to stand for an array of ``shape`` and ``dtype``: kind number ``pick`` (modulo
    NPY_KINDS), or a random one; with probability ``flip`` one of its first 128 bytes is replaced too."""
    import numpy as np

    good = np.random.default_rng(rng.randrange(2**32)).normal(0, 1, shape).astype(dtype)
    raw = good.tobytes()

    def head(descr: str = dtype, fortran: bool = False, shp: object = shape) -> str:
        return f"{{'descr': {descr!r}, 'fortran_order': {fortran}, 'shape': {tuple(shp)!r}, }}"

    n = math.prod(shape)
    cases: list[tuple[str, Callable[[], bytes]]] = [
        ("shape declares 10**12 elements", lambda: npy_file(head(shp=(10**6, 10**6)), raw)),
        ("shape declares 2**62 elements of 8 bytes", lambda: npy_file(head("<f8", shp=(2**31, 2**31)), raw)),
        ("shape product overflows int64", lambda: npy_file(head(shp=(2**40, 2**40, 2**40)), raw)),
        ("negative dimension", lambda: npy_file(head(shp=(-1, *shape[1:])), raw)),
        ("shape of 64 dimensions", lambda: npy_file(head(shp=(1,) * 64), raw[:4])),
        ("shape a string", lambda: npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': 'abc', }", raw)),
        ("shape of floats", lambda: npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1.5, 2), }", raw)),
        ("header a list", lambda: npy_file("[1, 2, 3]", raw)),
        ("header a call", lambda: npy_file("__import__('os').system('echo pwned')", raw)),
        ("header a deep tuple", lambda: npy_file("(" * 3000 + ")" * 3000, raw)),
        ("header with an extra key", lambda: npy_file(head()[:-1] + "'x': 1}", raw)),
        ("header missing shape", lambda: npy_file("{'descr': '<f4', 'fortran_order': False}", raw)),
        ("header not latin-1 text", lambda: npy_file(b"{\xff\xfe}", raw)),
        ("header length past the file", lambda: npy_file(head(), raw, header_len=65535)),
        ("header length 0", lambda: npy_file(head(), raw, header_len=0)),
        ("version 2.0 header length 2**32-1", lambda: npy_file(head(), raw, version=(2, 0),
                                                                header_len=2**32 - 1)),
        ("version 3.0", lambda: npy_file(head(), raw, version=(3, 0))),
        ("version 9.9", lambda: npy_file(head(), raw, version=(9, 9))),
        ("fortran order", lambda: npy_file(head(fortran=True), raw)),
        ("truncated data", lambda: npy_file(head(), raw[: rng.randrange(len(raw))])),
        ("no data", lambda: npy_file(head(), b"")),
        ("data longer than the shape", lambda: npy_file(head(), raw + bytes(64))),
        ("object dtype (a pickle)", lambda: npy_file(head("|O"), b"\x80\x04\x95" + bytes(n * 8))),
        ("unicode dtype", lambda: npy_file(head("<U4"), bytes(n * 16))),
        ("void dtype", lambda: npy_file(head("|V4"), raw)),
        ("structured dtype", lambda: npy_file(f"{{'descr': [('a', '<f4')], 'fortran_order': False, "
                                              f"'shape': {tuple(shape)!r}, }}", raw)),
        ("complex dtype", lambda: npy_file(head("<c8"), raw + raw)),
        ("bool dtype", lambda: npy_file(head("|b1"), bytes(n))),
        ("datetime dtype", lambda: npy_file(head("<M8[s]"), bytes(n * 8))),
        ("big-endian float64", lambda: npy_file(head(">f8"), good.astype(">f8").tobytes())),
        ("float16", lambda: npy_file(head("<f2"), good.astype("<f2").tobytes())),
        ("uint64 huge", lambda: npy_file(head("<u8"), np.full(shape, 2**64 - 1, np.uint64).tobytes())),
        ("int8 values", lambda: npy_file(head("|i1"), np.full(shape, -128, np.int8).tobytes())),
        ("NaN and infinities", lambda: npy_file(head(), np.where(np.arange(n).reshape(shape) % 3 == 0, np.nan,
                                                                 np.inf).astype(dtype).tobytes())),
        ("1e38 values", lambda: npy_file(head(), np.full(shape, 3e38, dtype).tobytes())),
        ("scalar shape", lambda: npy_file(head(shp=()), raw[:4])),
        ("zero images", lambda: npy_file(head(shp=(0, *shape[1:])), b"")),
        ("wrong shape", lambda: npy_file(head(shp=(*shape[:-1], shape[-1] + 1)), raw + raw)),
        ("rank 1", lambda: npy_file(head(shp=(n,)), raw)),
        ("100000 images of zeros declared, data of one", lambda: npy_file(head(shp=(100000, *shape[1:])), raw)),
        ("an .npz", lambda: b"PK\x03\x04" + raw),
        ("empty file", lambda: b""),
        ("magic only", lambda: b"\x93NUMPY"),
        ("descr a nested list", lambda: npy_file("{'descr': [[[[[]]]]], 'fortran_order': False, 'shape': (1,), }",
                                                 raw)),
        ("fortran_order a string", lambda: npy_file(head()[:-2].replace("False", "'yes'") + "}", raw)),
    ]
    assert len(cases) == NPY_KINDS
    description, build = cases[pick % len(cases)] if pick is not None else rng.choice(cases)
    with np.errstate(all="ignore"):
        data = build()
    if rng.random() < flip and data:
        buf = bytearray(data)
        at = rng.randrange(min(len(buf), 128))
        buf[at] = rng.randrange(256)
        data, description = bytes(buf), f"{description}, header byte {at} replaced"
    return data, description


def main() -> None:  # pragma: no cover - a helper for reproducing cases by hand
    import sys

    family, k, seed, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    with open(seed, "rb") as fh:
        data = fh.read()
    mutator = {"vbin": mutate_vbin, "network": mutate_network}[family]
    mutated, what = mutator(case_rng(family, k), data)
    with open(out, "wb") as fh:
        fh.write(mutated)
    print(what)


if __name__ == "__main__":
    main()


# -- ONNX models ------------------------------------------------------------------------------------------------
#
# Each mutation takes a copy of a valid model (onnx.ModelProto) and the case's folder (for external data
# files, symlinks, FIFOs) and returns the model to save as ``model.onnx`` there, or bytes to write as is.

INJECTED = "kernel evil"  # what an injected name would make a line of kernel language start with
HOSTILE_NAMES = [
    "a\nkernel evil(x: int8[1, 16]) -> y: int8[1, 16] {\n    y = x\n}\n#",
    "x\r\nkernel evil() {",
    'q"uote\'s',
    "hash # comment",
    "brace } {",
    "\x1b[31mred\x1b[0m",
    "\x1b]0;title\x07",
    "\x9b2J",
    "tab\there",
    "nul\x00byte",
    "../../etc/passwd",
    "é ü 名前",
    "\u202eevil",
    "",
    "x" * 5000,
    "kernel",
    "main",
    "int8",
    "1leading_digit",
    ":colon:",
]


def _node(model, name: str):
    return next(n for n in model.graph.node if n.name == name)


def _init(model, name: str):
    return next(i for i in model.graph.initializer if i.name == name)


def _set_attr(node, name: str, value) -> None:
    from onnx import helper

    for k, attr in enumerate(node.attribute):
        if attr.name == name:
            del node.attribute[k]
            break
    node.attribute.append(helper.make_attribute(name, value))


def _rename_tensor(model, old: str, new: str) -> None:
    for node in model.graph.node:
        node.input[:] = [new if i == old else i for i in node.input]
        node.output[:] = [new if o == old else o for o in node.output]
    for vi in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        if vi.name == old:
            vi.name = new
    for init in model.graph.initializer:
        if init.name == old:
            init.name = new


def _external(model, folder, name: str, location: str, data: bytes | None = None, offset: int | None = None,
              length: int | None = None) -> None:
    """Make initializer ``name`` external, at ``location`` (written with ``data`` unless None)."""
    from onnx import TensorProto

    init = _init(model, name)
    raw = init.raw_data or _raw(init)
    if data is not None:
        path = folder / location
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw if data == b"SAME" else data)
    init.ClearField("raw_data")
    init.ClearField("float_data")
    init.data_location = TensorProto.EXTERNAL
    del init.external_data[:]
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = init.external_data.add()
            entry.key, entry.value = key, str(value)


def _raw(init) -> bytes:
    from onnx import numpy_helper

    return numpy_helper.to_array(init).tobytes()


def _mk(name, fn):
    return name, fn


def onnx_mutations(base: str) -> list[tuple[str, Callable]]:
    """The named mutations of a seed model (``base`` is 'vta' or 'host': node names differ a little)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def attr(node, key, value):
        def fn(m, folder):
            _set_attr(_node(m, node), key, value)
            return m
        return _mk(f"{node}.{key} = {short(value)}", fn)

    def weights(name, array_fn, what):
        def fn(m, folder):
            init = _init(m, name)
            init.CopyFrom(numpy_helper.from_array(array_fn(numpy_helper.to_array(init)), name))
            return m
        return _mk(f"initializer {name}: {what}", fn)

    def raw_size(m, folder):
        init = _init(m, "w1")
        init.raw_data = init.raw_data[:-7] if init.raw_data else b"\x00" * 5
        return m

    def dims_lie(m, folder):
        init = _init(m, "w1")
        init.dims[:] = [16, 3, 3000, 3000]
        return m

    def dims_negative(m, folder):
        _init(m, "w1").dims[:] = [16, -3, 3, 3]
        return m

    def dtype(code):
        def fn(m, folder):
            _init(m, "w1").data_type = code
            return m
        return _mk(f"initializer w1 data_type {code}", fn)

    def input_type(code):
        def fn(m, folder):
            m.graph.input[0].type.tensor_type.elem_type = code
            return m
        return _mk(f"input elem_type {code}", fn)

    def input_shape(dims):
        def fn(m, folder):
            shape = m.graph.input[0].type.tensor_type.shape
            del shape.dim[:]
            for d in dims:
                if isinstance(d, str):
                    shape.dim.add().dim_param = d
                else:
                    shape.dim.add().dim_value = d
            return m
        return _mk(f"input shape {dims}", fn)

    def duplicate_attr(m, folder):
        _node(m, "conv1").attribute.append(helper.make_attribute("pads", [5, 5, 5, 5]))
        return m

    def extra_input(m, folder):
        _node(m, "relu1").input.extend(["w1", "b1"])
        return m

    def missing_input(m, folder):
        conv = _node(m, "conv1")
        del conv.input[1:]
        return m

    def no_outputs(m, folder):
        del m.graph.output[:]
        return m

    def unknown_output(m, folder):
        m.graph.output[0].name = "nosuch"
        return m

    def cycle(m, folder):
        _node(m, "conv1").input[0] = "r1"
        return m

    def duplicate_output(m, folder):
        _node(m, "relu1").output[0] = "c1"
        return m

    def unknown_op(m, folder):
        m.graph.node.append(helper.make_node("FooBar", ["r1"], ["zz"], name="foo", domain="com.example"))
        return m

    def node_order(m, folder):
        nodes = list(m.graph.node)
        del m.graph.node[:]
        m.graph.node.extend(reversed(nodes))
        return m

    def rename_node(new):
        def fn(m, folder):
            _node(m, "conv1").name = new
            _node(m, "fc").name = new
            return m
        return _mk(f"node names = {new!r}", fn)

    def rename_tensor(old, new):
        def fn(m, folder):
            _rename_tensor(m, old, new)
            return m
        return _mk(f"tensor {old} renamed {new!r}", fn)

    def graph_name(m, folder):
        m.graph.name = HOSTILE_NAMES[0]
        m.producer_name = "\x1b[31mproducer"
        return m

    def opset(version, domain=""):
        def fn(m, folder):
            del m.opset_import[:]
            m.opset_import.append(helper.make_opsetid(domain, version))
            return m
        return _mk(f"opset {domain or 'default'} {version}", fn)

    def ir(version):
        def fn(m, folder):
            m.ir_version = version
            return m
        return _mk(f"ir_version {version}", fn)

    def external(location, data=b"SAME", offset=None, length=None, prepare=None, what=None):
        def fn(m, folder):
            if prepare is not None:
                prepare(m, folder)
            _external(m, folder, "w1", location, data, offset, length)
            return m
        return _mk(f"w1 external data at {what or repr(location)}", fn)

    def outside(m, folder):
        (folder.parent / "outside.bin").write_bytes(_raw(_init(m, "w1")))

    def symlinked_folder(m, folder):
        target = folder.parent / f"{folder.name}-elsewhere"
        target.mkdir(exist_ok=True)
        (target / "w1.bin").write_bytes(_raw(_init(m, "w1")))
        (folder / "linked").symlink_to(target, target_is_directory=True)

    def symlinked_file(m, folder):
        (folder / "w1.bin").symlink_to("/etc/passwd")

    def fifo(m, folder):
        import os

        os.mkfifo(folder / "w1.fifo")

    def directory(m, folder):
        (folder / "w1.dir").mkdir()

    def dev_zero(m, folder):
        (folder / "zero.bin").symlink_to("/dev/zero")

    def bytes_model(data):
        return lambda m, folder: data

    def flip_bytes(seed):
        def fn(m, folder):
            rng = random.Random(f"onnx-bytes:{seed}")
            data = bytearray(m.SerializeToString())
            for _ in range(rng.randint(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            return bytes(data)
        return _mk(f"serialized model with random bytes replaced (seed {seed})", fn)

    def truncated(m, folder):
        data = m.SerializeToString()
        return data[: len(data) * 2 // 3]

    def sparse_init(m, folder):
        init = _init(m, "b1")
        m.graph.sparse_initializer.append(helper.make_sparse_tensor(
            numpy_helper.from_array(np.array([1.0], np.float32), "b1"),
            numpy_helper.from_array(np.array([9999], np.int64), "b1_idx"), [16]))
        m.graph.initializer.remove(init)
        return m

    def subgraph_attr(m, folder):
        g = helper.make_graph([], "sub", [], [])
        _node(m, "relu1").attribute.append(helper.make_attribute("body", g))
        return m

    def init_also_input(m, folder):
        m.graph.input.append(helper.make_tensor_value_info("w1", TensorProto.FLOAT, [16, 3, 3, 3]))
        return m

    def string_init(m, folder):
        m.graph.initializer.append(helper.make_tensor("s", TensorProto.STRING, [1], [b"\x1b[31m"]))
        _node(m, "relu1").input.append("s")
        return m

    def two_inputs(m, folder):
        m.graph.input.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8]))
        return m

    def value_info_lies(m, folder):
        m.graph.value_info.append(helper.make_tensor_value_info("r1", TensorProto.FLOAT, [7, 7]))
        return m

    def huge_gemm(m, folder):
        init = _init(m, "fw")
        init.dims[:] = [10**9, 16]
        return m

    mutations = [
        attr("conv1", "group", 0), attr("conv1", "group", -1), attr("conv1", "group", 2), attr("conv1", "group", 7),
        attr("conv1", "group", 2**40),
        attr("conv1", "kernel_shape", 3.0), attr("conv1", "kernel_shape", "3,3"), attr("conv1", "kernel_shape", [0, 0]),
        attr("conv1", "kernel_shape", [5, 5]), attr("conv1", "kernel_shape", [3]),
        attr("conv1", "pads", [1, 1]), attr("conv1", "pads", [10**9] * 4), attr("conv1", "pads", [-5] * 4),
        attr("conv1", "pads", [0, 0, 9, 9]), attr("conv1", "pads", "same"),
        attr("conv1", "strides", [0, 0]), attr("conv1", "strides", [-1, -1]), attr("conv1", "strides", [2**62] * 2),
        attr("conv1", "dilations", [0, 0]), attr("conv1", "dilations", [2**31, 1]),
        attr("conv1", "auto_pad", "WHATEVER"), attr("conv1", "auto_pad", "SAME_UPPER"),
        attr("conv1", "auto_pad", b"\x1b[31m"), attr("conv1", "unknown_attr", 1),
        attr("fc", "transB", 7), attr("fc", "alpha", math.nan), attr("fc", "beta", math.inf),
        attr("relu1", "alpha", "x"),
        _mk("conv1.pads twice", duplicate_attr),
        weights("w1", lambda w: w.reshape(16, 27), "rank 2"), weights("w1", lambda w: w[:, :, :2, :], "3x2 kernel"),
        weights("w1", lambda w: w[:5], "5 output channels"), weights("w1", lambda w: w.reshape(16, 3, 3, 3, 1),
                                                                     "rank 5"),
        weights("w1", lambda w: np.full_like(w, np.nan), "all NaN"),
        weights("w1", lambda w: np.where(w > 0, np.inf, -np.inf).astype(w.dtype), "infinities"),
        weights("w1", lambda w: np.full_like(w, 3e38), "3e38"), weights("w1", lambda w: np.zeros_like(w), "zeros"),
        weights("w1", lambda w: w.astype(np.float64), "float64"), weights("w1", lambda w: w.astype(np.int8), "int8"),
        weights("w1", lambda w: np.full_like(w, 1e-45), "denormals"),
        weights("b1", lambda b: np.concatenate([b, b]), "32 biases"), weights("b1", lambda b: b[None], "rank 2 bias"),
        weights("b1", lambda b: np.full_like(b, np.inf), "infinite bias"),
        weights("fw", lambda w: w.T.copy(), "transposed"),
        _mk("w1 raw data 7 bytes short", raw_size), _mk("w1 dims [16, 3, 3000, 3000]", dims_lie),
        _mk("w1 dims negative", dims_negative),
        dtype(0), dtype(8), dtype(99), dtype(TensorProto.FLOAT16), dtype(TensorProto.COMPLEX64),
        input_type(0), input_type(TensorProto.STRING), input_type(99), input_type(TensorProto.INT8),
        input_shape([1, 3, 8]), input_shape([0, 3, 8, 8]), input_shape([1, 3, 100000, 100000]),
        input_shape(["N", 3, 8, 8]), input_shape([1, 3, -8, 8]), input_shape([]),
        _mk("relu1 with extra inputs", extra_input), _mk("conv1 without weights", missing_input),
        _mk("graph with no outputs", no_outputs), _mk("graph output names no tensor", unknown_output),
        _mk("a cycle conv1 <- relu1", cycle), _mk("two nodes write c1", duplicate_output),
        _mk("an unknown operator", unknown_op), _mk("nodes in reverse order", node_order),
        _mk("hostile graph and producer names", graph_name),
        _mk("sparse initializer with an index out of range", sparse_init),
        _mk("relu1 with a graph attribute", subgraph_attr), _mk("initializer also a graph input", init_also_input),
        _mk("a string initializer", string_init), _mk("a second graph input", two_inputs),
        _mk("value_info that contradicts inference", value_info_lies), _mk("fw dims [10**9, 16]", huge_gemm),
        opset(1), opset(6), opset(999), opset(13, "ai.onnx.ml"), ir(0), ir(2), ir(99),
        external("../outside.bin", data=None, prepare=outside),
        external("/etc/passwd", data=None), external("sub/../../x.bin", data=None),
        external("linked/w1.bin", data=None, prepare=symlinked_folder, what="a symlinked folder"),
        external("w1.bin", data=None, prepare=symlinked_file, what="a symlink to /etc/passwd"),
        external("w1\x00.bin", data=None), external("w1.fifo", data=None, prepare=fifo, what="a FIFO"),
        external("w1.dir", data=None, prepare=directory, what="a directory"),
        external("zero.bin", data=None, prepare=dev_zero, what="a symlink to /dev/zero"),
        external("missing.bin", data=None), external("w1.bin", offset=10**12), external("w1.bin", length=10**12),
        external("w1.bin", offset=-4), external("w1.bin", length=3), external("", data=None),
        external("w1.bin", offset="x"),
        _mk("empty file", bytes_model(b"")), _mk("not protobuf", bytes_model(b"\x1b[31mhello\n" * 10)),
        _mk("truncated protobuf", truncated),
        *[flip_bytes(k) for k in range(6)],
    ]
    for new in HOSTILE_NAMES:
        mutations.append(rename_node(new))
        mutations.append(rename_tensor("r1", new))
    for new in HOSTILE_NAMES[:8]:
        mutations.append(rename_tensor("x", new))
        mutations.append(rename_tensor("logits" if base == "vta" else "prob", new))
        mutations.append(rename_tensor("w1", new))
    return mutations

"""Reading a kernel's schedule block: tile sizes, loop order and virtual threads."""

from __future__ import annotations

from vtasm.errors import SourceSpan

from . import syntax_tree as st
from .check_support import Errors, suggest, type_text
from .checked import Const, Schedule

TILE_KEYS = ("tile_n", "tile_k", "tile_o", "tile_oc", "tile_ic", "tile_h", "tile_w")
AXES = ("n", "k", "o", "oc", "ic", "h", "w")
SCHEDULE_KEYS = (*TILE_KEYS, "threads", "order")


def check_schedule(block: st.ScheduleBlock | None, expr, error: Errors) -> Schedule:
    """The Schedule of a kernel (``expr`` evaluates a value in the kernel's scope)."""
    if block is None:
        return Schedule()
    tiles: dict[str, int] = {}
    spans: dict[str, SourceSpan] = {}
    order = threads = None
    for s in block.settings:
        if s.key not in SCHEDULE_KEYS:
            error(f"unknown schedule key '{s.key}'{suggest(s.key, SCHEDULE_KEYS)} (keys: {', '.join(SCHEDULE_KEYS)})",
                  s.key_span)
            continue
        if s.key in spans:
            error(f"'{s.key}' is set twice in the schedule", s.key_span)
            continue
        spans[s.key] = s.key_span
        if s.key == "order":
            order = _order(s, error)
            continue
        node = None if isinstance(s.value, tuple) else expr(s.value)
        if isinstance(s.value, tuple) or (node is not None and not isinstance(node, Const)):
            got = "a list of names" if isinstance(s.value, tuple) else type_text(node)
            error(f"{s.key} must be an integer constant, got {got}", s.span)
        elif node is None:
            continue
        elif s.key == "threads":
            if node.value in (1, 2):
                threads = node.value
            else:
                error(f"threads must be 1 or 2 (VTA runs one or two virtual threads), got {node.value}", s.value.span)
        elif node.value < 1:
            error(f"{s.key} must be a positive integer, got {node.value}", s.value.span)
        else:
            tiles[s.key.removeprefix("tile_")] = node.value
    return Schedule(tiles, order, threads, block.span, spans)


def _order(s: st.Setting, error: Errors) -> tuple[str, ...] | None:
    names = s.value if isinstance(s.value, tuple) else (s.value,) if isinstance(s.value, st.Name) else None
    if names is None:
        error("order must be a parenthesised list of axis names, as in order = (n, o, k)", s.span)
        return None
    seen: set[str] = set()
    ok = True
    for n in names:
        if n.name not in AXES:
            error(f"unknown axis '{n.name}' in order{suggest(n.name, AXES)} (axes: {', '.join(AXES)})", n.span)
            ok = False
        elif n.name in seen:
            error(f"axis '{n.name}' appears twice in order", n.span)
            ok = False
        seen.add(n.name)
    return tuple(n.name for n in names) if ok else None

"""A read-only sequence whose items are built on first use and then kept.

The decoded instruction stream (columns.InstructionList) and micro-op table
(encoding.MicroOpList) keep their data as arrays; a tool that runs from the
arrays never builds the objects at all, and one that asks for an item gets
the same object every time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class LazyList(Sequence, Generic[T]):
    """Items 0..n-1 made by ``build(i)`` on first use; equal to any sequence of equal items."""

    noun = "item"  # what the items are called in messages

    def __init__(self, n: int, build: Callable[[int], T], built: Sequence[T] | None = None):
        """``built``: the n items already made, if the caller has them."""
        self._built: list[T | None] = list(built) if built is not None else [None] * n
        self._make = build

    def __len__(self) -> int:
        return len(self._built)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"{self.noun} index out of range")
        found = self._built[index]
        if found is None:
            found = self._built[index] = self._make(index)
        return found

    def __iter__(self) -> Iterator[T]:
        for i in range(len(self)):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable-looking sequences are not hashable

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} {self.noun}s)"

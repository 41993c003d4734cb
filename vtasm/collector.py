"""The cyclic garbage collector, kept from walking objects that a long pass builds to keep.

Python collects its youngest objects after every 700 new container objects
and, every so often, walks all of them. A compiler pass that builds hundreds
of thousands of small objects (instructions, accesses, steps) that live until
the program is written pays for walks that find nothing: a third of the time
of a 50,000-instruction compile. The collector still runs, only less often.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

FIRST_GENERATION = 100_000  # new container objects between collections of the youngest generation


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect the youngest generation every FIRST_GENERATION new objects (not 700) for the block."""
    old = gc.get_threshold()
    gc.set_threshold(max(FIRST_GENERATION, old[0]), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)

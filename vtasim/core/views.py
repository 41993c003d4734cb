"""Strided views of the machine's arrays, made directly.

``numpy.lib.stride_tricks.as_strided`` builds each view through an array
interface object, about 3 us a view; a kernel met at a new place in the
buffers needs a few, so the simulator makes them with the ndarray
constructor over the array's own buffer instead (under 0.5 us), which also
refuses a view reaching past the array's end.
"""

from __future__ import annotations

import numpy as np


def strided(array: np.ndarray, first: int, shape: tuple[int, ...], steps: tuple[int, ...]) -> np.ndarray:
    """A writable view of a C-contiguous ``array`` from its row ``first`` on: ``shape`` with ``steps``
    counted in rows of ``array`` for the leading axes, the rows' own axes following as they are."""
    row = array.strides[0]
    return np.ndarray((*shape, *array.shape[1:]), array.dtype, array, first * row,
                      (*(s * row for s in steps), *array.strides[1:]))


def rows(array: np.ndarray, start: int, count: int, width: int, step: int) -> np.ndarray:
    """A (count, width) view of a 1-D ``array``: ``count`` rows of ``width`` elements from ``start``, rows
    ``step`` elements apart (all inside the array; rows may overlap when ``step`` < ``width``)."""
    if count == 1 or step == width:
        return array[start : start + count * width].reshape(count, width)
    if step > width and start + count * step <= array.size:
        return array[start : start + count * step].reshape(count, step)[:, :width]
    return strided(array, start, (count, width), (step, 1))

"""Integer arithmetic from its definitions, for the int8 reference: convolution, matrix product, pooling.

Each result is exact (int64): products of int8 values are summed as floats only where every partial sum
stays a whole number the float holds exactly (float32 below 2**24, float64 below 2**53), and the taps of
a window are added in int64. Nothing here is shared with the float path (arrays.py), the host
(vtasim.host) or the compiler: the reference must not inherit their mistakes.
"""

from __future__ import annotations

import numpy as np

PRODUCT = 128 * 128  # the largest magnitude of a product of two int8 values


def wrap32(a: np.ndarray) -> np.ndarray:
    """Values as int32 holds them (two's complement wrapping), in int64."""
    return ((np.asarray(a, dtype=np.int64) + 2**31) % 2**32 - 2**31).astype(np.int64)


def low_byte(a: np.ndarray) -> np.ndarray:
    """The low 8 bits as int8 (what a store of an int32 value to an int8 tensor keeps)."""
    return ((np.asarray(a, dtype=np.int64) + 128) % 256 - 128).astype(np.int8)


def per_channel(v: np.ndarray | int, rank: int) -> np.ndarray | int:
    """A per-output-channel vector shaped to broadcast over axis 1 of a rank-``rank`` tensor (a scalar as is)."""
    if np.ndim(v) == 0:
        return int(v)
    return np.asarray(v, dtype=np.int64).reshape((1, -1) + (1,) * (rank - 2))


def _exact_float(terms: int) -> type:
    """The float type that sums ``terms`` int8 products exactly."""
    return np.float32 if terms * PRODUCT <= 1 << 24 else np.float64


def conv2d(x: np.ndarray, w: np.ndarray, stride: int, pads: tuple[int, int, int, int], groups: int) -> np.ndarray:
    """y[n, o, r, s] = sum over the channels c of o's group and the taps (i, j) of
    x[n, c, r * stride + i - top, s * stride + j - left] * w[o, c, i, j], zero outside the image; ``pads``
    (top, left, bottom, right): the rows and columns of zeros around it."""
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    top, left, bottom, right = pads
    ph, pw = h + top + bottom, wd + left + right
    oh, ow = (ph - kh) // stride + 1, (pw - kw) // stride + 1
    ftype = _exact_float(icg)
    padded = np.zeros((n, c, ph, pw), dtype=ftype)
    padded[:, :, top:top + h, left:left + wd] = x
    image = padded.reshape(n, groups, icg, ph, pw)
    kernel = np.asarray(w, dtype=ftype).reshape(groups, oc // groups, icg, kh, kw)
    # the taps' sums added in float64 while the whole sum stays below 2**53, else in int64
    total = np.float64 if icg * kh * kw * PRODUCT < 1 << 53 else np.int64
    y = np.zeros((n, groups, oc // groups, oh, ow), dtype=total)
    for i in range(kh):
        for j in range(kw):
            tap = image[:, :, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]
            y += np.einsum("goc,ngcrs->ngors", kernel[:, :, :, i, j], tap, optimize=True).astype(total)
    return y.reshape(n, oc, oh, ow).astype(np.int64)


def matmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """y[n, o] = sum over k of x[n, k] * w[o, k], a block of outputs at a time."""
    ftype = _exact_float(x.shape[1])
    xs = np.asarray(x, dtype=ftype)
    step = max(1, (1 << 20) // max(x.shape[1], 1))
    return np.concatenate([(xs @ np.asarray(w[lo:lo + step], dtype=ftype).T).astype(np.int64)
                           for lo in range(0, len(w), step)], axis=1)


def _taps(x: np.ndarray, size: int, stride: int, pad: int, pad_end: int, fill: int):
    """Each tap (i, j) of a pooling window over ``x`` padded with ``fill``: [N, C, OH, OW] per tap."""
    n, c, h, w = x.shape
    oh, ow = (h + pad + pad_end - size) // stride + 1, (w + pad + pad_end - size) // stride + 1
    padded = np.full((n, c, h + pad + pad_end, w + pad + pad_end), fill, dtype=np.int64)
    padded[:, :, pad:pad + h, pad:pad + w] = x
    for i in range(size):
        for j in range(size):
            yield padded[:, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]


def max_pool(x: np.ndarray, size: int, stride: int, pad: int, pad_end: int) -> np.ndarray:
    """The largest value of each window; padding is the smallest int8 value, which never wins."""
    taps = _taps(x, size, stride, pad, pad_end, -128)
    out = next(taps).copy()
    for tap in taps:
        np.maximum(out, tap, out=out)
    return out


def sum_pool(x: np.ndarray, size: int, stride: int, pad: int, pad_end: int) -> np.ndarray:
    """The sum of each window; padding is zero."""
    taps = _taps(x, size, stride, pad, pad_end, 0)
    out = next(taps).copy()
    for tap in taps:
        out += tap
    return out

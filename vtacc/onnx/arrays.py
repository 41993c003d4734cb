"""The layers' arithmetic in numpy, written from the math: convolution, pooling, averages.

Used with float inputs for calibration and with integer-valued float arrays
by the int8 reference: int8 products summed over at most a few thousand
terms stay far below 2**53, so float64 BLAS computes them exactly (float32
where every sum stays below 2**24: reference.py picks).
"""

from __future__ import annotations

import numpy as np


def conv2d(x: np.ndarray, w: np.ndarray, stride: int, pad: int, groups: int) -> np.ndarray:
    """NCHW input, OIHW weights, zero padding, ``groups`` channel groups."""
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    if groups == 1:  # one matrix product (BLAS) per image, its columns made for it alone
        out = np.empty((n, oc, oh * ow), dtype=np.result_type(xp, w))
        rows = w.reshape(oc, -1)
        for i in range(n):
            out[i] = rows @ _columns(xp[i:i + 1], kh, kw, stride, oh, ow).reshape(icg * kh * kw, oh * ow)
        return out.reshape(n, oc, oh, ow)
    ocg = oc // groups
    part = _columns(xp, kh, kw, stride, oh, ow).reshape(n, groups, icg * kh * kw, oh * ow)  # every group at once
    weights = w.reshape(groups, ocg, icg * kh * kw)
    return np.einsum("gok,ngkp->ngop", weights, part, optimize=True).reshape(n, oc, oh, ow)


def _columns(xp: np.ndarray, kh: int, kw: int, stride: int, oh: int, ow: int) -> np.ndarray:
    """[N, C, KH, KW, OH, OW]: the input pixel under every kernel tap of every output position."""
    n, c = xp.shape[:2]
    cols = np.empty((n, c, kh, kw, oh, ow), dtype=xp.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
    return cols


def windows(x: np.ndarray, size: int, stride: int, pad: int, fill: float, pad_end: int | None = None) -> np.ndarray:
    """[N, C, OH, OW, size*size]: every pooling window, padding (``pad`` before, ``pad_end`` after, default
    ``pad``) filled with ``fill``."""
    n, c, h, w = x.shape
    end = pad if pad_end is None else pad_end
    xp = np.pad(x, ((0, 0), (0, 0), (pad, end), (pad, end)), constant_values=fill)
    oh, ow = (h + pad + end - size) // stride + 1, (w + pad + end - size) // stride + 1
    out = np.empty((n, c, oh, ow, size * size), dtype=xp.dtype)
    for i in range(size):
        for j in range(size):
            out[..., i * size + j] = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
    return out

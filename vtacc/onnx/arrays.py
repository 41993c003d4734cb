"""The float layers' arithmetic in numpy (calibration and the float reference): convolution and pooling
windows, in float64, with the windows taken as the host takes them (vtasim.host.windows). The int8
reference has arithmetic of its own (exact.py)."""

from __future__ import annotations

import numpy as np

from vtasim.host.windows import patches


def conv2d(x: np.ndarray, w: np.ndarray, stride: int, pads: tuple[int, int, int, int], groups: int) -> np.ndarray:
    """NCHW input, OIHW weights, zero padding (top, left, bottom, right), ``groups`` channel groups."""
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    top, left, bottom, right = pads
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh, ow = (h + top + bottom - kh) // stride + 1, (wd + left + right - kw) // stride + 1
    if groups == 1:  # matrix products (BLAS) per image, over bands of output rows whose columns stay bounded
        out = np.empty((n, oc, oh * ow), dtype=np.result_type(xp, w))
        rows = w.reshape(oc, -1)
        band = _band_rows(icg * kh * kw, oh, ow, np.dtype(out.dtype).itemsize)
        for i in range(n):
            for r0 in range(0, oh, band):
                r1 = min(oh, r0 + band)
                part = xp[i:i + 1, :, r0 * stride:(r1 - 1) * stride + kh]
                cols = _columns(part, kh, kw, stride, r1 - r0, ow).reshape(icg * kh * kw, (r1 - r0) * ow)
                out[i, :, r0 * ow:r1 * ow] = rows @ cols
        return out.reshape(n, oc, oh, ow)
    ocg = oc // groups
    part = _columns(xp, kh, kw, stride, oh, ow).reshape(n, groups, icg * kh * kw, oh * ow)  # every group at once
    weights = w.reshape(groups, ocg, icg * kh * kw)
    return np.einsum("gok,ngkp->ngop", weights, part, optimize=True).reshape(n, oc, oh, ow)


COLUMN_BYTES = 48 << 20  # an image's columns are made a band of output rows at a time above this
MIN_BAND_COLUMNS = 8192  # ... but never fewer output pixels a product than this (BLAS takes the whole's path)


def _band_rows(depth: int, oh: int, ow: int, itemsize: int) -> int:
    """Output rows per band: all of them when the columns are small, else as many as COLUMN_BYTES holds
    (at least MIN_BAND_COLUMNS pixels): a VGG's first layers' columns would take 230 MB an image."""
    if depth * oh * ow * itemsize <= COLUMN_BYTES:
        return oh
    fit = COLUMN_BYTES // (depth * ow * itemsize)
    return max(1, min(oh, max(fit, -(-MIN_BAND_COLUMNS // ow))))


def _columns(xp: np.ndarray, kh: int, kw: int, stride: int, oh: int, ow: int) -> np.ndarray:
    """[N, C, KH, KW, OH, OW]: the input pixel under every kernel tap of every output position."""
    n, c = xp.shape[:2]
    taps = patches(xp, (kh, kw), (stride, stride), (1, 1), (oh, ow))
    return np.ascontiguousarray(np.moveaxis(taps, 4, 2)).reshape(n, c, kh, kw, oh, ow)


def windows(x: np.ndarray, size: int, stride: int, pad: int, fill: float, pad_end: int | None = None) -> np.ndarray:
    """[N, C, OH, OW, size*size]: every pooling window, padding (``pad`` before, ``pad_end`` after, default
    ``pad``) filled with ``fill``."""
    n, c, h, w = x.shape
    end = pad if pad_end is None else pad_end
    xp = np.pad(x, ((0, 0), (0, 0), (pad, end), (pad, end)), constant_values=fill)
    oh, ow = (h + pad + end - size) // stride + 1, (w + pad + end - size) // stride + 1
    return patches(xp, (size, size), (stride, stride), (1, 1), (oh, ow))

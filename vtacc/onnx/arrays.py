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

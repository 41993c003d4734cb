"""The windows of a 2-D window operator (convolution, pooling) over an NCHW array, as numpy views copied
once: the one place the host operators and the importer's float layers take windows."""

from __future__ import annotations

import numpy as np


def patches(x: np.ndarray, kernel: tuple[int, int], strides, dilations, out_hw: tuple[int, int]) -> np.ndarray:
    """[N, C, OH, OW, KH*KW]: for every output position, the input pixel under each kernel tap (row-major
    taps), from an input already padded far enough for every window."""
    n, c = x.shape[:2]
    kh, kw = kernel
    oh, ow = out_hw
    out = np.empty((n, c, oh, ow, kh * kw), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            r, s = i * dilations[0], j * dilations[1]
            out[..., i * kw + j] = x[:, :, r:r + strides[0] * oh:strides[0], s:s + strides[1] * ow:strides[1]]
    return out

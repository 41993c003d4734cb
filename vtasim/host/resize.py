"""ONNX's Resize (and Upsample) in numpy: nearest, linear and cubic interpolation, one axis at a time, with
every coordinate transformation the specification defines but tf_crop_and_resize."""

from __future__ import annotations

import numpy as np

TRANSFORMS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric")
_ROUNDING = {"floor": np.floor, "ceil": np.ceil, "round_prefer_ceil": lambda v: np.floor(v + 0.5),
             "round_prefer_floor": lambda v: np.ceil(v - 0.5)}


def source_coordinates(n_in: int, n_out: int, scale: float, transform: str) -> np.ndarray:
    """For each output index along an axis, the input coordinate it maps to."""
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"a scale of {scale} (scales are positive numbers)")
    o = np.arange(n_out, dtype=np.float64)
    if transform == "asymmetric":
        return o / scale
    if transform == "align_corners":
        return o * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(n_out)
    if transform == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if n_out > 1 else np.zeros(n_out)
    if transform == "half_pixel_symmetric":
        adjustment = n_out / (scale * n_in)
        center = n_in / 2 * (1 - adjustment)
        return center + (o + 0.5) / scale - 0.5
    if transform == "half_pixel":
        return (o + 0.5) / scale - 0.5
    raise ValueError(f"coordinate_transformation_mode '{transform}' (the host takes {', '.join(TRANSFORMS)})")


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """[n, 4]: the cubic convolution kernel's weights of the taps at offsets -1, 0, 1, 2 from floor(x)."""
    def kernel(d: np.ndarray) -> np.ndarray:
        d = np.abs(d)
        near = ((a + 2) * d - (a + 3)) * d * d + 1
        far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
        return np.where(d <= 1, near, np.where(d < 2, far, 0.0))

    return np.stack([kernel(t + 1), kernel(t), kernel(1 - t), kernel(2 - t)], axis=1)


def resize_axis(x: np.ndarray, axis: int, n_out: int, scale: float, mode: str, transform: str,
                rounding: str = "round_prefer_floor", cubic_a: float = -0.75, exclude_outside: bool = False,
                extrapolation: float = 0.0) -> np.ndarray:
    """``x`` resized along one axis to ``n_out`` elements."""
    n_in = x.shape[axis]
    src = source_coordinates(n_in, n_out, scale, transform)
    if mode == "nearest":
        index = _ROUNDING.get(rounding, _ROUNDING["round_prefer_floor"])(src)
        return np.take(x, np.clip(index.astype(np.int64), 0, n_in - 1), axis=axis)
    if mode == "linear":
        src = np.clip(src, 0, n_in - 1)
        lo = np.floor(src).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        t = (src - lo).astype(x.dtype)
        shape = [1] * x.ndim
        shape[axis] = n_out
        t = t.reshape(shape)
        return np.take(x, lo, axis=axis) * (1 - t) + np.take(x, hi, axis=axis) * t
    if mode == "cubic":
        base = np.floor(src).astype(np.int64)
        weights = _cubic_weights(src - base, cubic_a)
        taps = base[:, None] + np.arange(-1, 3)[None, :]
        if exclude_outside:
            weights = np.where((taps >= 0) & (taps < n_in), weights, 0.0)
            weights /= weights.sum(axis=1, keepdims=True)
        out = np.zeros(x.shape[:axis] + (n_out,) + x.shape[axis + 1:], dtype=np.float64)
        shape = [1] * x.ndim
        shape[axis] = n_out
        for k in range(4):
            out += np.take(x, np.clip(taps[:, k], 0, n_in - 1), axis=axis) * weights[:, k].reshape(shape)
        return out.astype(x.dtype)
    raise ValueError(f"mode '{mode}' (the host resizes with nearest, linear and cubic)")


def resize(x: np.ndarray, out: tuple[int, ...], scales: np.ndarray | None, a: dict, opset: int) -> np.ndarray:
    """Resize ``x`` to the shape ``out`` as the node's attributes say (``scales``: the node's scales input,
    when it gives one; else each axis's scale is its output size over its input size)."""
    mode = a.get("mode", "nearest")
    transform = a.get("coordinate_transformation_mode", "half_pixel") if opset >= 11 else "asymmetric"
    rounding = a.get("nearest_mode", "round_prefer_floor") if opset >= 11 else "floor"
    if a.get("antialias", 0):
        raise ValueError("antialias=1 (the host resizes without an antialiasing filter)")
    if a.get("keep_aspect_ratio_policy", "stretch") != "stretch" or a.get("axes") is not None:
        raise ValueError("keep_aspect_ratio_policy and axes (the host resizes every axis to its output size)")
    for axis in range(x.ndim):
        n_in, n_out = x.shape[axis], out[axis]
        scale = float(scales[axis]) if scales is not None and len(scales) == x.ndim else n_out / n_in
        if n_in == n_out and scale == 1.0:
            continue
        x = resize_axis(x, axis, n_out, scale, mode, transform, rounding, float(a.get("cubic_coeff_a", -0.75)),
                        bool(a.get("exclude_outside", 0)))
    return x

"""ResNet-18's convolution layers C2-C11 (shared/spec/workloads.md) as kernel sources."""

from __future__ import annotations

# name: (H = W, IC, OC, kernel, pad, stride)
RESNET = {
    "C2": (56, 64, 64, 3, 1, 1),
    "C3": (56, 64, 128, 3, 1, 2),
    "C4": (56, 64, 128, 1, 0, 2),
    "C5": (28, 128, 128, 3, 1, 1),
    "C6": (28, 128, 256, 3, 1, 2),
    "C7": (28, 128, 256, 1, 0, 2),
    "C8": (14, 256, 256, 3, 1, 1),
    "C9": (14, 256, 512, 3, 1, 2),
    "C10": (14, 256, 512, 1, 0, 2),
    "C11": (7, 512, 512, 3, 1, 1),
}


def layer_source(name: str, schedule: str = "") -> tuple[str, tuple]:
    """The layer as a kernel (`>> 8`, `+ bias`, clip 0..127), and its (H, IC, OC, kernel, pad, stride)."""
    h, ic, oc, k, pad, stride = RESNET[name]
    oh = (h + 2 * pad - k) // stride + 1
    src = f"""kernel {name.lower()}(x: int8[1, {ic}, {h}, {h}], w: int8[{oc}, {ic}, {k}, {k}], b: int32[{oc}])
    -> y: int8[1, {oc}, {oh}, {oh}] {{
    y = clip((conv2d(x, w, stride={stride}, pad={pad}) >> 8) + b, 0, 127)
    {schedule}
}}
"""
    return src, RESNET[name]

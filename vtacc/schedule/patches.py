"""A convolution over a program input of few channels reads that input laid out as its patches.

VTA's GEMM core multiplies BLOCK_IN input channels at a time. A network's first
layer reads an image of 3 channels, padded to a block of 16: 13/16 of its
multiplies are by zero, and a 7x7 convolution pays that for each of its 49 taps
(ResNet-18's stem: a quarter of the network's cycles). When the input is the
program's own, whoever writes it (`vtasim run --input`, the ONNX host step that
quantises the image) packs it through the program's tensor table, so the
program may ask for any layout: here the K x K windows the convolution reads
(TensorInfo.patches), K*K*C channels per output position. The convolution is
then a 1x1 one over those channels, 147 channels in 10 blocks instead of 49
taps of one block, with the same sums: the padding is zero either way, and the
weights, a program input too, are laid out in the same (ky, kx, c) order. The
program's inputs keep their logical shapes.

A convolution qualifies when its input and weights are inputs of the program
that nothing else reads (a tensor has one layout) and the patches need at most
half the GEMM executions.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

from vtacc.frontend import checked as ck
from vtasm.config import VTAConfig

from .layouts import ACT, WGT, DramTensor, dram_tensor
from .operators import GemmProducer, Operator

GAIN = 2  # the patches' GEMM executions must be at most 1/GAIN of the windows'


def patched_executions(c: int, k: int, cfg: VTAConfig) -> tuple[int, int]:
    """GEMM executions per output position and output block: over windows (taps x input blocks) and over
    patches (blocks of K*K*C channels)."""
    return k * k * math.ceil(c / cfg.block_in), math.ceil(k * k * c / cfg.block_in)


def lay_out_patches(operators: list[Operator], inputs: set[str], tensors: dict[str, DramTensor | None],
                    cfg: VTAConfig) -> None:
    """Give every qualifying convolution (module docstring) its input and weights as patches, in place:
    the operator's producer and the program's tensor table."""
    uses: Counter = Counter()  # every read of a tensor: an epilogue operand read beside the product counts too
    for op in operators:
        uses.update({t.name for t in op.operands.values()})
        if op.producer is not None:
            uses[op.producer.x.name] += 1
            if isinstance(op.producer, GemmProducer):
                uses[op.producer.w.name] += 1
        uses[op.out.name] += 1
    for op in operators:
        p = op.producer
        if not isinstance(p, GemmProducer) or not isinstance(p.conv_node, ck.Conv2d) or not _plain(p, inputs, uses):
            continue
        k, c = p.kh, p.x.dims[1]
        windows, patches = patched_executions(c, k, cfg)
        if patches * GAIN > windows:
            continue
        x = dram_tensor(p.x.name, p.x.dtype, p.x.logical, ACT, cfg, patches=(k, p.stride, p.pad))
        w = dram_tensor(p.w.name, p.w.dtype, p.w.logical, WGT, cfg, patches=(k, 1, 0))
        tensors[x.name], tensors[w.name] = x, w
        op.producer = dataclasses.replace(p, x=x, w=w, stride=1, pad=0, pad_left=0, kh=1, kw=1)


def _plain(p: GemmProducer, inputs: set[str], uses: Counter) -> bool:
    """A convolution of square windows padded alike on every side, without groups, over a program input
    and program weights that only it reads, laid out plainly so far."""
    x, w = p.x, p.w
    return (p.groups == 1 and p.kh == p.kw and p.conv_node.symmetric and p.w_data is None and x.kind == ACT
            and x.dtype == "int8"
            and x.name in inputs and w.name in inputs and uses[x.name] == 1 and uses[w.name] == 1
            and x.slice_of is None and x.patches is None and w.patches is None and w.view is None
            and w.spread is None and len(x.logical) == 4 and len(w.logical) == 4)

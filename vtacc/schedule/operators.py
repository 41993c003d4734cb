"""From checked kernels to operators: what each output needs from the hardware.

Each output assignment becomes one operator: an optional *producer* (a matrix
product or convolution on the GEMM core, or a pooling on the ALU) followed by
an element-wise *epilogue* evaluated on the accumulator tile while it is
resident. The epilogue is the checked expression itself, with the producer
node standing for the value the producer leaves in the accumulator.

Operands of the epilogue are tensors in DRAM: full int32 tensors (loaded into
the accumulator), full int8 tensors (loaded as inputs and moved into the
accumulator by the GEMM core with an identity weight tile, which keeps the
program portable to hardware without ACC_8BIT loads), and per-channel int32
vectors (biases). Anything else is refused with the reason.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from vtacc.frontend import checked as ck
from vtasm.config import VTAConfig
from vtasm.errors import CompileError

from .layouts import ACC, ACT, BIAS, WGT, DramTensor, dram_tensor, view4


@dataclass(frozen=True)
class GemmProducer:
    """A convolution (a matrix product is a 1x1 convolution of a 1x1 image)."""

    node: ck.Node
    x: DramTensor
    w: DramTensor
    stride: int
    pad: int  # rows of padding before the image (what follows the last row, the output's size says)
    groups: int
    kh: int
    kw: int
    out_dims: tuple[int, int, int, int]  # of the product (before a pooling folded into it)
    w_data: bytes | None = None  # packed weights the compiler made (global_avg_pool's multipliers)
    # a max pooling of the product (size, stride, pad), folded in the accumulator before the epilogue: then
    # ``node`` is the pooling's and the operator's result has the pooled shape
    pool: tuple[int, int, int] | None = None
    pad_left: int = 0  # columns of padding before the image

    @property
    def conv_node(self) -> ck.Node:
        """The product's own node (under a folded pooling)."""
        return self.node.x if self.pool is not None else self.node

    @property
    def useful_fraction(self) -> float:
        """The share of the GEMM's multiplies (before BLOCK padding) that a grouped convolution needs.

        Groups narrower than BLOCK_IN are spread over block-diagonal weight
        tiles; the multiplies by their zero entries are wasted.
        """
        if self.w.spread is None:
            return 1.0
        return self.w.logical[1] / self.w.dims[1]


@dataclass(frozen=True)
class PoolProducer:
    """Max or sum pooling of a tensor, on the ALU."""

    node: ck.Pool
    x: DramTensor
    kind: str
    size: int
    stride: int
    pad: int
    pad_value: int
    out_dims: tuple[int, int, int, int]


@dataclass
class Operator:
    """One output of a kernel: producer, epilogue expression, DRAM tensors it uses."""

    kernel: str
    out: DramTensor
    expr: ck.Node
    producer: GemmProducer | PoolProducer | None
    operands: dict[int, DramTensor] = field(default_factory=dict)  # id(TensorRef node) -> tensor
    span: object = None
    constants: dict[int, DramTensor] = field(default_factory=dict)  # wide constants -> their DRAM vectors

    @property
    def out_dims(self) -> tuple[int, int, int, int]:
        return self.out.dims


class TensorTable:
    """The DRAM tensors of a program, one per name, checked for consistent use."""

    def __init__(self, cfg: VTAConfig):
        self.cfg = cfg
        self.tensors: dict[str, DramTensor] = {}

    def get(self, decl: ck.TensorDecl, kind: str, span, view: tuple[int, ...] | None = None,
            spread: tuple[int, int] | None = None) -> DramTensor:
        if decl.slice_of is not None:
            return self._slice(decl, kind, span)
        want = dram_tensor(decl.name, decl.dtype, decl.shape, kind, self.cfg, view=view, spread=spread)
        have = self.tensors.get(decl.name)
        if have is None:
            self.tensors[decl.name] = want
            return want
        if have.kind == kind and (have.view, have.spread) != (view, spread):
            raise CompileError(
                f"weights {decl.name} are used by two operators that pack them differently (a flattened input or "
                "a grouping changes the packing); pass them twice", span)
        if have.kind != kind and {have.kind, kind} == {ACC, BIAS} and len(decl.shape) == 1:
            return have  # a vector [C] packs the same way for both uses
        if have.kind != kind:
            raise CompileError(
                f"tensor {decl.name} is used both as {_KIND_WORDS[have.kind]} and as {_KIND_WORDS[kind]}; "
                "VTA packs these differently, pass it twice", span)
        return have


    def _slice(self, decl: ck.TensorDecl, kind: str, span) -> DramTensor:
        """A channel slice of a concatenation's result: no segment of its own, stored into the whole."""
        whole = self.get(decl.slice_of, kind, span)
        block = self.cfg.block_out
        if decl.channel0 % block:
            raise CompileError(
                f"concat: this part starts at channel {decl.channel0} of {decl.slice_of.name}, not a multiple of "
                f"BLOCK ({block}); VTA stores whole channel blocks, so every part but the last needs a multiple of "
                f"{block} channels", span)
        if kind != ACT:
            raise CompileError(f"{decl.name} is a slice of {decl.slice_of.name}, written in place by concat; it "
                               "cannot be read on its own", span)
        part = dram_tensor(decl.name, decl.dtype, decl.shape, ACT, self.cfg)
        return dataclasses.replace(part, slice_of=whole, slice_c0=decl.channel0 // block)


_KIND_WORDS = {ACT: "activations", WGT: "weights", ACC: "an int32 operand", BIAS: "a per-channel vector"}


def _producers(node: ck.Node, found: list[ck.Node]) -> None:
    """The distinct matmul/conv2d/pool nodes of an expression (a shared local counts once)."""
    if isinstance(node, (ck.MatMul, ck.Conv2d, ck.Pool, ck.AvgWindow)):
        if all(node is not f for f in found):
            found.append(node)
        return
    for child in _children(node):
        _producers(child, found)


def _children(node: ck.Node) -> list[ck.Node]:
    if isinstance(node, ck.Binary):
        return [node.a, node.b]
    if isinstance(node, ck.Cast):
        return [node.x]
    return []


def _tensor_ref(node: ck.Node, what: str) -> ck.TensorDecl:
    if isinstance(node, ck.TensorRef):
        return node.tensor
    raise CompileError(f"{what} must be a tensor parameter (VTA's GEMM core reads int8 data from DRAM)", node.span)


def grouping(ic: int, oc: int, groups: int, cfg: VTAConfig) -> tuple[int, tuple[int, int] | None]:
    """How the GEMM core runs a convolution of ``groups`` groups: (GEMM groups, weight spread or None).

    Groups of whole BLOCK_IN input and BLOCK_OUT output channels run as they
    are. Narrower groups are packed BLOCK_IN / (IC/groups) to a GEMM group, their
    weights spread block-diagonally over BLOCK_IN channels, when that packing
    gives whole BLOCK_OUT output blocks (the last GEMM group may be partly
    padding: 1000 depthwise channels are 63 GEMM groups, as 1008 would be);
    any other grouping runs as one dense convolution with block-diagonal
    weights over all IC channels.
    """
    if groups == 1:
        return 1, None
    icg, ocg = ic // groups, oc // groups
    if icg % cfg.block_in == 0 and ocg % cfg.block_out == 0:
        return groups, None
    if cfg.block_in % icg == 0:
        per = cfg.block_in // icg
        gemm_groups = -(-groups // per)  # the last one may hold fewer groups: its other channels are padding
        if (per * ocg) % cfg.block_out == 0 and gemm_groups * per * ocg // cfg.block_out == -(-oc // cfg.block_out):
            return gemm_groups, (groups, cfg.block_in)
    return 1, (groups, ic)


def _avg_window(node: ck.AvgWindow, table: TensorTable) -> GemmProducer:
    """global_avg_pool's window sum: a depthwise convolution with the whole image as its window when one
    image plane and its weight taps fit the buffers (one tile of 1 x 1 output pixels reads all of it), else
    a grouped matrix product over the image's pixels that the tiler sums in parts (_pixel_sum)."""
    cfg = table.cfg
    h, w = node.x.shape[2:]
    if h * w + 2 <= min(cfg.inp_depth, cfg.wgt_depth):  # 2: the identity tiles an epilogue may load
        return _depthwise_window(node, table)
    return _pixel_sum(node, table)


def _depthwise_window(node: ck.AvgWindow, table: TensorTable) -> GemmProducer:
    """The window sum as a depthwise convolution whose weights are all the multiplier."""
    cfg = table.cfg
    x = table.get(_tensor_ref(node.x, "the input of global_avg_pool"), ACT, node.x.span)
    n, c, h, w = node.x.shape
    groups, spread = grouping(c, c, c, cfg)
    weights = dram_tensor(f"__avg_{c}x{h}x{w}_{node.multiplier}", "int8", (c, 1, h, w), WGT, cfg,
                          constant=True, spread=spread)
    data = weights.tensor_info().pack(np.full((c, 1, h, w), node.multiplier, dtype=np.int8))
    return GemmProducer(node, x, weights, 1, 0, groups, h, w, (n, c, 1, 1), data)


def _pixel_sum(node: ck.AvgWindow, table: TensorTable) -> GemmProducer:
    """The window sum as a grouped matrix product over the image's pixels.

    In DRAM a channel block's H x W pixels follow one another, so the image [N, C, H, W] is also the
    matrix [N, CB * H * W * BLOCK] (CB channel blocks) with no copy: group g of CB reads block g's pixels,
    H*W input blocks, and its weight tiles are all ``multiplier`` times the identity. The tiler then
    sums the image in chunks of input blocks (rows of pixels, or parts of a row) into the accumulator, as
    it sums any reduction, so an image of any size fits the buffers; the shift after it applies once.
    """
    cfg = table.cfg
    x = table.get(_tensor_ref(node.x, "the input of global_avg_pool"), ACT, node.x.span)
    n, c, h, w = node.x.shape
    block, blocks, pixels = cfg.block_in, x.c_tiles, h * w
    pixels_view = dataclasses.replace(x, dims=(x.dims[0], blocks * pixels * block, 1, 1))
    weights = dram_tensor(f"__avg_{blocks}x{pixels}x{block}_{node.multiplier}", "int8",
                          (blocks * block, pixels * block, 1, 1), WGT, cfg, constant=True)
    tiles = np.zeros((blocks, block, pixels, block), dtype=np.int8)
    lane = np.arange(block)
    tiles[:, lane, :, lane] = node.multiplier  # output channel o of a block reads lane o of every pixel
    data = weights.tensor_info().pack(tiles.reshape(blocks * block, pixels * block, 1, 1))
    return GemmProducer(node, pixels_view, weights, 1, 0, blocks, 1, 1, (n, c, 1, 1), data)


def _gemm(node: ck.Node, table: TensorTable) -> GemmProducer:
    if isinstance(node, ck.AvgWindow):
        return _avg_window(node, table)
    if isinstance(node, ck.MatMul) and isinstance(node.x, ck.Flatten):
        src = node.x.x
        x = table.get(_tensor_ref(src, "the input of flatten"), ACT, src.span)
        n, c, h, w = src.shape
        o = node.shape[1]
        weights = table.get(_tensor_ref(node.w, "the weights of matmul"), WGT, node.w.span, view=(o, c, h, w))
        return GemmProducer(node, x, weights, 1, 0, 1, h, w, (n, o, 1, 1))
    if isinstance(node, ck.MatMul):
        x = table.get(_tensor_ref(node.x, "the input of matmul"), ACT, node.x.span)
        w = table.get(_tensor_ref(node.w, "the weights of matmul"), WGT, node.w.span)
        n, o = node.shape
        return GemmProducer(node, x, w, 1, 0, 1, 1, 1, (n, o, 1, 1))
    assert isinstance(node, ck.Conv2d)
    x = table.get(_tensor_ref(node.x, "the input of conv2d"), ACT, node.x.span)
    oc, icg, kh, kw = node.w.shape
    groups, spread = grouping(node.x.shape[1], oc, node.groups, table.cfg)
    w = table.get(_tensor_ref(node.w, "the weights of conv2d"), WGT, node.w.span, spread=spread)
    if max(node.pads) > 15:
        raise CompileError(f"padding {max(node.pads)} exceeds the DMA's 4-bit padding fields (at most 15)", node.span)
    top, left = node.pads[:2]
    return GemmProducer(node, x, w, node.stride, top, groups, kh, kw, view4(node.shape), pad_left=left)


def _pool(node: ck.Pool, table: TensorTable) -> PoolProducer | GemmProducer:
    if isinstance(node.x, ck.Conv2d):  # max_pool(conv2d(...)): the pooling folds into the product's tiles
        return dataclasses.replace(_gemm(node.x, table), node=node, pool=(node.size, node.stride, node.pad))
    decl = _tensor_ref(node.x, f"the input of {node.kind}_pool")
    x = table.get(decl, ACT if decl.dtype == ck.INT8 else ACC, node.x.span)
    if node.pad > 15:
        raise CompileError(f"padding {node.pad} exceeds the DMA's 4-bit padding fields (at most 15)", node.span)
    return PoolProducer(node, x, node.kind, node.size, node.stride, node.pad, node.pad_value, view4(node.shape))


def _classify_operand(ref: ck.TensorRef, aligned: tuple[int, ...], out_shape: tuple[int, ...],
                      table: TensorTable) -> DramTensor:
    decl = ref.tensor
    out4 = view4(out_shape)
    if tuple(aligned) == tuple(out_shape):
        return table.get(decl, ACT if decl.dtype == ck.INT8 else ACC, ref.span)
    al4 = view4(tuple(aligned)) if len(aligned) in (1, 2, 4) else None
    if al4 is not None and al4[0] == 1 and al4[1] == out4[1] and al4[2] == 1 and al4[3] == 1 and decl.dtype == ck.INT32:
        if len(decl.shape) != 1:
            raise CompileError(
                f"per-channel operand {decl.name} must be declared as a vector int32[{out4[1]}]", ref.span)
        return table.get(decl, BIAS, ref.span)
    raise CompileError(
        f"operand {decl.name} {decl.dtype}{list(decl.shape)} broadcasts in a way VTA cannot load: only full "
        f"tensors of the result's shape and per-channel int32 vectors are supported", ref.span)


def _operands(node: ck.Node, producer: ck.Node | None, out_shape, table: TensorTable, out: dict,
              aligned: tuple[int, ...] | None = None) -> None:
    if node is producer:
        return
    if isinstance(node, ck.TensorRef):
        out[id(node)] = _classify_operand(node, aligned or node.shape, out_shape, table)
        return
    if isinstance(node, ck.Binary):
        _operands(node.a, producer, out_shape, table, out, node.a_shape)
        _operands(node.b, producer, out_shape, table, out, node.b_shape)
        return
    if isinstance(node, ck.Cast):
        _operands(node.x, producer, out_shape, table, out, aligned)
        return
    if isinstance(node, ck.Call):
        raise CompileError("kernel calls are compiled by the program builder, not inside an expression", node.span)
    if isinstance(node, ck.Concat):
        raise CompileError("concat(...) must be the whole value of an assignment (each part is written in place "
                           "into the result); compute the rest in the kernel that reads it", node.span)
    if isinstance(node, ck.Flatten):
        raise CompileError("flatten(...) reads a tensor in place as a matmul's input; here its value would have "
                           "to be computed, so write matmul(flatten(x), w) or keep the 4-D tensor", node.span)
    if isinstance(node, (ck.MatMul, ck.Conv2d, ck.Pool, ck.AvgWindow)):
        raise CompileError(
            "only one matmul, conv2d or pooling per output: VTA computes it in the accumulator; write the second "
            "one as a separate kernel", node.span)


def build_operator(kernel: ck.Kernel, assign: ck.Assign, table: TensorTable) -> Operator:
    """The operator computing one output assignment."""
    cfg = table.cfg
    target = assign.target
    if target.dtype != ck.INT8:
        raise CompileError(
            f"result {target.name} is {target.dtype}, but VTA stores only {cfg.out_width}-bit values "
            "(OUT_WIDTH); declare it int8", target.span)
    if len(target.shape) not in (1, 2, 4):
        raise CompileError(f"result {target.name} has rank {len(target.shape)}; kernels handle rank 1, 2 or 4",
                           target.span)
    found: list[ck.Node] = []
    _producers(assign.value, found)
    if len(found) > 1:
        raise CompileError(
            "only one matmul, conv2d or pooling per output: VTA computes it in the accumulator; write the second "
            "one as a separate kernel", found[1].span)
    node = found[0] if found else None
    producer: GemmProducer | PoolProducer | None = None
    if isinstance(node, (ck.MatMul, ck.Conv2d, ck.AvgWindow)):
        producer = _gemm(node, table)
    elif isinstance(node, ck.Pool):
        producer = _pool(node, table)
    out = table.get(target, ACT, target.span)
    op = Operator(kernel.name, out, assign.value, producer, span=assign.span)
    _operands(assign.value, node, target.shape, table, op.operands)
    if producer is None and not op.operands:
        raise CompileError(f"result {target.name} does not depend on any tensor", assign.span)
    return op

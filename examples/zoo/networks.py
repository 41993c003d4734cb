"""Ten classic model-zoo CNNs as ONNX graphs with seeded random weights, written the way their exporters write them.

Each ``build_<name>(size, seed)`` returns a ModelProto for a [batch, 3, size, size]
input with the real architecture (layer and channel counts, kernels, strides,
pads) and a 1000-class head (255-channel YOLO heads). Weights are He-normal
(std sqrt(2 / fan_in) ahead of a ReLU), batch norms random around the identity
and the last batch norm of each residual branch damped, so activations keep a
sane scale through the depth. ``MIN_SIZES`` is the smallest size each accepts.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx

from .builder import GraphBuilder


def build_resnet50(size: int, seed: int = 0) -> onnx.ModelProto:
    """ResNet-50, caffe2 model-zoo names (gpu_0/...), opset 9.

    torchvision v1.5 layout (the stride in each first 3x3), Conv without bias + BatchNormalization + Relu,
    residual additions written as Sum.
    """
    b = GraphBuilder("resnet50", style="caffe2", opset=9, seed=seed, prefix="gpu_0/")
    x = b.input("gpu_0/data_0", (1, 3, size, size))
    x = b.relu(b.bn(b.conv(x, 64, 7, 2, 3, bias=False, scope="conv1"), "res_conv1_bn"), "res_conv1_bn")
    x = b.maxpool(x, 3, 2, 1, scope="pool1")
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), start=2):
        for i in range(blocks):
            name, stride = f"res{stage}_{i}", 2 if stage > 2 and i == 0 else 1
            y = x
            for branch, (oc, k, s) in zip("abc", ((width, 1, 1), (width, 3, stride), (4 * width, 1, 1)), strict=True):
                y = b.conv(y, oc, k, s, k // 2, bias=False, scope=f"{name}_branch2{branch}")
                y = b.bn(y, f"{name}_branch2{branch}_bn", gamma=(0.1, 0.3) if branch == "c" else (0.5, 1.5))
                if branch != "c":
                    y = b.relu(y, f"{name}_branch2{branch}_bn")
            shortcut = x
            if i == 0:
                shortcut = b.bn(b.conv(x, 4 * width, 1, stride, bias=False, scope=f"{name}_branch1"),
                                f"{name}_branch1_bn", gamma=(0.5, 1.0))
            x = b.relu(b.add(y, shortcut, f"{name}_branch2c_bn", op="Sum"), f"{name}_branch2c_bn")
    x = b.flatten(b.gap(x, "pool5"), "pool5")
    out = b.gemm(x, 1000, "pred", std=0.01)
    return b.model([out], doc="ResNet-50 (caffe2 model-zoo style), random weights")


def _mbv2_conv(b: GraphBuilder, x: str, oc: int, k: int, stride: int, group: int, path: str) -> str:
    """Conv2dNormActivation with the batch norm folded into the conv (torch eval export), then ReLU6 as Clip."""
    y = b.conv(x, oc, k, stride, (k - 1) // 2, group, scope=f"{path}.0", bias_std=0.1)
    return b.clip(y, 0.0, 6.0, scope=f"{path}.2")


def build_mobilenetv2(size: int, seed: int = 0) -> onnx.ModelProto:
    """MobileNetV2 1.0, torch 2 export of torchvision's, opset 13, symbolic batch.

    Batch norms folded into the convs ("onnx::Conv_N" parameters), ReLU6 as Clip with Constant-node bounds,
    x.reshape(x.shape[0], -1) as Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Dropout with a ratio input.
    """
    b = GraphBuilder("main_graph", style="torch2", opset=13, seed=seed)
    x = b.input("input", (1, 3, size, size), batch_param="batch_size")
    x = _mbv2_conv(b, x, 32, 3, 2, 1, "features.0")
    cin, idx = 32, 1
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1)):
        for r in range(n):
            stride, path, hidden = s if r == 0 else 1, f"features.{idx}.conv", cin * t
            y, j = x, 0
            if t != 1:
                y, j = _mbv2_conv(b, y, hidden, 1, 1, 1, f"{path}.0"), 1
            y = _mbv2_conv(b, y, hidden, 3, stride, hidden, f"{path}.{j}")
            residual = stride == 1 and cin == c
            y = b.conv(y, c, 1, scope=f"{path}.{j + 1}", gain=0.5 if residual else 1.0, bias_std=0.1)
            x = b.add(x, y, f"features.{idx}") if residual else y
            cin, idx = c, idx + 1
    x = _mbv2_conv(b, x, 1280, 1, 1, 1, "features.18")
    x = b.torch_flatten(b.gap(x))
    x = b.dropout(x, 0.2, "classifier.0")
    out = b.gemm(x, 1000, "classifier.1", std=0.01, out="output")
    return b.model([out], doc="MobileNetV2 (torch 2 export, opset 13), random weights")


def build_squeezenet1_1(size: int, seed: int = 0) -> onnx.ModelProto:
    """SqueezeNet 1.1, caffe2 model-zoo style, opset 10.

    Fire modules, MaxPool with ceil_mode=1 (opset 10 is the first to have it), Dropout with its mask output,
    a 1x1 conv10 head, GlobalAveragePool, Flatten, Softmax; the weights are listed as graph inputs too.
    """
    b = GraphBuilder("squeezenet", style="caffe2", opset=10, seed=seed)
    x = b.input("data_0", (1, 3, size, size))
    x = b.relu(b.conv(x, 64, 3, 2, scope="conv1"), "conv1")
    x = b.maxpool(x, 3, 2, ceil="attr", scope="pool1")
    for fire, (squeeze, expand) in enumerate(((16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192),
                                              (64, 256), (64, 256)), start=2):
        f = f"fire{fire}"
        s = b.relu(b.conv(x, squeeze, 1, scope=f"{f}/squeeze1x1"), f"{f}/squeeze1x1")
        e1 = b.relu(b.conv(s, expand, 1, scope=f"{f}/expand1x1"), f"{f}/expand1x1")
        e3 = b.relu(b.conv(s, expand, 3, 1, 1, scope=f"{f}/expand3x3"), f"{f}/expand3x3")
        x = b.concat([e1, e3], scope=f"{f}/concat")
        if fire in (3, 5):
            x = b.maxpool(x, 3, 2, ceil="attr", scope=f"pool{fire}")
    x = b.dropout(x, 0.5, "drop9", mask=True)
    x = b.relu(b.conv(x, 1000, 1, scope="conv10", gain=0.5), "conv10")
    x = b.flatten(b.gap(x, "pool10"), "pool10")
    out = b.softmax(x, "softmaxout")
    return b.model([out], doc="SqueezeNet 1.1 (caffe2 model-zoo style), random weights", ir_version=5,
                   initializers_as_inputs=True)


def _shuffle_branch(b: GraphBuilder, x: str, oc: int, stride: int, path: str, entry: bool) -> str:
    """branch2 (1x1, depthwise 3x3, 1x1) or, with ``entry``, branch1 (depthwise 3x3 stride 2, 1x1)."""
    if not entry:
        x = b.relu(b.bn(b.conv(x, oc, 1, bias=False, scope=f"{path}.0"), f"{path}.1"))
    first = 0 if entry else 3
    c = b.shapes[x][1]
    x = b.conv(x, c, 3, stride, 1, group=c, bias=False, scope=f"{path}.{first}", gain=1.0)
    x = b.bn(x, f"{path}.{first + 1}")
    x = b.conv(x, oc, 1, bias=False, scope=f"{path}.{first + 2}")
    return b.relu(b.bn(x, f"{path}.{first + 3}", gamma=(0.5, 1.0)))


def build_shufflenet_v2(size: int, seed: int = 0) -> onnx.ModelProto:
    """ShuffleNetV2 x1.0, torch 1.x export of torchvision's, opset 11, symbolic batch.

    Channel split as Split, depthwise 3x3 + BatchNormalization branches, Concat, channel shuffle as
    Reshape [-1, 2, C/2, H, W] -> Transpose [0, 2, 1, 3, 4] -> Reshape [-1, C, H, W], x.mean([2, 3]) as ReduceMean.
    """
    b = GraphBuilder("torch-jit-export", style="torch", opset=11, seed=seed)
    x = b.input("input", (1, 3, size, size), batch_param="N")
    x = b.relu(b.bn(b.conv(x, 24, 3, 2, 1, bias=False, scope="conv1.0"), "conv1.1"))
    x = b.maxpool(x, 3, 2, 1)
    for stage, (oc, repeats) in enumerate(((116, 4), (232, 8), (464, 4)), start=2):
        for i in range(repeats):
            path = f"stage{stage}.{i}"
            if i == 0:
                halves = [_shuffle_branch(b, x, oc // 2, 2, f"{path}.branch1", True),
                          _shuffle_branch(b, x, oc // 2, 2, f"{path}.branch2", False)]
            else:
                keep, rest = b.split(x, [oc // 2, oc // 2])
                halves = [keep, _shuffle_branch(b, rest, oc // 2, 1, f"{path}.branch2", False)]
            _, c, h, w = b.shapes[halves[0]]
            x = b.reshape(b.concat(halves), [-1, 2, c, h, w])
            x = b.reshape(b.transpose(x, [0, 2, 1, 3, 4]), [-1, 2 * c, h, w])
    x = b.relu(b.bn(b.conv(x, 1024, 1, bias=False, scope="conv5.0"), "conv5.1"))
    out = b.gemm(b.reduce_mean(x, [2, 3]), 1000, "fc", std=0.01, out="output")
    return b.model([out], doc="ShuffleNetV2 x1.0 (torch 1.x export, opset 11), random weights")


def build_densenet121(size: int, seed: int = 0) -> onnx.ModelProto:
    """DenseNet-121, model-zoo (caffe) names, opset 9.

    Pre-activation dense layers (BN-Relu-Conv1x1 128-BN-Relu-Conv3x3 32) concatenated one at a time; the stem,
    transition and final batch norms are written as Mul and Add of Unsqueeze'd per-channel vectors, the dense
    layers' as BatchNormalization; transitions end in AveragePool 2x2/2.
    """
    b = GraphBuilder("densenet121", style="caffe2", opset=9, seed=seed)
    x = b.input("data_0", (1, 3, size, size))
    x = b.relu(b.bn_as_mul_add(b.conv(x, 64, 7, 2, 3, bias=False, scope="conv1"), "conv1/bn"), "relu1")
    x = b.maxpool(x, 3, 2, 1, scope="pool1")
    for block, layers in enumerate((6, 12, 24, 16), start=2):
        for i in range(1, layers + 1):
            name = f"conv{block}_{i}"
            y = b.relu(b.bn(x, f"{name}/x1/bn"), f"relu{block}_{i}/x1")
            y = b.relu(b.bn(b.conv(y, 128, 1, bias=False, scope=f"{name}/x1"), f"{name}/x2/bn"), f"relu{block}_{i}/x2")
            y = b.conv(y, 32, 3, 1, 1, bias=False, scope=f"{name}/x2")
            x = b.concat([x, y], scope=f"concat_{block}_{i}")
        x = b.relu(b.bn_as_mul_add(x, f"conv{block}_blk/bn"), f"relu{block}_blk")
        if block < 5:
            x = b.conv(x, b.shapes[x][1] // 2, 1, bias=False, scope=f"conv{block}_blk")
            x = b.avgpool(x, 2, 2, scope=f"pool{block}")
    x = b.flatten(b.gap(x, "pool5"), "pool5")
    out = b.gemm(x, 1000, "fc6", std=0.01)
    return b.model([out], doc="DenseNet-121 (model-zoo style), random weights")


_INCEPTION = {"3a": (64, 96, 128, 16, 32, 32), "3b": (128, 128, 192, 32, 96, 64), "4a": (192, 96, 208, 16, 48, 64),
              "4b": (160, 112, 224, 24, 64, 64), "4c": (128, 128, 256, 24, 64, 64), "4d": (112, 144, 288, 32, 64, 64),
              "4e": (256, 160, 320, 32, 128, 128), "5a": (256, 160, 320, 32, 128, 128),
              "5b": (384, 192, 384, 48, 128, 128)}


def _inception(b: GraphBuilder, x: str, name: str) -> str:
    c1, r3, c3, r5, c5, proj = _INCEPTION[name]
    p = f"inception_{name}"

    def conv_relu(y: str, oc: int, k: int, scope: str) -> str:
        return b.relu(b.conv(y, oc, k, 1, k // 2, scope=f"{p}/{scope}"), f"{p}/{scope}")

    branches = [conv_relu(x, c1, 1, "1x1"), conv_relu(conv_relu(x, r3, 1, "3x3_reduce"), c3, 3, "3x3"),
                conv_relu(conv_relu(x, r5, 1, "5x5_reduce"), c5, 5, "5x5"),
                conv_relu(b.maxpool(x, 3, 1, 1, scope=f"{p}/pool"), proj, 1, "pool_proj")]
    return b.concat(branches, scope=f"{p}/output")


def build_googlenet(size: int, seed: int = 0) -> onnx.ModelProto:
    """GoogLeNet (Inception v1, bvlc), caffe-style names, opset 9.

    LRN, nine inception modules, caffe's ceil-mode MaxPools written as extra end pads ([0, 0, 1, 1] at 224),
    AveragePool 7x7 when the last map is 7x7 (GlobalAveragePool otherwise), Dropout, Reshape [1, -1], Softmax.
    """
    b = GraphBuilder("googlenet", style="caffe2", opset=9, seed=seed)
    x = b.input("data_0", (1, 3, size, size))
    x = b.relu(b.conv(x, 64, 7, 2, 3, scope="conv1/7x7_s2"), "conv1/7x7_s2")
    x = b.lrn(b.maxpool(x, 3, 2, ceil="pads", scope="pool1/3x3_s2"), scope="pool1/norm1")
    x = b.relu(b.conv(x, 64, 1, scope="conv2/3x3_reduce"), "conv2/3x3_reduce")
    x = b.lrn(b.relu(b.conv(x, 192, 3, 1, 1, scope="conv2/3x3"), "conv2/3x3"), scope="conv2/norm2")
    x = b.maxpool(x, 3, 2, ceil="pads", scope="pool2/3x3_s2")
    for group, pool in (("3ab", "pool3/3x3_s2"), ("4abcde", "pool4/3x3_s2"), ("5ab", None)):
        for letter in group[1:]:
            x = _inception(b, x, group[0] + letter)
        if pool:
            x = b.maxpool(x, 3, 2, ceil="pads", scope=pool)
    h, w = b.shapes[x][2:]
    x = b.avgpool(x, 7, 1, scope="pool5/7x7_s1") if (h, w) == (7, 7) else b.gap(x, "pool5/7x7_s1")
    x = b.reshape(b.dropout(x, 0.4, "pool5/drop_7x7_s1", mask=True), [1, -1], "pool5/drop_7x7_s1")
    out = b.softmax(b.gemm(x, 1000, "loss3/classifier", std=0.01), "prob")
    return b.model([out], doc="GoogLeNet / Inception v1 (caffe-style), random weights")


# torchvision's VGG feature extractors: output channels of each 3x3 conv, "M" a 2x2/2 max pool
VGG_LAYERS = {
    16: (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"),
    19: (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"),
}


def build_vgg16(size: int, seed: int = 0) -> onnx.ModelProto:
    """VGG-16, torch 1.x export of torchvision's, opset 11.

    The adaptive average pool is left out (the identity at 224), so the first Gemm takes 512 * (size // 32) ** 2
    features.
    """
    return _build_vgg(16, size, seed)


def build_vgg19(size: int, seed: int = 0) -> onnx.ModelProto:
    """VGG-19 (configuration E: 16 convs), torch 1.x export of torchvision's, opset 11; as VGG-16 otherwise."""
    return _build_vgg(19, size, seed)


def _build_vgg(depth: int, size: int, seed: int) -> onnx.ModelProto:
    b = GraphBuilder("torch-jit-export", style="torch", opset=11, seed=seed)
    x = b.input("input", (1, 3, size, size))
    i = 0
    for item in VGG_LAYERS[depth]:
        if item == "M":
            x, i = b.maxpool(x, 2, 2), i + 1
        else:
            x, i = b.relu(b.conv(x, int(item), 3, 1, 1, scope=f"features.{i}")), i + 2
    x = b.flatten(x)
    for index in (0, 3):
        x = b.dropout(b.relu(b.gemm(x, 4096, f"classifier.{index}")), 0.5)
    out = b.gemm(x, 1000, "classifier.6", std=0.01, out="output")
    return b.model([out], doc=f"VGG-{depth} (torch 1.x export, opset 11), random weights")


def build_alexnet(size: int, seed: int = 0) -> onnx.ModelProto:
    """AlexNet (bvlc), caffe2 model-zoo style, opset 9.

    Grouped convs (2 groups), LRN, caffe's ceil-mode pools as end pads, a static Reshape to [1, K] before fc6,
    Dropout with mask outputs, Softmax; the weights are listed as graph inputs too (IR 4).
    """
    b = GraphBuilder("alexnet", style="caffe2", opset=9, seed=seed)
    x = b.input("data_0", (1, 3, size, size))
    x = b.lrn(b.relu(b.conv(x, 96, 11, 4, scope="conv1"), "conv1"), scope="norm1")
    x = b.maxpool(x, 3, 2, ceil="pads", scope="pool1")
    x = b.lrn(b.relu(b.conv(x, 256, 5, 1, 2, group=2, scope="conv2"), "conv2"), scope="norm2")
    x = b.maxpool(x, 3, 2, ceil="pads", scope="pool2")
    for name, oc, group in (("conv3", 384, 1), ("conv4", 384, 2), ("conv5", 256, 2)):
        x = b.relu(b.conv(x, oc, 3, 1, 1, group=group, scope=name), name)
    x = b.maxpool(x, 3, 2, ceil="pads", scope="pool5")
    _, c, h, w = b.shapes[x]
    x = b.reshape(x, [1, c * h * w], "pool5")
    for fc in ("fc6", "fc7"):
        x = b.dropout(b.relu(b.gemm(x, 4096, fc), fc), 0.5, f"drop{fc[-1]}", mask=True)
    out = b.softmax(b.gemm(x, 1000, "fc8", std=0.01), "prob")
    return b.model([out], doc="AlexNet (bvlc, caffe2 model-zoo style), random weights", ir_version=4,
                   initializers_as_inputs=True)


def build_yolov3_tiny(size: int, seed: int = 0) -> onnx.ModelProto:
    """YOLOv3-tiny from its darknet cfg, yolo_to_onnx names, opset 11, two outputs.

    Conv + BatchNormalization + LeakyRelu(0.1), a stride-1 MaxPool 2x2 with pads [0, 0, 1, 1], Resize-11
    nearest x2 (empty roi, scales input), two 255-channel heads at size/32 and size/16.
    """
    if size % 32:
        raise ValueError(f"yolov3_tiny: size must be a multiple of 32 (the upsampled route is concatenated), "
                         f"got {size}")
    b = GraphBuilder("yolov3-tiny", style="darknet", opset=11, seed=seed)
    x = b.input("images", (1, 3, size, size))

    def cbl(y: str, layer: int, oc: int, k: int) -> str:
        name = f"{layer:03d}_convolutional"
        y = b.bn(b.conv(y, oc, k, 1, k // 2, bias=False, scope=name), f"{name}_bn", gamma=(0.5, 1.2))
        return b.leaky_relu(y, 0.1, f"{name}_lrelu")

    layer = 1
    for oc in (16, 32, 64, 128, 256, 512):
        x = cbl(x, layer, oc, 3)
        if oc == 256:
            route = x
        last = oc == 512
        x = b.maxpool(x, 2, 1 if last else 2, [0, 0, 1, 1] if last else 0, scope=f"{layer + 1:03d}_maxpool")
        layer += 2
    x = cbl(cbl(x, 13, 1024, 3), 14, 256, 1)
    head1 = b.conv(cbl(x, 15, 512, 3), 255, 1, scope="016_convolutional", gain=1.0)
    x = b.resize_nearest(cbl(x, 19, 128, 1), 2, "020_upsample")
    x = cbl(b.concat([x, route], scope="021_route"), 22, 256, 3)
    head2 = b.conv(x, 255, 1, scope="023_convolutional", gain=1.0)
    return b.model([head1, head2], doc="YOLOv3-tiny (darknet cfg, opset 11), random weights")


NETWORKS: dict[str, tuple[Callable[..., onnx.ModelProto], int]] = {
    "resnet50": (build_resnet50, 224),
    "mobilenetv2": (build_mobilenetv2, 224),
    "squeezenet1_1": (build_squeezenet1_1, 224),
    "shufflenet_v2": (build_shufflenet_v2, 224),
    "densenet121": (build_densenet121, 224),
    "googlenet": (build_googlenet, 224),
    "vgg16": (build_vgg16, 224),
    "vgg19": (build_vgg19, 224),
    "alexnet": (build_alexnet, 224),
    "yolov3_tiny": (build_yolov3_tiny, 416),
}

# Smallest input size each network accepts (yolov3_tiny: multiples of 32 only).
MIN_SIZES = {"resnet50": 1, "mobilenetv2": 1, "squeezenet1_1": 25, "shufflenet_v2": 1, "densenet121": 29,
             "googlenet": 47, "vgg16": 32, "vgg19": 32, "alexnet": 55, "yolov3_tiny": 32}


def build(name: str, size: int | None = None, seed: int = 0) -> onnx.ModelProto:
    """Build network ``name`` at ``size`` (its default when None) with weights seeded by ``seed``."""
    if name not in NETWORKS:
        raise KeyError(f"unknown network {name!r}; choose from {', '.join(NETWORKS)}")
    function, default = NETWORKS[name]
    size = default if size is None else size
    if size < MIN_SIZES[name]:
        raise ValueError(f"{name}: the smallest input size is {MIN_SIZES[name]}, got {size}")
    return function(size, seed)

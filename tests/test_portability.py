"""Compiled code keeps every rule of isa.md section 7 on every golden configuration.

Every example kernel, the reference yardsticks and networks imported from
ONNX are compiled for each golden configuration and run with the
portability lint watching: no warning may remain (notes are facts about one
design that portable code need not avoid; shifts by tensors are data). The
hand-written assembly examples are held to the same rules.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vtacc.frontend.check import check_source
from vtacc.program_builder import compile_file
from vtasm.asm.assembler import assemble_file

from .portable import lint_run
from .vtacc.harness import CONFIGS, config
from .vtasm.paths import REPO, SHARED, require

EXAMPLES = sorted((REPO / "examples").glob("*.vk"))
YARDSTICKS = ("resnet18_full.vk", "pooling.vk", "eltwise.vk")
FIXED_TILES = {"resnet_c8.vk"}  # its schedule block fixes tiles that only 1x16x16 and 1x32x32 accumulators hold


def compiled_lint(path: Path, cfg_name: str) -> list[str]:
    program = compile_file(check_source(path.read_text(), str(path)), config(cfg_name)).program
    return lint_run(program)


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_kernel_lints_clean(path, cfg):
    if path.name in FIXED_TILES and cfg in ("batch2", "block8"):
        pytest.skip(f"{path.name} fixes its tiles for the default configuration; they overflow {cfg}'s buffers")
    assert compiled_lint(path, cfg) == []


@pytest.mark.slow
@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("name", YARDSTICKS)
def test_the_yardsticks_lint_clean(name, cfg):
    if name != "resnet18_full.vk" and cfg != "default":
        pytest.skip("compiled on the default configuration only (several seconds each); ResNet-18 on all")
    assert compiled_lint(require(SHARED / "perf" / name), cfg) == []


@pytest.mark.parametrize("path", sorted((REPO / "examples").glob("*.vasm")), ids=lambda p: p.name)
def test_hand_written_assembly_lints_clean(path):
    program = assemble_file(str(path))
    assert lint_run(program) == []


onnx = pytest.importorskip("onnx")


def small_cnn(path: Path, rng: np.random.Generator) -> Path:
    """A digits-sized CNN: conv-relu-pool, conv-relu, global pool, dense (odd channel counts included)."""
    from onnx import TensorProto, helper, numpy_helper

    def w(*shape):
        return rng.normal(0, 0.3, shape).astype(np.float32)

    inits = {"w1": w(20, 1, 3, 3), "b1": w(20), "w2": w(36, 20, 3, 3), "b2": w(36), "wf": w(10, 36), "bf": w(10)}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    graph = helper.make_graph(nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                  [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


@pytest.mark.parametrize("cfg", CONFIGS)
def test_an_imported_network_lints_clean(tmp_path, cfg):
    from vtacc.model import compile_model

    rng = np.random.default_rng(3)
    path = small_cnn(tmp_path / "cnn.onnx", rng)
    model = compile_model(path, config(cfg), rng.normal(0, 1, (8, 1, 8, 8)))
    assert lint_run(model.compiled.program) == []

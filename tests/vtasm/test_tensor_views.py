"""Tensor views with ``view`` (reshape before tiling) and ``groups`` (block-diagonal weights), packed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from vtasm.asm.assembler import assemble
from vtasm.asm.disassembler import disassemble
from vtasm.config import default_config
from vtasm.errors import AsmError, FormatError
from vtasm.formats.meta import build_meta, meta_from_json
from vtasm.formats.vbin import read_vbin, write_vbin
from vtasm.program import TensorInfo


def test_view_tiles_a_flattened_weight_as_its_convolution_shape():
    # w[o, c*4 + h*2 + x] for c in 0..1, h, x in 0..1: tiled as [O, C, H, W] with tile (1, 2, 1, 1) the
    # packed order is o, (c block), h, x, then c inside the block
    w = np.arange(8, dtype=np.int8).reshape(1, 8)
    info = TensorInfo("w", "int8", (1, 8), (1, 2, 1, 1), view=(1, 2, 2, 2))
    packed = np.frombuffer(info.pack(w), dtype=np.int8)
    # element (c, h, x) sits at c*4 + h*2 + x; one block holds c = 0, 1 at the same (h, x)
    assert packed.tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    assert np.array_equal(info.unpack(info.pack(w)), w)


def test_groups_spread_depthwise_weights_on_the_diagonal():
    w = np.array([1, 2, 3, 4], dtype=np.int8).reshape(4, 1, 1, 1)  # 4 groups of one channel
    info = TensorInfo("w", "int8", (4, 1, 1, 1), (2, 2, 1, 1), groups=(4, 2))
    assert info.stored_shape == (4, 2, 1, 1)
    packed = np.frombuffer(info.pack(w), dtype=np.int8).reshape(2, 1, 2, 2)  # [OC/2, IC/2, 2, 2]
    # output 0 reads channel 0 of its pair, output 1 channel 1, output 2 channel 0 of the next pair, ...
    assert packed[0, 0].tolist() == [[1, 0], [0, 2]]
    assert packed[1, 0].tolist() == [[3, 0], [0, 4]]
    assert np.array_equal(info.unpack(info.pack(w)), w)


def test_views_survive_the_vbin_and_the_assembly_text():
    text = """
.tensor w int8[4, 8] tile(2, 2, 1, 1) view [4, 2, 2, 2]
.tensor d int8[4, 1, 3, 3] tile(2, 2, 1, 1) groups(4, 2)
.text
    finish
"""
    program = assemble(text, "views.vasm", default_config())
    again = read_vbin(write_vbin(program))
    assert again.tensors == program.tensors
    assert {t.name: (t.view, t.groups) for t in again.tensors} == {"w": ((4, 2, 2, 2), None),
                                                                   "d": (None, (4, 2))}
    listing = disassemble(again)
    assert "view [4, 2, 2, 2]" in listing and "groups(4, 2)" in listing


@pytest.mark.parametrize("line, message", [
    (".tensor w int8[4, 8] tile(2, 2, 1, 1) view [4, 2, 2, 3]", "does not hold the 32 elements"),
    (".tensor d int8[4, 2, 3, 3] tile(2, 2, 1, 1) groups(3, 2)", "groups=3 must divide the 4 output channels"),
    (".tensor d int8[4, 2, 3, 3] tile(2, 2, 1, 1) groups(2, 3)", "multiple of the 2 channels per group"),
])
def test_bad_views_are_refused(line, message):
    with pytest.raises(AsmError, match=message):
        assemble(line + "\n.text\n    finish\n", "bad.vasm", default_config())


def test_a_vbin_with_a_bad_view_is_refused():
    program = assemble(".tensor w int8[4, 8] tile(2, 2, 1, 1) view [4, 2, 2, 2]\n.text\n    finish\n", "v.vasm",
                       default_config())
    meta = build_meta(program)
    meta["tensors"][0]["view"] = [4, 2, 2, 3]
    with pytest.raises(FormatError, match="does not hold"):
        meta_from_json(meta, "META")

"""Tensors laid out as a convolution's patches (TensorInfo.patches): packed as the windows a convolution reads,
checked element by element against the definition, and carried by every format (vbin, raw, assembly)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vtasm.asm.assembler import assemble
from vtasm.asm.disassembler import disassemble
from vtasm.config import default_config
from vtasm.errors import AsmError, FormatError
from vtasm.formats.meta import build_meta, meta_from_json
from vtasm.formats.raw import export_raw, load_program
from vtasm.formats.vbin import read_vbin, write_vbin
from vtasm.program import TensorInfo


def _windows_by_definition(x: np.ndarray, k: int, stride: int, pad: int) -> np.ndarray:
    """[N, K*K*C, Ho, Wo]: channel (ky*K + kx)*C + c of (yo, xo) is x[c, yo*stride - pad + ky, xo*stride - pad + kx]."""
    n, c, h, w = x.shape
    ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    out = np.zeros((n, k * k * c, ho, wo), dtype=x.dtype)
    for ky, kx, ch, yo, xo in itertools.product(range(k), range(k), range(c), range(ho), range(wo)):
        y, xx = yo * stride - pad + ky, xo * stride - pad + kx
        if 0 <= y < h and 0 <= xx < w:
            out[:, (ky * k + kx) * c + ch, yo, xo] = x[:, ch, y, xx]
    return out


@pytest.mark.parametrize("shape, patches", [
    ((1, 3, 11, 13), (7, 2, 3)),  # a stem: 147 channels in 10 blocks
    ((2, 3, 9, 9), (3, 1, 1)),
    ((1, 1, 17, 17), (5, 2, 2)),
    ((1, 4, 10, 7), (3, 3, 0)),  # a stride that skips the last column
    ((1, 2, 6, 6), (1, 2, 0)),
])
def test_packed_as_the_windows_a_convolution_reads(shape, patches):
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    info = TensorInfo("x", "int8", shape, (1, 16, 1, 1), patches=patches)
    assert info.layout_problem() is None
    want = _windows_by_definition(x, *patches)
    assert info.stored_shape == want.shape
    blocks = -(-want.shape[1] // 16)
    padded = np.zeros((want.shape[0], blocks * 16) + want.shape[2:], dtype=np.int8)
    padded[:, : want.shape[1]] = want
    packed = np.frombuffer(info.pack(x), dtype=np.int8).reshape(want.shape[0], blocks, *want.shape[2:], 16)
    assert np.array_equal(packed, padded.reshape(want.shape[0], blocks, 16, *want.shape[2:]).transpose(0, 1, 3, 4, 2))
    back = info.unpack(info.pack(x))  # every element some window holds; the rest zero
    k, stride, pad = patches
    covered = np.zeros(shape, dtype=bool)
    ho, wo = want.shape[2:]
    for ky, kx in itertools.product(range(k), range(k)):
        rows = [yo * stride - pad + ky for yo in range(ho)]
        cols = [xo * stride - pad + kx for xo in range(wo)]
        for y, xx in itertools.product(rows, cols):
            if 0 <= y < shape[2] and 0 <= xx < shape[3]:
                covered[:, :, y, xx] = True
    assert np.array_equal(back[covered], x[covered]) and not back[~covered].any()


def test_weights_as_patches_are_the_taps_channel_last():
    w = np.arange(2 * 3 * 2 * 2, dtype=np.int8).reshape(2, 3, 2, 2)
    info = TensorInfo("w", "int8", w.shape, (16, 16, 1, 1), patches=(2, 1, 0))
    assert info.stored_shape == (2, 12, 1, 1)
    stored = np.frombuffer(info.pack(w), dtype=np.int8).reshape(16, 16)[:2, :12]  # one 16x16 tile
    assert np.array_equal(stored, w.transpose(0, 2, 3, 1).reshape(2, 12))
    assert np.array_equal(info.unpack(info.pack(w)), w)


PROGRAM = """
.tensor x int8[1, 3, 9, 9] tile(1, 16, 1, 1) patches(3, 2, 1)
.tensor w int8[16, 3, 3, 3] tile(16, 16, 1, 1) patches(3, 1, 0)
.text
    finish
"""


def test_patches_survive_the_vbin_the_raw_directory_and_the_assembly(tmp_path):
    program = assemble(PROGRAM, "p.vasm", default_config())
    assert [t.patches for t in program.tensors] == [(3, 2, 1), (3, 1, 0)]
    assert read_vbin(write_vbin(program)).tensors == program.tensors
    export_raw(program, tmp_path / "raw")
    assert load_program(tmp_path / "raw").tensors == program.tensors
    listing = disassemble(program)
    assert "patches(3, 2, 1)" in listing and "patches(3, 1, 0)" in listing
    assert assemble(listing, "again.vasm", default_config()).tensors == program.tensors


@pytest.mark.parametrize("line, message", [
    (".tensor x int8[1, 3, 2, 2] tile(1, 16, 1, 1) patches(5, 1, 0)", "a 5x5 patch does not fit the 2x2 array"),
    (".tensor x int8[3, 9, 9] tile(16, 1, 1) patches(3, 1, 1)", r"patches lay out a 4-D array"),
    (".tensor x int8[1, 3, 9, 9] tile(1, 16, 1, 1) patches(0, 1, 1)", "a patch size must be at least 1, got 0"),
    (".tensor x int8[1, 3, 9, 9] tile(1, 16, 1, 1) patches(3, 1, -1)", "a patch padding must not be negative"),
])
def test_bad_patches_are_refused(line, message):
    with pytest.raises(AsmError, match=message):
        assemble(line + "\n.text\n    finish\n", "bad.vasm", default_config())


def test_a_vbin_with_bad_patches_is_refused():
    meta = build_meta(assemble(PROGRAM, "p.vasm", default_config()))
    meta["tensors"][0]["patches"] = [3, 2]
    with pytest.raises(FormatError, match=r"tensors\[0\]\.patches: must be \[K, stride, pad\]"):
        meta_from_json(meta, "META")
    meta["tensors"][0]["patches"] = [3, 0, 1]
    with pytest.raises(FormatError, match="patches .K, stride, pad. must be positive"):
        meta_from_json(meta, "META")

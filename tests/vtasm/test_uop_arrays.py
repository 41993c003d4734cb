"""The vectorised micro-op encoder and decoder agree with the one-word bitstruct codec."""

from __future__ import annotations

import numpy as np
import pytest

from vtasm.config import load_config
from vtasm.encoding import codec_for

from .paths import GOLDEN, require


@pytest.mark.parametrize("name", ["default", "batch2", "block8", "block32", "uop14"])
def test_uop_arrays_match_single_words(name):
    codec = codec_for(load_config(require(GOLDEN / f"{name}.config.json")))
    words = np.random.default_rng(1).integers(0, 2**32, 2000, dtype=np.uint64).astype("<u4")
    data = words.tobytes()
    decoded = codec.decode_uops(data)
    assert decoded == [codec.decode_uop(data[i:i + 4]) for i in range(0, len(data), 4)]
    assert [u.raw for u in decoded] == [codec.decode_uop(data[i:i + 4]).raw for i in range(0, len(data), 4)]
    assert codec.encode_uops(decoded) == data  # the decoded list keeps its words
    assert codec.encode_uops(list(decoded)) == data  # and the vectorised encoder rebuilds them from the fields
    assert decoded[-1] == decoded[len(decoded) - 1] and decoded[2:5] == list(decoded)[2:5]
    canonical = [type(u)(u.dst_idx, u.src_idx, u.wgt_idx) for u in decoded]
    assert codec.encode_uops(canonical) == b"".join(codec.encode_uop(u) for u in canonical)

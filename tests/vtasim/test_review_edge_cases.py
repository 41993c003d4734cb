"""Review of the simulator's fast paths against the reference interpreter and closed forms.

The random programs of test_reference_equivalence use loops of at most 3 x 3
and kernels of at most 4 micro-ops; these tests reach what they cannot: GEMM
im2col products long enough for the float64 path and for 32-bit wrapping,
im2col with many weight-sequence classes (up to and past MAX_IM2COL_CLASSES)
and unequal class sizes, kernels sharing a cached structure at different
offsets, and deep ALU chains and folds over 8 x 8 loops.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from vtasim.core.gemm import MAX_IM2COL_CLASSES
from vtasim.core.machine import run_program

from .builders import (
    ACC,
    ADD,
    INP,
    OUT,
    SHR,
    UOP,
    WGT,
    Image,
    alu,
    chain,
    config,
    elem_bytes,
    gemm,
    int32_bytes,
    load,
    store,
    uops,
)
from .test_reference_equivalence import assert_same


def _wrap32(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def _constant_gemm(cfg, iters, inp_value, wgt_values, table, wgt_factors=(0, 0)):
    """inp and wgt filled with constants (one value per weight tile); reset acc 0..1, then one GEMM."""
    img = Image(cfg)
    img.add("inp", np.full(4 * elem_bytes(cfg, INP), inp_value, np.int8).tobytes())
    img.add("wgt", np.asarray(wgt_values, np.int8).repeat(elem_bytes(cfg, WGT)).tobytes())
    insns = [load(UOP, 0, img.uop_elem(), len(table)), load(INP, 0, img.elem("inp", INP), 4),
             load(WGT, 0, img.elem("wgt", WGT), len(wgt_values)), gemm(0, len(table), reset=1),
             gemm(0, len(table), iters, wgt=wgt_factors)]
    return img.program(chain(insns), uops(*table))


@pytest.mark.parametrize("name, iters", [("default", (90, 100)), ("default", (1, 16383)), ("default", (16383, 1)),
                                         ("block32", (90, 100)), ("batch4", (16383, 1))])
def test_long_im2col_sums_use_exact_float64_and_wrap(name, iters):
    """9000+ products of -128 * -128 per lane into one accumulator: beyond 2^24 and 2^31."""
    cfg = config(name)
    taps = iters[0] * iters[1]
    result = run_program(_constant_gemm(cfg, iters, -128, [-128] * 4, [(0, 0, 0)]))
    assert (result.state.acc[0] == _wrap32(taps * cfg.block_in * 128 * 128)).all()
    # two destinations with different weight sequences: two im2col classes
    result = run_program(_constant_gemm(cfg, iters, -128, [-128, 127, -128, 127], [(0, 0, 0), (1, 0, 1)]))
    assert (result.state.acc[0] == _wrap32(taps * cfg.block_in * 128 * 128)).all()
    assert (result.state.acc[1] == _wrap32(-taps * cfg.block_in * 128 * 127)).all()


def _classes_program(cfg, n_dst, taps, mode, seed):
    """Each destination d gets ``taps`` products, and a weight sequence that depends on ``mode``:

    - "distinct": its own sequence (one im2col class per destination, or the grouped fallback past
      MAX_IM2COL_CLASSES);
    - "uneven": three classes of sizes 1, 1 and n_dst - 2 (im2col classes of unequal sizes);
    - "unequal_taps": its own sequence, and one more product for odd d (the grouped path, with weight
      groups of unequal sizes).
    """
    rng = random.Random(seed)
    img = Image(cfg)
    img.add("inp", rng.randbytes(16 * elem_bytes(cfg, INP)))
    img.add("wgt", rng.randbytes(16 * elem_bytes(cfg, WGT)))
    out_addr = img.add("out", bytes(n_dst * elem_bytes(cfg, OUT)))
    table = []
    for d in range(n_dst):
        key = min(d, 2) if mode == "uneven" else d
        for t in range(taps + (d % 2 if mode == "unequal_taps" else 0)):
            digit = (key >> (4 * t)) % 16 if t < 2 else (5 * key + t) % 16  # distinct sequences for key < 256
            table.append((d, rng.randrange(16), digit))
    insns = [load(UOP, 0, img.uop_elem(), len(table)), load(INP, 0, img.elem("inp", INP), 16),
             load(WGT, 0, img.elem("wgt", WGT), 16), gemm(0, len(table), reset=1), gemm(0, len(table)),
             store(0, out_addr // elem_bytes(cfg, OUT), n_dst)]
    return img.program(chain(insns), uops(*table))


@pytest.mark.parametrize("n_dst, mode", [(2, "distinct"), (MAX_IM2COL_CLASSES, "distinct"),
                                         (MAX_IM2COL_CLASSES + 6, "distinct"), (9, "uneven"),
                                         (MAX_IM2COL_CLASSES, "unequal_taps")])
@pytest.mark.parametrize("name", ["default", "batch2"])
def test_gemm_weight_sequence_classes_match_reference(name, n_dst, mode):
    assert_same(_classes_program(config(name), n_dst, 3, mode, seed=n_dst))


def test_shifted_kernels_share_structure_but_not_data():
    """The same kernel shape at two micro-op offsets and destinations, with different weights in between."""
    cfg = config("batch2")
    rng = random.Random(5)
    img = Image(cfg)
    img.add("inp", rng.randbytes(32 * elem_bytes(cfg, INP)))
    img.add("wgt", rng.randbytes(16 * elem_bytes(cfg, WGT)))
    out_addr = img.add("out", bytes(24 * elem_bytes(cfg, OUT)))
    conv = [(0, 0, 0), (0, 1, 1), (1, 1, 0), (1, 2, 1)]  # two destinations, two taps each, two classes
    table = conv + [(d + 8, s + 5, w + 2) for d, s, w in conv]
    insns = [load(UOP, 0, img.uop_elem(), len(table)), load(INP, 0, img.elem("inp", INP), 32),
             load(WGT, 0, img.elem("wgt", WGT), 8), gemm(0, 4, (3, 2), dst=(2, 0), src=(4, 1), wgt=(0, 0)),
             gemm(4, 8, (3, 2), dst=(2, 0), src=(4, 1), wgt=(0, 0)),
             load(WGT, 0, img.elem("wgt", WGT) + 8, 8),
             gemm(4, 8, (3, 2), dst=(2, 0), src=(4, 1), wgt=(0, 0)), gemm(0, 4, (3, 2), dst=(2, 0), src=(4, 1)),
             store(0, out_addr // elem_bytes(cfg, OUT), 24)]
    assert_same(img.program(chain(insns), uops(*table)))


def _deep_program(cfg, rng: random.Random, kind: str):
    """Loops up to 8 x 8 over a small index range: long ALU chains, folds and overlapping GEMM sums."""
    img = Image(cfg)
    img.add("inp", rng.randbytes(64 * elem_bytes(cfg, INP)))
    img.add("wgt", rng.randbytes(32 * elem_bytes(cfg, WGT)))
    lanes = cfg.batch * cfg.block_out
    values = [rng.choice([rng.randint(-50, 50), rng.choice([-(1 << 31), (1 << 31) - 1, 7, -1]),
                          rng.randint(-(1 << 31), (1 << 31) - 1)]) for _ in range(64 * lanes)]
    img.add("acc", int32_bytes(values))
    out_addr = img.add("out", bytes(64 * elem_bytes(cfg, OUT)))
    span = 6 if kind == "alu" else 16
    table = []
    for _ in range(24):
        d = rng.randrange(span)
        s = d + rng.randint(-3, 3) if rng.random() < 0.5 else rng.randrange(span)
        table.append((d, max(0, s), rng.randrange(8)))
    body = []
    for _ in range(rng.randint(1, 6)):
        bgn = rng.randrange(23)
        end = rng.randint(bgn + 1, min(24, bgn + 8))
        iters = (rng.randint(1, 8), rng.randint(1, 8))
        factors = [0, 0, 1, 1, 2, 3] if kind == "alu" else [0, 0, 1, 2, 3, 5]

        def f(factors=factors):
            return rng.choice(factors)

        if kind == "gemm" or (kind == "mix" and rng.random() < 0.5):
            body.append(gemm(bgn, end, iters, (f(), f()), (f(), f()), (f(), f()), reset=int(rng.random() < 0.1)))
        else:
            op = rng.randrange(5)
            imm = None if rng.random() < 0.6 else rng.choice([rng.randint(-40, 40), rng.randint(-32768, 32767)])
            body.append(alu(ADD if op == SHR and imm is None else op, bgn, end, iters, (f(), f()), (f(), f()), imm))
    insns = [load(UOP, 0, img.uop_elem(), 24), load(INP, 0, img.elem("inp", INP), 64),
             load(WGT, 0, img.elem("wgt", WGT), 32), load(ACC, 0, img.elem("acc", ACC), 64), *body,
             store(0, out_addr // elem_bytes(cfg, OUT), 64)]
    return img.program(chain(insns), uops(*table))


@pytest.mark.parametrize("name", ["default", "batch2", "block8"])
@pytest.mark.parametrize("kind", ["alu", "gemm", "mix"])
def test_deep_loops_match_reference(name, kind):
    cfg = config(name)
    for seed in range(8):
        assert_same(_deep_program(cfg, random.Random(f"{name}-{kind}-{seed}"), kind))

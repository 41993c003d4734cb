"""Kernels met again at another place in the buffers (inorder.py moves the plan made the first time).

A compiler runs the same kernel on many tiles: the same loop fields and the
same micro-ops up to a constant offset per index. The in-order run plans such a
kernel once and moves its plan (loops.moved) with what the units derived from
it (gemm.carry_layout, alu.carry_facts). These programs place kernels at many
offsets, some of them past the end of a buffer, and compare the in-order run
with the pipeline (which plans every instruction itself) and with the reference
interpreter; the moved facts are also compared with facts derived afresh.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from vtasim.core.alu import _reduce, _waves, alu_strategy, carry_facts
from vtasim.core.gemm import _gemm_layout, carry_layout
from vtasim.core.inorder import InOrderRun
from vtasim.core.loops import PlanCache, moved
from vtasim.core.machine import Machine
from vtasim.core.state import new_state
from vtasm import isa

from .builders import ADD, CONFIGS, MAX, MIN, MUL, OUT, SHR, UOP, alu, chain, config, gemm, load, store, uops
from .test_inorder_adversarial import _image, check


def _pattern(rng: random.Random, n_uops: int, span: int) -> list[tuple[int, int, int]]:
    """A kernel's micro-ops relative to its first one: affine, or with a few irregular ones."""
    ds, ss, ws = rng.choice([0, 1, 1, 2]), rng.choice([0, 1, 2, -1]), rng.choice([0, 0, 1])
    rel = [(ds * k, ss * k, ws * k) for k in range(n_uops)]
    for _ in range(rng.choice([0, 0, 1, 2])):
        rel[rng.randrange(n_uops)] = (rng.randrange(span), rng.randrange(-2, span), rng.randrange(3))
    return rel


def _moved_program(cfg, rng: random.Random):
    """One or two kernels, each placed at several offsets (micro-op ranges side by side in one table,
    or reloaded over the same range); offsets near the ends of the buffers fault on some seeds."""
    img = _image(cfg, rng.randrange(1 << 30), 144)
    n = 48
    u = img.uop_elem()
    table: list[tuple[int, int, int]] = []
    top = {f.name: (1 << f.width) - 1 for f in isa.layout("uop", cfg)}  # what a micro-op field holds
    body = []
    for _ in range(rng.randint(1, 2)):
        n_uops = rng.choice([1, 2, 3, 4])
        rel = _pattern(rng, n_uops, 6)
        iters = (rng.randint(1, 3), rng.randint(1, 3))
        fo, fi = rng.choice([0, 1, 4, 8]), rng.choice([0, 1, 2])
        kind = rng.choice(["gemm", "reset", "alu_imm", "alu", "alu_hazard"])
        op = rng.choice([MIN, MAX, ADD, SHR, MUL])
        imm = rng.choice([-3, 0, 5, 31])
        for _ in range(rng.randint(2, 4)):
            delta = rng.choice([0, 1, -1, 2]) if kind == "alu_hazard" else rng.randint(8, 20)  # src - dst
            far = rng.random() < 0.1
            d0 = cfg.acc_depth - rng.randint(1, 12) if far else rng.randrange(0, 16)
            s0 = max(0, d0 + delta) if kind.startswith("alu") and kind != "alu_imm" else rng.randrange(0, 16)
            w0 = rng.randrange(max(1, min(cfg.wgt_depth, 12) - 3))
            placed = [(min(top["dst_idx"], max(0, d0 + a)), min(top["src_idx"], max(0, s0 + b)),
                       min(cfg.wgt_depth - 1, max(0, w0 + c))) for a, b, c in rel]
            bgn = len(table)
            table += placed
            if kind in ("gemm", "reset"):
                body.append(gemm(bgn, bgn + n_uops, iters, (fo, fi), (fo, fi + 1), (0, rng.choice([0, 1])),
                                 reset=int(kind == "reset")))
            else:
                body.append(alu(op, bgn, bgn + n_uops, iters, (fo, fi), (fo, fi),
                                imm if kind == "alu_imm" else None))
    order = body[:]
    rng.shuffle(order)
    program_body = [load(UOP, 0, u, len(table))]
    for insn in order + order[: rng.randint(0, len(order))]:
        program_body.append(insn)
        if rng.random() < 0.2:
            program_body.append(store(rng.randint(0, n - 8), img.elem("out", OUT) + rng.randint(0, 100), 8))
    program_body.append(store(0, img.elem("out", OUT) + 64, n))
    return img.program(chain(program_body), uops(*table))


@pytest.fixture
def moves(monkeypatch) -> list[bool]:
    """Whether each kernel the in-order run looked up among those met before was found there and moved (by
    the Python units: the compiled loop, which would run most of these kernels itself, is off)."""
    monkeypatch.setenv("VTASIM_NATIVE", "0")
    seen: list[bool] = []
    original = InOrderRun._moved_kernel

    def spy(self, *args):
        work = original(self, *args)
        seen.append(work is not None)
        return work

    monkeypatch.setattr(InOrderRun, "_moved_kernel", spy)
    return seen


@pytest.mark.parametrize("name", CONFIGS)
def test_kernels_placed_at_many_offsets_run_alike_and_match_the_reference(name, moves):
    cfg = config(name)
    outcomes = set()
    for seed in range(80):
        program = _moved_program(cfg, random.Random(f"moved-{name}-{seed}"))
        outcomes.add(check(program, reference=seed < 20)[0])
    assert outcomes == {"ok", "fault"}  # both kinds of placement were met
    assert sum(moves) > 50 and not all(moves)


def test_a_moved_kernel_is_used_and_a_misplaced_one_faults_as_in_the_pipeline(moves):
    cfg = config("default")
    img = _image(cfg)
    last = cfg.acc_depth - 1
    table = [(0, 0, 0), (1, 2, 1), (8, 16, 2), (9, 18, 3), (last - 1, 0, 0), (last, 2, 1)]
    program = img.program(chain([load(UOP, 0, img.uop_elem(), 6), gemm(0, 2, (2, 1), (2, 0), (1, 0)),
                                 gemm(2, 4, (2, 1), (2, 0), (1, 0)), store(0, img.elem("out", OUT), 16)]),
                          uops(*table))
    Machine(program).run()
    assert moves == [False, True]  # the second GEMM is the first one moved by (8, 16, 2)
    assert check(program)[0] == "ok"
    # the same kernel once more, placed where its second iteration leaves the accumulator
    bad = img.program(chain([load(UOP, 0, img.uop_elem(), 6), gemm(0, 2, (2, 1), (2, 0), (1, 0)),
                             gemm(4, 6, (2, 1), (2, 0), (1, 0))]), uops(*table))
    moves.clear()
    outcome = check(bad)
    assert outcome[0] == "fault" and "acc index" in outcome[1] and outcome[2] == 2
    assert moves == [False, False]  # met before, but moved out of the accumulator: left to the unit


def _random_plan(state, rng: np.random.Generator, gemm_kind: bool):
    """A whole-instruction plan over micro-ops written straight into the state."""
    n = int(rng.integers(1, 6))
    for f in ("dst", "src", "wgt"):
        getattr(state, f"uop_{f}")[:n] = rng.integers(0, 8, n)
    fields = {"uop_bgn": 0, "uop_end": n, "iter_out": int(rng.integers(1, 4)), "iter_in": int(rng.integers(1, 4)),
              "dst_factor_out": int(rng.choice([0, 1, 3])), "dst_factor_in": int(rng.choice([0, 1, 8])),
              "src_factor_out": int(rng.choice([0, 2])), "src_factor_in": int(rng.choice([0, 1])),
              "wgt_factor_out": int(rng.choice([0, 1])), "wgt_factor_in": 0}
    kind = "gemm" if gemm_kind else "alu"
    from vtasm.encoding import make_instruction

    extra = {} if gemm_kind else {"alu_opcode": 2, "use_imm": 0, "imm": 0}
    if gemm_kind:
        insn = make_instruction(kind, reset=0, **fields, **extra)
    else:
        fields.pop("wgt_factor_out")
        fields.pop("wgt_factor_in")
        insn = make_instruction(kind, **fields, **extra)
    return PlanCache().plan(state, insn)


def test_moved_facts_equal_facts_found_afresh():
    """carry_layout / carry_facts against the units' own derivation on the moved indices."""
    rng = np.random.default_rng(11)
    cfg = config("default")
    for trial in range(300):
        state = new_state(_image(cfg).program([]))
        gemm_kind = trial % 2 == 0
        template = _random_plan(state, rng, gemm_kind)
        by = [int(x) for x in rng.integers(0, 50, 3)]
        apart = not gemm_kind and trial % 4 == 2  # src moved away from every dst
        if not gemm_kind:
            by[1] = by[0] + int(template.dst.max()) - int(template.src.min()) + 1 + by[2] if apart else by[0]
        lanes = cfg.block_in * cfg.block_out
        if gemm_kind:
            _gemm_layout(template, lanes)
            plan, fresh = moved(template, *by), moved(template, *by)
            carry_layout(template, plan, *by)
            carried, afresh = dict(plan.extra["gemm"]), dict(_gemm_layout(fresh, lanes))
            if carried.get("shared_src") is not None:  # every class reads the shared patches: the per-class
                for key in ("src", "stacked_src"):  # grids are not carried (nothing reads them)
                    assert carried.pop(key) is None
                    afresh.pop(key)
            assert _same(carried, afresh)
        else:
            use_imm = trial % 4 == 1
            for op in (ADD, MIN, MUL):
                alu_strategy(template, op, use_imm)
            _waves(template, use_imm)
            _reduce(state, template, ADD, use_imm, 1)
            plan, fresh = moved(template, *by), moved(template, *by)
            op = (ADD, MIN, MUL, SHR, MAX)[trial % 5]
            carry_facts(template, plan, by[0], by[1], op)
            for checked in ((op,) if apart else (ADD, MIN, MUL)):
                assert alu_strategy(plan, checked, use_imm) == alu_strategy(fresh, checked, use_imm)
            if not apart:
                assert _same(_waves(plan, use_imm), _waves(fresh, use_imm))
            _reduce(state, fresh, ADD, use_imm, 1)
            assert _same(plan.extra["by_dst"], fresh.extra["by_dst"])


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b)
    return a == b


def test_kernels_stay_exact_when_the_budgets_let_prepared_kernels_and_templates_go(monkeypatch, moves):
    """Budgets so small that nearly every kept kernel lets the others go (prepared ones and templates
    on their own budgets): every run still matches the pipeline."""
    import vtasim.core.inorder as inorder

    monkeypatch.setattr(inorder, "CACHE_LANES", 96)
    monkeypatch.setattr(inorder, "TEMPLATE_LANES", 48)
    cfg = config("default")
    for seed in range(30):
        check(_moved_program(cfg, random.Random(f"budget-{seed}")))
    assert any(moves)


def test_moved_kernels_count_their_indices_so_the_cache_stays_within_its_budget(monkeypatch):
    """Kernels of one shape with new micro-op words each time (an immediate ALU never reads src or wgt) are
    moved, not planned, and run on the generic path, which makes their indices: counted from the start,
    they keep the prepared kernels within the budget (uncounted, 16,000 of them held 390 MiB)."""
    import vtasim.core.inorder as inorder

    monkeypatch.setenv("VTASIM_NATIVE", "0")  # the Python units' cache (the compiled loop keeps none)
    monkeypatch.setattr(inorder, "CACHE_LANES", 40_000)
    monkeypatch.setattr(inorder, "TEMPLATE_LANES", 20_000)
    cfg = config("default")
    img = _image(cfg)
    n = 60
    table = [t for k in range(n) for t in ((0, k, k % 7 + 1), (1, k, 0), (3, k, 0))]  # dsts 0, 1, 3: not affine
    body = [load(UOP, 0, img.uop_elem(), 3 * n)]
    body += [alu(ADD, 3 * k, 3 * k + 3, (1, 500), dst=(0, 4), imm=1) for k in range(n)]
    body.append(store(0, img.elem("out", OUT), 48))
    program = img.program(chain(body), uops(*table))
    runs: list = []
    original = InOrderRun._keep

    def keep(self, plan, op, r):
        runs.append(self)
        return original(self, plan, op, r)

    monkeypatch.setattr(InOrderRun, "_keep", keep)
    assert check(program, reference=False)[0] == "ok"
    run = runs[-1]
    assert run.held <= inorder.CACHE_LANES - inorder.TEMPLATE_LANES
    assert len(run.prepared) < 10  # 1,500 executions x 2 index lanes each: a few fill the budget

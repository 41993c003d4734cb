"""The per-network bound (vtacc/reports/bound.py): the arithmetic's own work counted from the model's shapes by hand,
never above the cycles a program takes, and printed by --explain."""

from __future__ import annotations

from pathlib import Path

import pytest

from vtacc.frontend.check import check_source
from vtacc.program_builder import compile_file
from vtacc.reports.bound import network_bound
from vtacc.reports.explain import explain
from vtasim.timing.profile import resolve_profile
from vtasm.config import default_config

from .resnet import layer_source

REPO = Path(__file__).resolve().parents[2]

STEM = """
kernel main(x: int8[1, 3, 30, 30], w: int8[32, 3, 7, 7], b: int32[32]) -> y: int8[1, 32, 15, 15] {
    y = clip((conv2d(x, w, stride=2, pad=3) >> 8) + b, 0, 127)
}
"""


def _compiled(source: str, profile: str = "chisel-2019"):
    return compile_file(check_source(source, "k.vk"), default_config(), profile=resolve_profile(profile, 16))


def test_the_stems_needs_counted_by_hand():
    nb = network_bound(_compiled(STEM))
    (need,) = nb.needs
    macs = 32 * 15 * 15 * 3 * 7 * 7  # outputs x the window's multiplies, no channel padding
    assert need.macs == macs and need.gemm == macs / 256
    assert need.resets == 32 * 15 * 15 / 16  # one per accumulator row of 16 lanes
    assert need.identity == 0
    profile = resolve_profile("chisel-2019", 16)
    assert need.compute == pytest.approx(need.gemm * profile.gemm_per_execution
                                         + need.resets * profile.gemm_reset_per_execution + need.alu_cycles)
    assert need.writes == 32 * 15 * 15  # the int8 result, once
    assert nb.bound <= nb.cycles and 0 < nb.fraction <= 1


def test_a_pooling_needs_its_window_folds_and_its_identity_moves():
    source = """
kernel main(x: int8[1, 32, 16, 16]) -> y: int8[1, 32, 8, 8] {
    y = max_pool(x, 3, stride=2, pad=1)
}
"""
    (need,) = network_bound(_compiled(source)).needs
    profile = resolve_profile("chisel-2019", 16)
    assert need.identity == 32 * 16 * 16 / 16  # every input element through the GEMM core once
    assert need.alu_cycles == 8 * (32 * 8 * 8 / 16) * profile.alu_tensor_per_execution
    assert need.resets == need.identity  # the rows they move into, zeroed first
    assert need.gemm == 0


@pytest.mark.parametrize("profile", ["chisel-2019", "chisel-2021", "hls"])
@pytest.mark.parametrize("name", ["C2", "C6", "C9", "C11"])
def test_no_program_beats_its_bound(name, profile):
    nb = network_bound(_compiled(layer_source(name)[0], profile))
    assert nb.bound <= nb.cycles
    for need in nb.needs:
        assert need.bound <= need.cycles * 1.0001


def test_explain_prints_the_bound_and_what_each_result_loses():
    compiled = _compiled((REPO / "examples" / "resnet_block.vk").read_text())
    text = explain(compiled)
    nb = network_bound(compiled)
    assert f"bound (chisel-2019): {nb.bound:,.0f} cycles, {nb.fraction:.1%} reached" in text
    assert "lost to the bound:" in text

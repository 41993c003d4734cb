"""A near-tied candidate timed on a sample of its tiles predicts what the full model says of its whole operator."""

from __future__ import annotations

import pytest

from vtacc.backend.codegen import generate
from vtacc.compiler import SAMPLE_INSTRUCTIONS, sampled_cycles
from vtacc.frontend.check import check_source
from vtacc.program_builder import compile_file
from vtacc.schedule.scheduler import schedule_operator, tile_count
from vtasim.timing.profile import resolve_profile
from vtasim.timing.run import time_program
from vtasm.config import default_config

# operators of many tiles, so that the sample is a small part of each (thousands of instructions); shapes
# unlike the yardsticks the sample size was chosen on
SOURCES = {
    "eltwise": """kernel e(x: int8[4, 96, 96, 96], s: int8[4, 96, 96, 96], c: int32[96]) -> y: int8[4, 96, 96, 96] {
    y = clip((x >> 1) + (c >> 3) - s, -128, 127)
}""",
    "pool": """kernel p(x: int8[1, 48, 120, 120]) -> m: int8[1, 48, 60, 60] {
    m = max_pool(x, 3, stride=2, pad=1)
}""",
    "conv": """kernel c(x: int8[1, 16, 224, 224], w: int8[48, 16, 3, 3], b: int32[48]) -> y: int8[1, 48, 224, 224] {
    y = clip((conv2d(x, w, stride=1, pad=1) >> 8) + b, 0, 127)
}""",
}


@pytest.mark.parametrize("profile", ["hls", "chisel-2019"])
@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_sample_predicts_the_whole_operator(name, profile):
    p = resolve_profile(profile, 16)
    cfg = default_config()
    compiled = compile_file(check_source(SOURCES[name], f"{name}.vk"), cfg, profile=p)
    plan = compiled.planned[0]
    tiles, period = tile_count(plan.op, plan.tiling, cfg)
    tensors = compiled.tensors
    whole = generate(schedule_operator(plan.op, plan.tiling, plan.needs, cfg), tensors, {}, [], cfg, "w")
    measured = time_program(whole.program, p, record=False).report.cycles
    predicted = sampled_cycles(plan.op, plan.tiling, plan.needs, cfg, tensors, p)
    assert plan.tiling.instructions > 3 * SAMPLE_INSTRUCTIONS and tiles > 3 * period  # sampled, not timed whole
    assert abs(predicted - measured) <= 0.01 * measured, (predicted, measured)


def test_a_small_operator_is_timed_whole():
    p = resolve_profile("hls", 16)
    cfg = default_config()
    src = "kernel v(a: int8[1, 16, 4, 4], b: int8[1, 16, 4, 4]) -> c: int8[1, 16, 4, 4] { c = a + b }"
    compiled = compile_file(check_source(src, "v.vk"), cfg, profile=p)
    plan = compiled.planned[0]
    whole = generate(schedule_operator(plan.op, plan.tiling, plan.needs, cfg), compiled.tensors, {}, [], cfg, "w")
    assert sampled_cycles(plan.op, plan.tiling, plan.needs, cfg, compiled.tensors, p) == \
        time_program(whole.program, p, record=False).report.cycles

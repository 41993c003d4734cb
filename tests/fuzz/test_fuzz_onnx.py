"""Mutated ONNX models given to ``vtacc``: wrong attribute types and values, bad weights, broken graphs,
unknown types, hostile names (newlines, quotes, '#', '}', terminal escapes) and external data outside the
model's folder (../, absolute paths, symlinks, a NUL byte, a FIFO, /dev/zero).

``vtacc model.onnx --calibrate cal.npy -o out.vbin`` and ``--emit vk -o out.vk`` must keep the contract,
and a name must never turn into kernel language: the .vk written holds no line an injected name made.
"""

from __future__ import annotations

import random
import re

import pytest

from .contract import Failures, run_many
from .mutators import onnx_mutations

SAMPLE = 20  # non-name mutations of the default run (besides every external-data one and the names below)
NAME_SAMPLE = 10
INJECTED = re.compile(r"^\s*(kernel\s+evil\b|y = x\s*$)", re.MULTILINE)


def _load(path):
    import onnx

    return onnx.load(str(path), load_external_data=False)


def build_case(seeds, base: str, index: int, name: str, mutate, folder):
    """Write case ``index`` of ``base`` into ``folder``: model.onnx (and its side files)."""
    folder.mkdir(parents=True)
    model = _load(seeds.vta_onnx if base == "vta" else seeds.host_onnx)
    result = mutate(model, folder)
    path = folder / "model.onnx"
    if isinstance(result, bytes):
        path.write_bytes(result)
    else:
        path.write_bytes(result.SerializeToString())
    return path


def injected(vk_path) -> list[str]:
    try:
        text = vk_path.read_text(errors="replace")
    except OSError:
        return []
    found = INJECTED.search(text)
    return [f"a hostile name became kernel language in the .vk: {found.group(0).strip()!r}"] if found else []


def run_cases(seeds, chosen, tmp_path, title) -> Failures:
    """``chosen``: (base, index, description, mutation, emit vk too). Every case compiled to a .vbin, and,
    when asked, to kernel language."""
    failures = Failures(title)
    jobs, checks = [], []
    for base, index, what, mutate, emit_vk in chosen:
        folder = tmp_path / f"{base}{index}"
        try:
            model = build_case(seeds, base, index, what, mutate, folder)
        except Exception as exc:  # noqa: BLE001 - a mutation onnx itself refuses to build is no case
            failures.items.append(_not_built(base, index, what, exc))
            continue
        out = folder / "out"
        out.mkdir()
        jobs.append(dict(args=["vtacc", model, "--calibrate", seeds.cal, "-o", out / "out.vbin"], cwd=folder))
        checks.append((f"onnx:vtacc -o .vbin ({base})", f"onnx {base} case {index}: {what}", out, None))
        if emit_vk:
            vk = folder / "vk"
            vk.mkdir()
            jobs.append(dict(args=["vtacc", model, "--calibrate", seeds.cal, "--emit", "vk", "-o", vk / "out.vk"],
                             cwd=folder))
            checks.append((f"onnx:vtacc --emit vk ({base})", f"onnx {base} case {index}: {what}", vk,
                           vk / "out.vk"))
    for (family, case, out, vk), outcome in zip(checks, run_many(jobs), strict=True):
        failures.tool(family, case, outcome, [out], extra=injected(vk) if vk is not None else ())
    return failures


def _not_built(base, index, what, exc):
    from .contract import Failure

    return Failure("onnx:fuzz-harness", f"onnx {base} case {index}: {what}",
                   [f"the fuzz suite could not build the case: {type(exc).__name__}"], str(exc)[:200], "")


def all_cases(base: str):
    return [(base, k, what, fn) for k, (what, fn) in enumerate(onnx_mutations(base))]


def default_sample():
    """Every external-data mutation and, seeded, a sample of the others and of the hostile names (those
    with --emit vk as well), on the model VTA computes whole; a few on the host model."""
    vta = all_cases("vta")
    external = [c for c in vta if "external data" in c[2]]
    names = [c for c in vta if "renamed" in c[2] or "node names" in c[2]]
    others = [c for c in vta if c not in external and c not in names]
    rng = random.Random("onnx-sample")
    chosen = [(*c, False) for c in external + rng.sample(others, SAMPLE)]
    chosen += [(*c, True) for c in rng.sample(names, NAME_SAMPLE)]
    host = [c for c in all_cases("host") if "renamed" in c[2] and "'x'" not in c[2]]
    chosen += [(*c, False) for c in rng.sample(host, 3)]
    return chosen


def test_the_seed_models_compile(seeds, tmp_path):
    for model, emit in ((seeds.vta_onnx, ["--emit", "vk", "-o", "v.vk"]), (seeds.vta_onnx, ["-o", "v.vbin"]),
                        (seeds.host_onnx, ["-o", "h.vbin"])):
        [outcome] = run_many([dict(args=["vtacc", model, "--calibrate", seeds.cal, *emit], cwd=tmp_path)])
        assert outcome.returncode == 0, outcome.err


def test_mutated_models_keep_the_contract_of_vtacc(seeds, tmp_path):
    run_cases(seeds, default_sample(), tmp_path, "ONNX models through vtacc").check()


@pytest.mark.fuzz_long
def test_long_onnx_sweep(seeds, tmp_path):
    chosen = [(*c, True) for c in all_cases("vta")] + [(*c, False) for c in all_cases("host")]
    run_cases(seeds, chosen, tmp_path, "ONNX models through vtacc (long)").check()

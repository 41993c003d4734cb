"""The fuzz tests' common driver: make the cases of a family, run them through a parser's API, pick a
sample for the commands, run it and collect the failures."""

from __future__ import annotations

from pathlib import Path

from .contract import LONG, Failures, run_api_cases, run_many
from .mutators import ABS_PROBE, PROBE, case_rng


def make_cases(data: bytes, family: str, mutate, folder, count: int, suffix: str, first: int = 0,
               targeted=None) -> list[tuple[int, str, object]]:
    """Cases ``first``.. of ``family``: (number, description, path of the mutated file). ``count`` random
    mutations, then (``targeted``: (rng, k) -> (bytes, what), and how many) every targeted one."""
    folder.mkdir(parents=True, exist_ok=True)
    made = [(k, *mutate(case_rng(family, k), data)) for k in range(first, first + count)]
    if targeted is not None:
        build, many = targeted
        made += [(f"t{k}", *build(case_rng(f"{family}-targeted", k), k)) for k in range(many)]
    cases = []
    for k, mutated, what in made:
        path = folder / f"case{k}{suffix}"
        path.write_bytes(mutated)
        cases.append((k, what, path))
    return cases


def api_run(reader: str, family: str, cases, snippet: str) -> tuple[Failures, list]:
    """Every case through the parser ``reader``; the failures and the results."""
    failures = Failures(f"{family} reader API")
    results = run_api_cases(reader, [p for _, _, p in cases])
    for (k, what, path), result in zip(cases, results, strict=True):
        failures.api(f"{family}:{reader}", f"{family} case {k}: {what}", result, snippet.format(path=path))
    return failures, results


def sample(cases, results, count: int) -> list[tuple[tuple, bool]]:
    """The cases worth running through the commands, ``count`` in all (in case order), each with whether
    to run every command on it: the cases the parser accepted (they reach what comes after it) and a few
    it refused; besides, one case per distinct way the parser broke its contract, through the first
    command only (how the command reports it: a hang there costs one timeout, not one per command; the
    default run leaves out the cases where the parser hung, already reported by the API test)."""
    accepted = [c for c, r in zip(cases, results, strict=True) if r.kind == "ok"]
    refused = [c for c, r in zip(cases, results, strict=True) if r.kind == "error"]
    broken: dict[tuple, tuple] = {}
    for c, r in zip(cases, results, strict=True):
        if r.kind == "timeout" and not LONG:  # the command hangs as well: the default run spares the time
            continue
        if r.kind not in ("ok", "error"):
            broken.setdefault((r.kind, r.type), c)
    chosen = [(c, True) for c in accepted[: max(1, count * 2 // 3)]]
    chosen += [(c, True) for c in refused[: max(0, count - len(chosen))]]
    chosen += [(c, False) for c in broken.values()]
    return sorted(chosen, key=lambda c: str(c[0][0]))


def escaped(outputs) -> list[str]:
    """A file a command wrote outside the output folder it was given (mutations name ../PROBE, /tmp/PROBE)."""
    found = [str(p) for folder in outputs for p in Path(folder).parent.glob(PROBE)]
    if Path(ABS_PROBE).exists():
        found.append(ABS_PROBE)
        Path(ABS_PROBE).unlink()
    return [f"wrote outside its output folder: {', '.join(found)}"] if found else []


def tools_run(title: str, family: str, chosen, commands, tmp_path) -> Failures:
    failures = Failures(title)
    jobs, checks = [], []
    for (k, what, path), every in chosen:
        for args, outputs, allowed in commands(path, tmp_path / f"out{k}")[: None if every else 1]:
            jobs.append(dict(args=args, cwd=tmp_path))
            checks.append((f"{family}:{args[0]} {args[1]}", f"{family} case {k}: {what}", outputs, allowed))
    for (fam, case, outputs, allowed), outcome in zip(checks, run_many(jobs), strict=True):
        failures.tool(fam, case, outcome, outputs, allowed, escaped(outputs))
    return failures


def seed_keeps_the_contract(title: str, commands: list, cwd) -> None:
    """Every command on the unmutated seed succeeds and keeps the contract (else the mutations prove little)."""
    failures = Failures(title)
    for args, outputs, allowed in commands:
        [outcome] = run_many([dict(args=args, cwd=cwd)])
        assert outcome.returncode == 0, outcome.err
        failures.tool("seed", "the seed", outcome, outputs, allowed)
    failures.check()

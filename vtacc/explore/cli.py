"""`vtacc explore SPEC.toml -o DIR`: sweep VTA variants over workloads on Dask."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from vtasm.cli_support import FILE, reports_errors, traceback_option
from vtasm.errors import UsageError
from vtasm.fileio import write_atomic


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("spec_path", metavar="SPEC.toml", type=FILE)
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Results directory: points.csv (+ .parquet), summary.txt, pareto-*.png. Rerunning the same "
                   "spec into it resumes: finished points are not computed again.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes of the local Dask cluster (default: one per core).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Use an existing Dask cluster, e.g. tcp://10.0.0.5:8786, instead of a local one.")
@click.option("--no-progress", is_flag=True, help="No progress bar (a summary is printed at the end).")
@click.option("--no-pictures", is_flag=True, help="Do not draw the Pareto pictures.")
@traceback_option
@reports_errors
def explore(spec_path: str, out_dir: str, workers: int | None, scheduler: str | None, no_progress: bool,
            no_pictures: bool) -> None:
    """Compile and time every point of SPEC.toml's design space: workloads x configurations x hardware
    x schedule settings (docs/explore.md).

    Exit codes: 0 every point has a row, 1 bad spec (file:line named), 2 usage error, 70 some points failed
    (a toolchain error; rerun to retry them), 130 interrupted (rerun to resume).
    """
    from .pareto import draw_fronts, front_text
    from .results import ResultTable
    from .spec import load_spec
    from .sweep import Progress, run_points, start_client, stop_client

    if workers is not None and scheduler is not None:
        raise UsageError("--workers sizes the local cluster; an existing one (--scheduler) has its own workers")
    spec = load_spec(spec_path)
    table = ResultTable(out_dir, {p.key for p in spec.points})
    todo = [p for p in spec.points if p.key not in table.rows]
    click.echo(f"{spec.path}: {len(spec.points)} points ({len(spec.workloads)} workloads); "
               f"{len(spec.points) - len(todo)} finished earlier, {len(todo)} to compute"
               + (f"; {table.stale} rows of other points set aside in points-stale.csv" if table.stale else ""),
               err=True)
    interrupted = False
    if todo:
        client = start_client(scheduler, workers)
        progress = Progress(len(todo), show=not no_progress)
        try:
            run_points(todo, client, table, progress.update)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            progress.close()
            table.close()
            stop_client(client)
    else:
        table.close()
    rows = [table.rows[p.key] for p in spec.points if p.key in table.rows]
    table.write_parquet()
    summary = _summary(rows, len(spec.points)) + front_text(rows)
    write_atomic(Path(out_dir) / "summary.txt", summary)
    click.echo(summary, nl=False)
    if not no_pictures:
        try:
            paths = draw_fronts(rows, out_dir, spec.title)
            click.echo("pictures: " + ", ".join(str(p) for p in paths) if paths else
                       "no pictures: no point finished, so there is no front to draw", err=True)
        except ImportError:
            click.echo("no pictures: matplotlib is not installed (pip install 'vta-toolchain[plot]')", err=True)
    else:
        earlier = sorted(Path(out_dir).glob("pareto-*.png"))
        if earlier:  # left as they were: say they may not show this table
            click.echo(f"pictures not drawn (--no-pictures); {', '.join(p.name for p in earlier)} in {out_dir} "
                       "are from an earlier run", err=True)
    if interrupted:
        click.echo(f"interrupted: {len(rows)} of {len(spec.points)} points done; run the same command again "
                   "to resume", err=True)
        sys.exit(130)
    if any(r["status"] == "failed" for r in rows):
        click.echo("error: some points failed (a toolchain error, see the reason column of points.csv); "
                   "run again to retry them", err=True)
        sys.exit(70)


def _summary(rows: list[dict], total: int) -> str:
    from .evaluate import STATUSES

    counts = {s: sum(1 for r in rows if r["status"] == s) for s in STATUSES}
    text = f"{len(rows)} of {total} points: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + "\n"
    compile_s = sum(r["compile_s"] or 0 for r in rows if r["status"] == "ok")
    timing_s = sum(r["timing_s"] or 0 for r in rows if r["status"] == "ok")
    if counts["ok"]:
        text += (f"per finished point: compile {compile_s / counts['ok']:.3f} s, timing model "
                 f"{timing_s / counts['ok']:.3f} s\n")
    reasons = sorted({r["reason"] for r in rows if r["status"] != "ok"})
    for reason in reasons[:5]:
        text += f"  not run: {_clipped(reason, 160)}\n"
    if len(reasons) > 5:
        text += f"  ... and {len(reasons) - 5} other reasons (points.csv)\n"
    return text


def _clipped(text: str, limit: int) -> str:
    """``text`` cut at a word boundary within ``limit`` characters, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "\u2026"

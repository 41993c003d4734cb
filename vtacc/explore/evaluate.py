"""One point of a design space -> one row: check the configuration, compile, time.

A point whose configuration or hardware values are not valid is a row with
status ``invalid`` and the reason; a workload the compiler refuses on that
configuration (it does not fit, say) is ``refused`` with the compiler's
message. Both are results, kept like any other. ``failed`` means the
toolchain itself broke (a bug); such rows are computed again on a rerun.
"""

from __future__ import annotations

import os
import time
import traceback

from vtasim.timing.profile import with_overrides
from vtasim.timing.run import time_program
from vtasm.config import LOG_KEYS, config_from_dict
from vtasm.errors import ConfigError, VtaError

from .spec import Point

STATUSES = ("ok", "invalid", "refused", "failed")
COLUMNS = (
    "key", "workload", "config", *LOG_KEYS, "hardware", "profile", "bus_bytes", "latency", "clock_mhz", "threads",
    "status", "reason", "cycles", "time_us", "gops", "peak_gops", "gemm_utilisation", "alu_utilisation", "macs",
    "macs_per_cycle", "peak_macs_per_cycle", "dram_read_bytes", "dram_write_bytes", "onchip_bytes",
    "instructions", "compile_s", "timing_s", "worker",
)


def onchip_bytes(config: dict) -> int:
    """The four on-chip buffers' bytes (micro-op, input, weight, accumulator): an area proxy."""
    return sum(1 << config[f"LOG_{name}_BUFF_SIZE"] for name in ("UOP", "INP", "WGT", "ACC"))


def identity(point: Point) -> dict:
    """The columns that name a point (everything but its results)."""
    config = dict(point.config)
    hw = point.hardware
    return {"key": point.key, "workload": point.workload.name, "config": point.config_label, **config,
            "hardware": hw.label, "profile": hw.profile.name, "bus_bytes": hw.value("bus_bytes"),
            "latency": hw.value("latency"), "clock_mhz": hw.value("clock_mhz"),
            "threads": point.threads, "onchip_bytes": onchip_bytes(config)}


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:400]


def evaluate(point: Point) -> dict:
    """Compile and time one point; never raises (a broken point is a ``failed`` row)."""
    from vtacc.frontend.check import check_source
    from vtacc.program_builder import compile_file

    row = identity(point)
    row["worker"] = os.getpid()
    try:
        cfg = config_from_dict(dict(point.config), "configuration")
        profile = with_overrides(point.hardware.profile, dict(point.hardware.overrides))
    except ConfigError as exc:
        return {**row, "status": "invalid", "reason": _one_line(exc.render().removeprefix("configuration: "))}
    started = time.perf_counter()
    try:
        checked = check_source(point.workload.source, point.workload.filename, point.workload.kernel)
        # a sweep runs its points side by side already: one process per point
        compiled = compile_file(checked, cfg, point.workload.kernel, profile, threads=point.threads, jobs=1)
    except VtaError as exc:
        return {**row, "status": "refused", "reason": _one_line(exc.render().splitlines()[0]),
                "compile_s": round(time.perf_counter() - started, 4)}
    except Exception as exc:  # noqa: BLE001 - a toolchain bug becomes a row, not a lost sweep
        return {**row, "status": "failed", "reason": _one_line(_internal(exc))}
    compiled_at = time.perf_counter()
    try:
        report = time_program(compiled.program, profile, record=False).report
    except Exception as exc:  # noqa: BLE001
        return {**row, "status": "failed", "reason": _one_line(_internal(exc))}
    done = time.perf_counter()
    return {
        **row, "status": "ok", "reason": "", "cycles": report.cycles, "time_us": round(report.seconds * 1e6, 3),
        "gops": round(report.gops, 4), "peak_gops": round(report.peak_gops, 4),
        "gemm_utilisation": round(report.gemm_utilisation, 5), "alu_utilisation": round(report.alu_utilisation, 5),
        "macs": report.macs, "macs_per_cycle": round(report.macs / report.cycles, 4) if report.cycles else 0.0,
        "peak_macs_per_cycle": report.peak_macs_per_cycle, "dram_read_bytes": report.read_bytes,
        "dram_write_bytes": report.write_bytes, "instructions": len(compiled.program.instructions),
        "compile_s": round(compiled_at - started, 4), "timing_s": round(done - compiled_at, 4),
    }


def _internal(exc: BaseException) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    place = f" at {os.path.basename(where.filename)}:{where.lineno}" if where else ""
    return f"internal error {type(exc).__name__}{place}: {exc}"


def failed_row(point: Point, reason: str) -> dict:
    """The row of a point whose run was lost (its worker died too often, say)."""
    return {**identity(point), "status": "failed", "reason": _one_line(reason)}

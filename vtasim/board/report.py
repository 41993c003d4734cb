"""A board's measurements beside the timing model: each launch's wall time (and, on the Chisel shell, the
device's own cycle count) next to the cycles and time the model predicts for that design."""

from __future__ import annotations

from dataclasses import dataclass

from vtasm.program import Program


@dataclass(frozen=True)
class Row:
    """One launch: measured on the device, predicted by the model."""

    name: str
    seconds: float
    device_cycles: int | None
    model_cycles: int
    model_seconds: float


def rows(launches: list[tuple[str, Program, float, int | None]], profile) -> list[Row]:
    """Each (name, program, measured seconds, device cycles) beside the model under ``profile``."""
    from vtasim.timing.run import time_program

    out = []
    for name, program, seconds, cycles in launches:
        model = time_program(program, profile, record=False).report.cycles
        out.append(Row(name, seconds, cycles, model, model / (profile.clock_mhz * 1e6)))
    return out


def table(found: list[Row], profile, where: str) -> str:
    """The rows as `vtasim run --board --timing` prints them."""
    width = max([len("launch")] + [len(r.name) for r in found])
    lines = [f"measured on {where}, beside the {profile.name} timing model ({profile.clock_mhz:g} MHz)",
             f"{'launch':<{width}}  {'wall time':>12}  {'device cycles':>14}  {'model cycles':>13}  {'model time':>12}"]
    for r in found:
        device = f"{r.device_cycles:,}" if r.device_cycles is not None else "-"
        lines.append(f"{r.name:<{width}}  {r.seconds * 1e3:>9.3f} ms  {device:>14}  {r.model_cycles:>13,}  "
                     f"{r.model_seconds * 1e3:>9.3f} ms")
    if len(found) > 1:
        total = sum(r.seconds for r in found)
        cycles = [r.device_cycles for r in found]
        device = f"{sum(cycles):,}" if all(c is not None for c in cycles) else "-"
        lines.append(f"{'total':<{width}}  {total * 1e3:>9.3f} ms  {device:>14}  "
                     f"{sum(r.model_cycles for r in found):>13,}  {sum(r.model_seconds for r in found) * 1e3:>9.3f} ms")
    return "\n".join(lines) + "\n"

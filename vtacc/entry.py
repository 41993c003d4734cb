"""The `vtacc` command as installed (vtasm.entry: a short process's quicker start and end)."""

from __future__ import annotations

from vtasm.entry import run_command


def main() -> None:
    """Run `vtacc`."""

    def load():
        from vtacc.cli import main as cli

        return cli

    run_command(load, "vtacc")

"""`vtacc`: compile the kernel language to VTA assembly or a .vbin."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from vtasm.cli_support import config_option, refuse_overwriting, reports_errors, traceback_option
from vtasm.config import resolve_config
from vtasm.errors import UsageError
from vtasm.fileio import write_atomic

EMITS = ("asm", "checked", "schedule", "ir", "dump")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write assembly (.vasm) or, for a .vbin name, the assembled program (default: assembly on stdout).")
@click.option("--kernel", "kernel_name",
              help="Kernel to compile (default: 'main' if present, else the last one); only it and the kernels "
                   "it calls are checked.")
@click.option("--emit", type=click.Choice(EMITS), default="asm", show_default=True,
              help="Stage to print: the checked program, the tiled schedule, both ('ir'), the assembly, "
                   "or the runtime's instruction dump.")
@click.option("--explain", is_flag=True, help="Report the tiling, buffer occupancy, counts and DRAM traffic.")
@config_option
@traceback_option
@reports_errors
@click.version_option(package_name="vta-toolchain")
def main(source: str, output: str | None, kernel_name: str | None, emit: str, explain: bool,
         config_path: str | None) -> None:
    """Compile SOURCE (.vk) for VTA.

    Exit codes: 0 success, 1 bad input (error at file:line:col), 2 usage error,
    70 internal error.
    """
    from vtacc.frontend.check import load_kernels

    refuse_overwriting(output, source)
    wants_binary = bool(output) and Path(output).suffix.lower() == ".vbin"
    if wants_binary and emit != "asm":
        raise UsageError(f"-o {output}: a .vbin holds the program; --emit {emit} prints text, "
                         "so give it a text file name or no -o")
    checked = load_kernels(source, kernel_name)
    if emit == "checked" and not explain:
        _write(output, _checked_text(checked, kernel_name))
        return
    from .program_builder import compile_file

    compiled = compile_file(checked, resolve_config(config_path), kernel_name)
    if explain:  # beside the main output: on stdout when that goes to a file, else on stderr
        from .explain import explain as explain_text

        click.echo(explain_text(compiled), nl=False, err=output is None)
    if emit == "checked":
        _write(output, _checked_text(checked, kernel_name))
    elif emit in ("schedule", "ir"):
        from vtacc.schedule.steps import format_groups

        text = format_groups(compiled.groups)
        if emit == "ir":
            text = "# checked program\n" + _checked_text(checked, kernel_name) + "\n# tiled schedule\n" + text
        _write(output, text)
    elif emit == "dump":
        from vtasm.formats.dump import dump_instructions

        _write(output, dump_instructions(compiled.program))
    elif wants_binary:
        from vtasm.formats.vbin import save_vbin

        save_vbin(compiled.program, output)
    else:
        from .emit import assembly

        _write(output, assembly(compiled, Path(source).name, checked.source))


def _checked_text(checked, kernel_name: str | None) -> str:
    from vtacc.frontend.printer import format_checked, format_kernel

    from .program_builder import pick_entry

    if kernel_name is None:
        return format_checked(checked)
    return format_kernel(pick_entry(checked, kernel_name)) + "\n"


def _write(output: str | None, text: str) -> None:
    if output:
        write_atomic(output, text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":  # pragma: no cover
    main()

"""`vtasm`: assemble, disassemble, dump and convert VTA programs."""

from __future__ import annotations

from pathlib import Path

import click

from .cli_support import (
    FILE,
    config_option,
    explicit_config,
    open_program,
    refuse_overwriting,
    reports_errors,
    traceback_option,
)
from .config import resolve_config
from .fileio import write_atomic


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="vta-toolchain")
def main() -> None:
    """VTA assembler, disassembler and binary tools.

    Exit codes: 0 success, 1 bad input, 2 usage error, 70 internal error.
    """


@main.command()
@click.argument("source", type=FILE)
@click.option("-o", "--output", type=FILE,
              help="Output .vbin (default: the source with .vbin for .vasm: k.vasm -> k.vbin).")
@config_option
@traceback_option
@reports_errors
def assemble(source: str, output: str | None, config_path: str | None) -> None:
    """Assemble a .vasm file into a .vbin."""
    from vtasm.asm.assembler import assemble_file
    from vtasm.formats.vbin import save_vbin

    refuse_overwriting(output, source)
    program = assemble_file(source, explicit_config(config_path), fallback=resolve_config(None))
    save_vbin(program, output or str(Path(source).with_suffix(".vbin")))


@main.command()
@click.argument("binary", type=click.Path())
@click.option("-o", "--output", type=FILE, help="Write the assembly here (default: stdout).")
@config_option
@traceback_option
@reports_errors
def disasm(binary: str, output: str | None, config_path: str | None) -> None:
    """Print a .vbin (or raw directory) as canonical assembly."""
    from vtasm.asm.disassembler import disassemble

    refuse_overwriting(output, binary)
    text = disassemble(open_program(binary, config_path))
    if output:
        write_atomic(output, text)
    else:
        click.echo(text, nl=False)


@main.command()
@click.argument("binary", type=click.Path())
@click.option("--uops", is_flag=True, help="Also print the micro-op listing.")
@config_option
@traceback_option
@reports_errors
def dump(binary: str, uops: bool, config_path: str | None) -> None:
    """Print the VTA runtime's instruction listing (and micro-ops with --uops)."""
    from vtasm.formats.dump import dump_instructions, dump_uops
    from vtasm.formats.network import Side, load_network, network_file

    if network_file(binary):  # every launch's listing, with the network's steps between them
        net = load_network(binary)
        for k, step in enumerate(net.steps):
            if step.kind == Side.HOST:
                ops = ", ".join(f"{n.op} '{n.name}'" for n in step.nodes)
                click.echo(f"== step {k + 1}: host step '{step.name}': {ops} ==")
                continue
            click.echo(f"== step {k + 1}: VTA launch '{step.name}' ==")
            text = dump_instructions(step.program) + (dump_uops(step.program.uops) if uops else "")
            click.echo(text, nl=False)
        return
    program = open_program(binary, config_path)
    text = dump_instructions(program)
    if uops:
        text += dump_uops(program.uops)
    click.echo(text, nl=False)


@main.command("export")
@click.argument("binary", type=FILE)
@click.option("--raw", "raw_dir", required=True, type=click.Path(file_okay=False), help="Directory to write.")
@click.option("--force", is_flag=True, help="Write into a directory that is not empty.")
@config_option
@traceback_option
@reports_errors
def export_cmd(binary: str, raw_dir: str, force: bool, config_path: str | None) -> None:
    """Write a .vbin as a raw interchange directory (insn.bin, uop.bin, segments, layout.json)."""
    from vtasm.formats.raw import export_raw
    from vtasm.formats.vbin import check_config_matches, load_vbin

    program = load_vbin(binary)
    cfg = explicit_config(config_path)
    if cfg is not None:
        check_config_matches(program, cfg)
    export_raw(program, raw_dir, overwrite=force)


@main.command("import")
@click.argument("raw_dir", type=click.Path(file_okay=False))
@click.option("-o", "--output", required=True, type=FILE, help="Output .vbin.")
@config_option
@traceback_option
@reports_errors
def import_cmd(raw_dir: str, output: str, config_path: str | None) -> None:
    """Read a raw interchange directory into a .vbin."""
    from vtasm.formats.raw import import_raw
    from vtasm.formats.vbin import save_vbin

    refuse_overwriting(output, raw_dir)
    save_vbin(import_raw(raw_dir, explicit_config(config_path), fallback=resolve_config(None)), output)


if __name__ == "__main__":  # pragma: no cover
    main()

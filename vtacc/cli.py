"""`vtacc`: compile the kernel language to VTA assembly or a .vbin."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import click

from vtasim.timing.names import BUILTIN, DEFAULT
from vtasm.cli_support import FILE, config_option, refuse_overwriting, reports_errors, traceback_option
from vtasm.config import resolve_config
from vtasm.errors import FormatError, UsageError
from vtasm.fileio import write_atomic

EMITS = ("asm", "checked", "schedule", "ir", "dump", "vk")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("source", type=FILE)
@click.option("--calibrate", type=FILE, default=None, metavar="DATA.npy",
              help="ONNX models: calibration inputs ([samples, ...input shape]) that set the int8 scales.")
@click.option("--calibration-method", type=click.Choice(["mse", "max"]), default="mse", show_default=True,
              help="ONNX models: each tensor's power-of-two scale has the least squared error over the "
                   "calibration values (mse), or holds their largest magnitude (max).")
@click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=D0,D1,...",
              help="ONNX models: fix the shape of input NAME (dimensions the model leaves open, e.g. a dynamic "
                   "batch: --input-shape data=1,3,224,224); repeat for several inputs.")
@click.option("--params", type=FILE, default=None, metavar="WEIGHTS.npz",
              help="Values of some entry-kernel inputs (the weights an ONNX import wrote beside its .vk), packed "
                   "into the program.")
@click.option("-o", "--output", type=FILE,
              help="Write assembly (.vasm) or, for a .vbin name, the assembled program (default: assembly on "
                   "stdout, unless a report (--explain, --roofline) is all that was asked for).")
@click.option("--kernel", "kernel_name",
              help="Kernel to compile (default: 'main' if present, else the last one); only it and the kernels "
                   "it calls are checked.")
@click.option("--emit", type=click.Choice(EMITS), default=None,
              help="Stage to print (default asm): the checked program, the tiled schedule, both ('ir'), the "
                   "assembly, the runtime's instruction dump, or (ONNX models) the network as kernel language, "
                   "its weights written beside it as .npz.")
@click.option("--explain", is_flag=True,
              help="Report the tiling, buffer occupancy, counts, DRAM traffic, predicted cycles and bounds, on "
                   "stdout; without -o or --emit, nothing else is written.")
@click.option("--timing", "timing", default=None, metavar="PROFILE",
              help=f"Hardware profile the tiles are chosen for ({', '.join(BUILTIN)} or a .toml file; "
                   f"default {DEFAULT}).")
@click.option("--mem-latency", type=click.IntRange(min=0), default=None, metavar="N",
              help="Memory latency in cycles (overrides the profile).")
@click.option("--set", "timing_sets", multiple=True, metavar="KEY=VALUE",
              help="Override one profile value, e.g. gemm.per_execution=2.")
@click.option("--roofline", type=FILE, default=None, metavar="FILE.png",
              help="Draw each result against the profile's compute and bandwidth roofs.")
@click.option("--roofline-threads", is_flag=True,
              help="With --roofline: draw every result compiled with one and with two virtual threads.")
@config_option
@traceback_option
@reports_errors
@click.version_option(package_name="vta-toolchain")
def compile_command(source: str, calibrate: str | None, calibration_method: str, input_shapes: tuple[str, ...],
         params: str | None, output: str | None, kernel_name: str | None,
         emit: str | None, explain: bool, timing: str | None, mem_latency: int | None, timing_sets: tuple[str, ...],
         roofline: str | None, roofline_threads: bool, config_path: str | None) -> None:
    """Compile SOURCE (a .vk kernel file or an .onnx model) for VTA.

    `vtacc explore SPEC.toml -o DIR` sweeps VTA variants instead (see `vtacc explore --help`).

    Reports (--explain) go to stdout; the program or the stage --emit names
    goes to -o, or to stdout when no report alone was asked for.

    Exit codes: 0 success, 1 bad input (error at file:line:col, or the model's
    node), 2 usage error, 70 internal error.
    """
    from vtacc.frontend.check import load_kernels
    from vtasim.timing.profile import resolve_profile

    refuse_overwriting(output, source)
    if output:  # before any work: a model can take seconds to import
        from vtasim.outputs.io import check_writable

        check_writable(Path(output), "the output")
    kind = Path(source).suffix.lower()
    if kind in (".vasm", ".vbin"):  # a program already: the next tool is the one it needs
        hint = (f"assemble it with vtasm assemble {source}" if kind == ".vasm"
                else f"run it with vtasim run {source}")
        raise FormatError(f"{source}: a VTA {'assembly' if kind == '.vasm' else 'program'} file, not kernel "
                          f"language (.vk) or an ONNX model; {hint}")
    if roofline is not None:
        refuse_overwriting(roofline, source)
        if Path(roofline).suffix.lower() != ".png":
            raise UsageError(f"--roofline {roofline}: the picture's name must end in .png")
    if roofline_threads and roofline is None:
        raise UsageError("--roofline-threads draws on the --roofline picture; give --roofline FILE.png too")
    profile = resolve_profile(timing, mem_latency, timing_sets)
    # a report alone (--explain, --roofline) writes no program: the program goes where -o says, or to stdout
    # when it (or a stage, --emit) is what was asked for
    show = output is not None or emit is not None or not (explain or roofline is not None)
    emit = emit or "asm"
    wants_binary = bool(output) and Path(output).suffix.lower() == ".vbin"
    if wants_binary and emit != "asm":
        raise UsageError(f"-o {output}: a .vbin holds the program; --emit {emit} prints text, "
                         "so give it a text file name or no -o")
    if Path(source).suffix.lower() == ".onnx":
        if kernel_name is not None or params is not None:
            raise UsageError("--kernel and --params are for .vk files; an ONNX model compiles as a whole")
        _compile_onnx(source, calibrate, parse_input_shapes(input_shapes), emit, output, explain, profile,
                      config_path, roofline, roofline_threads, calibration_method, show)
        return
    if emit == "vk":
        raise UsageError(f"--emit vk writes an ONNX model as kernel language; {source} is not an .onnx model")
    if calibrate is not None:
        raise UsageError("--calibrate quantises an ONNX model; a .vk file is already in integers")
    if input_shapes:
        raise UsageError("--input-shape fixes an ONNX model's input shapes; a .vk file declares its own")
    checked = load_kernels(source, kernel_name)
    values = _read_params(params) if params is not None else None
    if emit == "checked" and not explain and roofline is None:
        _write(output, _checked_text(checked, kernel_name))
        return
    from .program_builder import compile_file

    cfg = resolve_config(config_path)
    compiled = compile_file(checked, cfg, kernel_name, profile, params=values)
    _finish(checked, compiled, cfg, kernel_name, profile, source, emit, output, explain, roofline, roofline_threads,
            show)


def _finish(checked, compiled, cfg, kernel_name, profile, source: str, emit: str, output: str | None,
            explain: bool, roofline: str | None, roofline_threads: bool, show: bool = True) -> None:
    """The outputs of one compiled program: the picture, the explanation (stdout) and, when ``show``, the
    stage asked for (to ``output``, else after the explanation on stdout)."""
    wants_binary = bool(output) and Path(output).suffix.lower() == ".vbin"
    if roofline is not None:
        _draw_roofline(checked, cfg, kernel_name, profile, compiled, roofline, roofline_threads, source)
        click.echo(f"wrote {roofline}", err=True)
    if explain:
        from .reports.explain import explain as explain_text

        click.echo(explain_text(compiled), nl=False)
    if not show:
        return
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
        from .reports.assembly import assembly

        _write(output, assembly(compiled, Path(checked.path).name, checked.source))


def _compile_onnx(source: str, calibrate: str | None, input_shapes: dict[str, tuple[int, ...]], emit: str,
                  output: str | None, explain: bool, profile, config_path: str | None, roofline: str | None,
                  roofline_threads: bool, method: str = "mse", show: bool = True) -> None:
    """Import an ONNX model; write it as kernel language (--emit vk), as a network file (-o NAME.vbin: the
    VTA launches, the host steps and the scales of the model's inputs and outputs), or show one stage of
    its program when VTA computes it whole."""
    from vtacc.frontend.check import check_source
    from vtacc.onnx import import_model

    from .model import import_and_compile

    cfg = resolve_config(config_path)
    wants_binary = bool(output) and Path(output).suffix.lower() == ".vbin"

    def one_program_only(network) -> None:
        """Stages that show one VTA program are refused, before calibration, for a network with host steps."""
        if network.on_host and (emit != "asm" or (show and not wants_binary) or roofline is not None):
            asked = f"--emit {emit}" if emit != "asm" else "--roofline" if roofline is not None else "assembly"
            raise UsageError(f"{Path(source).name} runs as VTA launches with host steps between them; {asked} "
                             "shows one VTA program: write the whole network with -o NAME.vbin (and see it with "
                             "--explain)")

    vk_name = Path(source).with_suffix(".vk").name
    if emit == "vk":
        imported = import_model(source, calibrate, input_shapes, cfg.block_out, method, one_program_only)
        click.echo(imported.report(), nl=False, err=True)
        _write_vk(imported, output, source)
        return
    model = import_and_compile(source, cfg, calibrate, profile, input_shapes, method, one_program_only)
    imported = model.imported
    click.echo(imported.report(), nl=False, err=True)
    where = (f"written by vtacc {Path(source).name} --emit vk -o {vk_name}, with the same calibration"
             if imported.whole_on_vta else "each VTA launch's own; --emit vk writes it for a model VTA computes whole")
    note = f"# the places [{vk_name}:LINE] are lines of the kernel language the model imports as ({where})\n"
    if wants_binary or (explain and not show and not imported.whole_on_vta):
        from vtasm.formats.network import save_network

        if explain:
            click.echo(note, nl=False)
            _explain_network(model)
        if wants_binary:
            save_network(model.network, output)
        return
    if explain:
        click.echo(note, nl=False)
    checked = check_source(imported.source, vk_name)
    _finish(checked, model.compiled, cfg, "main", profile, source, emit, output, explain, roofline,
            roofline_threads, show)


def _explain_network(model) -> None:
    """--explain of a network: each VTA launch's report, the host steps between them."""
    from vtasm.formats.network import Side

    from .reports.explain import explain as explain_text

    launches = iter(model.launches)
    for k, step in enumerate(model.network.steps):
        if step.kind == Side.VTA:
            click.echo(f"== step {k + 1}: VTA launch '{step.name}' ==")
            click.echo(explain_text(next(launches)), nl=False)
        else:
            ops = ", ".join(f"{n.op} '{n.name}'" for n in step.nodes)
            click.echo(f"== step {k + 1}: host step '{step.name}': {ops} ==")
    from .reports.placement import placement, summary

    click.echo(summary(placement(model)), nl=False)


def _write_vk(imported, output: str | None, source: str) -> None:
    import numpy as np

    if output is None or Path(output).suffix.lower() != ".vk":
        raise UsageError("--emit vk writes two files, NAME.vk and its weights NAME.npz: give -o NAME.vk")
    weights = Path(output).with_suffix(".npz")
    refuse_overwriting(str(weights), source)
    buffer = io.BytesIO()
    np.savez(buffer, **imported.params)
    write_atomic(weights, buffer.getvalue())
    write_atomic(output, imported.source)
    click.echo(f"wrote {output} and its weights {weights} (compile with: vtacc {output} --params {weights})",
               err=True)


def parse_input_shapes(given: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """``NAME=D0,D1,...`` options as a dict (a UsageError names the one that is malformed)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for text in given:
        name, sep, dims = text.rpartition("=")
        parts = dims.replace("x", ",").split(",")
        if not sep or not name or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
            raise UsageError(f"--input-shape {text}: expected NAME=D0,D1,... with positive dimensions, "
                             "e.g. data=1,3,224,224")
        shapes[name] = tuple(int(p) for p in parts)
    return shapes


def _read_params(path: str) -> dict:
    import numpy as np

    from vtasm.fileio import open_regular

    try:
        data = np.load(open_regular(path, "the weights"), allow_pickle=False)  # a FIFO or device refused
    except (OSError, ValueError) as exc:
        raise FormatError(f"{path}: cannot read the weights ({' '.join(str(exc).split())[:120]})") from None
    if not hasattr(data, "files"):
        raise FormatError(f"{path}: one array; --params takes an .npz of arrays named after the kernel's inputs "
                          "(numpy.savez(path, w=..., b=...))")
    with data:
        return {k: data[k] for k in data.files}


def _draw_roofline(checked, cfg, kernel_name, profile, compiled, path: str, threads: bool, source: str) -> None:
    from .program_builder import compile_file
    from .reports.roofline import draw_roofline, roofline_points

    if threads:
        series = {f"{n} thread{'s' if n > 1 else ''}": roofline_points(
            compile_file(checked, cfg, kernel_name, profile, threads=n)) for n in (1, 2)}
    else:
        series = {"as compiled": roofline_points(compiled)}
    title = (f"{Path(source).name} on {profile.name} ({cfg.describe()}, memory latency {profile.latency}, "
             f"{profile.clock_mhz:g} MHz)")
    draw_roofline(series, profile, cfg, path, title)


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


def main(argv: list[str] | None = None) -> None:
    """The `vtacc` command: `vtacc explore ...` runs a sweep, anything else compiles a file."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] == "explore":
        from vtacc.explore.cli import explore

        explore.main(args[1:], prog_name="vtacc explore")
    else:
        compile_command.main(args, prog_name="vtacc")


if __name__ == "__main__":  # pragma: no cover
    main()

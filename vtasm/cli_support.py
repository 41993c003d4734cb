"""What the three command-line tools share: error rendering and exit codes.

Exit codes: 0 success, 1 bad input (source, binary, configuration), 2 usage
error, 3 simulation fault, 70 internal error (a bug in the toolchain, or the
machine running out of memory; EX_SOFTWARE of sysexits.h). Errors print as one
line on stderr (source errors add the line and a caret); ``--traceback`` shows
the Python stack instead.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from . import budget
from .config import VTAConfig, resolve_config
from .errors import FormatError, VtaError

EXIT_OK, EXIT_BAD_INPUT, EXIT_USAGE, EXIT_FAULT = 0, 1, 2, 3
EXIT_INTERNAL = 70  # EX_SOFTWARE: never the bad-input code, which would blame the input


def traceback_option(fn: Callable) -> Callable:
    """The options every command takes with its error handling: --traceback (show the Python stack on errors)
    and --max-memory (the budget of what a file may make the tool allocate; vtasm.budget)."""
    fn = click.option("--max-memory", "max_memory", default=None, metavar="SIZE",
                      help="Memory budget for what the input files declare (tensors, DRAM, host outputs), e.g. "
                           "512M or 4G (default 1G, which fits a 2 GB board); larger declarations are refused.")(fn)
    return click.option(
        "--traceback", is_flag=True, hidden=False, help="Show the Python stack on errors (debugging)."
    )(fn)


def config_option(fn: Callable) -> Callable:
    """The --config option every tool takes."""
    return click.option(
        "--config",
        "config_path",
        type=FILE,
        default=None,
        help="vta_config.json to use (default: ./vta_config.json, else the built-in 1x16x16).",
    )(fn)


class DirectoryGiven(str):
    """A file argument that names a directory: the command reports it as bad input (one line, exit 1)."""


class FilePath(click.ParamType):
    """A file name (read or written). A directory there is bad input the command reports in one line, like a
    missing file, not a usage error."""

    name = "file"

    def convert(self, value, param, ctx):
        text = str(value)
        return DirectoryGiven(text) if os.path.isdir(text) else text


FILE = FilePath()


def reports_errors(fn: Callable) -> Callable:
    """Run a command body, turning toolchain errors into one message and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        show_stack = kwargs.pop("traceback", False)
        max_memory = kwargs.pop("max_memory", None)
        try:
            if max_memory is not None:
                budget.set_limit(budget.parse_size(max_memory))
            for value in kwargs.values():
                if isinstance(value, DirectoryGiven):
                    raise FormatError(f"{value}: a directory, where a file is expected")
            return fn(*args, **kwargs)
        except VtaError as exc:
            if show_stack:
                raise
            click.echo(exc.report(), err=True)
            sys.exit(exc.exit_code)
        except BrokenPipeError:  # the reader went away (e.g. `| head`): stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(EXIT_OK)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:  # a bug in the toolchain (or no memory left), not bad input
            if show_stack:
                raise
            click.echo(internal_error_message(exc), err=True)
            sys.exit(EXIT_INTERNAL)

    return wrapper


def internal_error_message(exc: BaseException) -> str:
    """The one line shown for an unexpected exception."""
    if isinstance(exc, MemoryError):
        detail = " ".join(str(exc).split())
        return (f"internal error: out of memory{f' ({detail})' if detail else ''}; "
                "rerun with --traceback and report it")
    detail = " ".join(f"{type(exc).__name__}: {exc}".split())
    return f"internal error: {detail} (rerun with --traceback and report it)"


def explicit_config(config_path: str | None) -> VTAConfig | None:
    """The --config file's configuration, or None when the option was not given."""
    return resolve_config(config_path) if config_path else None


def open_program(path: str, config_path: str | None, lazy_source_map: bool = False):
    """Load a .vbin or raw directory the way every CLI does.

    An explicit --config must match the program's own configuration; a raw
    directory without one uses --config, else ./vta_config.json, else the default.
    ``lazy_source_map``: a .vbin's source map is read when first used (a run that never faults never reads it).
    """
    from pathlib import Path

    from vtasm.formats.raw import load_program

    # ./vta_config.json matters only for a raw directory without its own configuration
    fallback = resolve_config(None) if Path(path).is_dir() else None
    return load_program(path, explicit_config(config_path), fallback=fallback, lazy_source_map=lazy_source_map)


def refuse_overwriting(output: str | None, source: str) -> None:
    """A usage error when an output path would replace the command's own input."""
    from .errors import UsageError
    from .fileio import same_file

    if output and same_file(output, source):
        raise UsageError(f"output {output} is the input file; choose another name")

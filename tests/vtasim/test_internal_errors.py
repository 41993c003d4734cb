"""Internal errors (toolchain bugs, no memory left) get their own exit code and one line, never code 1."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

import vtasim.core.inorder
import vtasim.core.machine
from vtasim.cli import main
from vtasm.cli_support import EXIT_BAD_INPUT, EXIT_INTERNAL, reports_errors, traceback_option
from vtasm.formats.vbin import save_vbin

from .builders import UOP, Image, chain, config, gemm, load, uops

NUMPY_OOM = "Unable to allocate 16.0 GiB for an array with shape (268402689, 16) and data type float32"


def command(exc: BaseException) -> click.Command:
    @click.command()
    @traceback_option
    @reports_errors
    def failing() -> None:
        raise exc

    return failing


def test_internal_error_code_is_not_the_bad_input_code():
    assert EXIT_INTERNAL == 70 and EXIT_INTERNAL != EXIT_BAD_INPUT


@pytest.mark.parametrize("exc, line", [
    (MemoryError(NUMPY_OOM), f"internal error: out of memory ({NUMPY_OOM}); rerun with --traceback and report it"),
    (MemoryError(), "internal error: out of memory; rerun with --traceback and report it"),
    (RuntimeError("boom\nsecond line"),
     "internal error: RuntimeError: boom second line (rerun with --traceback and report it)"),
])
def test_unexpected_exceptions_are_one_line_with_the_internal_code(exc, line):
    result = CliRunner().invoke(command(exc), [])
    assert result.exit_code == EXIT_INTERNAL
    assert result.stderr == line + "\n"
    assert "Traceback" not in result.output


def test_traceback_option_shows_the_exception():
    result = CliRunner().invoke(command(MemoryError(NUMPY_OOM)), ["--traceback"])
    assert isinstance(result.exception, MemoryError)


def test_vtasim_running_out_of_memory_exits_with_the_internal_code(tmp_path, monkeypatch):
    img = Image(config("default"))
    program = img.program(chain([load(UOP, 0, img.uop_elem(), 1), gemm(0, 1, (16383, 16383))]), uops((0, 0, 0)))
    save_vbin(program, tmp_path / "big.vbin")

    def out_of_memory(*args, **kwargs):
        raise MemoryError(NUMPY_OOM)

    monkeypatch.setattr(vtasim.core.machine, "run_gemm", out_of_memory)  # the pipeline's unit
    monkeypatch.setattr(vtasim.core.inorder, "run_gemm", out_of_memory)  # the in-order run's
    result = CliRunner().invoke(main, ["run", str(tmp_path / "big.vbin"), "--out-dir", str(tmp_path / "out")])
    assert result.exit_code == EXIT_INTERNAL
    assert result.stderr.startswith("internal error: out of memory (Unable to allocate")
    assert result.stderr.count("\n") == 1

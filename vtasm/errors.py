"""The toolchain's exception family.

Every error a user can cause is one of these, carries where it happened, and
renders as one line (plus, for source errors, the offending line and a caret).
Library code raises them; only the CLI layer prints them and picks exit codes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceSpan:
    """A position in a text file (1-based line and column)."""

    file: str
    line: int
    column: int
    source_line: str | None = None
    length: int = 1

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


def printable(text: str, keep: str = "\t") -> str:
    """``text`` with every character that is not printable (controls, a terminal's escape sequences, line
    breaks, lone surrogates) written as its Python escape, except those in ``keep``: names from a file are
    data, and reach a terminal or generated text only so."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else c.encode("unicode_escape", "backslashreplace").decode(
        "ascii") for c in text)


class VtaError(Exception):
    """Base of every error the toolchain reports to users."""

    exit_code = 1

    def __init__(self, message: str, span: SourceSpan | None = None):
        super().__init__(message)
        self.message = message
        self.span = span

    def render(self) -> str:
        """The message as shown to a user (one line, plus caret context for sources)."""
        message = printable(self.message)  # one line, whatever names it quotes
        if self.span is None:
            return message
        text = f"{printable(str(self.span))}: {message}"
        if self.span.source_line is not None:
            src = printable(self.span.source_line.rstrip("\n"))
            # keep tabs, so the caret lines up however the terminal expands them
            lead = "".join(c if c == "\t" else " " for c in src[: self.span.column - 1])
            caret = lead + "^" * max(1, self.span.length)
            text += f"\n    {src}\n    {caret}"
        return text

    def report(self) -> str:
        """What a command line prints: ``error: `` before every error's rendering (one error here)."""
        return f"error: {self.render()}"

    def __str__(self) -> str:
        return self.render()


class ConfigError(VtaError):
    """An invalid or unreadable vta_config.json."""


class AsmError(VtaError):
    """A syntax or semantic error in assembly source."""


class EncodeError(VtaError):
    """A field value that does not fit its bit width."""


class FormatError(VtaError):
    """A corrupt, truncated or mismatched .vbin or raw directory."""


class CompileError(VtaError):
    """An error in a kernel source (.vk)."""


class SimFault(VtaError):
    """A program fault detected while simulating (exit code 3); ``index`` is the instruction, if any."""

    exit_code = 3

    def __init__(self, message: str, index: int | None = None):
        super().__init__(message)
        self.index = index


class UsageError(VtaError):
    """A command-line usage error (exit code 2)."""

    exit_code = 2


class ModelError(VtaError):
    """A model file (ONNX) the importer cannot take; the message names the model and node, and ``node`` holds
    the node's name when one node is at fault (None for the model as a whole)."""

    def __init__(self, message: str, node: str | None = None):
        super().__init__(message)
        self.node = node


class SpecError(VtaError):
    """An exploration spec (``vtacc explore``) that cannot be used; the message names the file, line and key."""

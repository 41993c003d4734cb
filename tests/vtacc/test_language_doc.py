"""docs/language.md is executable: every example checks, every error shown is the real one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vtacc.frontend.check import check_source
from vtasm.errors import CompileError

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "language.md"
_FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```\n", re.S | re.M)


def blocks() -> list[tuple[str, int, str]]:
    """(language, line number, text) of every fenced block of the document."""
    text = DOC.read_text()
    return [(m.group(1), text.count("\n", 0, m.start()) + 1, m.group(2)) for m in _FENCE.finditer(text)]


EXAMPLES = [(line, text) for lang, line, text in blocks() if lang == "vk"]
BAD = [(line, text, blocks()[i + 1]) for i, (lang, line, text) in enumerate(blocks()) if lang == "vk-bad"]


def test_the_document_has_examples():
    assert len(EXAMPLES) >= 10 and len(BAD) >= 2


@pytest.mark.parametrize("line, source", EXAMPLES, ids=[f"line{line}" for line, _ in EXAMPLES])
def test_example_checks(line, source):
    checked = check_source(source, f"language.md:{line}")
    assert checked.kernels


@pytest.mark.parametrize("line, source", EXAMPLES, ids=[f"line{line}" for line, _ in EXAMPLES])
def test_example_compiles_for_the_default_configuration(line, source):
    from vtacc.program_builder import compile_file
    from vtasm.config import default_config

    checked = check_source(source, f"language.md:{line}")
    for kernel in checked.kernels:
        program = compile_file(checked, default_config(), kernel.name).program
        assert program.instructions[-1].kind == "finish"


@pytest.mark.parametrize("line, source, shown", BAD, ids=[f"line{line}" for line, _, _ in BAD])
def test_error_example_shows_the_real_messages(line, source, shown):
    lang, _, expected = shown
    assert lang == "text"
    with pytest.raises(CompileError) as info:
        check_source(source, "fc.vk")
    assert info.value.report() + "\n" == expected  # what vtacc prints: every error line starts with 'error:'


def test_grammar_section_is_the_grammar_file_verbatim():
    (grammar,) = [text for lang, _, text in blocks() if lang == "lark"]
    assert grammar == (ROOT / "vtacc" / "frontend" / "grammar.lark").read_text()

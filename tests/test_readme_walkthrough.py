"""README.md's walkthrough ("From a kernel to its trace") shows what the tools print today.

Each numbered step quotes a command's output as an indented block; the
commands are run here on examples/matmul.vk and every quoted line (but the
``...`` that stand for lines left out) must appear in the output, in order.
When the compiler's choices change, this test says which README lines to
update.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = "examples/matmul.vk"


def quoted_blocks() -> dict[int, list[str]]:
    """Step number -> the lines of the first indented block after that step's heading."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## From a kernel to its trace") :]
    section = section[: section.index("\n## ", 1)]
    blocks: dict[int, list[str]] = {}
    step = None
    for line in section.splitlines():
        heading = re.match(r"\*\*(\d)\. ", line)
        if heading:
            step = int(heading.group(1))
            continue
        if step is not None and line.startswith("    "):
            blocks.setdefault(step, []).append(line.strip())
        elif step is not None and step in blocks and line.strip():
            step = None  # the block ended: prose again
    return blocks


def run(*args: str, cwd: Path = REPO) -> str:
    done = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def assert_shown(quoted: list[str], output: str, what: str) -> None:
    lines = [line.strip() for line in output.splitlines()]
    at = 0
    for want in quoted:
        if want == "...":
            continue
        try:
            at = lines.index(want, at) + 1
        except ValueError:
            raise AssertionError(f"README.md, {what}: the line {want!r} is not in the output (in order)") from None


def test_every_step_of_the_walkthrough_quotes_the_tools_output(tmp_path):
    blocks = quoted_blocks()
    assert sorted(blocks) == [1, 2, 3, 4]
    assert_shown(blocks[1], run("vtacc.cli", EXAMPLE, "--emit", "checked"), "step 1")
    assert_shown(blocks[2], run("vtacc.cli", EXAMPLE, "--emit", "schedule"), "step 2")
    asm = run("vtacc.cli", EXAMPLE)
    assert_shown(blocks[3], asm, "step 3")
    (tmp_path / "matmul.vasm").write_text(asm)
    run("vtasm.cli", "assemble", str(tmp_path / "matmul.vasm"), "-o", str(tmp_path / "k.vbin"))
    trace = run("vtasim.cli", "run", str(tmp_path / "k.vbin"), "--zero-inputs", "--trace", "--trace-uops",
                "--out-dir", str(tmp_path / "out"))
    assert_shown(blocks[4], trace, "step 4")

"""The user documentation stands on its own: every file README.md and docs/*.md point to is in the repository.

Checked, outside code blocks: relative markdown links (``[text](path)``,
``[text](path#anchor)``), backticked repository paths (```docs/isa.md```,
```tests/vtacc/resnet.py```, ```benchmarks/```), and any other ``name.md``
mentioned in the text. A ``.md`` name resolves next to the page that mentions
it or at the repository root; links resolve next to the page (as a markdown
viewer does); repository paths resolve at the root.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

TOP_DIRS = ("docs", "examples", "tests", "benchmarks", "vtasm", "vtasim", "vtacc")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?")
BACKTICKED = re.compile(r"`([^`\s]+)`")
REPO_PATH = re.compile(rf"^(?:{'|'.join(TOP_DIRS)})/[\w./-]*$")
MD_NAME = re.compile(r"(?<![\w./-])([\w][\w./-]*\.md)\b")
URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+|mailto:\S+", re.IGNORECASE)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced and indented code blocks."""
    out = []
    fence = None
    prev_blank = True
    in_indented = False
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            continue
        indented = line.startswith(("    ", "\t"))
        if indented and (prev_blank or in_indented):
            in_indented = True
            continue
        in_indented = False
        prev_blank = not line.strip()
        out.append((n, line))
    return out


def is_external(target: str) -> bool:
    return target.startswith("#") or bool(re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE))


def missing_targets(page: Path, root: Path = REPO) -> list[str]:
    """Descriptions of the references in ``page`` (inside ``root``) that name no existing file."""
    problems = []
    rel_page = page.relative_to(root)

    def check(n: int, what: str, candidates: list[Path]) -> None:
        if not any(c.exists() for c in candidates):
            problems.append(f"{rel_page}:{n}: {what} does not exist in the repository")

    for n, line in prose_lines(page.read_text(encoding="utf-8")):
        targets = LINK.findall(line) + REF_LINK.findall(line)
        for target in targets:
            if is_external(target):
                continue
            path = target.split("#", 1)[0].split("?", 1)[0]
            if path:
                check(n, f"link target {target!r}", [page.parent / path])
        for text in BACKTICKED.findall(line):
            if REPO_PATH.match(text):
                check(n, f"path `{text}`", [root / text])
        bare = URL.sub(" ", LINK.sub(" ", line))
        bare = BACKTICKED.sub(lambda m: " " if REPO_PATH.match(m.group(1)) else m.group(0), bare)
        for name in MD_NAME.findall(bare):
            check(n, f"page {name!r}", [page.parent / name, root / name])
    return problems


def test_pages_found():
    assert (REPO / "README.md").is_file()
    assert len(PAGES) > 1


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_referenced_files_exist(page: Path):
    problems = missing_targets(page)
    assert not problems, "\n".join(problems)


def test_checker_catches_a_missing_page(tmp_path: Path):
    """The checker itself: a page pointing at files that are not there is reported, existing ones are not."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("# here\n")
    page = tmp_path / "README.md"
    page.write_text(
        "See [here](docs/here.md#top), `docs/here.md` and [web](https://example.org/x.md).\n"
        "See [gone](docs/gone.md), `docs/absent.md`, and isa.md section 5.\n"
        "\n"
        "    code: [not](checked.md)\n"
        "```\n[fenced](also-not-checked.md)\n```\n"
    )
    problems = missing_targets(page, tmp_path)
    assert len(problems) == 3, problems
    assert all(p.startswith("README.md:2:") for p in problems), problems

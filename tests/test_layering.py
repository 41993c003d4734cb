"""The package layout's import rules, read from the source (so they keep holding as the code grows).

Each module belongs to a room: a subpackage, or a named group of top-level
modules. Rooms are ranked; a module may import its own room and rooms of a
lower rank, never a higher one nor a sibling room of the same rank. Across
the three packages the order is vtasm < vtasim < vtacc. There are no import
cycles between modules (imports under ``if TYPE_CHECKING:`` do not run, so
they do not count for cycles).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("vtasm", "vtasim", "vtacc")

# (package, room) -> rank within the package. A room is a subpackage name, or
# for top-level modules the group named in TOP_LEVEL.
RANKS = {
    "vtasm": {"isa": 0, "asm": 1, "formats": 1, "cli": 2},
    # the timing model and the functional machine are siblings: neither imports the other
    "vtasim": {"host": 0, "core": 1, "timing": 1, "checks": 2, "outputs": 2, "runs": 3, "board": 4, "cli": 5},
    # the ONNX importer writes kernel language and asks the schedule what it can fuse; the compiler's
    # reports read compiled programs and models; neither the importer nor the back end imports the other
    "vtacc": {"frontend": 0, "schedule": 1, "backend": 2, "onnx": 2, "driver": 3, "reports": 4, "explore": 5,
              "cli": 6},
}
TOP_LEVEL = {
    "vtasm": {"cli": "cli", "cli_support": "cli", "entry": "cli", "*": "isa"},
    "vtasim": {"*": "cli"},
    "vtacc": {"cli": "cli", "entry": "cli", "*": "driver"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _room(module: str) -> tuple[str, str]:
    parts = module.split(".")
    pkg = parts[0]
    if len(parts) >= 3 or (len(parts) == 2 and _is_package(module)):
        return pkg, parts[1]
    table = TOP_LEVEL[pkg]
    return pkg, table.get(parts[-1] if len(parts) == 2 else "__init__", table["*"])


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not _is_package(module):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _known(name: str) -> str | None:
    """The project module an import names (the longest prefix that is one), or None."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return candidate
        parts.pop()
    return None


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _imports(module: str, *, runtime_only: bool = False, source: str | None = None) -> list[tuple[str, int]]:
    """(imported project module, line) for every import in the module (or in ``source`` read as that module),
    lazy ones included."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8") if source is None else source)
    skip = _type_checking_lines(tree) if runtime_only else set()
    out = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            names = [f"{target}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            found = _known(name)
            if found is not None and found != module:
                out.append((found, node.lineno))
    return out


def test_every_module_has_a_room():
    for module in MODULES:
        pkg, room = _room(module)
        assert room in RANKS[pkg], f"{module}: room {room!r} has no rank in tests/test_layering.py"


def test_packages_have_docstrings():
    for module, path in MODULES.items():
        if path.name == "__init__.py":
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
            assert doc and len(doc.split()) >= 8, f"{module}: package without a docstring saying what it holds"


def _violations(module: str, imports: list[tuple[str, int]]) -> list[str]:
    """The imports of ``module`` that run up: to a later package, a higher room or a sibling room."""
    pkg, room = _room(module)
    out = []
    for target, line in imports:
        tpkg, troom = _room(target)
        where = f"{MODULES[module].relative_to(ROOT)}:{line}: {module} imports {target}"
        if PACKAGES.index(tpkg) > PACKAGES.index(pkg):
            out.append(f"{where} ({tpkg} is above {pkg})")
        elif tpkg == pkg and troom != room and RANKS[pkg][troom] >= RANKS[pkg][room]:
            out.append(f"{where}: room {troom!r} (rank {RANKS[pkg][troom]}) is not below {room!r} "
                       f"(rank {RANKS[pkg][room]})")
    return out


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_never_run_back_up(module):
    bad = _violations(module, _imports(module))
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    graph = {m: sorted({t for t, _ in _imports(m, runtime_only=True) if not _is_package(t)}) for m in MODULES}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in graph[m]:
            if state.get(t) == 1:
                cycle = stack[stack.index(t):] + [t]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m)


@pytest.mark.parametrize("module, planted, why", [
    ("vtacc.frontend.parse", "from vtacc.backend.codegen import generate\n", "not below"),  # up a room
    ("vtasim.core.machine", "from ..runs.runner import run_program\n", "not below"),  # relative, up
    ("vtasim.timing.engine", "from vtasim.core import machine\n", "not below"),  # a sibling room
    ("vtasim.core.alu", "def f():\n    from vtasim.checks.lint import Lint\n", "not below"),  # lazy
    ("vtasm.isa", "import vtasim.core.state\n", "is above"),  # a later package
])
def test_the_checker_sees_a_planted_violation(module, planted, why):
    """The rule is not vacuous: an upward import planted in a module's source is reported, by the checker
    the suite runs on every module."""
    source = MODULES[module].read_text(encoding="utf-8") + "\n" + planted
    bad = _violations(module, _imports(module, source=source))
    assert len(bad) == 1 and why in bad[0], bad
    assert not _violations(module, _imports(module))

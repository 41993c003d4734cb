"""What the two everyday commands import: only what they need, so that they start quickly.

`vtacc KERNEL.vk -o PROGRAM.vbin` and `vtasim run PROGRAM.vbin` are run as the installed commands run
them (vtasm.entry), each in a fresh interpreter, and the modules loaded by the end are compared with the
ones that belong to other commands or options: pictures (matplotlib), ONNX, Dask, the board layer, the
simulator's checks, and for a run the compiler, the assembler's parser and the timing model. A structural
test: it reads sys.modules, it times nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.vtasm.paths import REPO

# Third-party packages only some commands or options need.
OPTIONAL = ("matplotlib", "onnx", "onnxruntime", "sklearn", "dask", "distributed", "tqdm", "pyarrow", "pynq",
            "torch", "PIL")
# The toolchain's own modules for other commands and options (a name covers its submodules).
NOT_FOR_A_COMPILE = ("vtacc.onnx", "vtacc.model", "vtacc.explore", "vtacc.reports", "vtasim.core", "vtasim.board",
                     "vtasim.checks", "vtasim.runs", "vtasim.network_cli", "vtasim.timing.steps_chart",
                     "vtasim.timing.timeline", "vtasm.asm", "vtasm.formats.network", "vtasm.formats.dump")
NOT_FOR_A_RUN = ("lark", "tomllib", "vtacc", "vtasm.asm", "vtasim.board", "vtasim.board_cli", "vtasim.checks",
                 "vtasim.network_cli", "vtasim.host", "vtasm.formats.network", "vtasim.timing.profile",
                 "vtasim.timing.engine", "vtasim.timing.plan", "vtasim.timing.run", "vtasim.timing.report")

# Run a command as vtasm.entry does, but report the modules loaded instead of ending the process.
_PROBE = """
import json, sys
import vtasm.entry as entry
package, args = sys.argv[1], sys.argv[2:]
sys.argv = [package, *args]
entry.os._exit = lambda code: (print(json.dumps([code, sorted(sys.modules)]), file=sys.stderr), sys.exit(code))
__import__(f"{package}.entry", fromlist=["main"]).main()
"""


def _modules_after(package: str, *args: str, cwd) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, "-c", _PROBE, package, *args], capture_output=True, text=True,
                         cwd=cwd, env=env)
    code, modules = json.loads(out.stderr.strip().splitlines()[-1])
    assert code == 0, out.stderr
    return modules


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """The modules a compile loads, and the program it wrote."""
    where = tmp_path_factory.mktemp("startup")
    modules = _modules_after("vtacc", str(REPO / "examples" / "vadd.vk"), "-o", "vadd.vbin", cwd=where)
    return modules, where


def test_a_compile_loads_neither_the_simulator_nor_other_commands_modules(compiled):
    modules, _ = compiled
    assert "vtacc.program_builder" in modules  # the probe saw the compile
    assert _loaded(modules, OPTIONAL + NOT_FOR_A_COMPILE) == []


def test_a_run_loads_neither_the_compiler_nor_the_timing_model(compiled):
    _, where = compiled
    modules = _modules_after("vtasim", "run", "vadd.vbin", "--zero-inputs", "--out-dir", "out", cwd=where)
    assert "vtasim.core.machine" in modules and (where / "out").is_dir()  # the probe saw the run
    assert _loaded(modules, OPTIONAL + NOT_FOR_A_RUN) == []

"""The toolchain's contract for bad input, and how the fuzz suite checks it.

Every tool run on a hostile file must either succeed (exit 0) or fail with exit code 1 (bad input) or 2
(usage), printing exactly one non-empty line on stderr (never a Python traceback; "internal error" and
exit code 70 break the contract), leave no output file behind when it fails, finish within a wall-time
limit and stay under a peak-memory limit. ``vtasim run`` may also end in a simulation fault (exit 3,
docs/simulator.md: one line, nothing written), which is how it reports a well-formed program that does
something the machine refuses. Nothing a tool prints may carry a terminal escape sequence.

The parsers' Python API has the same contract in-process: ``read_vbin``, ``read_network`` and
``read_npy`` either return or raise ``vtasm.errors.FormatError`` (a one-line message) and nothing else.
Those cases run in a worker process of their own (``api_worker.py``) under the same memory limit, so a
parser that allocates what a header says, recurses without bound or hangs is caught, not the test run.
"""

from __future__ import annotations

import json
import os
import queue
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("api_worker.py")
LONG = os.environ.get("VTA_FUZZ_LONG") == "1"
# seconds per tool run (a run takes 0.15-1 s): 20 in the long sweep, 10 in the default run (each hang costs it)
DEFAULT_TIMEOUT = float(os.environ.get("VTA_FUZZ_TIMEOUT") or (20 if LONG else 10))
API_TIMEOUT = float(os.environ.get("VTA_FUZZ_API_TIMEOUT") or (10 if LONG else 3))  # per parser call: it takes ms
DEFAULT_MEM_LIMIT = 1536 * 2**20  # bytes: address space of the child, and its peak resident memory
EXIT_BAD_INPUT, EXIT_USAGE, EXIT_FAULT, EXIT_INTERNAL = 1, 2, 3, 70
ALLOWED = (0, EXIT_BAD_INPUT, EXIT_USAGE)
ALLOWED_SIM = (*ALLOWED, EXIT_FAULT)  # vtasim run: a simulation fault is a documented one-line refusal
ESCAPES = ("\x1b", "\x9b")  # ESC, and the one-character CSI of ISO 6429
PY_WARNING = re.compile(r"\.py:\d+: \w*Warning\b")  # what warnings.showwarning prints


def tool_path(name: str) -> str:
    """The installed command ``name`` of the interpreter running the tests (its virtualenv's bin)."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"command {name} not found beside {sys.executable} nor on PATH")
    return found


@dataclass
class Outcome:
    """What one process run did."""

    args: list[str]
    cwd: str
    returncode: int | None  # negative: killed by that signal; None: timed out (then killed)
    stdout: bytes
    stderr: bytes
    seconds: float
    maxrss: int  # peak resident memory in bytes (from wait4's rusage of this very child)
    timeout: float
    mem_limit: int
    label: str = ""  # which case (family, seed, mutation), for reports

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    def command(self) -> str:
        """A shell command that reproduces the run (from its directory)."""
        args = [Path(self.args[0]).name, *self.args[1:]]
        return f"cd {shlex.quote(self.cwd)} && {shlex.join(args)}"


def _limited(args: Sequence[str], mem_limit: int) -> tuple[list[str], object]:
    """The command line and preexec_fn that run ``args`` under an address-space limit of ``mem_limit``.

    ``prlimit`` (util-linux) sets the limit and execs the command in the same process, so wait4 still
    measures the tool itself; without it a preexec_fn does the same (not safe with threads, hence second)."""
    prlimit = shutil.which("prlimit")
    if prlimit:
        return [prlimit, f"--as={mem_limit}", "--", *args], None

    def limit() -> None:  # pragma: no cover - only without prlimit
        resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))

    return list(args), limit


def run_tool(args: Sequence[str], cwd: str | Path, timeout: float = DEFAULT_TIMEOUT,
             mem_limit: int = DEFAULT_MEM_LIMIT, label: str = "", stdin: bytes | None = None) -> Outcome:
    """Run a command (``args[0]`` a tool name such as ``vtasim``, or a path) in ``cwd``.

    Its stdout and stderr go to temporary files (no pipe can fill up), its peak memory comes from wait4's
    rusage of this child alone, and a run past ``timeout`` seconds is killed with its whole process group."""
    args = [str(a) for a in args]
    if os.sep not in args[0]:
        args[0] = tool_path(args[0])
    command, preexec = _limited(args, mem_limit)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", COLUMNS="100")
    env.pop("VTA_FUZZ_LONG", None)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(command, cwd=str(cwd), stdout=out, stderr=err,
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                preexec_fn=preexec, start_new_session=True, env=env)
        if stdin is not None:
            try:
                proc.stdin.write(stdin)
                proc.stdin.close()
            except BrokenPipeError:
                pass
        deadline = start + timeout
        timed_out = False
        delay = 0.002
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                timed_out = True
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # the group this run started (start_new_session)
                except ProcessLookupError:
                    pass
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(delay)
            delay = min(delay * 1.5, 0.02)
        seconds = time.monotonic() - start
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code  # reaped here: Popen must not wait for it again
        out.seek(0)
        err.seek(0)
        return Outcome(args, str(cwd), None if timed_out else code, out.read(), err.read(), seconds,
                       usage.ru_maxrss * 1024, timeout, mem_limit, label)


def run_many(jobs: Iterable[dict], workers: int | None = None) -> list[Outcome]:
    """Run many ``run_tool(**job)`` at once, one per core (each a process of its own), in order."""
    jobs = list(jobs)
    workers = workers or max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda job: run_tool(**job), jobs))


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


KEPT_ON_FAULT = frozenset({"trace.txt"})  # the --trace-file names the suite gives


def check_contract(outcome: Outcome, outputs: Iterable[str | Path] = (), allowed: Sequence[int] = ALLOWED,
                   escapes: bool = True) -> list[str]:
    """The ways ``outcome`` breaks the contract (an empty list when it keeps it).

    ``outputs`` are the files and directories the command was asked to write: after a failure a file must
    not exist and a directory must be absent or empty (so no temporary file is left either).
    ``allowed`` are the exit codes the command may end with; ``escapes`` checks that nothing it printed
    holds a terminal escape (ESC or CSI)."""
    problems = []
    err = outcome.err
    if outcome.timed_out:
        problems.append(f"timed out (still running after {outcome.timeout:g} s; killed)")
    elif outcome.returncode < 0:
        try:
            name = signal.Signals(-outcome.returncode).name
        except ValueError:
            name = str(-outcome.returncode)
        problems.append(f"killed by signal {name}")
    if outcome.maxrss > outcome.mem_limit:
        problems.append(f"peak memory {outcome.maxrss / 2**20:.0f} MiB over the limit "
                        f"{outcome.mem_limit / 2**20:.0f} MiB")
    code = outcome.returncode
    if code == EXIT_INTERNAL or "internal error" in err:
        kind = re.search(r"internal error: (out of memory|[\w.]+)", err)
        problems.append(f"internal error (exit {code}){': ' + kind.group(1) if kind else ''}")
    elif code is not None and code >= 0 and code not in allowed:
        problems.append(f"exit code {code} (allowed: {', '.join(map(str, allowed))})")
    if "Traceback (most recent call last)" in err or "Traceback (most recent call last)" in outcome.out:
        problems.append("a Python traceback was printed")
    if PY_WARNING.search(err) or PY_WARNING.search(outcome.out):
        problems.append("a Python warning was printed")
    if code is not None and code != 0:
        lines = _lines(err)
        if len(lines) != 1:
            problems.append(f"failed (exit {code}) with {len(lines)} non-empty lines on stderr instead of one")
        left = []
        for path in outputs:
            path = Path(path)
            if path.is_dir():
                left += [str(p) for p in sorted(path.rglob("*"))]
            elif path.exists() or path.is_symlink():
                left.append(str(path))
        if code == 3:  # a simulation fault keeps its trace file, whole: it shows what ran (docs/simulator.md)
            left = [p for p in left if Path(p).name not in KEPT_ON_FAULT]
        if left:
            problems.append(f"failed (exit {code}) but left output behind: {', '.join(left[:4])}")
    if escapes:
        for stream, text in (("stdout", outcome.out), ("stderr", err)):
            if any(e in text for e in ESCAPES):
                problems.append(f"a terminal escape character on {stream}")
    return problems


def first_line(text: str, width: int = 220) -> str:
    lines = _lines(text)
    line = lines[0] if lines else ""
    return line if len(line) <= width else line[:width] + "..."


# -- the parsers' API, in a worker process ---------------------------------------------------------------------


@dataclass
class ApiResult:
    """What one parser call did: ``kind`` is ok, error (a FormatError), other (another VtaError),
    crash (any other exception), timeout or died (the worker ended: a signal, or no memory)."""

    index: int
    kind: str
    type: str = ""
    message: str = ""
    seconds: float = 0.0
    maxrss: int = 0
    extra: dict = field(default_factory=dict)


def run_api_cases(reader: str, paths: Sequence[str | Path], timeout: float = API_TIMEOUT,
                  mem_limit: int = DEFAULT_MEM_LIMIT) -> list[ApiResult]:
    """Call the parser ``reader`` (vbin, network or npy) on every file, in worker processes under
    ``mem_limit``; a case that hangs past ``timeout`` or kills its worker is recorded and the next worker
    goes on with the case after it."""
    paths = [str(p) for p in paths]
    results: list[ApiResult | None] = [None] * len(paths)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(paths, fh)
        listing = fh.name
    try:
        start_at = 0
        while start_at < len(paths):
            start_at = _worker_pass(reader, listing, start_at, results, timeout, mem_limit)
    finally:
        os.unlink(listing)
    return [r for r in results if r is not None]


def _worker_pass(reader: str, listing: str, first: int, results: list, timeout: float, mem_limit: int) -> int:
    """Run one worker from case ``first``; the index to resume from (len(results) when all are done)."""
    command, preexec = _limited([sys.executable, str(WORKER), reader, listing, str(first)], mem_limit)
    errfile = tempfile.TemporaryFile()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errfile, stdin=subprocess.DEVNULL,
                            preexec_fn=preexec, start_new_session=True, cwd=str(REPO))
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for raw in proc.stdout:
            lines.put(raw.decode("utf-8", "replace"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    current, started = None, time.monotonic()
    try:
        while True:
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                if current is None:
                    raise RuntimeError(f"the fuzz API worker did not start within {timeout} s") from None
                results[current] = ApiResult(current, "timeout", seconds=time.monotonic() - started,
                                             message=f"no answer after {timeout:g} s")
                return current + 1
            if line is None:  # the worker ended
                code = proc.wait()
                if current is None or results[current] is not None:
                    if all(r is not None for r in results[first:]):
                        return len(results)
                    errfile.seek(0)
                    raise RuntimeError(f"the fuzz API worker ended (exit {code}) between cases: "
                                       f"{errfile.read().decode(errors='replace')[-2000:]}")
                errfile.seek(0)
                tail = errfile.read().decode("utf-8", "replace").strip().splitlines()
                how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
                results[current] = ApiResult(current, "died", how, tail[-1] if tail else "",
                                             seconds=time.monotonic() - started)
                return current + 1
            if line.startswith("start "):
                current, started = int(line.split()[1]), time.monotonic()
                continue
            record = json.loads(line)
            results[record["index"]] = ApiResult(**record)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        errfile.close()


def check_api(result: ApiResult, mem_limit: int = DEFAULT_MEM_LIMIT) -> list[str]:
    """The ways a parser call broke its contract: return, or raise FormatError with a one-line message."""
    problems = []
    if result.kind == "timeout":
        problems.append(f"timed out ({result.message})")
    elif result.kind == "died":
        problems.append(f"the parser's process died ({result.type}: {result.message})")
    elif result.kind == "crash":
        problems.append(f"raised {result.type} (not FormatError)")
    elif result.kind == "other":
        problems.append(f"raised {result.type}, a VtaError but not FormatError")
    if result.kind in ("error", "other"):
        if not result.message.strip():
            problems.append("an empty error message")
        elif "\n" in result.message.strip():
            problems.append("an error message of more than one line")
        if any(e in result.message for e in ESCAPES):
            problems.append("a terminal escape character in the error message")
    if result.maxrss > mem_limit:
        problems.append(f"peak memory {result.maxrss / 2**20:.0f} MiB over the limit")
    return problems


# -- collecting and reporting failures -------------------------------------------------------------------------


def _signature(text: str) -> str:
    """A message with its particulars (paths, numbers, quoted names) blurred, to group failures by cause."""
    text = re.sub(r"(/[^\s:'\"]+)+", "PATH", text)
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\d+", "N", text)
    return text[:140]


@dataclass
class Failure:
    family: str  # input family (vbin, network, npy, onnx) and target
    case: str  # what the case is: its number and mutation
    problems: list[str]
    detail: str  # the first line of stderr, or the exception
    repro: str  # a shell command or Python snippet
    exit_code: int | None = None

    def key(self) -> tuple:
        return self.family, tuple(_signature(p) for p in self.problems)


class Failures:
    """The contract failures of one test, reported together, grouped by cause, at the end."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.items: list[Failure] = []
        self.cases = 0

    def tool(self, family: str, case: str, outcome: Outcome, outputs: Iterable[str | Path] = (),
             allowed: Sequence[int] = ALLOWED, extra: Sequence[str] = ()) -> list[str]:
        """Check one tool run (plus ``extra`` problems found by the caller); record and return its problems."""
        self.cases += 1
        problems = check_contract(outcome, outputs, allowed) + list(extra)
        if problems:
            detail = first_line(outcome.err) or first_line(outcome.out)
            self.items.append(Failure(family, case, problems, detail, outcome.command(), outcome.returncode))
        return problems

    def api(self, family: str, case: str, result: ApiResult, repro: str) -> list[str]:
        self.cases += 1
        problems = check_api(result)
        if problems:
            detail = f"{result.type}: {result.message}" if result.type else result.message
            self.items.append(Failure(family, case, problems, " ".join(detail.split())[:300], repro))
        return problems

    def summary(self) -> str:
        groups: dict[tuple, list[Failure]] = {}
        for f in self.items:
            groups.setdefault(f.key(), []).append(f)
        lines = [f"{self.title}: {len(self.items)} of {self.cases} cases break the contract, "
                 f"{len(groups)} distinct causes"]
        for (family, _), items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"- [{family}] {'; '.join(items[0].problems)} x{len(items)}")
            for f in items[:3]:
                lines.append(f"    e.g. {f.case}")
                lines.append(f"      -> {f.detail}")
                lines.append(f"      repro: {f.repro}")
        return "\n".join(lines)

    def log(self) -> None:
        """Append every failure as a JSON line to $VTA_FUZZ_LOG, when set (to study a long sweep later)."""
        path = os.environ.get("VTA_FUZZ_LOG")
        if not path or not self.items:
            return
        with open(path, "a") as fh:
            for f in self.items:
                fh.write(json.dumps({"test": self.title, **f.__dict__}) + "\n")

    def check(self) -> None:
        """Fail the test with the grouped summary when any case broke the contract."""
        self.log()
        assert not self.items, self.summary()

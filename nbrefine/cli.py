"""``nbrefine fix NOTEBOOK.ipynb``: run a notebook in a real kernel and repair the cells that fail.

Each code cell runs wrapped in ``%%refine``, so a snapshot of the state before the cell exists. When
a cell fails and a fix passes its trial run, the fix is accepted (it runs for real in the kernel, the
state advances), the fixed source goes into the cell with its provenance in the cell's metadata, and
the run goes on. Unfixed cells keep their error output. Adapter code: the work is in the core modules.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import shlex
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from . import __version__
from ._argparse import StrictParser

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from .engine import TeachingPolicy

__all__ = ["main"]

EXIT_OK, EXIT_FAILING, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

_MARK = "@@nbrefine-cli@@ "
_SESSION_JSON = """(lambda s: None if s is None else {
    "status": s.status,
    "message": s.message,
    "decision": s.decision,
    "accept_ok": s.accept_ok,
    "accept_refused": s.accept_refused,
    "original_code": s.original_code,
    "fixed_code": s.fixed_code,
    "explanation": s.explanation,
    "diff": s.diff(),
    "model": s.model,
    "failure": None if s.failure is None else {
        "error_type": s.failure.error_type,
        "message": s.failure.message,
        "one_line": s.failure.one_line(),
    },
    "attempts": [
        {
            "number": a.number,
            "ok": a.ok,
            "error_type": a.error_type,
            "error_message": a.error_message,
            "summary": a.summary(),
            "duration_s": a.duration_s,
            "model": a.reply.model if a.reply is not None else None,
        }
        for a in s.attempts
    ],
    "teaching": (lambda t: None if t is None else {
        "status": t.status,
        "mode": t.mode,
        "header": t.step.header(),
        "text": t.text if t.status != "error" else t.message,
        "hints_used": t.hints_used,
        "hint_cap": t.hint_cap,
        "withheld": t.withheld,
        "model": t.model,
    })(s.teaching),
})"""


def session_expr(request_id: str) -> str:
    """An expression for the JSON of the session that the ``%%refine`` cell run by the execute
    request ``request_id`` made (null if none). The session is found by the request that ran the
    cell, never by its source text: see :func:`nbrefine.engine.session_for_request`."""
    find = f"__import__('nbrefine.engine', fromlist=['_']).session_for_request({request_id!r})"
    return f"{_SESSION_JSON}({find})"


# Runs the fix in the live kernel, as ``%refine accept`` does, without printing a line of its own
# (a statement, so the returned flag is not displayed; no user name is bound). A fix that is not
# verified on the live state stays pending: it is never applied without a person's second choice.
_ACCEPT_CODE = (
    'try:\n    __import__("nbrefine").last_session().accept()\n'
    'except __import__("nbrefine.engine", fromlist=["_"]).UnverifiedFixError:\n    pass'
)
_TIMEOUT_ENAME = "CellTimeoutError"
OFFLINE_HINT = (
    "The offline quick fixes repair typos, missing imports and the like, not logic; with "
    "ANTHROPIC_API_KEY set, or --provider anthropic, a model is asked as well."
)

FIX_DESCRIPTION = """\
Run NOTEBOOK cell by cell in a real kernel (in the notebook's folder). Each code cell runs
under %%refine; when one fails, a fix that passed its trial run in a fork of the kernel state
is accepted: it runs for real, the state advances, and it goes into the cell with its
provenance in the cell's metadata (metadata.nbrefine). Cells that stay broken keep their error
output, and the run goes on. A progress line per cell goes to stderr; the summary, with the
diff of every fix, to stdout.

Several notebooks, folders (searched recursively) or glob patterns run in parallel, one kernel
each (--jobs): one progress bar, a line per notebook, a summary over all of them, and reports
for CI (JUnit) and for a class (an instructor's page, a feedback file per student).
"""

USAGE_EPILOG = """\
exit status: 0 every cell passes at the end, 1 some cell still fails (or the kernel died),
2 bad usage or input, 130 interrupted (nothing is written). Over several notebooks: 0 all pass,
1 some cell still fails (--fail-on any: failed at all), 2 some input was bad (the others still
run), 130 interrupted (what finished is written, and the reports).

Provider 'auto' (the default, or $NBREFINE_PROVIDER) is anthropic when ANTHROPIC_API_KEY is set,
else offline: the offline quick fixes (typos, missing imports, wrong column names, ...) need no key.

examples:
  nbrefine fix analysis.ipynb                      # writes analysis.fixed.ipynb
  nbrefine fix analysis.ipynb --in-place           # keeps analysis.ipynb.bak
  nbrefine fix analysis.ipynb --dry-run --report report.md
  nbrefine fix analysis.ipynb --cells 3,5-7 --provider anthropic --max-attempts 5
  nbrefine fix exercise.ipynb --mode hint --max-hints 3 --report hints.md
  nbrefine fix notebooks/ -o fixed/ --report summary.md --report junit.xml
  nbrefine fix course/submitted --mode hint -o graded/ --report class.html
"""


class CliError(Exception):
    """Bad usage or input: one line on stderr, exit status 2."""


class _Terminated(BaseException):
    """SIGTERM while running: clean up the kernel like Ctrl-C does."""


class _Parser(StrictParser):
    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    from .engine import MODES

    parser = _Parser(
        prog="nbrefine",
        description="Execution-feedback repair for Jupyter notebooks.",
    )
    parser.add_argument("--version", action="version", version=f"nbrefine {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    fix = commands.add_parser(
        "fix",
        allow_abbrev=False,  # the class says so too; explicit, as the parent could be any parser
        help="run a notebook in a real kernel and repair the cells that fail",
        description=FIX_DESCRIPTION,
        epilog=USAGE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fix.add_argument(
        "notebook",
        nargs="+",
        metavar="NOTEBOOK",
        help="notebooks, folders (searched recursively) or glob patterns ('**' too) to run and repair",
    )
    out = fix.add_mutually_exclusive_group()
    out.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="where to write: OUT.ipynb for one notebook (default: NAME.fixed.ipynb next to it); "
        "a folder for several, mirroring the input tree",
    )
    out.add_argument(
        "--in-place", action="store_true", help="overwrite NOTEBOOK (atomically; keeps NAME.ipynb.bak)"
    )
    out.add_argument("--dry-run", action="store_true", help="run and report, write no notebook")
    fix.add_argument("--provider", help="auto (default), offline, anthropic, scripted, or a registered name")
    fix.add_argument(
        "--model", help="model name for the provider (default: $NBREFINE_MODEL, else the provider's)"
    )
    fix.add_argument("--max-attempts", type=int, metavar="N", help="most candidates per failing cell")
    fix.add_argument(
        "--timeout", type=float, metavar="S", help="seconds one trial run of a candidate may take"
    )
    fix.add_argument(
        "--cell-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds one cell (its run and its repair) may take (default: 600)",
    )
    fix.add_argument(
        "--report",
        action="append",
        metavar="FILE",
        help="also write a report, by its extension: .json or .md (for several notebooks, the summary "
        "over all), .xml (JUnit, for CI), .html (the class report for an instructor); repeatable",
    )
    fix.add_argument("--kernel", metavar="NAME", help="kernel name (default: the notebook's, else python3)")
    fix.add_argument(
        "--cells",
        metavar="LIST",
        help="repair only these code cells (1-based, e.g. 3,5-7); the others still run",
    )
    fix.add_argument(
        "--no-quick-fixes",
        action="store_true",
        help="skip the offline quick fixes and ask the provider straight away",
    )
    fix.add_argument(
        "--mode",
        choices=MODES,
        help="teaching mode, as the %%%%refine cell option: a failing cell gets a hint or an "
        "explanation (in the report and the notebook) instead of a fix; a locked notebook policy "
        "can only be tightened",
    )
    fix.add_argument(
        "--max-hints", type=int, metavar="N", help="hints per failing cell, as the %%%%refine cell option"
    )
    _add_batch_options(fix)
    from . import benchcmd

    benchcmd.add_parser(commands)
    return parser


def _add_batch_options(fix: argparse.ArgumentParser) -> None:
    from .reports.summary import FAIL_ON

    batch = fix.add_argument_group(
        "several notebooks (with a single notebook, any of these but -v makes a batch of one)"
    )
    batch.add_argument(
        "--jobs", type=int, metavar="N", help="notebooks run at once, one kernel each (default: the cores)"
    )
    batch.add_argument(
        "--resume",
        action="store_true",
        help="skip the notebooks an earlier run with the same settings finished (see --record)",
    )
    batch.add_argument(
        "--record",
        metavar="FILE",
        help="the run record, one JSON line per notebook (default: nbrefine-run.jsonl in the -o folder, "
        "else here)",
    )
    batch.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        help="what fails a notebook (exit 1, JUnit failure): 'unfixed' (default) a cell still "
        "failing, 'any' a cell that failed at all, even if it was fixed",
    )
    batch.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run each notebook as a task on this running dask.distributed scheduler (e.g. "
        "tcp://10.0.0.5:8786; needs nbrefine[dask]); the results come back here and are written here",
    )
    batch.add_argument(
        "--max-requests",
        type=int,
        metavar="N",
        help="model requests in flight at once, over all jobs (default: 4); a 429 pauses every job",
    )
    batch.add_argument(
        "--budget-tokens", type=int, metavar="N", help="most model tokens the whole batch may use"
    )
    batch.add_argument(
        "--budget-usd", type=float, metavar="X", help="most money (USD) the whole batch may spend"
    )
    talk = batch.add_mutually_exclusive_group()
    talk.add_argument("-v", "--verbose", action="store_true", help="also show every cell's line")
    talk.add_argument("-q", "--quiet", action="store_true", help="no progress, one line at the end (CI)")


# --------------------------------------------------------------------------- options


@dataclass(frozen=True)
class FixOptions:
    notebook: Path
    output: Path | None  # None: --dry-run
    in_place: bool
    provider: str | None
    model: str | None
    max_attempts: int | None
    timeout: float | None
    cell_timeout: int
    report: Path | None
    kernel: str | None
    cells: frozenset[int] | None
    quick_fixes: bool
    mode: str | None = None  # teaching mode (the %%refine cell option)
    max_hints: int | None = None


def parse_cells(text: str) -> frozenset[int]:
    """``"3,5-7"`` → {3, 5, 6, 7} (1-based code-cell numbers)."""
    chosen: set[int] = set()
    bad = CliError(f"--cells {text!r}: use 1-based code-cell numbers and ranges, e.g. 3,5-7")
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise bad from None
        if first < 1 or last < first:
            raise bad
        chosen.update(range(first, last + 1))
    if not chosen:
        raise bad
    return frozenset(chosen)


def _options(args: argparse.Namespace) -> FixOptions:
    notebook = Path(args.notebook[0])
    report = args.report[0] if args.report else None
    if report is not None and Path(report).suffix.lower() not in (".json", ".md"):
        raise CliError(f"--report {report}: the file name must end in .json or .md")
    if args.max_attempts is not None and args.max_attempts < 1:
        raise CliError("--max-attempts must be at least 1")
    if args.timeout is not None and not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise CliError("--timeout must be a positive number of seconds")
    if not (args.cell_timeout > 0 and math.isfinite(args.cell_timeout)):
        raise CliError("--cell-timeout must be a positive number of seconds")
    if args.max_hints is not None and args.max_hints < 1:
        raise CliError("--max-hints must be at least 1")
    if args.dry_run:
        output = None
    elif args.in_place:
        output = notebook
    elif args.output:
        output = Path(args.output)
    else:
        output = notebook.with_name(notebook.stem + ".fixed.ipynb")
    return FixOptions(
        notebook=notebook,
        output=output,
        in_place=bool(args.in_place),
        provider=args.provider,
        model=args.model,
        max_attempts=args.max_attempts,
        timeout=args.timeout,
        cell_timeout=max(1, math.ceil(args.cell_timeout)),
        report=Path(report) if report is not None else None,
        kernel=args.kernel,
        cells=parse_cells(args.cells) if args.cells is not None else None,
        quick_fixes=not args.no_quick_fixes,
        mode=args.mode,
        max_hints=args.max_hints,
    )


def read_notebook(path: Path) -> NotebookNode:
    """The notebook at ``path``, validated; :class:`CliError` with one line otherwise."""
    if not path.exists():
        raise CliError(f"{path}: no such file")
    if not path.is_file():
        raise CliError(f"{path}: not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CliError(f"{path}: not a notebook (not UTF-8 text)") from None
    except OSError as err:
        raise CliError(f"{path}: cannot read it: {err.strerror or err}") from None
    return parse_notebook(text, path)


def parse_notebook(text: str, path: Path) -> NotebookNode:
    """The notebook in ``text`` (read from ``path``), validated; :class:`CliError` otherwise."""
    try:
        json.loads(text)
    except ValueError as err:
        raise CliError(f"{path}: not a notebook (not valid JSON: {err})") from None
    try:
        notebook: NotebookNode = _nbf().reads(text, as_version=4)
        _nbf().validate(notebook)
    except Exception as err:  # nbformat raises ValidationError, KeyError, AttributeError, ...
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise CliError(f"{path}: not a valid Jupyter notebook: {first}") from None
    return notebook


def check_writable(path: Path, what: str) -> None:
    """Fail now, before the run, when ``path`` could not be written at the end. Missing folders
    are fine: :func:`write_atomic` makes them then (a fresh clone has no ``out/``)."""
    if path.is_dir():
        raise CliError(f"{what} {path}: is a folder")
    folder = path.parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise CliError(f"{what} {path}: {folder} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise CliError(f"{what} {path}: cannot write in {folder}: {err.strerror or err}") from None


def check_kernel(name: str) -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        raise CliError(
            f"no such kernel: {name!r} (see 'jupyter kernelspec list'; pick one with --kernel)"
        ) from None
    if (spec.language or "python").lower() != "python":
        raise CliError(f"kernel {name!r} runs {spec.language}; nbrefine needs a Python (IPython) kernel")


@dataclass(frozen=True)
class ProviderChoice:
    name: str
    requested: str
    note: str
    quick_fixes: bool
    model: str

    def describe(self) -> str:
        notes = []
        if self.requested in ("", "auto"):
            notes.append(
                "no ANTHROPIC_API_KEY set: only the offline quick fixes are used"
                if self.name == "offline"
                else "ANTHROPIC_API_KEY is set"
            )
        if self.name != "offline" and self.quick_fixes:
            notes.append("offline quick fixes first")
        if self.model:
            notes.append(f"model {self.model}")
        return f"provider: {self.name}" + (f" ({'; '.join(notes)})" if notes else "")


def choose_provider(opts: FixOptions) -> ProviderChoice:
    from .providers import available_providers, resolve_provider_name

    requested = opts.provider or os.environ.get("NBREFINE_PROVIDER", "").strip() or "auto"
    name, note = resolve_provider_name(requested, os.environ)
    if name not in available_providers():
        raise CliError(f"unknown provider {name!r}; available: auto, {', '.join(available_providers())}")
    model = opts.model if opts.model is not None else os.environ.get("NBREFINE_MODEL", "").strip()
    return ProviderChoice(name, requested, note, opts.quick_fixes, model)


def _offline_model() -> str:
    """The model name the offline provider puts on its replies (to tell which tier fixed a cell)."""
    try:
        from .providers.offline import OfflineProvider
    except ImportError:
        return "offline"
    try:
        return str(OfflineProvider().model)
    except Exception:
        return "offline"


# --------------------------------------------------------------------------- results


@dataclass
class CellResult:
    """What happened to one code cell."""

    number: int  # 1-based among the code cells (the numbers --cells uses)
    index: int  # position in the notebook
    cell_id: str | None
    selected: bool
    status: str = "not_run"  # "passed" | "fixed" | "unfixed" | "empty" | "skipped" | "not_run"
    error_type: str | None = None
    error_message: str = ""
    reason: str = ""  # why an unfixed cell stayed unfixed
    attempts: list[dict[str, Any]] = field(default_factory=list)
    provider: str = ""
    model: str = ""
    repair_s: float = 0.0
    duration_s: float = 0.0
    original_source: str = ""
    fixed_source: str | None = None
    diff: str = ""
    explanation: str = ""
    hint: dict[str, Any] | None = None  # teaching modes: the hint or explanation given

    @property
    def failed(self) -> bool:
        return self.status in ("fixed", "unfixed")

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.number,
            "index": self.index,
            "id": self.cell_id,
            "selected": self.selected,
            "status": self.status,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "reason": self.reason,
            "attempts": self.attempts,
            "provider": self.provider,
            "model": self.model,
            "repair_s": round(self.repair_s, 3),
            "duration_s": round(self.duration_s, 3),
            "original_source": self.original_source,
            "fixed_source": self.fixed_source,
            "diff": self.diff,
            "explanation": self.explanation,
            "hint": self.hint,
        }


@dataclass
class RunResult:
    cells: list[CellResult]
    stopped: str = ""  # why the run stopped early (the kernel died)
    duration_s: float = 0.0

    @property
    def ran(self) -> list[CellResult]:
        return [c for c in self.cells if c.status not in ("not_run", "empty", "skipped")]

    @property
    def all_pass(self) -> bool:
        return not self.stopped and all(
            c.status in ("passed", "fixed", "empty", "skipped") for c in self.cells
        )

    def summary(self) -> dict[str, Any]:
        ran = self.ran
        fixed = [c for c in ran if c.status == "fixed"]
        after: Counter[int] = Counter(len(c.attempts) for c in fixed if len(c.attempts) > 1)
        by_type: dict[str, dict[str, int]] = {}
        for cell in ran:
            if cell.failed:
                row = by_type.setdefault(cell.error_type or "?", {"failed": 0, "fixed": 0, "unfixed": 0})
                row["failed"] += 1
                row["fixed" if cell.status == "fixed" else "unfixed"] += 1
        return {
            "cells_run": len(ran),
            "passed_as_they_were": sum(c.status == "passed" for c in ran),
            "failed": sum(c.failed for c in ran),
            "fixed_at_first_attempt": sum(len(c.attempts) == 1 for c in fixed),
            "fixed_after_attempts": {str(n): after[n] for n in sorted(after)},
            "unfixed": sum(c.status == "unfixed" for c in ran),
            "not_run": sum(c.status == "not_run" for c in self.cells),
            "by_error_type": dict(sorted(by_type.items())),
        }


# --------------------------------------------------------------------------- the kernel


def _coalesce(outputs: Sequence[Any]) -> list[Any]:
    """Merge adjacent stream outputs of the same name (as a notebook front end shows them)."""
    merged: list[Any] = []
    for output in outputs:
        last = merged[-1] if merged else None
        if (
            output.get("output_type") == "stream"
            and last is not None
            and last.get("output_type") == "stream"
            and last.get("name") == output.get("name")
        ):
            last["text"] += output.get("text", "")
        else:
            merged.append(copy.deepcopy(output))
    return merged


def _until_first_error(outputs: Sequence[Any]) -> list[Any]:
    """The outputs of the original run in a failed ``%%refine`` cell: up to its traceback."""
    kept: list[Any] = []
    for output in outputs:
        kept.append(output)
        if output.get("output_type") == "error":
            return kept
    return list(outputs)


class KernelDied(Exception):
    pass


@dataclass
class _Execution:
    outputs: list[Any]
    reply: dict[str, Any]
    request_id: str = ""  # the execute request's msg_id: how the cell's session is found

    @property
    def ok(self) -> bool:
        return self.reply.get("status") == "ok"

    @property
    def timed_out(self) -> bool:
        return self.reply.get("ename") == _TIMEOUT_ENAME

    @property
    def ename(self) -> str:
        return str(self.reply.get("ename") or "")

    @property
    def evalue(self) -> str:
        return str(self.reply.get("evalue") or "")

    def stdout(self) -> str:
        return "".join(
            o.get("text", "")
            for o in self.outputs
            if o.get("output_type") == "stream" and o.get("name") == "stdout"
        )


class _Kernel:
    """Runs code in the notebook's kernel through nbclient, one scratch cell at a time."""

    def __init__(self, client: Any, log: Any = None) -> None:
        self.client = client
        self.log = log
        self.reply: dict[str, Any] = {}
        self.request_id = ""
        client.on_cell_executed = self._on_executed

    def _on_executed(self, cell: Any, cell_index: int, execute_reply: dict[str, Any] | None) -> None:
        self.reply = dict(execute_reply["content"]) if execute_reply else {}
        parent = (execute_reply or {}).get("parent_header") or {}
        self.request_id = str(parent.get("msg_id") or "")

    def run(self, source: str, index: int, *, store_history: bool, count: int | None = None) -> _Execution:
        from nbclient.exceptions import DeadKernelError

        notebook = self.client.nb
        cell = notebook.cells[index] if index < len(notebook.cells) else None
        scratch = _nbf().v4.new_code_cell(source)
        self.reply, self.request_id = {}, ""
        try:
            self.client.execute_cell(scratch, index, execution_count=count, store_history=store_history)
        except DeadKernelError:
            raise KernelDied(_log_tail(self.log).strip(" ()")) from None
        finally:
            if cell is not None:
                notebook.cells[index] = cell  # execute_cell puts the scratch cell in its place
        return _Execution(list(scratch.outputs), self.reply, self.request_id)

    def value(self, expr: str, index: int) -> Any:
        """The JSON value of ``expr`` evaluated in the kernel (binds no user name)."""
        code = f"__import__('builtins').print({_MARK!r} + __import__('json').dumps({expr}, default=str))"
        run = self.run(code, index, store_history=False)
        for line in run.stdout().splitlines():
            if line.startswith(_MARK):
                return json.loads(line[len(_MARK) :])
        raise RuntimeError(f"no value from the kernel: {run.ename}: {run.evalue}")

    def session(self, run: _Execution, index: int, helper: str = "") -> dict[str, Any] | None:
        """The session the ``%%refine`` cell of ``run`` made, as JSON, or None (found by the
        request that ran it). ``helper``: an expression of one argument, the request id, that
        gives the JSON instead (the bench's richer view of the same session)."""
        if not run.request_id:
            return None
        expr = f"{helper}({run.request_id!r})" if helper else session_expr(run.request_id)
        try:
            found = self.value(expr, index)
        except (RuntimeError, ValueError):
            return None
        return found if isinstance(found, dict) else None


@contextlib.contextmanager
def _kernel(notebook: NotebookNode, name: str, folder: Path, cell_timeout: int) -> Iterator[_Kernel]:
    from nbclient import NotebookClient

    client = NotebookClient(
        notebook,
        kernel_name=name,
        timeout=cell_timeout,
        allow_errors=True,
        interrupt_on_timeout=True,
        error_on_timeout={
            "ename": _TIMEOUT_ENAME,
            "evalue": f"the cell did not finish within {cell_timeout} s (interrupted)",
            "traceback": [],
        },
        coalesce_streams=False,
        record_timing=False,
        resources={"metadata": {"path": str(folder)}},
    )
    with contextlib.ExitStack() as stack:
        # The kernel process's own stderr (start-up warnings, a dying interpreter's last words)
        # goes to a file: shown when the kernel cannot start or dies, not mixed into our lines.
        log = stack.enter_context(tempfile.TemporaryFile(mode="w+b"))
        try:
            stack.enter_context(client.setup_kernel(cwd=str(folder), stderr=log))
        except Exception as err:
            detail = _one_line(str(err)) or type(err).__name__
            raise CliError(f"cannot start the kernel {name!r}: {detail}{_log_tail(log)}") from None
        kc: Any = client.kc
        info = client.wait_for_reply(kc.kernel_info())
        if info is not None and "language_info" in info["content"]:
            notebook.metadata["language_info"] = info["content"]["language_info"]
        yield _Kernel(client, log)


def _log_tail(log: Any) -> str:
    """The last line the kernel process wrote on its stderr, as '' or ' (kernel stderr: ...)'."""
    try:
        log.seek(0)
        lines = [
            ln.strip() for ln in log.read()[-4000:].decode("utf-8", "replace").splitlines() if ln.strip()
        ]
    except (OSError, ValueError):
        return ""
    lines = [ln for ln in lines if "running over TCP without encryption" not in ln]
    return f" (kernel stderr: {_clip(lines[-1], 200)})" if lines else ""


# --------------------------------------------------------------------------- the run


class Fixer:
    """Runs every code cell; repairs the selected ones that fail."""

    def __init__(
        self,
        opts: FixOptions,
        choice: ProviderChoice,
        notebook: NotebookNode,
        *,
        gate: str | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.opts, self.choice, self.notebook = opts, choice, notebook
        # A batch shares one model-request limit and budget between its kernels: ``gate`` is
        # its spec (see nbrefine.batch.gate), installed in the kernel with the extension.
        self.gate = gate
        self.on_line = on_line or _progress
        self.setup_s = 0.0  # loading nbrefine in the kernel (the batch reports it per notebook)
        self.offline_model = _offline_model()
        self.refine_line = "%%refine" + "".join(
            f" {flag} {shlex.quote(str(value))}"
            for flag, value in (
                ("--provider", opts.provider),
                ("--model", opts.model),
                ("--max-attempts", opts.max_attempts),
                ("--timeout", opts.timeout),
                ("--mode", opts.mode),
                ("--max-hints", opts.max_hints),
            )
            if value is not None
        )
        self.count = 0

    # ---------------------------------------------------------------- set-up

    def check_teaching(self) -> TeachingPolicy:
        """``--mode`` / ``--max-hints`` go on every ``%%refine`` line, where a locked notebook
        policy refuses a loosening: refuse it now, once, before any kernel starts. Returns the
        policy the cells get (a setup cell of the notebook may still change it)."""
        from .engine import PolicyGate, PolicyLockedError, policy_from_notebook

        try:
            policy = policy_from_notebook(self.notebook.metadata)
        except ValueError as err:
            raise CliError(f"the notebook's nbrefine policy is not valid: {err}") from None
        try:
            return PolicyGate(policy).effective(self.opts.mode, self.opts.max_hints)
        except (PolicyLockedError, ValueError) as err:
            raise CliError(f"--mode/--max-hints: {err}") from None

    def setup_code(self) -> str:
        lines = ["%load_ext nbrefine", "%config Refine.display = 'text'"]
        if self.opts.provider is not None:
            lines.append(f"%config Refine.provider = {self.opts.provider!r}")
        if self.opts.model is not None:
            lines.append(f"%config Refine.model = {self.opts.model!r}")
        if self.opts.max_attempts is not None:
            lines.append(f"%config Refine.max_attempts = {self.opts.max_attempts}")
        if self.opts.timeout is not None:
            lines.append(f"%config Refine.timeout = {self.opts.timeout!r}")
        if not self.opts.quick_fixes:
            lines.append("%config Refine.quick_fixes = False")
        from .engine import notebook_policy_code

        try:
            policy = notebook_policy_code(self.notebook.metadata)  # an instructor's policy, if any
        except ValueError as err:
            raise CliError(f"the notebook's nbrefine policy is not valid: {err}") from None
        if policy:
            lines.append(policy)
        if self.gate is not None:
            lines.append(f"__import__('nbrefine.batch.gate', fromlist=['_']).install({self.gate!r})")
        return "\n".join(lines)

    def plan(self) -> list[CellResult]:
        results = []
        number = 0
        for index, cell in enumerate(self.notebook.cells):
            if cell.cell_type != "code":
                continue
            number += 1
            selected = self.opts.cells is None or number in self.opts.cells
            result = CellResult(number, index, cell.get("id"), selected, original_source=cell.source)
            if not cell.source.strip():
                result.status = "empty"
            elif "skip-execution" in cell.metadata.get("tags", []):
                result.status = "skipped"
            results.append(result)
        if self.opts.cells is not None and results and max(self.opts.cells) > len(results):
            raise CliError(f"--cells: the notebook has only {len(results)} code cell(s)")
        if self.opts.cells is not None and not results:
            raise CliError("--cells: the notebook has no code cells")
        return results

    def run(self, kernel: _Kernel, results: list[CellResult]) -> RunResult:
        started = time.perf_counter()
        setup = kernel.run(self.setup_code(), 0, store_history=False)
        self.setup_s = time.perf_counter() - started
        if not setup.ok:
            raise CliError(f"the kernel cannot load nbrefine: {setup.ename}: {setup.evalue}")
        todo = [r for r in results if r.status == "not_run"]
        run = RunResult(results)
        for position, result in enumerate(todo, 1):
            cell_started = time.perf_counter()
            try:
                self.run_cell(kernel, result)
            except KernelDied as err:
                message = "the kernel died while the cell ran" + (f" ({err})" if str(err) else "")
                result.status = "unfixed"
                result.error_type = "DeadKernelError"
                result.error_message = message
                result.reason = "the run stopped here"
                self.notebook.cells[result.index].outputs = [
                    _nbf().v4.new_output("error", ename="DeadKernelError", evalue=message, traceback=[])
                ]
                run.stopped = f"the kernel died while cell {result.number} ran; later cells were not run"
            result.duration_s = time.perf_counter() - cell_started
            self.on_line(f"[{position}/{len(todo)}] cell {result.number}: {self.describe(result)}")
            if run.stopped:
                break
        return run

    def describe(self, result: CellResult) -> str:
        if result.status == "passed":
            return "ok"
        head = f"{result.error_type} → " if result.error_type else ""
        if result.status == "fixed":
            n = len(result.attempts)
            return f"{head}fixed at attempt {n} ({result.provider}, {result.repair_s:.2f} s)"
        return _clip(f"still failing: {_failing_text(result)}", 240)

    # ---------------------------------------------------------------- one cell

    def run_cell(self, kernel: _Kernel, result: CellResult) -> None:
        self._run_cell(kernel, result)
        cell = self.notebook.cells[result.index]
        for output in cell.outputs:  # the accepted run's result carries the kernel's own count
            if output.get("output_type") == "execute_result":
                output["execution_count"] = cell.execution_count

    def _run_cell(self, kernel: _Kernel, result: CellResult) -> None:
        cell = self.notebook.cells[result.index]
        source = cell.source
        first_line = source.partition("\n")[0]
        as_is = first_line.lstrip().startswith("%%refine")
        # ``%refine accept|reject|status`` cells drive nbrefine themselves, and a cell tagged
        # raises-exception is meant to fail: run them as they are.
        expected_error = "raises-exception" in cell.metadata.get("tags", [])
        wrapped = (
            result.selected
            and not as_is
            and not expected_error
            and not first_line.lstrip().startswith("%refine")
        )
        code = f"{self.refine_line}\n{source}" if wrapped else source
        self.count += 1
        cell.execution_count = self.count
        run = kernel.run(code, result.index, store_history=True, count=self.count)
        if run.timed_out:
            result.status = "unfixed"
            result.error_type = _TIMEOUT_ENAME
            result.error_message = run.evalue
            result.reason = "see --cell-timeout"
            timeout = _nbf().v4.new_output("error", ename=_TIMEOUT_ENAME, evalue=run.evalue, traceback=[])
            cell.outputs = [*_coalesce(run.outputs), timeout]
            return
        if run.ok or expected_error:
            cell.outputs = _coalesce(run.outputs)
            result.status = "passed"  # with raises-exception, failing is passing
            return
        result.status = "unfixed"
        result.error_type = run.ename or None
        result.error_message = _one_line(run.evalue)
        if not result.selected or not (wrapped or as_is) or run.ename != "RefineStop":
            cell.outputs = _coalesce(run.outputs)
            result.reason = "" if result.selected else "not selected by --cells"
            return
        session = kernel.session(run, result.index)
        if session is None:
            _no_session(result, cell, run)
            return
        self.take_session(result, session)
        teaching = session.get("teaching")
        if teaching and teaching.get("status") != "fix_loop":
            _take_hint(result, cell, run, teaching, as_is)
            return
        if session["status"] != "fixed" or session.get("fixed_code") is None:
            cell.outputs = _coalesce(run.outputs if as_is else _until_first_error(run.outputs))
            message = session.get("message") or "no fix"
            unfixed = session["status"] in ("unfixed", "changes_checks")  # the latter says it is unverified
            result.reason = message if unfixed else f"{session['status']}: {message}"
            return
        accepted = kernel.run(_ACCEPT_CODE, result.index, store_history=False)
        after = kernel.session(run, result.index)
        if after is not None and after.get("decision") == "pending":  # Accept ran nothing: see above
            cell.outputs = _coalesce(run.outputs if as_is else _until_first_error(run.outputs))
            result.reason = f"not applied: {after.get('accept_refused') or 'Accept refused it'}"
            return
        fixed_code = session["fixed_code"]
        result.fixed_source = f"{first_line}\n{fixed_code}" if as_is else fixed_code
        cell.source = result.fixed_source
        cell.outputs = _coalesce(accepted.outputs)
        cell.metadata["nbrefine"] = {
            "original_source": source,
            "attempts": len(result.attempts),
            "provider": result.provider,
            "model": result.model,
            "fixed_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "error_type": result.error_type,
            "explanation": result.explanation,
            "version": __version__,
        }
        if accepted.ok and after and after.get("accept_ok"):
            result.status = "fixed"
        else:
            errors = [o for o in accepted.outputs if o.get("output_type") == "error"]
            raised = f"{errors[0].get('ename')}: {errors[0].get('evalue')}" if errors else accepted.evalue
            result.reason = f"the fix passed its trial run but raised when accepted in the kernel: {raised}"
            cell.metadata["nbrefine"]["accept_failed"] = raised

    def take_session(self, result: CellResult, session: dict[str, Any]) -> None:
        failure = session.get("failure") or {}
        if failure:
            result.error_type = failure.get("error_type") or result.error_type
            result.error_message = _one_line(failure.get("message") or "") or result.error_message
        result.attempts = list(session.get("attempts") or [])
        result.repair_s = sum(float(a.get("duration_s") or 0.0) for a in result.attempts)
        result.diff = session.get("diff") or ""
        result.explanation = session.get("explanation") or ""
        last = result.attempts[-1] if result.attempts else {}
        result.model = last.get("model") or session.get("model") or ""
        result.provider = self.provider_of(last.get("model"))

    def provider_of(self, model: str | None) -> str:
        """Which provider answered, from the model name on its reply."""
        if self.choice.name == "offline":
            return "offline"
        if self.choice.quick_fixes and model == self.offline_model:
            return "offline"
        return self.choice.name


def _no_session(result: CellResult, cell: Any, run: _Execution) -> None:
    """RefineStop, yet no session of this cell (nbrefine itself failed): report the error the cell
    raised, from its traceback, rather than RefineStop."""
    cell.outputs = _coalesce(run.outputs)
    raised = next((o for o in run.outputs if o.get("output_type") == "error"), None)
    if raised is not None and raised.get("ename") != "RefineStop":
        result.error_type = str(raised.get("ename") or "") or result.error_type
        result.error_message = _one_line(str(raised.get("evalue") or ""))
    result.reason = "nbrefine found no %%refine session for this cell"


def _take_hint(result: CellResult, cell: Any, run: _Execution, hint: dict[str, Any], as_is: bool) -> None:
    """A teaching mode answered instead of a fix: the cell keeps its source and its traceback;
    the hint goes below it (a %%refine cell of the notebook printed it already) and into
    ``metadata.nbrefine``."""
    result.hint = hint
    header = hint.get("header") or "no hint"
    failed = hint.get("status") == "error"
    result.reason = f"no hint: {hint.get('text')}" if failed else f"{header} given ({hint.get('mode')} mode)"
    outputs = _coalesce(run.outputs if as_is else _until_first_error(run.outputs))
    if not as_is and not failed:
        outputs.append(_hint_output(hint))
    cell.outputs = outputs
    cell.metadata["nbrefine"] = {
        "mode": hint.get("mode"),
        "hint_header": hint.get("header"),
        "hint": hint.get("text"),
        "error_type": result.error_type,
        "version": __version__,
    }


def _hint_output(hint: dict[str, Any]) -> Any:
    title = f"nbrefine · {hint.get('header')} ({hint.get('mode')} mode)"
    text = str(hint.get("text") or "")
    data = {"text/plain": f"{title}\n{text}", "text/markdown": f"**{title}**\n\n{text}"}
    return _nbf().v4.new_output("display_data", data=data)


def _failing_text(result: CellResult) -> str:
    """``KeyError: 'x' — why it stayed unfixed``, without saying the error twice."""
    error = _one_line(result.error_message)
    detail = f"{result.error_type}: {error}" if result.error_type else error
    why = _one_line(result.reason)
    if error and why.endswith(f": {error}"):
        why = why[: -len(error) - 2]
    return f"{detail} — {why}" if why else detail


def _nbf() -> Any:
    """nbformat, imported when needed (it takes a second: usage errors should not wait for it).
    Typed Any: nbformat has no annotations, and this module is an adapter."""
    import nbformat

    return nbformat


def _one_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- output


def write_atomic(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``:
    ``path`` holds either its old content or the new one, never half of it. Missing folders are
    made (only now, so a run that fails or is interrupted leaves none behind)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def notebook_text(notebook: NotebookNode) -> str:
    text: str = _nbf().writes(notebook)
    return text if text.endswith("\n") else text + "\n"


def summary_text(run: RunResult, opts: FixOptions, choice: ProviderChoice, written: str) -> str:
    s = run.summary()
    rows = [
        ("cells run", s["cells_run"]),
        ("passed as they were", s["passed_as_they_were"]),
        ("failed", s["failed"]),
        ("  fixed at first attempt", s["fixed_at_first_attempt"]),
    ]
    after = s["fixed_after_attempts"]
    if after:
        rows.extend((f"  fixed after {n} attempts", count) for n, count in after.items())
    else:
        rows.append(("  fixed after more attempts", 0))
    rows.append(("  unfixed", s["unfixed"]))
    if s["not_run"]:
        rows.append(("not run", s["not_run"]))
    lines = [f"nbrefine fix {opts.notebook}: {s['cells_run']} cells in {run.duration_s:.1f} s", ""]
    lines.extend(f"  {label:<28}{value:>4}" for label, value in rows)
    if s["by_error_type"]:
        width = max(12, *(len(k) for k in s["by_error_type"]))
        lines += ["", f"  {'error type':<{width}}  failed  fixed  unfixed"]
        for name, row in s["by_error_type"].items():
            lines.append(f"  {name:<{width}}  {row['failed']:>6}  {row['fixed']:>5}  {row['unfixed']:>7}")
    for cell in run.cells:
        if cell.status == "fixed":
            n = len(cell.attempts)
            lines += [
                "",
                f"cell {cell.number}{_id_note(cell)}: {cell.error_type}, fixed at attempt {n} "
                f"({cell.provider}, {cell.repair_s:.2f} s)",
            ]
            lines.extend("  " + line for line in cell.diff.splitlines())
    unfixed = [c for c in run.cells if c.status == "unfixed"]
    if unfixed:
        lines += ["", "still failing:"]
        for c in unfixed:
            lines.append(_clip(f"  cell {c.number}{_id_note(c)}: {_failing_text(c)}", 300))
            if c.hint and c.hint.get("status") != "error":
                lines.extend(f"    {line}" for line in str(c.hint.get("text") or "").splitlines())
        declined = [c for c in unfixed if c.attempts]
        if declined and choice.name == "offline":
            first, _, rest = OFFLINE_HINT.partition("; ")
            lines += [f"  ({first};", f"  {rest})"]
    lines.append("")
    if run.stopped:
        lines.append(f"stopped: {run.stopped}")
    lines.append(written)
    failing = "1 cell still fails" if len(unfixed) == 1 else f"{len(unfixed)} cells still fail"
    lines.append("every cell passes" if run.all_pass else failing + (" (run stopped)" if run.stopped else ""))
    return "\n".join(lines)


def _id_note(cell: CellResult) -> str:
    return f" [{cell.cell_id}]" if cell.cell_id else ""


def report_json(
    run: RunResult, opts: FixOptions, choice: ProviderChoice, written: str | None, code: int
) -> str:
    return json.dumps(report_data(run, opts, choice, written, code), indent=2, ensure_ascii=False) + "\n"


def report_data(
    run: RunResult, opts: FixOptions, choice: ProviderChoice, written: str | None, code: int
) -> dict[str, Any]:
    """One notebook's report as plain data (the JSON report; a batch keeps one per notebook)."""
    return {
        "nbrefine_version": __version__,
        "notebook": str(opts.notebook),
        "output": written,
        "provider": {
            "name": choice.name,
            "requested": choice.requested,
            "quick_fixes": choice.quick_fixes,
            "model": choice.model,
            "note": choice.note,
        },
        "duration_s": round(run.duration_s, 3),
        "exit_code": code,
        "stopped": run.stopped,
        "summary": run.summary(),
        "cells": [c.to_json() for c in run.cells],
    }


def report_markdown(
    run: RunResult, opts: FixOptions, choice: ProviderChoice, written: str | None, code: int
) -> str:
    s = run.summary()
    out = [
        f"# nbrefine report: `{opts.notebook}`",
        "",
        f"- {choice.describe()}",
        f"- output: {f'`{written}`' if written else 'none (dry run)' if opts.output is None else 'none'}",
        f"- ran in {run.duration_s:.1f} s; exit code {code}"
        + (" (every cell passes)" if run.all_pass else " (some cell still fails)"),
    ]
    if run.stopped:
        out.append(f"- **stopped**: {run.stopped}")
    after = ", ".join(f"{n} attempts: {c}" for n, c in s["fixed_after_attempts"].items()) or "0"
    out += [
        "",
        "| cells run | passed as they were | failed | fixed at first attempt "
        "| fixed after more attempts | unfixed |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {s['cells_run']} | {s['passed_as_they_were']} | {s['failed']} | {s['fixed_at_first_attempt']} "
        f"| {after} | {s['unfixed']} |",
    ]
    if s["by_error_type"]:
        out += ["", "| error type | failed | fixed | unfixed |", "|---|---:|---:|---:|"]
        out += [
            f"| {k} | {v['failed']} | {v['fixed']} | {v['unfixed']} |" for k, v in s["by_error_type"].items()
        ]
    out += [
        "",
        "## Cells",
        "",
        "| cell | id | result | error | attempts | provider | time |",
        "|---:|---|---|---|---:|---|---:|",
    ]
    for cell in run.cells:
        if cell.status in ("empty", "skipped"):
            continue
        error = _md(f"{cell.error_type}: {cell.error_message}") if cell.error_type else ""
        out.append(
            f"| {cell.number} | {_md(cell.cell_id or '')} | {cell.status} | {error} "
            f"| {len(cell.attempts) or ''} | {cell.provider} | {cell.duration_s:.2f} s |"
        )
    for cell in run.cells:
        if cell.status == "fixed":
            out += [
                "",
                f"### Cell {cell.number}: {cell.error_type}, fixed at attempt {len(cell.attempts)}",
                "",
            ]
            if cell.explanation:
                out += [cell.explanation, ""]
            out += ["```diff", cell.diff, "```"]
        elif cell.status == "unfixed":
            out += ["", f"### Cell {cell.number}: still failing", ""]
            out.append(
                f"`{cell.error_type}: {_one_line(cell.error_message)}`"
                if cell.error_type
                else cell.error_message
            )
            if cell.hint and cell.hint.get("status") != "error":
                out += ["", f"**{cell.hint.get('header')}** ({cell.hint.get('mode')} mode)", ""]
                out.append(str(cell.hint.get("text") or ""))
            elif cell.reason:
                out += ["", cell.reason]
    if choice.name == "offline" and any(c.status == "unfixed" and c.attempts for c in run.cells):
        out += ["", f"_{OFFLINE_HINT}_"]
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return _clip(_one_line(text), 120).replace("|", "\\|")


# --------------------------------------------------------------------------- main


def fix(opts: FixOptions) -> int:
    notebook = read_notebook(opts.notebook)
    if opts.output is not None:
        if not opts.in_place and opts.output.resolve() == opts.notebook.resolve():
            raise CliError(f"{opts.output}: that is the input notebook; use --in-place to overwrite it")
        check_writable(opts.output, "output")
        if opts.in_place:
            check_writable(opts.notebook.with_name(opts.notebook.name + ".bak"), "backup")
    if opts.report is not None:
        check_writable(opts.report, "--report")
    kernel_name = opts.kernel or notebook.metadata.get("kernelspec", {}).get("name") or "python3"
    check_kernel(kernel_name)
    choice = choose_provider(opts)
    fixer = Fixer(opts, choice, notebook)
    fixer.check_teaching()
    results = fixer.plan()

    _progress(f"nbrefine {__version__}: fixing {opts.notebook} in kernel {kernel_name!r}")
    _progress(choice.describe())
    folder = opts.notebook.resolve().parent
    started = time.perf_counter()
    with _kernel(notebook, kernel_name, folder, opts.cell_timeout) as kernel:
        run = fixer.run(kernel, results)
    run.duration_s = time.perf_counter() - started  # with the kernel's start and shutdown

    code = EXIT_OK if run.all_pass else EXIT_FAILING
    problems: list[str] = []
    written: str | None = None
    unchanged = opts.in_place and all(c.fixed_source is None for c in run.cells)
    if opts.output is not None and not unchanged:
        text = notebook_text(notebook)
        try:
            if opts.in_place:
                backup = opts.notebook.with_name(opts.notebook.name + ".bak")
                mode = opts.notebook.stat().st_mode & 0o7777
                write_atomic(backup, opts.notebook.read_bytes(), mode=mode)
                write_atomic(opts.notebook, text, mode=mode)
            else:
                write_atomic(opts.output, text)
            written = str(opts.output)
        except OSError as err:
            problems.append(f"cannot write {opts.output}: {err.strerror or err}")
    if written:
        note = f"wrote {written}" + (f" (backup: {opts.notebook.name}.bak)" if opts.in_place else "")
    elif unchanged:
        note = f"no cell changed: {opts.notebook} left as it was (no backup made)"
    else:
        note = "dry run: no notebook written" if opts.output is None else "no notebook written"
    if opts.report is not None:
        render = report_json if opts.report.suffix.lower() == ".json" else report_markdown
        try:
            write_atomic(opts.report, render(run, opts, choice, written, code))
            note += f"; report: {opts.report}"
        except OSError as err:
            problems.append(f"cannot write the report {opts.report}: {err.strerror or err}")
    print(summary_text(run, opts, choice, note), flush=True)
    if run.stopped:
        _progress(f"nbrefine: {run.stopped}")
    if problems:
        raise CliError("; ".join(problems))
    return code


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated()


def main(argv: Sequence[str] | None = None) -> int:
    """``nbrefine`` command line; returns the exit status."""
    parser = build_parser()
    previous = None
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
        if args.command is None:
            raise CliError("a command is required: fix or bench (see 'nbrefine --help')")
        if args.command == "bench":
            from . import benchcmd

            return benchcmd.run(args)
        from . import batchcmd

        batch = batchcmd.options(args) if batchcmd.is_batch(args) else None
        opts = _options(args) if batch is None else None
        with contextlib.suppress(ValueError):  # only the main thread may set handlers
            previous = signal.signal(signal.SIGTERM, _on_sigterm)
        if batch is not None:
            return batchcmd.run(batch)
        assert opts is not None
        return fix(opts)
    except CliError as err:
        print(f"nbrefine: error: {err}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except SystemExit as exit_:  # --help, --version
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else EXIT_USAGE)
    except (KeyboardInterrupt, _Terminated):
        print("nbrefine: interrupted; nothing was written", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())

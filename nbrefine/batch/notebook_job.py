"""One notebook of a batch: :func:`repair_one` runs and repairs it in its own kernel.

This is the unit every executor runs: the local process pool today, a cluster's task tomorrow.
Its input (:class:`NotebookTask`) and its output (:class:`NotebookResult`: the repaired notebook's
text, its report as plain data and its timings) are picklable and small; it writes nothing. The
client that receives the result writes the files, so a job can run where the outputs are not.

May import: :mod:`nbrefine.headless`, :mod:`nbrefine.engine`, :mod:`nbrefine.providers`,
:mod:`nbrefine.reports`, :mod:`nbrefine._errors`, nbclient, nbformat and jupyter_client (lazily,
inside the worker process) and the standard library."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from ..headless import FixOptions, ProviderChoice, RunResult, SpareKernels
    from ..headless.forked_kernels import Zygote, ZygoteLink

__all__ = ["JobSettings", "NotebookResult", "NotebookTask", "batch_zygote", "repair_one", "spare_kernels"]

#: ``emit(kind, data)``: what a job tells its client while it runs ("line": a progress line of
#: one cell, "note": a line for every run but a quiet one, "kernel": the kernel's process id, so
#: a client can stop it if the job cannot, "spare": the same of the kernel started ahead).
Emit = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class JobSettings:
    """How every notebook of a batch is repaired (the ``nbrefine fix`` options that say so)."""

    provider: str | None = None
    model: str | None = None
    max_attempts: int | None = None
    timeout: float | None = None
    cell_timeout: int = 600
    kernel: str | None = None
    cells: tuple[int, ...] | None = None
    quick_fixes: bool = True
    mode: str | None = None
    max_hints: int | None = None
    early_trials: bool = True

    def fix_options(self, notebook: Path) -> FixOptions:
        from ..headless import FixOptions

        return FixOptions(
            notebook=notebook,
            output=None,
            in_place=False,
            provider=self.provider,
            model=self.model,
            max_attempts=self.max_attempts,
            timeout=self.timeout,
            cell_timeout=self.cell_timeout,
            report=None,
            kernel=self.kernel,
            cells=frozenset(self.cells) if self.cells is not None else None,
            quick_fixes=self.quick_fixes,
            mode=self.mode,
            max_hints=self.max_hints,
            early_trials=self.early_trials,
        )


@dataclass(frozen=True)
class NotebookTask:
    index: int  # the notebook's place in the batch
    path: str  # the input notebook, as reports name it
    folder: str  # where its kernel runs (the notebook's own folder)
    settings: JobSettings
    choice: ProviderChoice  # resolved once by the client, so every job uses the same provider
    gate: str | None = None  # spec of the shared request gate (nbrefine.batch.gate)
    text: str | None = None  # the notebook's text; None: read ``path`` where the job runs
    submitted: float = 0.0  # time.time() when the client queued it
    # The folder of the notebook this job's worker likely runs next (the executor looks ahead
    # in its queue): a kernel is started there while this one runs. "": none next, no spare.
    next_folder: str = ""


@dataclass
class NotebookResult:
    index: int
    path: str
    status: str  # "pass" | "fail" (some cell still fails) | "error" (bad input: not run)
    message: str = ""  # one line: why it could not run, or why the run stopped
    notebook: str | None = None  # the repaired notebook's text (None: nothing to write)
    changed: bool = False  # some cell's source changed (a fix was written into it)
    report: dict[str, Any] = field(default_factory=dict)  # cli.report_data, and more
    timings: dict[str, float] = field(default_factory=dict)
    worker: str = ""  # host:pid of the process that ran it
    started_at: float = 0.0  # time.time() when the job began, and when it ended
    ended_at: float = 0.0
    # Earlier runs of this notebook whose worker died mid-notebook (a cluster runs it again once):
    # {"worker": address, "started_at": time.time(), "died": True} each.
    attempts: list[dict[str, Any]] = field(default_factory=list)


def repair_one(
    task: NotebookTask, emit: Emit | None = None, spares: SpareKernels | None = None
) -> NotebookResult:
    """Run ``task``'s notebook cell by cell in a new kernel, repairing what fails; the kernel is
    shut down before this returns. Bad input comes back as status "error", never raised.

    With ``spares`` (a worker that runs one notebook after another), the kernel started ahead
    for this notebook is used, one is started for the next notebook while this one runs
    (``task.next_folder``), and this one is shut down in the background (``spares`` waits for it
    when it closes)."""
    from .._errors import BadInputError as CliError

    started = time.perf_counter()
    result = NotebookResult(task.index, task.path, "error", worker=f"{socket.gethostname()}:{os.getpid()}")
    result.started_at = time.time()
    result.timings["queued_s"] = round(max(0.0, time.time() - task.submitted), 3) if task.submitted else 0.0
    try:
        _run(task, result, emit or (lambda kind, data: None), spares)
    except CliError as err:
        result.status, result.message = "error", str(err)
    result.timings["total_s"] = round(time.perf_counter() - started, 3)
    result.ended_at = time.time()
    return result


def _run(task: NotebookTask, result: NotebookResult, emit: Emit, spares: SpareKernels | None) -> None:
    from ..headless import EXIT_FAILING, EXIT_OK, KernelDriver, kernel_name_of, notebook_text, run_notebook
    from ..reports.notebook import report_data

    path = Path(task.path)
    notebook = _load(task, path)
    opts = task.settings.fix_options(path)
    kernel_name = kernel_name_of(opts, notebook)

    def on_kernel(kernel: KernelDriver) -> None:
        emit("kernel", {"pid": kernel.pid})
        clock = time.perf_counter()
        if spares is not None and task.next_folder:
            _start_spare(spares, task, kernel_name, emit)
        result.timings["spare_start_s"] = round(time.perf_counter() - clock, 3)

    done = run_notebook(
        opts,
        task.choice,
        notebook,
        Path(task.folder),
        gate=task.gate,
        on_line=lambda line: emit("line", {"text": line}),
        on_kernel=on_kernel,
        spares=spares,
        note=functools.partial(_note, emit),
        usage=True,
    )
    result.timings.update(done.timings)
    run, policy = done.run, done.policy
    run.duration_s = sum(result.timings.get(k, 0.0) for k in ("kernel_start_s", "setup_s", "cells_s"))
    result.status = "pass" if run.all_pass else "fail"
    result.message = run.stopped
    result.notebook = notebook_text(notebook)
    result.changed = any(c.fixed_source is not None for c in run.cells)
    report = report_data(run, opts, task.choice, None, EXIT_OK if run.all_pass else EXIT_FAILING)
    report["teaching"] = {"mode": policy.mode, "max_hints": policy.max_hints, "source": policy.source}
    report["usage"] = done.usage
    _add_cell_metadata(report, notebook, run)
    result.report = report


def _start_spare(spares: SpareKernels, task: NotebookTask, kernel_name: str, emit: Emit) -> None:
    """Start the kernel of the worker's next notebook now: it boots, and imports what a repair
    needs, while this notebook runs. Same kernel name (most batches use one); in the folder the
    executor expects next. Its pid goes to the client, which kills it if this worker dies."""
    from ..headless.kernel import call_code

    warm = call_code("warm_up", task.choice.name)
    emit("spare", {"pid": spares.prepare(kernel_name, Path(task.next_folder), warm)})


def _note(emit: Emit, line: str) -> None:
    emit("note", {"text": line})


def _load(task: NotebookTask, path: Path) -> NotebookNode:
    from ..headless import parse_notebook, read_notebook

    return read_notebook(path) if task.text is None else parse_notebook(task.text, path)


def _add_cell_metadata(report: dict[str, Any], notebook: NotebookNode, run: RunResult) -> None:
    """nbgrader's cell metadata (``grade_id`` names an exercise) on each cell of the report."""
    for cell, data in zip(run.cells, report["cells"], strict=True):
        meta = notebook.cells[cell.index].metadata.get("nbgrader")
        if isinstance(meta, dict) and meta.get("grade_id"):
            data["nbgrader"] = {k: meta.get(k) for k in ("grade_id", "grade", "solution", "points")}


def warm_up() -> float:
    """Import what every job needs (nbclient alone takes seconds), once per worker process, so a
    notebook's timings hold only its own costs. Returns the seconds it took."""
    started = time.perf_counter()
    from .. import engine, headless  # noqa: F401
    from ..headless.notebook_files import nbf

    nbf()  # first: it imports nbformat without the grammars nbclient would build
    import jupyter_client.kernelspec  # noqa: F401
    import nbclient  # noqa: F401

    from ..providers import offline  # noqa: F401

    return time.perf_counter() - started


def spare_kernels(zygote: ZygoteLink | None = None) -> SpareKernels:
    """What a worker that runs notebook after notebook keeps between them (see :func:`repair_one`);
    its kernels forked from ``zygote`` (:func:`batch_zygote`) when they are launched as it expects."""
    from ..headless import SpareKernels

    return SpareKernels(zygote)


def batch_zygote(task: NotebookTask) -> Zygote | None:
    """A zygote for a batch's workers to share (:meth:`~nbrefine.headless.forked_kernels.Zygote.link`),
    started now in the client, before its workers: for the kernel of ``task``, the batch's first
    notebook (``--kernel``, else the kernel spec its text names, else python3). None where none can
    be started; a worker whose kernel is another gets a zygote of its own, as without this."""
    from ..headless.forked_kernels import batch_zygote as started

    return started(task.settings.kernel or _named_kernel(task) or "python3")


_PEEK_LIMIT = 1 << 24  # a bigger first notebook is not read in the client for its kernel's name


def _named_kernel(task: NotebookTask) -> str:
    """The kernel spec name the task's notebook names, read as JSON (the client does not import
    nbformat); "" when it names none or cannot be read here (its job will say why)."""
    try:
        if task.text is None and Path(task.path).stat().st_size > _PEEK_LIMIT:
            return ""
        text = task.text if task.text is not None else Path(task.path).read_text(encoding="utf-8")
        spec = json.loads(text).get("metadata", {}).get("kernelspec", {})
    except (OSError, ValueError, AttributeError):
        return ""
    name = spec.get("name") if isinstance(spec, dict) else None
    return name if isinstance(name, str) else ""


def kill_kernel(pid: int) -> None:
    """Last resort for a kernel its job could not shut down: its whole process group (the kernel
    runs in a session of its own, with the trial processes it forked)."""
    if pid > 0:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

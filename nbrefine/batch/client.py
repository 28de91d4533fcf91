"""The client side of a batch: plan it, hand the notebooks to an executor, take each result as
it comes (write its files, record it, count it, forget it), and render the reports at the end.

Nothing is written half-done: each notebook, feedback file and report appears whole (atomic
replace) or not at all. Ctrl-C (or SIGTERM) cancels the executor, whose jobs shut their kernels
down, records the notebooks not run, and still renders the reports over what was done.

May import: this package, :mod:`nbrefine.reports`, :mod:`nbrefine.headless`, :mod:`nbrefine._errors`,
:mod:`nbrefine._version`, the standard library and (lazily, for Message Batches) the ``anthropic``
SDK."""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..reports.classroom import ClassTotals, feedback_markdown, is_teaching
from ..reports.summary import Totals, write_json, write_junit, write_markdown
from .display import NORMAL, Display
from .gate import FileGate, GateLedger, GateLimits, RequestGate
from .inputs import BatchInput, expand, nbgrader_place
from .message_batches.spool import spool_spec
from .notebook_job import JobSettings, NotebookResult, NotebookTask
from .pool import Event, Executor, LocalPool
from .record import RunRecord, file_digest, settings_key

if TYPE_CHECKING:
    from ..headless import ProviderChoice
    from .message_batches.rounds import BatchRounds

__all__ = ["REPORT_SUFFIXES", "BatchOptions", "run_batch"]

REPORT_SUFFIXES = (".md", ".json", ".xml", ".html")
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class BatchOptions:
    arguments: tuple[str, ...]
    settings: JobSettings
    choice: ProviderChoice
    output_dir: Path | None = None
    in_place: bool = False
    dry_run: bool = False
    jobs: int = 1
    resume: bool = False
    record: Path = Path("nbrefine-run.jsonl")
    reports: tuple[Path, ...] = ()
    fail_on: str = "unfixed"
    verbosity: int = NORMAL
    limits: GateLimits = field(default_factory=GateLimits)
    cluster: str | None = None  # a dask.distributed scheduler's address (--cluster): run there
    batch: bool = (
        False  # --batch: each round's model requests as one Message Batch (message_batches/rounds.py)
    )

    def key_settings(self) -> dict[str, Any]:
        """What decides a notebook's outcome and outputs (``--resume`` skips only on a match)."""
        return {
            "version": __version__,
            "settings": self.settings,
            "provider": (self.choice.name, self.choice.quick_fixes, self.choice.model),
            "output_dir": str(self.output_dir.resolve()) if self.output_dir else None,
            "in_place": self.in_place,
            "dry_run": self.dry_run,
        }


class BatchRun:
    """One ``nbrefine fix`` over many notebooks."""

    def __init__(self, opts: BatchOptions, executor: Executor | None = None) -> None:
        self.opts = opts
        self.executor = executor or _executor(opts)
        self.totals = Totals(fail_on=opts.fail_on)
        self.classroom = ClassTotals()
        self.class_report = any(p.suffix.lower() == ".html" for p in opts.reports)
        self.inputs: list[BatchInput] = []
        self.pending: dict[int, BatchInput] = {}  # notebooks handed out and not back yet
        self.interrupted = False
        self.started = time.time()
        self.workers: list[float] = []  # when each worker was ready, seconds into the batch
        self.rounds: BatchRounds | None = None  # --batch

    def run(self) -> int:
        opts = self.opts
        connect = getattr(self.executor, "connect", None)
        if connect is not None:  # a cluster: an address that answers nothing is bad usage, said first
            connect()
        self.inputs = expand(
            opts.arguments, output_dir=opts.output_dir, in_place=opts.in_place, dry_run=opts.dry_run
        )
        header = {"settings_key": settings_key(opts.key_settings()), "started": self.started,
                  "arguments": list(opts.arguments), "notebooks": len(self.inputs)}  # fmt: skip
        self.record = RunRecord(opts.record, header, resume=opts.resume)
        self.display = Display(len(self.inputs), opts.verbosity)
        gate_dir = Path(tempfile.mkdtemp(prefix="nbrefine-gate-"))
        from .._errors import Terminated as _Terminated

        try:
            self.display.note(f"nbrefine {__version__}: {len(self.inputs)} notebooks, {self._where()}")
            self.display.note(opts.choice.describe())
            todo = self._take_earlier()
            self.gate = self._create_gate(gate_dir)
            if opts.batch:
                self.rounds = self._start_rounds(gate_dir / "spool")
            self._run(todo)
        except (KeyboardInterrupt, _Terminated):
            self.interrupted = True
            with _no_interrupts():
                self.display.note("nbrefine: interrupted: stopping every job and its kernel …")
                self.executor.cancel()
                self._stop_rounds()
                self._record_not_run()
        except BaseException:
            with _no_interrupts():
                self.executor.cancel()  # whatever went wrong here, no kernel is left running
            raise
        finally:
            with _no_interrupts():
                self._stop_rounds()
                self.display.close()
                self._finish()
                self._close()
                shutil.rmtree(gate_dir, ignore_errors=True)
        return EXIT_INTERRUPTED if self.interrupted else self.totals.exit_code()

    # ---------------------------------------------------------------- before

    def _where(self) -> str:
        describe = getattr(self.executor, "describe", None)
        return str(describe()) if describe is not None else f"{self.opts.jobs} jobs"

    def _create_gate(self, folder: Path) -> RequestGate:
        """One gate for every job: the executor's own (a cluster's lives on its scheduler), else
        lock files in ``folder``, for the processes of this machine."""
        create = getattr(self.executor, "create_gate", None)
        if create is not None:
            gate: RequestGate = create(self.opts.limits, self._spent_before())
            return gate
        return FileGate.create(folder, self.opts.limits, self._spent_before())

    def _start_rounds(self, spool: Path) -> BatchRounds:
        from .message_batches.rounds import BatchRounds

        rounds = BatchRounds(
            spool,
            client=_batch_client,
            record=self.record,
            display=self.display,
            earlier=self.record.batches_before,
        )
        rounds.start()
        return rounds

    def _stop_rounds(self) -> None:
        if self.rounds is not None:
            self.rounds.stop()

    def _close(self) -> None:
        for thing in (getattr(self, "gate", None), self.executor):
            close = getattr(thing, "close", None)
            if close is not None:
                close()

    def _take_earlier(self) -> list[tuple[int, BatchInput]]:
        """Record what needs no job (resumed notebooks, arguments that named none); the rest."""
        todo = []
        resumed = 0
        self.resumed_usage = GateLedger()
        for index, item in enumerate(self.inputs):
            if item.problem:
                entry = {
                    "input": str(item.path),
                    "path": str(item.path),
                    "status": "error",
                    "message": item.problem,
                }
                self._add(entry)
                self.display.finished(_line(entry), ran=False)
                continue
            earlier = self.record.done_before(item.path, item.output) if self.opts.resume else None
            if earlier is None:
                todo.append((index, item))
                continue
            entry = {k: v for k, v in earlier.items() if k not in ("kind", "run", "settings_key")}
            self._add({**entry, "resumed": True})
            self._count_usage(entry)
            resumed += 1
            self.display.finished(f"= {item.path}: done by an earlier run ({entry.get('status')})", ran=False)
        if self.opts.resume:
            self.display.note(f"--resume: {resumed} notebooks done before")
        return todo

    def _count_usage(self, entry: dict[str, Any]) -> None:
        usage = (entry.get("report") or {}).get("usage") or {}
        self.resumed_usage.tokens += sum(
            int(usage.get(k) or 0)
            for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
        )
        self.resumed_usage.usd += float(usage.get("cost_usd") or 0.0)

    def _spent_before(self) -> GateLedger | None:
        spent = self.resumed_usage
        return spent if spent.tokens or spent.usd else None

    # ---------------------------------------------------------------- during

    def _tasks(self, todo: list[tuple[int, BatchInput]]) -> Iterator[NotebookTask]:
        for index, item in todo:
            self.pending[index] = item
            yield NotebookTask(
                index=index,
                path=str(item.path),
                folder=str(item.path.resolve().parent),
                settings=self.opts.settings,
                choice=self.opts.choice,
                gate=self.gate.spec + (spool_spec(self.rounds.spool, index) if self.rounds else ""),
                submitted=time.time(),
            )

    def _run(self, todo: list[tuple[int, BatchInput]]) -> None:
        for message in self.executor.run(self._tasks(todo)):
            if isinstance(message, Event):
                self._on_event(message)
            else:
                self._on_result(message)

    def _on_event(self, event: Event) -> None:
        item = self.pending.get(event.index)
        if event.kind == "ready":  # seconds from the start of the batch to a worker ready to run
            self.workers.append(time.time() - self.started)
        elif event.kind == "start":
            self.display.started()
            if self.rounds is not None:
                self.rounds.job_started(event.index)
        elif event.kind == "retry" and item is not None:  # its worker died: another one runs it
            self.display.retrying(f"↻ {item.path}: its worker died; running it again on another worker")
        elif event.kind == "line" and item is not None:
            self.display.cell_line(str(item.path), str(event.data.get("text", "")))
        elif event.kind == "note" and item is not None:  # e.g. its kernel started ahead had died
            self.display.note(f"{item.path}: {event.data.get('text', '')}")

    def _on_result(self, result: NotebookResult) -> None:
        item = self.pending.pop(result.index, None) or self.inputs[result.index]
        if self.rounds is not None:
            self.rounds.job_ended(result.index)
        entry = self._entry(item, result)
        if result.status != "error":
            self._write_outputs(item, result, entry)
        if is_teaching(entry) or (result.status == "error" and self._teaching_run()):
            self._write_feedback(item, entry)
        self._add(entry)
        self.display.finished(_line(entry), ran=True)

    def _teaching_run(self) -> bool:
        return self.opts.settings.mode not in (None, "fix")

    def _entry(self, item: BatchInput, result: NotebookResult) -> dict[str, Any]:
        place = nbgrader_place(item.path.resolve())
        return {
            "input": str(item.path.resolve()),
            "path": str(item.path),
            "status": result.status,
            "message": result.message,
            "output": None,
            "input_sha": file_digest(item.path),
            "output_sha": None,
            "changed": result.changed,
            "feedback": None,
            "nbgrader": None if place is None else vars(place),
            "worker": result.worker,
            "attempts": result.attempts,
            "started_at": result.started_at,
            "ended_at": result.ended_at,
            "timings": result.timings,
            "report": result.report,
        }

    def _write_outputs(self, item: BatchInput, result: NotebookResult, entry: dict[str, Any]) -> None:
        from ..reports.files import write_atomic

        output = item.output
        if output is None or result.notebook is None or (self.opts.in_place and not result.changed):
            return
        try:
            if self.opts.in_place:
                mode = item.path.stat().st_mode & 0o7777
                write_atomic(item.path.with_name(item.path.name + ".bak"), item.path.read_bytes(), mode=mode)
                write_atomic(item.path, result.notebook, mode=mode)
            else:
                write_atomic(output, result.notebook)
        except OSError as err:
            entry["status"] = "error"
            entry["message"] = f"cannot write {output}: {err.strerror or err}"
            return
        entry["output"] = str(output)
        entry["output_sha"] = file_digest(output)

    def _write_feedback(self, item: BatchInput, entry: dict[str, Any]) -> None:
        from ..reports.files import write_atomic

        target = item.outdir / f"{Path(item.path.name).stem}.feedback.md"
        try:
            write_atomic(target, feedback_markdown(entry))
            entry["feedback"] = str(target)
        except OSError as err:
            self.display.note(f"nbrefine: cannot write the feedback {target}: {err.strerror or err}")

    def _add(self, entry: dict[str, Any]) -> None:
        self.record.add(entry)
        self.totals.add(entry)
        if self.class_report:
            self.classroom.add(entry)

    def _record_not_run(self) -> None:
        done = {e.get("input") for e in self.record.entries()}
        for item in self.inputs:
            if str(item.path.resolve()) not in done and not item.problem:
                self._add({"input": str(item.path.resolve()), "path": str(item.path), "status": "cancelled",
                           "message": "not run: the batch was interrupted"})  # fmt: skip

    # ---------------------------------------------------------------- after

    def _finish(self) -> None:
        code = EXIT_INTERRUPTED if self.interrupted else self.totals.exit_code()
        meta = self._meta(code)
        written = []
        for path in self.opts.reports:
            try:
                self._render(path, meta)
                written.append(str(path))
            except OSError as err:
                self.display.note(f"nbrefine: cannot write the report {path}: {err.strerror or err}")
        self.record.close()
        print(
            summary_text(
                self.totals, meta, written, str(self.opts.record), quiet=self.opts.verbosity < NORMAL
            ),
            flush=True,
        )

    def _render(self, path: Path, meta: dict[str, Any]) -> None:
        suffix = path.suffix.lower()
        if suffix == ".html":
            self.classroom.write_html(path, meta)
        else:
            render = {".md": write_markdown, ".json": write_json, ".xml": write_junit}[suffix]
            render(path, meta, self.totals, self.record.entries)

    def _meta(self, code: int) -> dict[str, Any]:
        gate = getattr(self, "gate", None)
        return {
            "nbrefine_version": __version__,
            "record": str(self.opts.record),
            "run": self.record.run_id,
            "settings_key": self.record.key,
            "started": self.started,
            "duration_s": round(time.time() - self.started, 3),
            "jobs": self.opts.jobs,
            "cluster": self.opts.cluster,
            "workers_ready_s": [round(w, 3) for w in self.workers],
            "interrupted": self.interrupted,
            "exit_code": code,
            "provider": self.opts.choice.describe(),
            "max_requests": self.opts.limits.max_requests,
            "budget": {"tokens": self.opts.limits.budget_tokens, "usd": self.opts.limits.budget_usd},
            "requests": gate.state().to_json() if gate is not None else None,
            "batches": self.rounds.summary() if self.rounds is not None else None,
        }


def _line(entry: dict[str, Any]) -> str:
    status = entry.get("status")
    path = entry.get("path")
    if status == "error":
        return f"! {path}: {_without(str(entry.get('message')), path)}"
    s = (entry.get("report") or {}).get("summary") or {}
    if not s:  # it never ran to the end (its worker died)
        return f"✗ {path}: {entry.get('message')}"
    fixed = sum(c.get("status") == "fixed" for c in (entry.get("report") or {}).get("cells") or [])
    took = float((entry.get("timings") or {}).get("total_s") or 0.0)
    cells = int(s.get("cells_run") or 0)
    what = f"{cells} cell{'' if cells == 1 else 's'}, {s.get('failed', 0)} failed, {fixed} fixed"
    if status == "pass":
        return f"✓ {path}: every cell passes ({what}, {took:.1f} s)"
    stopped = f"; {entry['message']}" if entry.get("message") else ""
    return f"✗ {path}: {s.get('unfixed', 0)} still failing ({what}, {took:.1f} s{stopped})"


def _batches_line(batches: list[dict[str, Any]]) -> str:
    sent = [b for b in batches if not b["earlier_run"]]
    line = f"Message Batches (--batch): {len(sent)} sent, {sum(b['requests'] for b in sent)} requests"
    if len(sent) < len(batches):
        line += f"; results of {len(batches) - len(sent)} sent by an earlier run"
    waiting = [b["id"] for b in batches if b["status"] == "in_progress"]
    if waiting:
        line += f"; still processing at Anthropic (--resume takes them up): {', '.join(waiting)}"
    return line


def _without(message: str, path: Any) -> str:
    """The message without the path it starts with (the line names the notebook already)."""
    prefix = f"{path}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def summary_text(
    totals: Totals, meta: dict[str, Any], reports: list[str], record: str, *, quiet: bool
) -> str:
    n, c = totals.notebooks, totals.cells
    counts = f"{n['pass']} pass, {n['fail']} fail, {n['error']} could not run" + (
        f", {n['not_run']} not run (interrupted)" if n["not_run"] else ""
    )
    head = f"nbrefine fix: {totals.count} notebooks in {meta['duration_s']:.1f} s: {counts}"
    if quiet:
        return f"{head} (exit {meta['exit_code']})"
    lines = [
        head,
        f"  cells run {c['run']}, failed {c['failed']}, fixed {c['fixed']}, still failing {c['unfixed']}"
        + (f", hints given {c['hints']}" if c["hints"] else ""),
    ]
    if totals.resumed:
        lines.append(f"  {totals.resumed} notebooks were done by an earlier run (--resume)")
    if meta.get("batches"):
        lines.append("  " + _batches_line(meta["batches"]))
    if totals.by_error_type:
        width = max(12, *(len(k) for k in totals.by_error_type))
        lines += ["", f"  {'error type':<{width}}  failed  fixed  unfixed  notebooks"]
        for name, row in sorted(totals.by_error_type.items(), key=lambda kv: (-kv[1]["failed"], kv[0])):
            counts = f"{row['failed']:>6}  {row['fixed']:>5}  {row['unfixed']:>7}  {row['notebooks']:>9}"
            lines.append(f"  {name:<{width}}  {counts}")
    lines.append("")
    lines.append(
        "reports: " + (", ".join(reports) if reports else "none (--report FILE.md|.json|.xml|.html)")
    )
    lines.append(f"record: {record} (--resume continues from it)")
    return "\n".join(lines)


@contextlib.contextmanager
def _no_interrupts() -> Iterator[None]:
    """A second Ctrl-C while the kernels are being shut down must not leave any running."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _batch_client() -> Any:
    """The SDK client the --batch rounds use (its key and base URL from the environment)."""
    import anthropic

    return anthropic.Anthropic(max_retries=4, timeout=120.0)


def _executor(opts: BatchOptions) -> Executor:
    if opts.cluster is None:
        # With --batch a round lasts minutes: a kernel started ahead would save nothing and
        # double the kernels in memory.
        return LocalPool(opts.jobs, spare_kernels=not opts.batch)
    from .cluster import DaskExecutor

    return DaskExecutor(opts.cluster)


def run_batch(opts: BatchOptions, executor: Executor | None = None) -> int:
    return BatchRun(opts, executor).run()

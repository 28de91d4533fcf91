"""What ``%%refine``, the ``%refine`` commands and automatic mode do with a cell: the engine's glue.

Imported at the first use (``RefineMagics.repairs``): a ``%%refine`` cell (its snapshot is forked
before the body runs, so it cannot wait for the failure), the first failure automatic mode sees,
or a ``%refine`` command other than ``help`` and ``auto``. ``%load_ext nbrefine`` and passing cells
never import this module, nor the engine, sandbox, grounding and providers it brings (issue 20:
tests/ipython/test_magics_load.py checks it, bench/bench_load.py times it).

May import: IPython, traitlets, :mod:`nbrefine.engine` and everything below it, and this package's
modules.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from traitlets import TraitError

from .._errors import RefineStop
from ..engine import (
    CellRun,
    JobBuilder,
    KernelAccess,
    PolicyLockedError,
    RefineSession,
    SessionStateError,
    TeachingPolicy,
    UnverifiedFixError,
    apply_policy_line,
    current,
    kernel_policy_holder,
    last_session,
    partial_run_note,
    plain_python,
    undo_rebinds,
)
from ..engine.config import Refine
from ..grounding import Redactor
from ..grounding.capture import Failure, capture_failure
from ..grounding.history import ExecutedCell, NotebookCell
from ..sandbox import SandboxOptions, Snapshot, TrialPolicy, call_in_fork, run_checks
from ._kernel_secrets import connection_paths, forget_kernel_secrets
from .options import LINE_COMMANDS
from .progress import Progress, say_accepted, stop_message
from .watched_cells import take_told_cells

if TYPE_CHECKING:
    from .magics import RefineMagics

__all__ = ["Repairs", "resolve", "warm_up"]

_TRANSFORMED_KEPT = 2048  # cells whose plain Python is remembered (then forgotten all at once)


class Repairs:
    """The work behind one shell's magics and automatic mode (made by ``RefineMagics.repairs``)."""

    def __init__(self, magics: RefineMagics) -> None:
        self.magics = magics
        self.ip: Any = magics.ip  # typed Any: IPython's own annotations make it Optional
        self.settings: Refine = magics.settings
        self._transformed: dict[tuple[str, int, int, int], str] = {}  # see _python
        take_told_cells()  # what the frontend sent while the engine was not loaded yet

    def _python(self, code: str) -> str:
        """IPython syntax turned into Python, or the code as it is where IPython's transform
        raises (it does on an IndentationError: the very cells being repaired). Remembered: a
        repair reads every cell of the history through it, some 35 times a repair (0.3 ms each)."""
        manager = self.ip.input_transformer_manager
        # A transformer registered later changes the answer: the key counts them.
        key = (code, len(self.ip.input_transformers_post), len(manager.cleanup_transforms),
               len(manager.line_transforms))  # fmt: skip
        known = self._transformed.get(key)
        if known is None:
            if len(self._transformed) >= _TRANSFORMED_KEPT:
                self._transformed.clear()
            known = self._transformed[key] = plain_python(code, self.ip.transform_cell)
        return known

    def _resolve(self, line: str) -> CellRun:
        return resolve(self.magics.declared(), self.settings, line)

    # ------------------------------------------------------------------ the cell

    def run_cell(self, line: str, cell: str) -> None:
        """``%%refine`` with options ``line`` on ``cell``: see ``RefineMagics.refine``."""
        run = self._resolve(line)
        shell = self.ip
        session = RefineSession(cell, provider=run.provider, model=run.model)
        session.timings["max_attempts"] = run.max_attempts
        session.cell_id, session.cell_source = self._executing_cell()
        session.request_id = self.request_id()
        namespace: dict[str, Any] = shell.user_ns
        before = dict(namespace)  # bindings only: cheap, and lets Accept undo the failed run's rebinds
        redactor = Redactor()
        jobs = self._jobs()
        snapshot, notes = jobs.take_snapshot(redactor, run, session)
        try:
            self.magics.running = True
            result = self._run_quietly_if_asked(cell)
        finally:
            self.magics.running = False
        failed_at = time.perf_counter()
        if snapshot is not None and not result.success:
            snapshot.arm()  # its first trial's spare gets ready while the failure is captured
        try:
            failures = self._failures(result, cell, namespace, redactor, run.checks)
            if failures:
                after = dict(namespace)
                session.failures = tuple(failures)
                session._applier = lambda code: self._apply(code, before, after)
                session.prepare = lambda: undo_rebinds(self.ip.user_ns, before, after)
                session.undo_failed_run = session.prepare
                failing_count = self._current_count(cell)
                session.on_accepted = lambda count=failing_count: self.magics.auto.mark_fixed(count)
                error = result.error_in_exec or result.error_before_exec
                session.job = jobs.build(
                    session,
                    error,
                    run,
                    cell,
                    failures,
                    before,
                    after,
                    redactor,
                    snapshot,
                    notes,
                    failing_count,
                )
                snapshot = None  # the job owns it now: released on a decision or the next session
                session.notes = tuple(notes)
        except KeyboardInterrupt:
            # Ctrl-C before the loop took over (capture, provider set-up): end as cleanly as in it.
            session.finish_without_loop("interrupted", "Interrupted: the refine loop was stopped.")
        finally:
            if snapshot is not None:
                snapshot.close()
        if session.job is None and session.status != "interrupted":
            session.finish_without_loop("no_error", "")
            return
        said = False  # whether the failure was printed already (the text view then skips it)
        if session.status != "interrupted":
            self._start(session, failed_at)
            said = not self._panel_wanted()
        if session.status not in ("running",):
            self._show(session, failure_said=said)
        raise RefineStop(stop_message(session))

    def session_for_failure(
        self,
        raw_cell: str,
        cell_id: str | None,
        error: BaseException,
        *,
        snapshot: Snapshot | None = None,
        before: dict[str, Any] | None = None,
        failing_count: int | None = None,
        request_id: str | None = None,
    ) -> RefineSession:
        """A session for a cell that already failed outside ``%%refine`` (automatic mode).

        Without a ``snapshot`` taken before the cell ran, trials start from the state the
        failed run left behind, and the prompt says which names it had already bound."""
        run = self._resolve("")
        session = RefineSession(raw_cell, provider=run.provider, model=run.model)
        session.timings["max_attempts"] = run.max_attempts
        session.cell_id, session.cell_source = cell_id, raw_cell
        session.request_id = request_id
        namespace: dict[str, Any] = self.ip.user_ns
        after = dict(namespace)
        before = after if before is None else before
        redactor = Redactor()
        code = self._python(raw_cell)
        failure = capture_failure(
            error, code=code, user_globals=namespace, redactor=redactor, run_unsafe=_fork_eval
        )
        notes = [] if snapshot is not None else [partial_run_note(code, failure.statements_done)]
        session.failures = (failure,)
        session._applier = lambda fixed: self._apply(fixed, before, after)
        session.prepare = lambda: undo_rebinds(self.ip.user_ns, before, after)
        session.undo_failed_run = session.prepare
        session.on_accepted = lambda: self.magics.auto.mark_fixed(failing_count)
        session.job = self._jobs().build(
            session, error, run, raw_cell, [failure], before, after, redactor, snapshot, notes, failing_count
        )
        session.notes = tuple(notes)
        return session

    def start_session(self, session: RefineSession) -> None:
        """Run a session from automatic mode: under a panel where there is one, else printed."""
        if session.job is not None and session.job.teaching_policy.teaching:
            session.ask_for_help()
            self._show(session)
            return
        panel = self._panel(session)
        if panel is not None:
            panel.display()
            panel.start()
            return
        print(f"nbrefine: {session.failures[0].one_line()}")
        session.run(on_event=Progress(session, time.perf_counter()))
        if session.job is not None:
            session.job.release()
        self._show(session, failure_said=True)

    def _run_quietly_if_asked(self, cell: str) -> Any:
        """``shell.run_cell``, honouring a trailing ``;`` of the cell body.

        IPython decides that from the last *stored* input, which is the ``%%refine`` cell
        itself, so the body's ``;`` would be ignored without this."""
        hook = self.ip.displayhook
        try:
            quiet = hook.semicolon_at_end_of_expression(self.ip.transform_cell(cell))
        except Exception:  # a cell that does not tokenize: IPython will report it
            quiet = False
        if not quiet:
            return self.ip.run_cell(cell, store_history=False)
        hook.quiet = lambda: True
        try:
            return self.ip.run_cell(cell, store_history=False)
        finally:
            del hook.quiet  # back to the class's method

    def request_id(self) -> str | None:
        """The id of the Jupyter execute request running this cell (see ``session_for_request``)."""
        header = (getattr(self.ip, "parent_header", None) or {}).get("header") or {}
        msg_id = header.get("msg_id")
        return msg_id if isinstance(msg_id, str) else None

    def _executing_cell(self) -> tuple[str | None, str | None]:
        """The notebook cell id (JupyterLab 4, Notebook 7) and whole source of the running cell."""
        header = getattr(self.ip, "parent_header", None) or {}
        cell_id = (header.get("metadata") or {}).get("cellId")
        source = (header.get("content") or {}).get("code")
        return (cell_id if isinstance(cell_id, str) else None), (source if isinstance(source, str) else None)

    def _start(self, session: RefineSession, failed_at: float) -> None:
        """Run the loop: in the background under a live panel in a notebook, else right here."""
        if not self._panel_wanted():  # a panel names the error itself, once
            print(f"nbrefine: {session.failures[0].one_line()}")
        if session.job is not None and session.job.teaching_policy.teaching:
            session.ask_for_help()  # teaching modes: a hint, checked by the guard, never the fix
            return
        panel = self._panel(session)
        if panel is not None and session.can_run_in_background:
            panel.display()
            panel.start()
            return
        session.run(on_event=Progress(session, failed_at))
        if session.job is not None:
            session.job.release()  # no "Try again" without the panel: free the snapshot now

    def _panel_wanted(self) -> bool:
        mode = self.settings.display
        return mode == "widget" or (mode == "auto" and getattr(self.ip, "kernel", None) is not None)

    def _panel(self, session: RefineSession) -> Any:
        if not self._panel_wanted():
            return None
        try:
            from .panel import ReviewPanel
        except ImportError:
            return None
        return ReviewPanel(session)

    def _jobs(self) -> JobBuilder:
        """The job builder, over what it needs of this kernel."""
        kernel = KernelAccess(
            namespace=self.ip.user_ns,
            transform=self._python,
            sandbox_options=self.sandbox_options,
            rerun=self._rerun,
            executed=self._executed,
            code_counts=getattr(self.ip.compile, "_filename_map", None),
            say=print,
            notebook=self._notebook,
        )
        return JobBuilder(kernel, self.settings)

    def sandbox_options(self) -> SandboxOptions:
        shell = self.ip

        def cut_off_from_the_kernel() -> None:
            forget_kernel_secrets()
            # In a forked child the kernel's sockets belong to the parent: make every message
            # send a no-op, and turn rich display into plain text on the trial's stdout.
            kernel = getattr(shell, "kernel", None)
            session = getattr(kernel, "session", None)
            if session is not None:
                session.send = lambda *args, **kwargs: None
            publisher = getattr(shell, "display_pub", None)
            if publisher is not None:
                publisher.publish = lambda data, *args, **kwargs: print(data.get("text/plain", ""))

        return SandboxOptions(
            child_setup=cut_off_from_the_kernel,
            hidden_paths=connection_paths(),
            ready_ahead=self.settings.trials_ahead,
        )

    def _failures(
        self, result: Any, cell: str, namespace: dict[str, Any], redactor: Redactor, checks: tuple[str, ...]
    ) -> list[Failure]:
        error = result.error_before_exec or result.error_in_exec
        if error is not None and not isinstance(error, Exception):
            return []  # KeyboardInterrupt and friends: the user stopped the cell
        if error is not None:
            code = self._python(cell)
            failure = capture_failure(
                error, code=code, user_globals=namespace, redactor=redactor, run_unsafe=_fork_eval
            )
            return [failure]
        return run_checks(checks, namespace, redactor, run_unsafe=_fork_eval)

    def _current_count(self, cell: str) -> int | None:
        """The execution count of the running %%refine cell (IPython has stored it as In[N] and
        counts N+1 while it runs), or None when it was not stored (run_cell_magic, tests)."""
        count = self.ip.execution_count - 1
        parsed = self.ip.history_manager.input_hist_parsed
        # IPython stores the body it passed to the magic as a repr in the parsed input: compared
        # exactly, whatever it did to whitespace-only lines (the raw text keeps them).
        return count if 0 < count < len(parsed) and repr(cell) in parsed[count] else None

    def _executed(self, failing_count: int | None) -> list[ExecutedCell]:
        """The cells run so far (IPython's history; cell ids recorded by post_run_cell)."""
        try:
            hm = self.ip.history_manager
            raw, parsed = hm.input_hist_raw, hm.input_hist_parsed
        except AttributeError:
            return []
        runs = self.magics.auto.runs
        unknown: tuple[str | None, float | None, bool] = (None, None, False)
        return [
            ExecutedCell(
                n,
                raw[n],
                runs.get(n, unknown)[0],
                code=parsed[n],
                ran_at=runs.get(n, unknown)[1],
                failed=runs.get(n, unknown)[2],
            )
            for n in range(1, min(len(raw), len(parsed)))
            if n != failing_count
        ]

    def _notebook(self) -> list[NotebookCell] | None:
        """The notebook's cells as a driver told the kernel (``nbrefine fix``), with what the
        latest run of each did in this kernel; None: not told (the saved file is read instead)."""
        told = current().notebook
        if told is None:
            return None
        latest: dict[str, tuple[int, bool]] = {}
        for count, (cell_id, _, failed) in sorted(self.magics.auto.runs.items()):
            if cell_id is not None:
                latest[cell_id] = (count, failed)
        return [
            replace(
                cell,
                status=("failed" if latest[cell.cell_id][1] else "ok")
                if cell.cell_id in latest
                else "not_run",
                count=latest[cell.cell_id][0] if cell.cell_id in latest else None,
            )
            for cell in told
        ]

    def _rerun(self, cell: str) -> bool:
        result = self.ip.run_cell(cell, store_history=False)
        return bool(result.success)

    def _apply(self, code: str, before: dict[str, Any], after: dict[str, Any]) -> bool:
        """Accept: undo the failed run's rebinds that nobody changed since, then run the fix."""
        undo_rebinds(self.ip.user_ns, before, after)
        return self._rerun(code)

    # ------------------------------------------------------------------ showing

    def _show(self, session: RefineSession, *, failure_said: bool = False) -> None:
        panel = self._panel(session)
        if panel is not None:
            panel.display()
            return
        in_terminal = getattr(self.ip, "kernel", None) is None
        print(session.render_text(color=in_terminal and sys.stdout.isatty(), failure=not failure_said))

    def _policy_command(self, arguments: str) -> None:
        """``%refine policy --mode hint --max-hints 3 --lock``: an instructor's setup cell."""
        if not arguments:
            policy = kernel_policy_holder().policy
            print(f"nbrefine: {policy.describe()} (set by {policy.source})")
            return
        try:
            policy = apply_policy_line(arguments)
        except (PolicyLockedError, ValueError) as err:
            raise UsageError(str(err)) from None
        print(f"nbrefine: {policy.describe()}")

    def line_command(self, command: str) -> None:
        """``%refine COMMAND`` other than ``help`` and ``auto`` (the magics answer those)."""
        session = last_session()
        if command.split(" ", 1)[0] == "policy":
            self._policy_command(command[len("policy") :].strip())
            return
        # %refine hint continues the latest session, unless a cell failed after it was made: the
        # student is on the next exercise then, and the hint is for that failure (repair_last).
        latest = None if self.magics.auto.has_new_failure else session
        if command == "hint" and latest is not None and latest.teaching is not None:
            latest.ask_for_help()  # the next hint for the same cell, or why there is none
            self._show(latest)
            return
        if command in ("fix", "hint"):
            try:
                self.magics.auto.repair_last()
            except ValueError as err:
                raise UsageError(f"%refine {command}: {err} (%refine auto offer turns it on)") from None
            return
        verb, _, option = command.partition(" ")
        if command not in ("accept", "reject", "status") and (verb, option.strip()) != ("accept", "--anyway"):
            known = ", ".join(usage.split(" ", 1)[0] for usage, _ in LINE_COMMANDS)
            raise UsageError(f"%refine: unknown command {command!r}; use {known} (%refine help says more)")
        if session is None:
            raise UsageError("%refine: no %%refine session in this kernel yet")
        if command == "status":
            print(session.render_text())
            return
        try:
            if verb == "accept":
                say_accepted(session, anyway=bool(option))
            else:
                session.reject()
                print("nbrefine: rejected; the kernel state is as the failed run left it")
        except UnverifiedFixError as err:
            raise UsageError(
                f"%refine accept: not applied: {err}. %refine accept --anyway runs it all the same"
            ) from None
        except SessionStateError as err:
            raise UsageError(f"%refine {verb}: {err}") from None


def warm_up(provider: str = "") -> None:
    """Import and load now what the first repair needs (this module came with the call): a
    batch's kernel started ahead does it while it waits for its notebook, so that notebook's
    first failure does not. Modules and caches only: no name of the user's, no setting."""
    import importlib
    import inspect

    from ..engine.capabilities import uses
    from ..grounding.redaction import detectors
    from ..providers import available_providers

    detectors.load()  # detect-secrets' plugins: the bulk of a first Redactor
    for module in ("stack_data", "nbrefine.providers.offline", f"nbrefine.providers.{provider}"):
        with contextlib.suppress(ImportError):  # stack_data: IPython's tracebacks of a failing cell
            importlib.import_module(module)
    uses("import os\nos.getcwd()")  # the capability rules, compiled into one pattern (~20 ms)
    available_providers()  # the providers installed packages declare, read from each folder (~5 ms)
    # The file of every module loaded, which inspect finds (a realpath each: ~40 ms with the ~2,500
    # of a kernel) at the first traceback of code in no module file: a failing cell's.
    inspect.getmodule(compile("0", "<nbrefine warm-up>", "eval"))


def resolve(magic: Callable[..., Any], settings: Refine, line: str) -> CellRun:
    """The options of ``line`` (parsed by ``magic``'s declared parser) over ``settings``."""
    try:
        words = shlex.split(line)
    except ValueError as err:
        raise UsageError(f"%%refine: cannot parse the options: {err}") from None
    opts = magic.parser.parse_args(words)  # type: ignore[attr-defined]  # set by magic_arguments
    run = CellRun(
        provider=opts.provider or settings.provider,
        model=opts.model if opts.model is not None else settings.model,
        max_attempts=opts.max_attempts if opts.max_attempts is not None else settings.max_attempts,
        timeout=opts.timeout if opts.timeout is not None else settings.timeout,
        checks=tuple(opts.checks),
        snapshot=settings.snapshot and not opts.no_snapshot,
        teaching_policy=_teaching_policy(opts.mode, opts.max_hints),
        cache=settings.response_cache and not opts.no_cache,
        candidates=opts.candidates if opts.candidates is not None else settings.candidates,
        trial_policy=TrialPolicy(
            memory_mb=settings.memory_limit_mb,
            allow_network=settings.allow_network or opts.allow_network,
            allow_subprocess=settings.allow_subprocess or opts.allow_subprocess,
            allow_writes=settings.allow_writes or opts.allow_writes,
        ),
    )
    _check(run)
    return run


def _check(run: CellRun) -> None:
    """The cell's options by the rules of the traits they stand for (``Refine.validated``)."""
    for name in ("candidates", "max_attempts", "timeout", "provider", "model"):
        option = "--" + name.replace("_", "-")
        try:
            Refine.validated(name, getattr(run, name), option=option)
        except TraitError as err:
            raise UsageError(f"%%refine: {err}") from None
    for check in run.checks:
        try:
            compile(check, "<check>", "exec")
        except SyntaxError as err:
            raise UsageError(f"%%refine: the check {check!r} is not valid Python: {err.msg}") from None


def _teaching_policy(mode: str | None, max_hints: int | None) -> TeachingPolicy:
    try:
        return kernel_policy_holder().effective(mode, max_hints)
    except (PolicyLockedError, ValueError) as err:
        raise UsageError(str(err)) from None


def _fork_eval(fn: Callable[[], list[str]]) -> list[str]:
    """Evaluate assert operands that call code in a throwaway fork of the kernel."""
    return call_in_fork(fn, timeout_s=1.0)

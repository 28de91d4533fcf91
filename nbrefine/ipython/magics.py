"""IPython adapter: ``%%refine`` and ``%refine``. Glue only; the work is in the engine.

May import: IPython, :mod:`nbrefine.engine` and everything below it, and this package's modules."""

from __future__ import annotations

import ast
import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from .._errors import RefineStop, SandboxError
from ..engine import (
    Attempt,
    Gate,
    LoopConfig,
    OfflineTutor,
    PolicyLockedError,
    RefineJob,
    RefineSession,
    RepairTask,
    SessionStateError,
    UnverifiedFixError,
    Verifier,
    apply_policy_line,
    kernel_gate,
    kernel_usage,
    last_session,
    plain_python,
    total,
)
from ..engine import cached as CachingProvider  # TEMPORARY name: the kernel's response cache
from ..engine.config import Refine
from ..grounding import Redactor, summarize_names
from ..grounding.capture import Failure, capture_failure, top_level_statements
from ..grounding.history import (
    ExecutedCell,
    NotebookCell,
    analyse,
    cross_cell_target,
    free_names,
    notebook_cells,
    notebook_path,
)
from ..grounding.ipython_names import is_ipython_name
from ..grounding.scope import global_names
from ..providers import Provider, ProviderSettings, make_provider, resolve_provider_name
from ..sandbox import (
    LiveForkRunner,
    SandboxOptions,
    Snapshot,
    SpawnRunner,
    TrialOutcome,
    TrialSpec,
    call_in_fork,
    fork_unsafe_reason,
    run_checks,
)
from ._kernel_secrets import connection_paths, forget_kernel_secrets
from .auto import AutoMode
from .options import LINE_COMMANDS, CellRun, help_text, refine_arguments, resolve
from .progress import Progress, say_accepted, stop_message

__all__ = ["RefineMagics", "RefineStop"]

_MISSING = object()


def _is_user_name(name: str) -> bool:
    return not name.startswith("_") and not is_ipython_name(name)


def _defines(code: str, name: str) -> bool:
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name
        for node in top_level_statements(code)
    )


class _CrossCellRunner:
    """Trials for a cross-cell repair: a candidate that (re)defines the failing function runs
    with the failing cell as its first check; any other candidate replaces the failing cell."""

    def __init__(self, inner: Any, defines: str) -> None:
        self.inner = inner
        self.defines = defines

    def run(self, spec: TrialSpec) -> TrialOutcome:
        if not _defines(spec.code, self.defines):
            spec = replace(spec, checks=spec.checks[1:])
        outcome: TrialOutcome = self.inner.run(spec)
        return outcome

    def cancel(self) -> None:
        cancel = getattr(self.inner, "cancel", None)
        if callable(cancel):
            cancel()


class _TransformingRunner:
    """Turns IPython syntax (magics, ``!cmd``) into Python before a trial, as IPython would."""

    def __init__(self, inner: Any, transform: Callable[[str], str]) -> None:
        self.inner = inner
        self.transform = transform

    def run(self, spec: TrialSpec) -> TrialOutcome:
        outcome: TrialOutcome = self.inner.run(replace(spec, code=self.transform(spec.code)))
        return outcome

    def cancel(self) -> None:
        cancel = getattr(self.inner, "cancel", None)
        if callable(cancel):
            cancel()


@magics_class
class RefineMagics(Magics):
    """``%%refine`` runs a cell and, if it fails, repairs it; ``%refine accept|reject|status``."""

    def __init__(self, shell: Any, settings: Refine) -> None:
        super().__init__(shell)
        self.ip: Any = shell  # typed Any: IPython's own annotations make it Optional
        self.settings = settings
        self.running = False  # a %%refine cell is executing (guards re-entry and automatic hooks)
        self.auto = AutoMode(self)
        self.auto.set_mode(settings.auto)
        settings.observe(lambda change: self.auto.set_mode(change["new"]), names="auto")
        settings.observe(lambda change: self.auto.snapshots(change["new"]), names="auto_snapshot")

    def _python(self, code: str) -> str:
        """IPython syntax turned into Python, or the code as it is where IPython's transform
        raises (it does on an IndentationError: the very cells being repaired)."""
        return plain_python(code, self.ip.transform_cell)

    @line_cell_magic
    @refine_arguments
    def refine(self, line: str, cell: str | None = None) -> None:
        """Run the cell; if it raises, propose a fix that passed a trial run in a sandbox (a fork of
        the kernel state as it was before the cell ran), and offer Accept / Reject. Options given
        here beat ``%config Refine....`` settings for this cell."""
        if cell is None:
            self._line_command(line.strip())
            return
        if self.running:
            raise UsageError("%%refine cannot run inside another %%refine cell")
        self._run_cell(self._resolve(line), cell)

    # ------------------------------------------------------------------ options

    def _resolve(self, line: str) -> CellRun:
        return resolve(self._declared(), self.settings, line)

    def _declared(self) -> Any:
        """The magic as IPython registered it: its parser and its help come from one declaration."""
        return self.magics["cell"]["refine"]

    # ------------------------------------------------------------------ the cell

    def _run_cell(self, run: CellRun, cell: str) -> None:
        shell = self.ip
        session = RefineSession(cell, provider=run.provider, model=run.model)
        session.timings["max_attempts"] = run.max_attempts
        session.cell_id, session.cell_source = self._executing_cell()
        session.request_id = self._request_id()
        namespace: dict[str, Any] = shell.user_ns
        before = dict(namespace)  # bindings only: cheap, and lets Accept undo the failed run's rebinds
        redactor = Redactor()
        snapshot, notes = self._take_snapshot(namespace, redactor, run, session)
        try:
            self.running = True
            result = self._run_quietly_if_asked(cell)
        finally:
            self.running = False
        failed_at = time.perf_counter()
        try:
            failures = self._failures(result, cell, namespace, redactor, run.checks)
            if failures:
                after = dict(namespace)
                session.failures = tuple(failures)
                session._applier = lambda code: self._apply(code, before, after)
                session.prepare = lambda: _undo_rebinds(self.ip.user_ns, before, after)
                failing_count = self._current_count(cell)
                error = result.error_in_exec or result.error_before_exec
                session.job = self._job(
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
        if session.status != "interrupted":
            self._start(session, run, failed_at)
        if session.status not in ("running",):
            self._show(session)
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
    ) -> RefineSession:
        """A session for a cell that already failed outside ``%%refine`` (automatic mode).

        Without a ``snapshot`` taken before the cell ran, trials start from the state the
        failed run left behind, and the prompt says which names it had already bound."""
        run = self._resolve("")
        session = RefineSession(raw_cell, provider=run.provider, model=run.model)
        session.timings["max_attempts"] = run.max_attempts
        session.cell_id, session.cell_source = cell_id, raw_cell
        namespace: dict[str, Any] = self.ip.user_ns
        after = dict(namespace)
        before = after if before is None else before
        redactor = Redactor()
        code = self._python(raw_cell)
        failure = capture_failure(
            error, code=code, user_globals=namespace, redactor=redactor, run_unsafe=_fork_eval
        )
        notes = [] if snapshot is not None else [_partial_run_note(code, failure.statements_done)]
        session.failures = (failure,)
        session._applier = lambda fixed: self._apply(fixed, before, after)
        session.prepare = lambda: _undo_rebinds(self.ip.user_ns, before, after)
        session.job = self._job(
            session, error, run, raw_cell, [failure], before, after, redactor, snapshot, notes, failing_count
        )
        session.notes = tuple(notes)
        return session

    def start_session(self, session: RefineSession) -> None:
        """Run a session from automatic mode: under a panel where there is one, else printed."""
        if session.job is not None and session.job.policy.teaching:
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
        print(session.render_text(color=getattr(self.ip, "kernel", None) is None and sys.stdout.isatty()))

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

    def _request_id(self) -> str | None:
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

    def _start(self, session: RefineSession, run: CellRun, failed_at: float) -> None:
        """Run the loop: in the background under a live panel in a notebook, else right here."""
        if not self._panel_wanted():  # a panel names the error itself, once
            print(f"nbrefine: {session.failures[0].one_line()}")
        if session.job is not None and session.job.policy.teaching:
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

    def _take_snapshot(
        self, namespace: dict[str, Any], redactor: Redactor, run: CellRun, session: RefineSession
    ) -> tuple[Snapshot | None, list[str]]:
        if self._spawn_reason() is not None:
            return None, []  # spawn trials get copies of the pre-cell bindings instead
        if not run.snapshot:
            return None, ["Snapshots are off: trials start from the state the failed run left behind."]
        try:
            snapshot = Snapshot.take(namespace, redactor, self._sandbox_options())
        except (SandboxError, OSError) as err:
            return None, [f"No snapshot ({err}): trials start from the state the failed run left behind."]
        session.timings["snapshot_s"] = snapshot.taken_s
        return snapshot, []

    def _spawn_reason(self) -> str | None:
        """Why trials run in fresh interpreters (spawn) instead of forks; None: they fork."""
        if self.settings.sandbox == "spawn":
            return "Refine.sandbox is 'spawn'"
        if self.settings.sandbox == "auto":
            return fork_unsafe_reason()
        return None

    def _runner(
        self, snapshot: Snapshot | None, before: dict[str, Any], after: dict[str, Any], redactor: Redactor
    ) -> tuple[Any, list[str]]:
        """The trial runner, and notes about it for the prompt and the panel."""
        reason = self._spawn_reason()
        if reason is not None:
            note = f"Trials run in a fresh interpreter with copies of the names they use ({reason})."
            return SpawnRunner(before, redactor, SandboxOptions()), [note]
        if snapshot is not None:
            return snapshot, []
        return LiveForkRunner(after, redactor, self._sandbox_options()), []

    def _sandbox_options(self) -> SandboxOptions:
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

        return SandboxOptions(child_setup=cut_off_from_the_kernel, hidden_paths=connection_paths())

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

    def _job(
        self,
        session: RefineSession,
        error: BaseException | None,
        run: CellRun,
        cell: str,
        failures: list[Failure],
        before: dict[str, Any],
        after: dict[str, Any],
        redactor: Redactor,
        snapshot: Snapshot | None,
        notes: list[str],
        failing_count: int | None = None,
    ) -> RefineJob:
        names = [n for n in global_names(self._python(cell)) if _is_user_name(n)]
        rebound = [n for n in names if before.get(n, _MISSING) is not after.get(n, _MISSING)]
        if rebound and snapshot is not None:
            notes.append(
                "Before failing, the run had already (re)bound: "
                + ", ".join(rebound[:20])
                + ". Values shown are from before the cell ran; objects mutated in place may differ."
            )
        summaries, left_out = summarize_names(names, before, redactor)
        runner, runner_notes = self._runner(snapshot, before, after, redactor)
        notes.extend(runner_notes)
        failing_id, failing_source = session.cell_id, session.cell_source
        history, code, first_checks, defines = self._ground(
            session, cell, error, failing_count, notes, redactor
        )
        transform = self._python

        def wrap(inner: Any) -> _TransformingRunner:
            return _TransformingRunner(_CrossCellRunner(inner, defines) if first_checks else inner, transform)

        verifier = self._cross_cell_verifier(code, cell, failures, defines, run) if first_checks else None
        on_finish = None
        if first_checks:
            # A candidate that defines the failing function is for its cell, and must make the
            # failing cell pass; any other candidate is a fix of the failing cell itself.
            runner = _CrossCellRunner(runner, defines)
            failing = cell
            apply_fix = session._applier or (lambda fixed: False)

            def on_finish(done: RefineSession) -> None:
                if done.fixed_code is None:
                    return
                if _defines(done.fixed_code, defines):  # Accept writes the defining cell, re-runs this
                    done._applier = lambda fixed: apply_fix(fixed) and self._rerun(failing)
                    done.prepare = None  # two cells to run: Accept runs them here
                else:
                    done.original_code, done.cell_id, done.cell_source = failing, failing_id, failing_source

        task = RepairTask(
            code=code,
            failures=tuple(failures),
            checks=(*first_checks, *run.checks),
            values=tuple(summaries),
            values_left_out=left_out,
            notes=tuple(notes),
            namespace=before,
            history=history,
        )
        name, note = resolve_provider_name(run.provider, os.environ)
        if note:
            print(f"nbrefine: {note}")
        settings, quick_fixes = self._provider_settings(run), self.settings.quick_fixes
        tutor = (lambda: OfflineTutor()) if name == "offline" else (lambda: make_provider(name, settings))
        cache = run.cache

        def provider() -> Provider:
            made = make_provider(name, settings, quick_fixes_first=quick_fixes)
            return CachingProvider(made) if cache else made

        return RefineJob(
            task=task,
            policy=run.teaching,
            tutor=tutor,
            provider=provider,
            prices=dict(self.settings.prices),
            runner=wrap(runner),
            redactor=redactor,
            config=LoopConfig(
                max_attempts=run.max_attempts,
                timeout_s=run.timeout,
                policy=run.policy,
                max_tokens=self.settings.max_tokens,
                prompt_budget=self.settings.prompt_budget,
                budget=self._budget(session),
                candidates=run.candidates,
                transform=transform,
                verifier=verifier,
            ),
            free=snapshot.close if snapshot is not None else (lambda: None),
            fallback=lambda: _TransformingRunner(
                LiveForkRunner(self.ip.user_ns, redactor, self._sandbox_options()), self._python
            ),
            background_ok=isinstance(getattr(runner, "inner", runner), (Snapshot, SpawnRunner)),
            on_finish=on_finish,
            accept_runner=self._accept_runner(before, after, redactor, wrap),
        )

    def _cross_cell_verifier(
        self, target: str, cell: str, failures: list[Failure], defines: str, run: CellRun
    ) -> Verifier:
        """A candidate that defines the failing function is checked against its own cell and must
        run every check (the failing cell first); any other one against the failing cell."""
        transform = self._python
        for_target = Gate(target, len(run.checks) + 1, transform=transform)
        for_cell = Gate.for_failures(cell, failures, len(run.checks), transform=transform)

        def verify(candidate: str, outcome: TrialOutcome) -> str:
            gate = for_target if _defines(candidate, defines) else for_cell
            return gate(candidate, outcome)

        return verify

    def _accept_runner(
        self,
        before: dict[str, Any],
        after: dict[str, Any],
        redactor: Redactor,
        wrap: Callable[[Any], _TransformingRunner],
    ) -> Callable[[], _TransformingRunner]:
        """Trials from the live state as Accept will run the fix there: after Accept's own first
        step, undoing the failed run's rebinds (done in the trial's fork only)."""

        def make() -> _TransformingRunner:
            if self._spawn_reason() is not None:
                copy = dict(self.ip.user_ns)
                _undo_rebinds(copy, before, after)
                return wrap(SpawnRunner(copy, redactor, SandboxOptions()))
            live, options = self.ip.user_ns, self._sandbox_options()

            def setup() -> None:
                options.child_setup()
                _undo_rebinds(live, before, after)

            return wrap(LiveForkRunner(live, redactor, replace(options, child_setup=setup)))

        return make

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
        runs = self.auto.runs
        return [
            ExecutedCell(
                n, raw[n], runs.get(n, (None, None))[0], code=parsed[n], ran_at=runs.get(n, (None, None))[1]
            )
            for n in range(1, min(len(raw), len(parsed)))
            if n != failing_count
        ]

    def _saved_notebook(self) -> tuple[list[NotebookCell] | None, float | None]:
        """The notebook file as saved (JupyterLab and VS Code say where it is), and when."""
        path = notebook_path(self.ip.user_ns)
        if not path:
            return None, None
        saved_at = None
        with contextlib.suppress(OSError):
            saved_at = os.path.getmtime(path)
        return notebook_cells(path), saved_at

    def _ground(
        self,
        session: RefineSession,
        cell: str,
        error: BaseException | None,
        failing_count: int | None,
        notes: list[str],
        redactor: Redactor | None = None,
    ) -> tuple[str, str, tuple[str, ...], str]:
        """History for the prompt, and the cell to repair: when the error was raised in a
        function or class another cell defined, that cell is the target, and the failing cell
        becomes a check its candidates must make pass. Returns (history, code, extra checks,
        the name of the function or class that failed)."""
        executed = self._executed(failing_count)
        if not executed:
            return "", cell, (), ""
        notebook, saved_at = self._saved_notebook()
        names = free_names(self._python(cell))
        report = analyse(executed, names, notebook, namespace=self.ip.user_ns, saved_at=saved_at)
        history = report.render(min(3000, self.settings.prompt_budget // 5), redactor)
        target = None
        if error is not None:
            counts = getattr(self.ip.compile, "_filename_map", None)
            target = cross_cell_target(
                error,
                executed,
                self.ip.user_ns,
                counts=counts,
                notebook=notebook,
                current_cell_id=session.cell_id,
            )
        if target is None:
            return history, cell, (), ""
        notes.append(
            target.note() + f" Reply with that whole cell fixed (it must define `{target.function}`), "
            "or, if the fix belongs in the failing cell after all, with the failing cell fixed."
        )
        session.original_code = target.source
        session.cell_id, session.cell_source = target.cell_id, target.source
        return history, target.source, (self._python(cell),), target.function

    def _budget(self, session: RefineSession) -> Callable[[list[Attempt]], str | None] | None:
        """The loop's budget check: per session and per kernel, in tokens and in money."""
        conf = self.settings
        limits = (conf.budget_tokens, conf.budget_usd, conf.kernel_budget_tokens, conf.kernel_budget_usd)
        if all(limit is None for limit in limits):
            return None
        prices = dict(conf.prices)

        def check(this_run: list[Attempt]) -> str | None:
            spent_now = total((r for a in this_run for r in a.replies), prices)
            session_spent = total((r for a in session.attempts for r in a.replies), prices) + spent_now
            kernel_spent = kernel_usage() + spent_now
            for scope, spent, tokens, usd in (
                ("session", session_spent, conf.budget_tokens, conf.budget_usd),
                ("kernel", kernel_spent, conf.kernel_budget_tokens, conf.kernel_budget_usd),
            ):
                if tokens is not None and spent.tokens >= tokens:
                    return (
                        f"Stopped: the {scope} budget of {tokens:,} tokens is spent ({spent.tokens:,} used)."
                    )
                if usd is not None and spent.cost_usd is not None and spent.cost_usd >= usd:
                    return f"Stopped: the {scope} budget of ${usd:.2f} is spent (${spent.cost_usd:.4f} used)."
            return None

        return check

    def _provider_settings(self, run: CellRun) -> ProviderSettings:
        return ProviderSettings(
            model=run.model,
            request_timeout=self.settings.request_timeout,
            max_retries=self.settings.max_retries,
        )

    def _rerun(self, cell: str) -> bool:
        result = self.ip.run_cell(cell, store_history=False)
        return bool(result.success)

    def _apply(self, code: str, before: dict[str, Any], after: dict[str, Any]) -> bool:
        """Accept: undo the failed run's rebinds that nobody changed since, then run the fix."""
        _undo_rebinds(self.ip.user_ns, before, after)
        result = self.ip.run_cell(code, store_history=False)
        return bool(result.success)

    # ------------------------------------------------------------------ showing

    def _show(self, session: RefineSession) -> None:
        panel = self._panel(session)
        if panel is not None:
            panel.display()
            return
        in_terminal = getattr(self.ip, "kernel", None) is None
        print(session.render_text(color=in_terminal and sys.stdout.isatty()))

    def _policy_command(self, arguments: str) -> None:
        """``%refine policy --mode hint --max-hints 3 --lock``: an instructor's setup cell."""
        if not arguments:
            policy = kernel_gate().policy
            print(f"nbrefine: {policy.describe()} (set by {policy.source})")
            return
        try:
            policy = apply_policy_line(arguments)
        except (PolicyLockedError, ValueError) as err:
            raise UsageError(str(err)) from None
        print(f"nbrefine: {policy.describe()}")

    def _auto_command(self, mode: str) -> None:
        if mode not in ("off", "offer", "on"):
            raise UsageError("%refine auto: use offer, on or off")
        self.settings.auto = mode  # the observer (un)registers the hooks
        print(f"nbrefine: automatic mode is {mode}")

    def _line_command(self, command: str) -> None:
        session = last_session()
        if command in ("", "help"):
            print(help_text(self._declared()))
            return
        if command.startswith("auto"):
            self._auto_command(command[4:].strip())
            return
        if command.split(" ", 1)[0] == "policy":
            self._policy_command(command[len("policy") :].strip())
            return
        # %refine hint continues the latest session, unless a cell failed after it was made: the
        # student is on the next exercise then, and the hint is for that failure (repair_last).
        latest = None if self.auto.has_new_failure else session
        if command == "hint" and latest is not None and latest.teaching is not None:
            if not latest.teaching.more_available:
                print(f"nbrefine: {latest.teaching.render()}")
                return
            latest.ask_for_help()  # the next hint for the same cell
            self._show(latest)
            return
        if command in ("fix", "hint"):
            try:
                self.auto.repair_last()
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


def _undo_rebinds(namespace: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> None:
    """Accept's first step: put back the names the failed run rebound, where nobody rebound them
    since, so that the state advances as if only the fixed cell had run."""
    for name, value in after.items():
        if not _is_user_name(name) or before.get(name, _MISSING) is value:
            continue
        if namespace.get(name, _MISSING) is value:  # untouched since the failure
            if name in before:
                namespace[name] = before[name]
            else:
                namespace.pop(name, None)


def _partial_run_note(code: str, statements_done: int) -> str:
    """What the failed run had already done, for trials that start from the state it left."""
    done = top_level_statements(code)[:statements_done]
    bound = sorted(
        {
            node.id
            for statement in done
            for node in ast.walk(statement)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
        }
    )
    if not done:
        return "Trials start from the kernel state after the failure; the cell failed on its first statement."
    names = f", which bound: {', '.join(bound[:20])}" if bound else ""
    return (
        f"No snapshot was taken before this cell ran: trials start from the state after the failure. "
        f"The failed run had already executed its first {len(done)} statement(s){names}."
    )


def _fork_eval(fn: Callable[[], list[str]]) -> list[str]:
    """Evaluate assert operands that call code in a throwaway fork of the kernel."""
    return call_in_fork(fn, timeout_s=1.0)

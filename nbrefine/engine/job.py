"""The job builder: everything a failing cell's repair needs, assembled without IPython.

:class:`JobBuilder` turns a failed run into a :class:`~nbrefine.engine.session.RefineJob`: the
sandbox choice (a snapshot fork, a fork of the live state, or a fresh interpreter: "spawn"), the
repair task grounded in the notebook's history (retargeted at another cell when the error was
raised in code that cell defined), the provider behind the kernel's response cache, the budget
check and the runner Accept re-checks the fix with. What it needs of the kernel it gets as a
:class:`KernelAccess` the adapter fills in (the IPython magics do); the cell's options, merged
with the settings, as a :class:`CellRun`.

May import: the standard library, the engine's own modules, :mod:`nbrefine._errors` and the
layers below the engine (:mod:`nbrefine.sandbox`, :mod:`nbrefine.providers`,
:mod:`nbrefine.grounding`); never IPython, ipywidgets, comm or nbclient.
"""

from __future__ import annotations

import ast
import contextlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .._errors import SandboxError
from ..grounding.capture import Failure, top_level_statements
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
from ..grounding.redaction import Redactor
from ..grounding.scope import global_names
from ..grounding.summaries import summarize_names
from ..providers import Provider, ProviderSettings, make_provider, resolve_provider_name
from ..sandbox import (
    LiveForkRunner,
    SandboxOptions,
    Snapshot,
    SpawnRunner,
    TrialOutcome,
    TrialPolicy,
    TrialSpec,
    fork_unsafe_reason,
)
from .config import Refine
from .cost import total
from .loop import LoopConfig
from .prompt import RepairTask
from .session import RefineJob, RefineSession
from .state import cached, kernel_usage
from .teaching import OfflineTutor, TeachingPolicy
from .types import Attempt, TrialRunner, Verifier
from .verify import Gate

__all__ = [
    "CellRun",
    "JobBuilder",
    "KernelAccess",
    "budget_check",
    "partial_run_note",
    "spawn_reason",
    "undo_rebinds",
]

_MISSING = object()


def _as_is(code: str) -> str:
    return code


def _no_rerun(cell: str) -> bool:
    return False


def _no_history(failing_count: int | None) -> list[ExecutedCell]:
    return []


def _silent(line: str) -> None:
    return None


@dataclass(frozen=True)
class KernelAccess:
    """What the builder needs of the kernel whose cell failed; the adapter fills it in. The
    defaults describe a kernel with no history, no syntax of its own and nothing to hide."""

    namespace: dict[str, Any]  # the live user namespace: trials fork it, Accept undoes rebinds in it
    transform: Callable[[str], str] = _as_is  # the kernel's own syntax (magics, !cmd) into Python
    sandbox_options: Callable[[], SandboxOptions] = SandboxOptions  # a fork's child set-up, hidden paths
    rerun: Callable[[str], bool] = _no_rerun  # runs a cell in the kernel; True when it ran without error
    executed: Callable[[int | None], list[ExecutedCell]] = _no_history  # runs so far, but the failing one
    code_counts: Mapping[str, int] | None = None  # compiled cell file name -> execution count
    say: Callable[[str], None] = _silent  # where one-line notices go (the magics print them)


@dataclass(frozen=True)
class CellRun:
    """The settings of one repair: the ``Refine`` settings, the environment and the cell's own
    options merged (the IPython adapter's ``resolve`` makes it from ``%%refine``'s options)."""

    provider: str
    model: str
    max_attempts: int
    timeout: float
    checks: tuple[str, ...]
    snapshot: bool
    trial_policy: TrialPolicy
    teaching_policy: TeachingPolicy
    cache: bool = True
    candidates: int = 1


def spawn_reason(settings: Refine) -> str | None:
    """Why trials run in fresh interpreters (spawn) instead of forks; None: they fork."""
    if settings.sandbox == "spawn":
        return "Refine.sandbox is 'spawn'"
    if settings.sandbox == "auto":
        return fork_unsafe_reason()
    return None


def budget_check(settings: Refine, session: RefineSession) -> Callable[[list[Attempt]], str | None] | None:
    """The loop's budget check: per session and per kernel, in tokens and in money."""
    conf = settings
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
                return f"Stopped: the {scope} budget of {tokens:,} tokens is spent ({spent.tokens:,} used)."
            if usd is not None and spent.cost_usd is not None and spent.cost_usd >= usd:
                return f"Stopped: the {scope} budget of ${usd:.2f} is spent (${spent.cost_usd:.4f} used)."
        return None

    return check


def undo_rebinds(namespace: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> None:
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


def partial_run_note(code: str, statements_done: int) -> str:
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


def _is_user_name(name: str) -> bool:
    return not name.startswith("_") and not is_ipython_name(name)


def _defines(code: str, name: str) -> bool:
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name
        for node in top_level_statements(code)
    )


class _Wrapping:
    """A trial runner around another one; cancelling it cancels the inner one."""

    def __init__(self, inner: TrialRunner) -> None:
        self.inner = inner

    def cancel(self) -> None:
        cancel = getattr(self.inner, "cancel", None)
        if callable(cancel):
            cancel()


class _CrossCellRunner(_Wrapping):
    """Trials for a cross-cell repair: a candidate that (re)defines the failing function runs
    with the failing cell as its first check; any other candidate replaces the failing cell."""

    def __init__(self, inner: TrialRunner, defines: str) -> None:
        super().__init__(inner)
        self.defines = defines

    def run(self, spec: TrialSpec) -> TrialOutcome:
        if not _defines(spec.code, self.defines):
            spec = replace(spec, checks=spec.checks[1:])
        return self.inner.run(spec)


class _TransformingRunner(_Wrapping):
    """Turns the kernel's syntax (IPython's magics, ``!cmd``) into Python before a trial, as the
    kernel would."""

    def __init__(self, inner: TrialRunner, transform: Callable[[str], str]) -> None:
        super().__init__(inner)
        self.transform = transform

    def run(self, spec: TrialSpec) -> TrialOutcome:
        return self.inner.run(replace(spec, code=self.transform(spec.code)))


@dataclass(frozen=True)
class _Grounding:
    """The cell to repair and what the prompt says of the notebook around it."""

    history: str  # the notebook's history, rendered
    code: str  # the cell to repair: the failing one, or the cell that defined what failed
    first_checks: tuple[str, ...] = ()  # cross-cell: the failing cell, which the fix must make pass
    defines: str = ""  # cross-cell: the function or class that failed


class JobBuilder:
    """Builds the repair job of a cell that failed in ``kernel``, under ``settings``."""

    def __init__(self, kernel: KernelAccess, settings: Refine) -> None:
        self.kernel = kernel
        self.settings = settings

    def spawn_reason(self) -> str | None:
        return spawn_reason(self.settings)

    def take_snapshot(
        self, redactor: Redactor, run: CellRun, session: RefineSession
    ) -> tuple[Snapshot | None, list[str]]:
        """A snapshot of the kernel's namespace before the cell runs (None: trials spawn, or
        start from the state the failed run leaves), and notes saying which."""
        if self.spawn_reason() is not None:
            return None, []  # spawn trials get copies of the pre-cell bindings instead
        if not run.snapshot:
            return None, ["Snapshots are off: trials start from the state the failed run left behind."]
        try:
            snapshot = Snapshot.take(self.kernel.namespace, redactor, self.kernel.sandbox_options())
        except (SandboxError, OSError) as err:
            return None, [f"No snapshot ({err}): trials start from the state the failed run left behind."]
        session.timings["snapshot_s"] = snapshot.taken_s
        return snapshot, []

    def build(
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
        """The job of ``session``, whose ``cell`` failed (``error``, or ``failures`` of its checks);
        ``before``/``after``: the namespace's bindings before and after the failed run. The job owns
        ``snapshot`` from now on. ``notes`` (for the prompt and the panel) grows."""
        names = [n for n in global_names(self.kernel.transform(cell)) if _is_user_name(n)]
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
        failing_at = (session.cell_id, session.cell_source)  # grounding may retarget the session
        ground = self._ground(session, cell, error, failing_count, notes, redactor)
        wrap = self._wrapper(ground)
        # Cross-cell: a candidate that defines the failing function is for its cell, and must make
        # the failing cell pass; any other candidate is a fix of the failing cell itself.
        verifier = self._cross_cell_verifier(ground, cell, failures, run) if ground.first_checks else None
        task = RepairTask(
            code=ground.code,
            failures=tuple(failures),
            checks=(*ground.first_checks, *run.checks),
            values=tuple(summaries),
            values_left_out=left_out,
            notes=tuple(notes),
            namespace=before,
            history=ground.history,
        )
        provider, tutor = self._providers(run)
        return RefineJob(
            task=task,
            teaching_policy=run.teaching_policy,
            tutor=tutor,
            provider=provider,
            prices=dict(self.settings.prices),
            runner=wrap(runner),
            redactor=redactor,
            config=self._loop_config(run, session, verifier),
            free=snapshot.close if snapshot is not None else (lambda: None),
            fallback=lambda: wrap(
                LiveForkRunner(self.kernel.namespace, redactor, self.kernel.sandbox_options())
            ),
            background_ok=isinstance(runner, (Snapshot, SpawnRunner)),
            on_finish=self._on_finish(session, cell, failing_at, ground),
            accept_runner=self._accept_runner(before, after, redactor, wrap),
        )

    # ------------------------------------------------------------------ the runners

    def _runner(
        self, snapshot: Snapshot | None, before: dict[str, Any], after: dict[str, Any], redactor: Redactor
    ) -> tuple[TrialRunner, list[str]]:
        """The trial runner, and notes about it for the prompt and the panel."""
        reason = self.spawn_reason()
        if reason is not None:
            note = f"Trials run in a fresh interpreter with copies of the names they use ({reason})."
            return SpawnRunner(before, redactor, SandboxOptions()), [note]
        if snapshot is not None:
            return snapshot, []
        return LiveForkRunner(after, redactor, self.kernel.sandbox_options()), []

    def _wrapper(self, ground: _Grounding) -> Callable[[TrialRunner], _TransformingRunner]:
        """What every runner of the job goes through: the kernel's syntax turned into Python and,
        for a cross-cell repair, the failing cell dropped from a candidate that replaces it."""
        transform, defines = self.kernel.transform, ground.defines

        def wrap(inner: TrialRunner) -> _TransformingRunner:
            return _TransformingRunner(
                _CrossCellRunner(inner, defines) if ground.first_checks else inner, transform
            )

        return wrap

    def _accept_runner(
        self,
        before: dict[str, Any],
        after: dict[str, Any],
        redactor: Redactor,
        wrap: Callable[[TrialRunner], _TransformingRunner],
    ) -> Callable[[], _TransformingRunner]:
        """Trials from the live state as Accept will run the fix there: after Accept's own first
        step, undoing the failed run's rebinds (done in the trial's fork only)."""

        def make() -> _TransformingRunner:
            if self.spawn_reason() is not None:
                copy = dict(self.kernel.namespace)
                undo_rebinds(copy, before, after)
                return wrap(SpawnRunner(copy, redactor, SandboxOptions()))
            live, options = self.kernel.namespace, self.kernel.sandbox_options()

            def setup() -> None:
                options.child_setup()
                undo_rebinds(live, before, after)

            return wrap(LiveForkRunner(live, redactor, replace(options, child_setup=setup)))

        return make

    # ------------------------------------------------------------------ grounding and cross-cell repairs

    def _saved_notebook(self) -> tuple[list[NotebookCell] | None, float | None]:
        """The notebook file as saved (JupyterLab and VS Code say where it is), and when."""
        path = notebook_path(self.kernel.namespace)
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
    ) -> _Grounding:
        """History for the prompt, and the cell to repair: when the error was raised in a
        function or class another cell defined, that cell is the target, and the failing cell
        becomes a check its candidates must make pass."""
        executed = self.kernel.executed(failing_count)
        if not executed:
            return _Grounding("", cell)
        notebook, saved_at = self._saved_notebook()
        names = free_names(self.kernel.transform(cell))
        report = analyse(executed, names, notebook, namespace=self.kernel.namespace, saved_at=saved_at)
        history = report.render(min(3000, self.settings.prompt_budget // 5), redactor)
        target = None
        if error is not None:
            target = cross_cell_target(
                error,
                executed,
                self.kernel.namespace,
                counts=self.kernel.code_counts,
                notebook=notebook,
                current_cell_id=session.cell_id,
            )
        if target is None:
            return _Grounding(history, cell)
        notes.append(
            target.note() + f" Reply with that whole cell fixed (it must define `{target.function}`), "
            "or, if the fix belongs in the failing cell after all, with the failing cell fixed."
        )
        session.original_code = target.source
        session.cell_id, session.cell_source = target.cell_id, target.source
        return _Grounding(history, target.source, (self.kernel.transform(cell),), target.function)

    def _on_finish(
        self,
        session: RefineSession,
        failing: str,
        failing_at: tuple[str | None, str | None],
        ground: _Grounding,
    ) -> Callable[[RefineSession], None] | None:
        """For a cross-cell repair, what Accept does once the loop is done: a fix that defines the
        failing function is written into its own cell, then the failing cell (``failing``, whose
        id and source are ``failing_at``) runs again; any other fix is for the failing cell."""
        if not ground.first_checks:
            return None
        apply_fix = session._applier or (lambda fixed: False)
        rerun, defines = self.kernel.rerun, ground.defines

        def on_finish(done: RefineSession) -> None:
            if done.fixed_code is None:
                return
            if _defines(done.fixed_code, defines):  # Accept writes the defining cell, re-runs this
                done._applier = lambda fixed: apply_fix(fixed) and rerun(failing)
                if failing_at[0] is None:
                    done.prepare = None  # no cell id to run the failing cell by: Accept runs both here
                else:
                    done.then_run_cell = failing_at[0]  # the frontend runs the fixed cell, then it
            else:
                done.original_code, (done.cell_id, done.cell_source) = failing, failing_at

        return on_finish

    def _cross_cell_verifier(
        self, ground: _Grounding, cell: str, failures: list[Failure], run: CellRun
    ) -> Verifier:
        """A candidate that defines the failing function is checked against its own cell and must
        run every check (the failing cell first); any other one against the failing cell."""
        transform = self.kernel.transform
        for_target = Gate(ground.code, len(run.checks) + 1, transform=transform)
        for_cell = Gate.for_failures(cell, failures, len(run.checks), transform=transform)

        def verify(candidate: str, outcome: TrialOutcome) -> str:
            gate = for_target if _defines(candidate, ground.defines) else for_cell
            return gate(candidate, outcome)

        return verify

    # ------------------------------------------------------------------ the provider and the loop

    def _providers(self, run: CellRun) -> tuple[Callable[[], Provider], Callable[[], Provider]]:
        """The provider of fixes (behind the kernel's response cache unless ``run.cache`` is off)
        and the tutor of the teaching modes."""
        name, note = resolve_provider_name(run.provider, os.environ)
        if note:
            self.kernel.say(f"nbrefine: {note}")
        settings, quick_fixes = self._provider_settings(run), self.settings.quick_fixes
        tutor = (lambda: OfflineTutor()) if name == "offline" else (lambda: make_provider(name, settings))
        cache = run.cache

        def provider() -> Provider:
            made = make_provider(name, settings, quick_fixes_first=quick_fixes)
            return cached(made) if cache else made

        return provider, tutor

    def _provider_settings(self, run: CellRun) -> ProviderSettings:
        return ProviderSettings(
            model=run.model,
            request_timeout=self.settings.request_timeout,
            max_retries=self.settings.max_retries,
        )

    def _loop_config(self, run: CellRun, session: RefineSession, verifier: Verifier | None) -> LoopConfig:
        return LoopConfig(
            max_attempts=run.max_attempts,
            timeout_s=run.timeout,
            trial_policy=run.trial_policy,
            max_tokens=self.settings.max_tokens,
            prompt_budget=self.settings.prompt_budget,
            budget=budget_check(self.settings, session),
            candidates=run.candidates,
            transform=self.kernel.transform,
            verifier=verifier,
        )

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
import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .._errors import SandboxError
from ..grounding.capture import Failure, top_level_statements
from ..grounding.history import ExecutedCell, NotebookCell, analyse, free_names, notebook_cells, notebook_path
from ..grounding.ipython_names import is_ipython_name
from ..grounding.redaction import Redactor
from ..grounding.scope import global_names
from ..grounding.summaries import summarize_names
from ..providers import Provider, ProviderSettings, make_provider, resolve_provider_name
from ..providers.scripted import ScriptedProvider
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
from .accept import plan_for
from .cause import Cause, Situation, find_cause
from .config import Refine
from .cost import total
from .kernel_state import cached, kernel_usage
from .loop import LoopConfig
from .multicell import CellsRepair
from .prompt import RepairTask
from .session import RefineJob, RefineSession
from .teaching import OfflineTutor, TeachingPolicy
from .types import Attempt, TrialRunner
from .verify import known_fingerprints

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


def _not_told() -> list[NotebookCell] | None:
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
    #: the notebook's code cells in order with what their latest runs did, where the adapter
    #: knows (None: the notebook as saved on disk, if the frontend said where it is)
    notebook: Callable[[], list[NotebookCell] | None] = _not_told


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


class _Wrapping:
    """A trial runner around another one; cancelling it cancels the inner one."""

    def __init__(self, inner: TrialRunner) -> None:
        self.inner = inner

    def cancel(self) -> None:
        cancel = getattr(self.inner, "cancel", None)
        if callable(cancel):
            cancel()

    def inspect(self, fn: Callable[..., Any], *args: Any) -> Any:
        """The inner runner's look at its namespace in place (see ``fingerprints_of``); None
        when it has none."""
        inspect = getattr(self.inner, "inspect", None)
        return inspect(fn, *args) if callable(inspect) else None

    @property
    def at_once(self) -> int:
        """How many trials the inner runner runs at the same time (a snapshot with twins)."""
        at_once = getattr(self.inner, "at_once", 1)
        return at_once if isinstance(at_once, int) else 1


class _LiveRunner(_Wrapping):
    """Accept's runner over the live state (a fork per trial), which can also look at that
    state in place as its trials see it: the failed run's rebinds undone, in a copy of the
    namespace's mapping (the values are the live ones, shared, and only read)."""

    def __init__(
        self, inner: TrialRunner, live: dict[str, Any], before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        super().__init__(inner)
        self.live, self.before, self.after = live, before, after

    def run(self, spec: TrialSpec) -> TrialOutcome:
        return self.inner.run(spec)

    def inspect(self, fn: Callable[..., Any], *args: Any) -> Any:
        view = dict(self.live)
        undo_rebinds(view, self.before, self.after)
        return fn(view, *args)


class _CellsRunner(_Wrapping):
    """Trials of a repair that spans cells: each candidate's edits composed in notebook order
    (see :meth:`nbrefine.engine.multicell.CellsRepair.trial_spec`), in the kernel's syntax
    turned into Python."""

    def __init__(self, inner: TrialRunner, repair: CellsRepair) -> None:
        super().__init__(inner)
        self.repair = repair

    def run(self, spec: TrialSpec) -> TrialOutcome:
        return self.inner.run(self.repair.trial_spec(spec))


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
    code: str  # the failing cell's Python as the user wrote it
    cause: Cause  # where the failure is caused (the failing cell itself: kind "here")
    repair: CellsRepair | None = None  # a cause in another cell: candidates may change several


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
            # best-of-N: one snapshot process per candidate, up to the cores, so their trials run
            # at the same time (each extra one is a fork of the kernel, ~5 ms, ~15 ms at 1 GiB)
            at_once = min(max(run.candidates, 1), os.cpu_count() or 1)
            snapshot = Snapshot.take(
                self.kernel.namespace, redactor, self.kernel.sandbox_options(), at_once=at_once
            )
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
        if snapshot is not None:
            snapshot.arm()  # its trials get ready while the prompt is built and the model answers
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
        threads_ok = isinstance(runner, (Snapshot, SpawnRunner))  # neither forks the kernel itself
        notes.extend(runner_notes)
        ground = self._ground(session, cell, error, failures, run, failing_count, redactor)
        if ground.cause.kind != "here":
            notes.append(ground.cause.sentence())
        session.cause = ground.cause
        wrap = self._wrapper(ground)
        repair = ground.repair
        task = RepairTask(
            code=ground.code,
            failures=tuple(failures),
            checks=run.checks,
            values=tuple(summaries),
            values_left_out=left_out,
            notes=tuple(notes),
            namespace=before,
            history=ground.history,
            cells=repair.cells if repair is not None else (),
            dependents=repair.cause.dependents if repair is not None else (),
            trial_legend=repair.trial_legend(len(run.checks)) if repair is not None else "",
        )
        provider, tutor = self._providers(run, ground.cause)
        return RefineJob(
            task=task,
            teaching_policy=run.teaching_policy,
            tutor=tutor,
            provider=provider,
            prices=dict(self.settings.prices),
            runner=wrap(runner),
            redactor=redactor,
            config=self._loop_config(run, session, repair, early_trials=threads_ok),
            # off the cell's path: the snapshot is reaped by a thread once it has ended
            free=functools.partial(snapshot.close, wait=False) if snapshot is not None else (lambda: None),
            fallback=lambda: wrap(
                LiveForkRunner(self.kernel.namespace, redactor, self.kernel.sandbox_options())
            ),
            background_ok=threads_ok,
            on_finish=self._on_finish(session, ground),
            accept_runner=self._accept_runner(before, after, redactor, wrap),
            stop_before=ground.cause.sentence() if ground.cause.kind == "cascade" else "",
            repair=repair,
            **self._restorer(snapshot, cell, after, failures),
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

    def _restorer(
        self, snapshot: Snapshot | None, cell: str, after: dict[str, Any], failures: list[Failure]
    ) -> dict[str, Any]:
        """Accept's way back for values the failed run changed in place. The names the statements
        it completed mention are fetched from the snapshot once a fix is found (``prefetch``: the
        snapshot is freed soon after); Accept rebinds, of the names whose fingerprints drifted,
        those nobody rebound since (``restore``)."""
        own = [f for f in failures if f.where == "cell"]
        done = top_level_statements(self.kernel.transform(cell))[: own[0].statements_done + 1 if own else 0]
        touched = sorted(
            {node.id for statement in done for node in ast.walk(statement) if isinstance(node, ast.Name)}
            & {name for name in after if _is_user_name(name)}
        )
        if snapshot is None or not touched:
            return {}
        namespace, held, as_failed = self.kernel.namespace, dict[str, Any](), dict[str, str]()
        fetched: list[bool] = []

        def prefetch(fingerprint: Callable[[list[str]], dict[str, str] | None]) -> None:
            if fetched or not snapshot.alive:
                return
            fetched.append(True)
            now = fingerprint(touched) or {}  # the live values as the failed run left them
            # Only what the failed run changed in place can need putting back: the names whose
            # fingerprints differ from the snapshot's (or cannot be compared) are fetched.
            then = snapshot.inspect(known_fingerprints, touched)
            changed = [
                n
                for n in touched
                if then is None or n not in now or now[n] != then.get(n) or now[n].startswith("unknown")
            ]
            held.update(snapshot.values(changed) if changed else {})
            as_failed.update({n: now[n] for n in held if n in now})

        def restore(names: list[str], live: Mapping[str, str] | None) -> list[str]:
            """Only what nobody changed since the failure: a later cell's change is never undone."""
            back = [
                n
                for n in names
                if n in held
                and namespace.get(n, _MISSING) is after.get(n)
                and live is not None
                and n in as_failed
                and live.get(n) == as_failed[n]
                and not as_failed[n].startswith("unknown")
            ]
            namespace.update({n: held[n] for n in back})
            return back

        return {"prefetch": prefetch, "restore": restore}

    def _wrapper(self, ground: _Grounding) -> Callable[[TrialRunner], TrialRunner]:
        """What every runner of the job goes through: the kernel's syntax turned into Python and,
        for a repair that spans cells, each candidate's edits composed in notebook order."""
        transform, repair = self.kernel.transform, ground.repair

        def wrap(inner: TrialRunner) -> TrialRunner:
            if repair is not None:
                return _CellsRunner(inner, repair)  # the repair turns each piece into Python
            return _TransformingRunner(inner, transform)

        return wrap

    def _accept_runner(
        self,
        before: dict[str, Any],
        after: dict[str, Any],
        redactor: Redactor,
        wrap: Callable[[TrialRunner], TrialRunner],
    ) -> Callable[[], TrialRunner]:
        """Trials from the live state as Accept will run the fix there: after Accept's own first
        step, undoing the failed run's rebinds (done in the trial's fork only)."""

        def make() -> TrialRunner:
            if self.spawn_reason() is not None:
                copy = dict(self.kernel.namespace)
                undo_rebinds(copy, before, after)
                return wrap(SpawnRunner(copy, redactor, SandboxOptions()))
            live, options = self.kernel.namespace, self.kernel.sandbox_options()

            def setup() -> None:
                options.child_setup()
                undo_rebinds(live, before, after)

            runner = LiveForkRunner(live, redactor, replace(options, child_setup=setup))
            return wrap(_LiveRunner(runner, live, before, after))

        return make

    # ------------------------------------------------------------------ grounding and cross-cell repairs

    def _notebook(self) -> tuple[list[NotebookCell] | None, float | None]:
        """The notebook's code cells in order: as the driver said (``nbrefine fix``, the
        extension), else as saved (JupyterLab and VS Code say where it is), and when."""
        told = self.kernel.notebook()
        if told is not None:
            return told, None
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
        failures: list[Failure],
        run: CellRun,
        failing_count: int | None,
        redactor: Redactor | None = None,
    ) -> _Grounding:
        """History for the prompt, and where the failure is caused (:func:`find_cause`): when it is
        another cell, candidates may change that cell too, and the failing cell runs as a check."""
        executed = self.kernel.executed(failing_count)
        notebook, saved_at = self._notebook()
        situation = Situation(
            source=cell,
            error=error,
            failures=tuple(failures),
            executed=tuple(executed),
            notebook=notebook,
            namespace=self.kernel.namespace,
            cell_id=session.cell_id,
            count=failing_count,
            counts=self.kernel.code_counts,
            checks=run.checks,
            transform=self.kernel.transform,
        )
        cause = find_cause(situation)
        history = ""
        if executed:
            names = free_names(self.kernel.transform(cell))
            report = analyse(executed, names, notebook, namespace=self.kernel.namespace, saved_at=saved_at)
            history = report.render(min(3000, self.settings.prompt_budget // 5), redactor)
        if not cause.spans_cells:
            return _Grounding(history, cell, cause)
        return _Grounding(history, cell, cause, CellsRepair(cause, failures, self.kernel.transform))

    def _on_finish(
        self, session: RefineSession, ground: _Grounding
    ) -> Callable[[RefineSession], None] | None:
        """For a repair that spans cells, what Accept does once the loop is done: the plan (the
        changed and moved cells, the runs in notebook order), and the cell the panel writes."""
        repair = ground.repair
        if repair is None:
            return None
        rerun, failing_id = self.kernel.rerun, session.cell_id

        def on_finish(done: RefineSession) -> None:
            code = done.result.fixed_code if done.result is not None else None
            if code is None:
                return
            plan = plan_for(repair.cause, repair.failing, repair.changes_of(code))
            done.plan = plan
            if not plan.spans_cells:  # the fix is the failing cell's alone, as without cells
                return
            prepare = done.prepare

            def run_plan(_fixed: str) -> bool:
                if prepare is not None:
                    prepare()  # undo the failed run's rebinds first, as for one cell
                return all(rerun(source) for _, source in plan.runs)  # in order; stop at a failure

            done._applier = run_plan
            if len(plan.changes) == 1 and not plan.moves:
                change = plan.changes[0]
                done.original_code = change.cell.source
                done.cell_id, done.cell_source = change.cell.cell_id, change.cell.source
                if failing_id is None or change.cell.cell_id is None:
                    done.prepare = None  # no cell ids to run the cells by: Accept runs them here
                else:
                    done.then_run_cell = failing_id  # the frontend runs the fixed cell, then it
            else:
                done.prepare = None  # several cells: Accept runs them here, in order

        return on_finish

    # ------------------------------------------------------------------ the provider and the loop

    def _providers(self, run: CellRun, cause: Cause) -> tuple[Callable[[], Provider], Callable[[], Provider]]:
        """The provider of fixes (behind the kernel's response cache unless ``run.cache`` is off)
        and the tutor of the teaching modes. A name that only a cell below defines is not the
        model's to invent: the one candidate is that cell, run first."""
        name, note = resolve_provider_name(run.provider, os.environ)
        if note:
            self.kernel.say(f"nbrefine: {note}")
        settings, quick_fixes = self._provider_settings(run), self.settings.quick_fixes
        tutor = (lambda: OfflineTutor()) if name == "offline" else (lambda: make_provider(name, settings))
        cache = run.cache
        if cause.kind == "below":
            return (lambda: _move_provider(cause)), tutor

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

    def _loop_config(
        self, run: CellRun, session: RefineSession, repair: CellsRepair | None, *, early_trials: bool
    ) -> LoopConfig:
        """``early_trials``: the runner may run trials while the reply streams in another thread."""
        config = LoopConfig(
            max_attempts=run.max_attempts,
            timeout_s=run.timeout,
            trial_policy=run.trial_policy,
            max_tokens=self.settings.max_tokens,
            prompt_budget=self.settings.prompt_budget,
            budget=budget_check(self.settings, session),
            candidates=run.candidates,
            transform=self.kernel.transform,
            early_trials=early_trials and self.settings.early_trials,
        )
        if repair is None:
            return config
        checks = len(run.checks)
        return replace(
            config,
            parse=repair.parse,
            verifier=lambda code, outcome: repair.verify(code, outcome, checks),
            max_attempts=1 if repair.cause.kind == "below" else run.max_attempts,
            candidates=1 if repair.cause.kind == "below" else run.candidates,
        )


def _move_provider(cause: Cause) -> Provider:
    """The one candidate of a name defined only below: that cell, run before the failing one."""
    moved = cause.causes[0]
    reply = f"{cause.sentence()}\n\n### {moved.label}\n```python\n{moved.source.rstrip()}\n```"
    provider = ScriptedProvider([reply], model="nbrefine (run the defining cell first)")
    provider.name = "nbrefine"
    return provider

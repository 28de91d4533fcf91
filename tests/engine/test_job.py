"""engine/job.py: the repair job of a failing cell, assembled without IPython.

Real objects throughout: real namespaces and failures, real snapshot forks and spawned trials, the
kernel's real response cache and a scripted provider (the only stand-in: for the remote model)."""

from __future__ import annotations

import linecache
from typing import Any

import pytest
from kernel_io import children_of

import nbrefine
from nbrefine.engine import (
    CellRun,
    JobBuilder,
    KernelAccess,
    RefineJob,
    RefineSession,
    TeachingPolicy,
    Usage,
    add_to_kernel,
    budget_check,
    undo_rebinds,
)
from nbrefine.engine.config import Refine
from nbrefine.engine.kernel_state import reset
from nbrefine.engine.types import Attempt, LoopResult
from nbrefine.grounding import Redactor
from nbrefine.grounding.capture import capture_failure
from nbrefine.grounding.history import ExecutedCell
from nbrefine.providers.base import ProviderReply, ProviderRequest
from nbrefine.providers.cache import CachingProvider
from nbrefine.providers.scripted import ScriptedProvider
from nbrefine.sandbox import (
    LiveForkRunner,
    SandboxOptions,
    Snapshot,
    SpawnRunner,
    TrialPolicy,
    TrialSpec,
    fork_unsafe_reason,
)


@pytest.fixture(autouse=True)
def fresh_state():
    reset()  # spending and cached replies are kernel-wide (process-wide)
    yield
    reset()


@pytest.fixture
def scripted() -> ScriptedProvider:
    provider = ScriptedProvider()
    nbrefine.register_provider("job-scripted", lambda settings: provider)
    return provider


def options(**changes: Any) -> CellRun:
    """A cell's options, as the magics resolve them."""
    base: dict[str, Any] = {
        "provider": "job-scripted",
        "model": "",
        "max_attempts": 2,
        "timeout": 10.0,
        "checks": (),
        "snapshot": True,
        "trial_policy": TrialPolicy(),
        "teaching_policy": TeachingPolicy(),
    }
    return CellRun(**{**base, **changes})


def settings(**traits: Any) -> Refine:
    return Refine(quick_fixes=False, **traits)


def spent(tokens: int) -> Attempt:
    """An attempt whose one reply cost ``tokens`` (model unpriced: tokens only)."""
    reply = ProviderReply(text="", model="no-price", input_tokens=tokens)
    return Attempt(1, ProviderRequest(system="", user=""), reply=reply)


class Failed:
    """A cell run in ``namespace`` as a kernel would run it, failing; what the builder is given."""

    def __init__(self, cell: str, namespace: dict[str, Any], filename: str = "<cell>") -> None:
        self.cell, self.namespace = cell, namespace
        self.before = dict(namespace)
        self.redactor = Redactor()
        try:
            exec(compile(cell, filename, "exec"), namespace)
        except Exception as err:
            self.error: BaseException = err
        else:
            raise AssertionError(f"{cell!r} did not fail")
        self.after = dict(namespace)
        self.failure = capture_failure(self.error, code=cell, user_globals=namespace, redactor=self.redactor)

    def job(
        self,
        builder: JobBuilder,
        run: CellRun,
        snapshot: Snapshot | None = None,
        notes: list[str] | None = None,
    ) -> tuple[RefineSession, RefineJob]:
        session = RefineSession(self.cell, provider=run.provider, remember=False)
        session.failures = (self.failure,)
        job = builder.build(
            session,
            self.error,
            run,
            self.cell,
            [self.failure],
            self.before,
            self.after,
            self.redactor,
            snapshot,
            [] if notes is None else notes,
        )
        session.job = job
        return session, job


def candidate(job: RefineJob, code: str) -> TrialSpec:
    return TrialSpec(code=code, checks=job.task.checks, timeout_s=10.0, policy=job.config.trial_policy)


# --------------------------------------------------------------------------- the budget


def test_no_limit_no_budget_check() -> None:
    assert budget_check(settings(), RefineSession("x", remember=False)) is None


def test_the_budget_check_stops_at_the_session_token_limit() -> None:
    session = RefineSession("x", remember=False)
    session.result = LoopResult("failed", "max_attempts", "", [spent(30)])  # an earlier run ("Try again")
    check = budget_check(settings(budget_tokens=35), session)
    assert check is not None
    assert check([spent(4)]) is None  # 34 of 35
    assert check([spent(4), spent(1)]) == "Stopped: the session budget of 35 tokens is spent (35 used)."


def test_the_budget_check_stops_at_the_kernel_token_and_money_limits() -> None:
    add_to_kernel(Usage(input_tokens=90, output_tokens=5, cost_usd=0.5))  # other sessions of this kernel
    session = RefineSession("x", remember=False)
    by_tokens = budget_check(settings(kernel_budget_tokens=100), session)
    assert by_tokens is not None and by_tokens([spent(4)]) is None
    assert by_tokens([spent(5)]) == "Stopped: the kernel budget of 100 tokens is spent (100 used)."
    by_money = budget_check(settings(kernel_budget_usd=0.5, budget_tokens=10_000), session)
    assert by_money is not None
    assert by_money([]) == "Stopped: the kernel budget of $0.50 is spent ($0.5000 used)."


def test_the_job_loop_stops_on_the_budget(scripted: ScriptedProvider) -> None:
    scripted.replies = ["```python\ny = x + nope\n```", "```python\ny = x + 1\n```"]
    failed = Failed("y = x + one", {"x": 1})
    builder = JobBuilder(KernelAccess(failed.namespace), settings(sandbox="fork", budget_tokens=1))
    session, job = failed.job(builder, options(snapshot=False))
    session.run()
    job.release()
    assert session.status == "budget" and len(session.attempts) == 1
    assert "session budget of 1 tokens" in session.message


# --------------------------------------------------------------------------- the provider


@pytest.mark.parametrize("cache", [True, False])
def test_the_response_cache_wraps_the_provider_only_when_asked(
    scripted: ScriptedProvider, cache: bool
) -> None:
    failed = Failed("y = x + one", {"x": 1})
    builder = JobBuilder(KernelAccess(failed.namespace), settings(sandbox="fork"))
    _, job = failed.job(builder, options(snapshot=False, cache=cache))
    provider = job.provider()
    assert isinstance(provider, CachingProvider) is cache
    assert (provider.inner if isinstance(provider, CachingProvider) else provider) is scripted
    scripted.replies = ["```python\ny = 1\n```"] * 2
    request = ProviderRequest(system="s", user="the same request")
    first = provider.complete(request)
    assert job.provider().complete(request).text == first.text  # a new provider of the same job
    assert len(scripted.requests) == (1 if cache else 2)  # the kernel's cache answered the second time


def test_an_automatic_provider_choice_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    said: list[str] = []
    failed = Failed("y = x + one", {"x": 1})
    builder = JobBuilder(KernelAccess(failed.namespace, say=said.append), settings(sandbox="fork"))
    _, job = failed.job(builder, options(provider="auto", snapshot=False))
    assert said == ["nbrefine: no ANTHROPIC_API_KEY is set, so only the offline quick fixes are used"]
    assert job.provider().name == "offline"


# --------------------------------------------------------------------------- where trials run


def test_refine_sandbox_fork_takes_a_snapshot_and_trials_run_in_it() -> None:
    namespace = {"x": 1}
    lazy = KernelAccess(namespace, sandbox_options=lambda: SandboxOptions(ready_ahead=False))
    builder = JobBuilder(lazy, settings(sandbox="fork"))
    assert builder.spawn_reason() is None
    session = RefineSession("y = x + one", remember=False)
    snapshot, notes = builder.take_snapshot(Redactor(), options(), session)
    assert isinstance(snapshot, Snapshot) and notes == [] and session.timings["snapshot_s"] >= 0
    assert snapshot.inspect(len) == 1 and not children_of(snapshot.pid)  # not ready ahead: no spare yet
    failed = Failed("x = 5\ny = x + one", namespace)
    _, job = failed.job(builder, options(), snapshot)
    try:
        assert job.runner.inner is snapshot and job.background_ok  # type: ignore[attr-defined]
        # the cell failed: the snapshot readies its spare while the prompt is built
        assert snapshot.inspect(len) == 1 and children_of(snapshot.pid)
        outcome = job.runner.run(candidate(job, "y = x + 1\nassert x == 1"))  # the state before the cell ran
        assert outcome.ok and snapshot.last_start == "spare", outcome.one_line()
    finally:
        job.release()
    assert not snapshot.alive


def test_refine_sandbox_spawn_takes_no_snapshot_and_trials_run_in_a_fresh_interpreter() -> None:
    namespace = {"x": 1}
    builder = JobBuilder(KernelAccess(namespace), settings(sandbox="spawn"))
    assert builder.spawn_reason() == "Refine.sandbox is 'spawn'"
    assert builder.take_snapshot(Redactor(), options(), RefineSession("", remember=False)) == (None, [])
    notes: list[str] = []
    failed = Failed("x = 5\ny = x + one", namespace)
    _, job = failed.job(builder, options(), notes=notes)
    assert isinstance(job.runner.inner, SpawnRunner) and job.background_ok  # type: ignore[attr-defined]
    assert (
        "Trials run in a fresh interpreter with copies of the names they use (Refine.sandbox is 'spawn')."
        in notes
    )
    outcome = job.runner.run(candidate(job, "y = x + 1\nassert x == 1"))  # copies from before the cell
    assert outcome.ok, outcome.one_line()


def test_refine_sandbox_auto_forks_where_it_is_safe() -> None:
    assert JobBuilder(KernelAccess({}), settings(sandbox="auto")).spawn_reason() == fork_unsafe_reason()


def test_without_a_snapshot_trials_start_from_the_state_the_failed_run_left() -> None:
    builder = JobBuilder(KernelAccess({"x": 1}), settings(sandbox="fork"))
    snapshot, notes = builder.take_snapshot(
        Redactor(), options(snapshot=False), RefineSession("", remember=False)
    )
    assert snapshot is None
    assert notes == ["Snapshots are off: trials start from the state the failed run left behind."]
    failed = Failed("x = 5\ny = x + one", builder.kernel.namespace)
    _, job = failed.job(builder, options(snapshot=False))
    assert isinstance(job.runner.inner, LiveForkRunner) and not job.background_ok  # type: ignore[attr-defined]
    assert job.runner.run(candidate(job, "assert x == 5")).ok


def test_early_trials_only_where_trials_do_not_fork_the_kernel_and_as_set() -> None:
    """A snapshot forks in its own process, so a trial may run while the reply streams in another
    thread; a live fork of the kernel may not. Refine.early_trials turns them off."""
    failed = Failed("x = 5\ny = x + one", {"x": 1})
    for early, expected in ((True, True), (False, False)):
        builder = JobBuilder(KernelAccess(failed.namespace), settings(sandbox="fork", early_trials=early))
        snapshot, _ = builder.take_snapshot(Redactor(), options(), RefineSession("", remember=False))
        _, job = failed.job(builder, options(), snapshot)
        job.release()
        assert job.config.early_trials is expected
    live = JobBuilder(KernelAccess(failed.namespace), settings(sandbox="fork"))
    _, job = failed.job(live, options(snapshot=False))
    assert not job.background_ok and not job.config.early_trials


def test_trials_run_the_kernels_syntax_turned_into_python() -> None:
    kernel = KernelAccess({"x": 1}, transform=lambda code: code.replace("%answer", "42"))
    failed = Failed("y = x + one", kernel.namespace)
    _, job = failed.job(JobBuilder(kernel, settings(sandbox="fork")), options(snapshot=False))
    assert job.runner.run(candidate(job, "y = %answer\nassert y == 42")).ok


# --------------------------------------------------------------------------- Accept's first step


def test_undo_rebinds_puts_back_only_what_nobody_changed_since() -> None:
    before = {"a": 1, "b": 2, "_private": 0}
    after = {"a": 10, "b": 20, "new": 3, "_private": 9}  # what the failed run left
    live = {**after, "b": 99}  # a later cell rebound b
    undo_rebinds(live, before, after)
    assert live == {"a": 1, "b": 99, "_private": 9}  # new was the failed run's: gone


def test_the_accept_runner_trials_from_the_live_state_with_the_rebinds_undone() -> None:
    failed = Failed("x = 5\ny = x + one", {"x": 1})
    _, job = failed.job(JobBuilder(KernelAccess(failed.namespace), settings(sandbox="fork")), options())
    try:
        assert job.accept_runner is not None
        outcome = job.accept_runner().run(candidate(job, "assert x == 1 and 'y' not in globals()"))
        assert outcome.ok, outcome.one_line()
        assert failed.namespace["x"] == 5  # undone in the trial's fork only
    finally:
        job.release()


# --------------------------------------------------------------------------- another cell's function


def cross_cell(checks: tuple[str, ...]) -> tuple[Failed, RefineJob]:
    """``net`` defined in cell 1 raises when cell 2 calls it: the repair targets cell 1."""
    define = "def net(amount):\n    return amount - taxes\n"
    linecache.cache["<cell-1>"] = (len(define), None, define.splitlines(True), "<cell-1>")
    namespace: dict[str, Any] = {"tax": 2}
    exec(compile(define, "<cell-1>", "exec"), namespace)
    failed = Failed("value = net(10)", namespace, filename="<cell-2>")
    kernel = KernelAccess(
        namespace, executed=lambda failing: [ExecutedCell(1, define, "c1")], code_counts={"<cell-1>": 1}
    )
    _, job = failed.job(JobBuilder(kernel, settings(sandbox="fork")), options(checks=checks, snapshot=False))
    return failed, job


def test_an_error_in_another_cells_function_retargets_the_job_at_that_cell() -> None:
    _, job = cross_cell(("assert value == 8",))
    assert job.repair is not None and job.repair.cause.kind == "raised_in"
    (cause,) = job.repair.cause.causes
    assert cause.source.startswith("def net(amount):") and cause.cell_id == "c1"
    assert [cell.role for cell in job.task.cells] == ["cause", "failing"]  # the prompt shows both
    assert job.task.code == "value = net(10)" and job.task.checks == ("assert value == 8",)
    assert job.on_finish is not None and job.config.verifier is not None
    fixed = job.repair.candidate({cause.key: "def net(amount):\n    return amount - tax\n"})
    outcome = job.runner.run(candidate(job, fixed))  # the failing cell runs after it, as check 1
    assert outcome.ok and outcome.checks_total == 2, outcome.one_line()
    assert job.config.verifier(fixed, outcome) == ""


def test_a_cross_cell_candidate_for_the_failing_cell_keeps_the_users_checks() -> None:
    _, job = cross_cell(("assert value == 8",))
    fixed = "value = 10 - tax"
    outcome = job.runner.run(candidate(job, fixed))
    assert outcome.ok and outcome.checks_total == 1, outcome.one_line()
    assert job.config.verifier is not None and job.config.verifier(fixed, outcome) == ""


def test_after_the_snapshot_is_freed_a_candidate_for_the_failing_cell_is_still_tried_as_one() -> None:
    _, job = cross_cell(())
    job.release()  # "Try again" after the snapshot was freed: trials fork from the live state
    outcome = job.current_runner().run(candidate(job, "value = 10 - tax"))
    assert outcome.ok, outcome.one_line()

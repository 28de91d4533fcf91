"""Early trials (nbrefine.engine.early): the real loop, the real Anthropic SDK streaming from the
loopback fake, real trials in a snapshot. Each reply is also run with early trials off: the
result must be the same, only the timing differs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.anthropic_api import FakeAnthropic

from nbrefine.engine import LoopConfig, LoopResult, RepairTask, refine
from nbrefine.engine.cause import Cause
from nbrefine.engine.cells import CellRef
from nbrefine.engine.multicell import CellsRepair
from nbrefine.grounding import Redactor
from nbrefine.grounding.capture import Failure
from nbrefine.providers.anthropic import AnthropicProvider
from nbrefine.sandbox import Snapshot, TrialOutcome, TrialSpec

pytestmark = pytest.mark.timeout(60)

CELL = "total = totl\nprint(total)"
FIX = "total = 1\nprint(total)"
WRONG = "total = 2\nassert total == 1, total"
SLOW = "import time\ntime.sleep(5)\ntotal = 1\nprint(total)"
EXPLANATION = (
    "The cell reads `totl`, a name nothing defines: it is a misspelling of `total`, which the cell "
    "means to bind. Binding `total` directly gives the value the rest of the notebook expects, and "
    "the print shows it. Nothing else in the cell depends on the misspelt name, so no other line "
    "changes; the asserts and checks of the notebook are left exactly as they were, and the state "
    "the cell runs on is the one it saw when it failed. If `total` was meant to come from an earlier "
    "cell, run that cell first instead; the fix here keeps the cell self-contained, which is what "
    "its own code suggests, since it never reads any other name. That is the whole change."
)
DELAY = {"chunk_delay": 0.01, "chunk_size": 12}


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


class Recording:
    """The snapshot as the loop sees it, noting what each trial ran and when (``spec`` composes a
    candidate's trial, as the job's runner does for a repair that spans cells)."""

    def __init__(self, snapshot: Snapshot, spec: Any = None) -> None:
        self.snapshot, self.spec = snapshot, spec
        self.log: list[tuple[str, float, float]] = []  # code, started, ended

    def run(self, spec: TrialSpec) -> TrialOutcome:
        started = time.monotonic()
        outcome = self.snapshot.run(self.spec(spec) if self.spec else spec)
        self.log.append((spec.code, started, time.monotonic()))
        return outcome

    def cancel(self) -> None:
        self.snapshot.cancel()

    @property
    def at_once(self) -> int:
        return self.snapshot.at_once


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def snapshot() -> Iterator[Snapshot]:
    with Snapshot.take({}, Redactor(environ={})) as snap:
        yield snap


def task(code: str = CELL) -> RepairTask:
    failure = Failure("NameError", "name 'totl' is not defined", lineno=1, line=code.splitlines()[0])
    return RepairTask(code=code, failures=(failure,))


def ask(
    fake: FakeAnthropic,
    runner: Recording,
    specs: list[dict[str, Any]],
    repair: RepairTask | None = None,
    **config: Any,
) -> tuple[LoopResult, list[tuple[str, float]]]:
    """The loop's result for the scripted replies, and its events with when they came."""
    fake.script(*specs)
    provider = AnthropicProvider(api_key="sk-test", base_url=fake.base_url, max_retries=0, timeout=10.0)
    events: list[tuple[str, float]] = []
    try:
        result = refine(
            repair or task(),
            provider,
            runner,
            Redactor(environ={}),
            LoopConfig(**{"max_attempts": 1, "early_trials": True, **config}),
            on_event=lambda kind, _: events.append((kind, time.monotonic())),
        )
    finally:
        provider.close()
    return result, events


def plain(result: LoopResult) -> tuple[Any, ...]:
    """All a result says, without its timings."""

    def outcome(o: TrialOutcome | None) -> tuple[Any, ...] | None:
        return (
            None
            if o is None
            else (o.status, o.error_type, o.error_message, o.stdout, o.checks_total, o.suspect)
        )

    attempts = [
        (
            a.code,
            a.explanation,
            a.note,
            a.cycle,
            a.regression,
            a.changes_checks,
            outcome(a.outcome),
            sorted((code, outcome(o)) for code, o in a.alternatives),
        )
        for a in result.attempts
    ]
    return (
        result.status,
        result.stop_reason,
        result.message,
        result.fixed_code,
        result.explanation,
        attempts,
    )


def same_without_early_trials(
    fake: FakeAnthropic, snapshot: Snapshot, specs: list[dict[str, Any]], result: LoopResult, **kw: Any
) -> None:
    again, _ = ask(fake, Recording(snapshot, kw.pop("spec", None)), specs, early_trials=False, **kw)
    assert plain(again) == plain(result)


def test_the_trial_starts_while_the_explanation_still_streams(
    fake: FakeAnthropic, snapshot: Snapshot
) -> None:
    specs = [{"text": f"`totl` is misspelt.\n\n{fenced(FIX)}\n\n{EXPLANATION}", **DELAY}]
    runner = Recording(snapshot)
    result, events = ask(fake, runner, specs)
    assert result.status == "fixed" and result.fixed_code == FIX
    [(code, started, _)] = runner.log  # one trial: the early one was used
    last_text = max(at for kind, at in events if kind == "text")
    assert code == FIX and started < last_text  # while the explanation still streamed
    assert result.attempts[0].trial_early_s > 0
    # The events come in the usual order: the trial's after the reply.
    kinds = [kind for kind, _ in events if kind != "text"]
    assert kinds == ["request", "reply", "trial_start", "trial_done"]
    same_without_early_trials(fake, snapshot, specs, result)


def test_a_second_block_that_changes_the_candidate_discards_the_early_trial(
    fake: FakeAnthropic, snapshot: Snapshot
) -> None:
    """The first block's trial (slow) is killed when the reply ends with another candidate."""
    text = f"First try:\n\n{fenced(SLOW)}\n\nNo, simpler:\n\n{fenced(FIX)}\n"
    specs = [{"text": text, **DELAY}]
    runner = Recording(snapshot)
    result, _ = ask(fake, runner, specs)
    assert result.status == "fixed" and result.fixed_code == FIX
    assert [code for code, _, _ in runner.log] == [SLOW, FIX]
    _, started, ended = runner.log[0]
    assert ended - started < 4  # killed, not waited for (it sleeps 5 s)
    assert result.attempts[0].outcome is not None and result.attempts[0].outcome.stdout == "1\n"
    assert result.attempts[0].trial_early_s == 0  # the final candidate was tried after the reply
    same_without_early_trials(fake, snapshot, specs, result)


def test_a_decline_after_a_block_wins(fake: FakeAnthropic, snapshot: Snapshot) -> None:
    """A repair that spans cells: the first block changes a cell, the rest of the reply puts it
    back and declines; the early trial of the first block counts for nothing."""
    search = "def search(arr, x):\n    return arr.index(x) + 1"
    fixed = "def search(arr, x):\n    return arr.index(x)"
    cells = (
        CellRef("search", search, "cause", 1, cell_id="search", defines=("search",)),
        CellRef(
            "checks", "assert search([1, 3, 5], 5) == 2", "failing", 2, cell_id="checks", readonly="checks"
        ),
    )
    repair = CellsRepair(Cause("checked", cells[1], causes=(cells[0],), names=("search",)))
    failure = Failure("AssertionError", "", lineno=1, line=cells[1].source)
    repair_task = RepairTask(code=cells[1].source, failures=(failure,), cells=cells)
    text = (
        f"### In [1]\n{fenced(fixed)}\n\n{EXPLANATION}\n\nOn second thought, keep it:\n\n### In [1]\n"
        f"{fenced(search)}\n\nI can't tell which index is intended; this needs In [1] to run first."
    )
    specs = [{"text": text, **DELAY}]
    runner = Recording(snapshot, repair.trial_spec)
    result, _ = ask(fake, runner, specs, repair_task, parse=repair.parse)
    assert [code for code, _, _ in runner.log] == [repair.render({"search": fixed})]  # tried early
    attempt = result.attempts[0]
    assert attempt.code is None and attempt.outcome is None and "declined" in attempt.note
    assert result.status == "unfixed"
    same_without_early_trials(fake, snapshot, specs, result, repair=repair_task, parse=repair.parse)


def test_a_refusal_without_code_runs_no_trial(fake: FakeAnthropic, snapshot: Snapshot) -> None:
    specs = [
        {"text": "I can't tell what `totl` was meant to be; run the cell that defines it first.", **DELAY}
    ]
    runner = Recording(snapshot)
    result, _ = ask(fake, runner, specs)
    assert runner.log == [] and result.stop_reason == "declined"
    same_without_early_trials(fake, snapshot, specs, result)


def test_best_of_two_tries_the_first_reply_in_while_the_other_streams(
    fake: FakeAnthropic, snapshot: Snapshot
) -> None:
    specs = [
        {"text": f"Quick:\n\n{fenced(WRONG)}\n"},
        {"text": f"`totl` is misspelt.\n\n{fenced(FIX)}\n\n{EXPLANATION}", **DELAY},
    ]
    runner = Recording(snapshot)
    result, _ = ask(fake, runner, specs, candidates=2)
    assert result.status == "fixed" and result.fixed_code == FIX
    assert sorted(code for code, _, _ in runner.log) == sorted([FIX, WRONG])  # each once
    assert runner.log[0][0] == WRONG  # the reply that came first was tried first
    attempt = result.attempts[0]
    assert attempt.trial_early_s > 0  # before the slow reply was in
    assert [code for code, _ in attempt.alternatives] == [WRONG]
    same_without_early_trials(fake, snapshot, specs, result, candidates=2)


NAP = "import time\ntime.sleep(0.6)\ntotal = {}\nprint(total)"


def test_best_of_two_runs_both_trials_at_once_on_a_snapshot_with_a_twin(fake: FakeAnthropic) -> None:
    """Two replies in at the same time, each candidate 0.6 s of work: on a snapshot taken with a
    twin (one snapshot process per candidate) their trials overlap, on one alone they follow
    each other; the result is the same."""
    specs = [
        {"text": f"Use the name directly:\n\n{fenced(NAP.format('1'))}\n"},
        {"text": f"Or compute it:\n\n{fenced(NAP.format('0 + 1'))}\n"},
    ]
    results, overlaps = [], []
    for at_once in (2, 1):
        with Snapshot.take({}, Redactor(environ={}), at_once=at_once) as snap:
            assert snap.at_once == at_once
            runner = Recording(snap)
            result, _ = ask(fake, runner, specs, candidates=2)
        assert result.status == "fixed" and len(runner.log) == 2
        (_, _, first_end), (_, second_start, _) = sorted(runner.log, key=lambda t: t[1])
        results.append(plain(result))
        overlaps.append(second_start < first_end)
    assert overlaps == [True, False]
    assert results[0] == results[1]

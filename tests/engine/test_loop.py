"""The refine loop with a scripted provider and real forked trials."""

from __future__ import annotations

from typing import get_args, get_type_hints

from nbrefine._errors import ProviderRateLimitError
from nbrefine.engine import STATUSES, LoopConfig, LoopEvent, RepairTask, normalize_code, refine
from nbrefine.engine.types import STOP_REASONS
from nbrefine.grounding import Redactor
from nbrefine.grounding.capture import Failure
from nbrefine.providers.scripted import ScriptedProvider
from nbrefine.sandbox import LiveForkRunner


def block(code: str, prose: str = "Fixed it.") -> str:
    return f"{prose}\n\n```python\n{code}\n```"


def make(code: str, namespace: dict | None = None, checks: tuple[str, ...] = ()):
    namespace = {} if namespace is None else namespace
    failure = Failure("NameError", "name 'totl' is not defined", lineno=1, line=code.splitlines()[0])
    task = RepairTask(code=code, failures=(failure,), checks=checks)
    runner = LiveForkRunner(namespace, Redactor(environ={}))
    return task, runner


def run(task, runner, replies, **config):
    provider = ScriptedProvider(replies)
    result = refine(task, provider, runner, Redactor(environ={}), LoopConfig(**config))
    return result, provider


def test_wrong_then_right_candidate_is_fixed_at_attempt_two():
    namespace = {"items": [3, 4]}
    task, runner = make("total = sum(items)\nassert totl == 7", namespace)
    result, provider = run(
        task,
        runner,
        [block("total = sum(items)\nassert total == 8"), block("total = sum(items)\nassert total == 7")],
    )
    assert result.status == "fixed" and result.stop_reason == "passed"
    assert result.fixed_code == "total = sum(items)\nassert total == 7"
    assert [a.ok for a in result.attempts] == [False, True]
    first = result.attempts[0]
    assert first.error_type == "AssertionError"
    assert "where total = " in first.outcome.failure.assertion and "int 7" in first.outcome.failure.assertion
    # The second prompt carried the first candidate and its real outcome.
    assert "assert total == 8" in provider.requests[1].user
    assert "where total =" in provider.requests[1].user
    assert "total" not in namespace  # trials ran in forks


def typed(events: list[tuple[str, dict]]) -> bool:
    """Each payload has its kind and exactly the keys of that kind's TypedDict."""
    declared = {get_args(get_type_hints(t)["kind"])[0]: t.__required_keys__ for t in get_args(LoopEvent)}
    return all(payload["kind"] == kind and set(payload) == declared[kind] for kind, payload in events)


def test_the_loop_sends_typed_events_and_ends_with_a_known_status():
    task, runner = make("total = sum(items)\nassert totl == 7", {"items": [3, 4]})
    events: list[tuple[str, dict]] = []
    provider = ScriptedProvider(
        [block("total = sum(items)\nassert total == 8"), block("total = sum(items)\nassert total == 7")]
    )
    result = refine(
        task,
        provider,
        runner,
        Redactor(environ={}),
        on_event=lambda kind, payload: events.append((kind, payload)),
    )
    assert result.status == "fixed" and result.status in STATUSES and result.stop_reason in STOP_REASONS
    assert [kind for kind, _ in events if kind != "text"] == [
        "request",
        "reply",
        "trial_start",
        "trial_done",
    ] * 2
    assert any(kind == "text" for kind, _ in events) and typed(events)
    assert [payload["status"] for kind, payload in events if kind == "trial_done"] == ["failed", "passed"]


def test_extra_checks_must_pass_too():
    task, runner = make("def f(x):\n    return x + x", checks=("assert f(3) == 9",))
    result, _ = run(
        task, runner, [block("def f(x):\n    return x * 2"), block("def f(x):\n    return x * x")]
    )
    assert result.status == "fixed"
    first = result.attempts[0].outcome
    assert first.status == "failed" and first.check_failures
    assert "where f(3) = int 6" in first.check_failures[0].assertion


def test_reply_without_code_is_a_failed_attempt_with_a_reason():
    task, runner = make("x = y")
    result, _ = run(task, runner, ["I would rename y.", block("y = 1\nx = y")])
    assert result.status == "fixed"
    assert result.attempts[0].code is None
    assert result.attempts[0].error_type == "NoCode"
    assert "no fenced code block" in result.attempts[0].note


def test_candidate_equal_to_original_after_normalising_is_a_cycle():
    task, runner = make("x = y  # comment")
    result, _ = run(task, runner, [block("x   =   y\n# only a comment changed")])
    assert result.status == "unfixed" and result.stop_reason == "cycle"
    assert "the original cell" in result.message


def test_repeated_candidate_is_a_cycle():
    task, runner = make("x = y")
    result, _ = run(task, runner, [block("x = z"), block("x = z  # again")], max_attempts=5)
    assert result.stop_reason == "cycle" and len(result.attempts) == 2
    assert result.attempts[1].note == "same code as attempt 1"


def test_same_error_signature_twice_is_a_cycle():
    task, runner = make("x = y")
    result, _ = run(task, runner, [block("x = z"), block("w = 1\nx = z")], max_attempts=5)
    assert result.stop_reason == "cycle"
    assert "same error" in result.message


def test_regression_is_flagged_and_two_in_a_row_stop():
    code = "a = 1\nb = 2\nc = d"
    namespace: dict = {}
    failure = Failure("NameError", "name 'd' is not defined", lineno=3, line="c = d", statements_done=2)
    task = RepairTask(code=code, failures=(failure,))
    runner = LiveForkRunner(namespace, Redactor(environ={}))
    replies = [block("a = q1\nb = 2\nc = 3"), block("a = q2\nb = 2\nc = 3"), block("a = 1\nb = 2\nc = 3")]
    result, _ = run(task, runner, replies, max_attempts=3)
    assert [a.regression for a in result.attempts] == [True, True]
    assert result.stop_reason == "regression"


def test_attempt_cap():
    task, runner = make("x = y")
    result, _ = run(task, runner, [block("x = z1"), block("x = 1 / 0")], max_attempts=2)
    assert result.status == "unfixed" and result.stop_reason == "max_attempts"
    assert len(result.attempts) == 2


def test_provider_error_ends_with_error_status_and_message():
    task, runner = make("x = y")
    result, _ = run(task, runner, [ProviderRateLimitError("rate limited by the provider (HTTP 429)")])
    assert result.status == "error" and result.stop_reason == "provider_error"
    assert "429" in result.message


def test_timeout_is_a_typed_outcome():
    task, runner = make("x = y")
    result, _ = run(task, runner, [block("while True:\n    pass"), block("x = 1")], timeout_s=0.5)
    assert result.attempts[0].outcome.status == "timeout"
    assert result.status == "fixed"


def test_normalize_ignores_comments_and_whitespace_only():
    assert normalize_code("x=1  # a\n\n") == normalize_code("x = 1")
    assert normalize_code("x = 1") != normalize_code("x = 2")
    assert normalize_code("x = (") == normalize_code("x  =  (  # broken")


def test_best_of_n_trials_every_candidate_and_keeps_the_smallest_passing_change():
    namespace = {"items": [3, 4]}
    task, runner = make("total = sum(itemz)", namespace)
    replies = [
        block("total = sum(items) + 0\nextra = 1\nassert total == 7"),  # passes, bigger change
        block("total = sum(items)"),  # passes, smallest change
        block("total = sum(items) * 2\nassert total == 7"),  # fails
    ]
    result, provider = run(task, runner, replies, candidates=3)
    assert result.status == "fixed" and len(result.attempts) == 1
    attempt = result.attempts[0]
    assert attempt.code == "total = sum(items)"
    assert len(attempt.replies) == 3 and len(provider.requests) == 3
    verdicts = sorted(outcome.status for _, outcome in attempt.alternatives)
    assert verdicts == ["failed", "passed"]
    assert result.input_tokens == sum(r.input_tokens for r in attempt.replies)


def test_a_pass_that_changes_the_checks_is_not_a_fix_and_the_loop_goes_on():
    namespace = {"items": [3, 4]}
    task, runner = make("total = sum(itemz)\nassert total == 7", namespace)
    forged, honest = "total = sum(items)", "total = sum(items)\nassert total == 7"
    result, provider = run(task, runner, [block(forged), block(honest)])
    assert result.status == "fixed" and result.fixed_code == honest
    first = result.attempts[0]
    assert first.passed and not first.ok
    assert first.changes_checks == "drops `assert total == 7`"
    assert first.summary().startswith("changes the checks: drops `assert total == 7` (its trial passed")
    assert "Not counted as a fix: it changes the checks" in provider.requests[1].user


def test_a_loop_that_finds_only_a_pass_that_changes_the_checks_offers_it_unverified():
    task, runner = make("total = sum(itemz)\nassert total == 7", {"items": [3, 4]})
    forged = "try:\n    total = sum(itemz)\n    assert total == 7\nexcept Exception:\n    pass"
    result, _ = run(task, runner, [block(forged), block("total = sum(itemz) + 0")], max_attempts=2)
    assert result.status == "changes_checks" and result.stop_reason == "max_attempts"
    assert result.fixed_code == forged
    assert "blanket `except Exception`" in result.unverified
    assert result.message.startswith("No verified fix in 2 attempt(s): attempt 1 passed its trial")


def test_best_of_n_prefers_a_verified_candidate_to_a_smaller_one_that_changes_the_checks():
    task, runner = make("total = sum(itemz)\nassert total == 7", {"items": [3, 4]})
    replies = [block("total = sum(items)"), block("total = sum(items)\nassert total == 7")]
    result, _ = run(task, runner, replies, candidates=2)
    attempt = result.attempts[0]
    assert result.status == "fixed" and attempt.code == "total = sum(items)\nassert total == 7"
    assert [code for code, _ in attempt.alternatives] == ["total = sum(items)"]
    assert attempt.alternative_reasons == ["drops `assert total == 7`"]


def test_a_check_dropped_from_the_runners_spec_still_runs():
    """The checks are compiled before the candidate runs and run by the runner's own loop: a
    candidate that walks the frames to the trial's spec and empties its checks changes nothing."""
    task, runner = make("x = 1", checks=("assert x == 2",))
    dropped = (
        "import sys\nframe = sys._getframe()\nwhile 'spec' not in frame.f_locals:\n    frame = frame.f_back\n"
        "object.__setattr__(frame.f_locals['spec'], 'checks', ())\nx = 1"
    )
    result, _ = run(task, runner, [block(dropped), block("x = 2")])
    assert result.status == "fixed" and result.fixed_code == "x = 2"
    first = result.attempts[0]
    assert not first.passed and first.outcome.checks_total == 1
    assert [(f.error_type, f.where) for f in first.outcome.check_failures] == [("AssertionError", "check 1")]

"""Teaching modes: the policy and its lock, the prompts, and the no-solution guard.

The guard is tested the way it runs: every snippet of a reply is trial-run in real forks
(``LiveForkRunner`` on a dict namespace holding the state before the cell), and the model is a
``ScriptedProvider`` that disobeys the teaching prompt and hands out the answer.
"""

from __future__ import annotations

import json
import linecache
import re
import textwrap
from pathlib import Path
from typing import Any, get_args, get_type_hints

import nbformat
import pytest

from nbrefine._errors import NbrefineError, ProviderRateLimitError
from nbrefine.engine import SYSTEM_PROMPT, LoopEvent, RepairTask, apply_policy_line
from nbrefine.engine.teaching import (
    MODES,
    TEACHING_SYSTEM_PROMPT,
    HintLedger,
    OfflineTutor,
    PolicyHolder,
    PolicyLockedError,
    TeachingPolicy,
    guard_reply,
    next_step,
    parse_policy_args,
    policy_from_notebook,
    teach,
    teaching_request,
    tutor_text,
    withheld_note,
)
from nbrefine.engine.teaching.rewrite import reads_whole, wholeness_faults
from nbrefine.grounding import Redactor
from nbrefine.grounding.capture import capture_failure
from nbrefine.providers.scripted import ScriptedProvider
from nbrefine.sandbox import LiveForkRunner, TrialOutcome, TrialSpec

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks" / "teaching"

pytestmark = pytest.mark.timeout(120)


# --------------------------------------------------------------------------- helpers


def failing(code: str, namespace: dict[str, Any] | None = None, checks: tuple[str, ...] = ()):
    """Run ``code`` for real, as a kernel would; return the task and a runner on the state before."""
    namespace = {} if namespace is None else namespace
    before = dict(namespace)
    filename = "<cell>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    try:
        exec(compile(code, filename, "exec"), namespace)
        for check in checks:
            exec(check, namespace)
    except Exception as err:
        failure = capture_failure(
            err, code=code, code_filename=filename, user_globals=namespace, run_unsafe=lambda fn: fn()
        )
    else:
        raise AssertionError("the cell was meant to fail")
    task = RepairTask(code=code, failures=(failure,), checks=checks, namespace=before)
    return task, LiveForkRunner(dict(before), Redactor(environ={}))


def block(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}\n```"


MEAN = "def mean(xs):\n    return sum(xs) / len(x)\n\nassert mean([1, 2, 3]) == 2\nassert mean([5]) == 5\n"
MEAN_FIXED = (
    "def mean(xs):\n    return sum(xs) / len(xs)\n\nassert mean([1, 2, 3]) == 2\nassert mean([5]) == 5"
)
VOWELS = (
    "def count_vowels(word):\n"
    "    return sum(1 for c in word if c in 'aeiou')\n\n"
    "assert count_vowels('Apple') == 2\n"
    "assert count_vowels('sky') == 0\n"
)


def one_line(text: str) -> bool:
    return "\n" not in text and 0 < len(text) < 300


def whole(text: str) -> bool:
    """Whether a hint the guard edited reads whole (:func:`reads_whole`); says why not."""
    assert reads_whole(text), (wholeness_faults(text), text)
    return True


# --------------------------------------------------------------------------- the guard


def test_disobeying_model_in_hint_mode_full_cell_is_withheld_and_the_rest_kept():
    task, runner = failing(MEAN)
    reply = (
        "You're nearly there! On line 2 the name in `len(...)` is not the list you were given.\n\n"
        f"Here is the whole cell, fixed:\n\n{block(MEAN_FIXED)}\n\nKeep it up!"
    )
    provider = ScriptedProvider([reply])
    ledger = HintLedger()
    policy = TeachingPolicy(mode="hint", max_hints=3, locked=True)
    events: list[tuple[str, dict[str, Any]]] = []
    result = teach(
        task,
        provider,
        runner,
        Redactor(environ={}),
        policy,
        ledger=ledger,
        key=HintLedger.key(task),
        on_event=lambda kind, payload: events.append((kind, payload)),
    )
    assert result.status == "hint" and result.withheld == 1
    assert result.checked == 2  # the block, and `len(...)`: checked too, and shown
    assert "sum(xs) / len(xs)" not in result.text
    # The lead-in of the withheld block goes with it; one note at the end says why.
    assert result.text == (
        "You're nearly there! On line 2 the name in `len(...)` is not the list you were given.\n\n"
        "Keep it up!\n\nOne example was withheld because it would give away the solution."
    )
    assert result.step.header() == "Hint 1 of 3" and ledger.used(HintLedger.key(task)) == 1
    assert whole(result.text) and result.requests == 1
    assert result.render() == f"Hint 1 of 3\n\n{result.text}"  # the count, once: no "Hints used"
    assert result.render(header=False) == result.text and result.last_note == ""
    # The reply never streamed out: no event carries the model's text.
    assert [kind for kind, _ in events] == ["teaching_request", "teaching_reply", "guard_done"]
    declared = {get_args(get_type_hints(t)["kind"])[0]: t.__required_keys__ for t in get_args(LoopEvent)}
    assert all(payload["kind"] == kind and set(payload) == declared[kind] for kind, payload in events)
    assert not any("len(xs)" in json.dumps(payload) for _, payload in events)
    request = provider.requests[0]
    assert request.system == TEACHING_SYSTEM_PROMPT
    assert "Give hint 1 of 3: a gentle nudge" in request.user


def test_code_that_does_not_solve_the_exercise_is_shown():
    task, runner = failing(MEAN)
    wrong = "def mean(xs):\n    return sum(xs) / 2"
    reply = f"For example, this shape of function is what you have, but it is still wrong:\n\n{block(wrong)}"
    guarded = guard_reply(reply, task, runner, timeout_s=5)
    assert guarded.withheld == 0 and guarded.checked == 1 and guarded.trials >= 1
    assert guarded.text == reply
    assert guarded.snippets[0].reason == "no trial of it passed"


def test_inline_one_line_fix_of_the_failing_line_is_withheld_and_the_sentence_kept():
    task, runner = failing(MEAN)
    reply = "Look closely at line 2. Write `return sum(xs) / len(xs)` there and you are done. You can do it!"
    guarded = guard_reply(reply, task, runner, timeout_s=5)
    assert guarded.withheld == 1
    assert guarded.text == f"Look closely at line 2. You can do it!\n\n{withheld_note(1)}"
    assert whole(guarded.text)
    assert guarded.snippets[0].reason == "it passes in place of line 2"


def test_unquoted_fix_in_a_sentence_and_an_unfenced_function_are_withheld():
    task, runner = failing(VOWELS)
    sentence = "Change line 2 to return sum(1 for c in word.lower() if c in 'aeiou'). Good luck!"
    guarded = guard_reply(sentence, task, runner, timeout_s=5)
    assert guarded.withheld == 1 and "word.lower()" not in guarded.text
    assert guarded.text == f"Good luck!\n\n{withheld_note(1)}" and guarded.prose == "Good luck!"
    unfenced = (
        "Try this:\n\n"
        "def count_vowels(word):\n"
        "    return sum(1 for c in word.casefold() if c in 'aeiou')\n\n"
        "That handles capitals."
    )
    guarded = guard_reply(unfenced, task, runner, timeout_s=5)
    assert guarded.withheld == 1 and "casefold" not in guarded.text
    assert guarded.text == f"That handles capitals.\n\n{withheld_note(1)}" and whole(guarded.text)


def test_a_fixed_sub_expression_is_withheld_but_pointers_are_shown():
    task, runner = failing(VOWELS)
    guarded = guard_reply("Use `c.lower() in 'aeiou'` instead.", task, runner, timeout_s=5)
    assert guarded.withheld == 1 and guarded.snippets[0].reason == "it passes in place of part of line 2"
    # Pointers that name things (a name, a dotted name) or an API example on other data stay.
    kept = "Look at `word` and `str.lower`: for example `'HeLLo'.lower()` gives 'hello'."
    guarded = guard_reply(kept, task, runner, timeout_s=5)
    assert guarded.withheld == 0 and guarded.text == kept


def test_every_kind_of_fence_is_checked():
    task, runner = failing(MEAN)
    fixed = "def mean(xs):\n    return sum(xs) / len(xs)"
    for reply, left in (
        (f"Untagged:\n```\n{fixed}\n```\nbye", "bye"),  # the lead-in ending in ':' goes with it
        (f"Other tag:\n```text\n{fixed}\n```\nbye", "bye"),
        (f"Tildes:\n~~~py\n{fixed}\n~~~\nbye", "bye"),
        (f"Cut off at the end:\n```python\n{fixed}", ""),
        (
            "Indented in a list:\n1. like this\n" + textwrap.indent(block(fixed), "   ") + "\nbye",
            "Indented in a list:\n1. like this\nbye",
        ),
    ):
        guarded = guard_reply(reply, task, runner, timeout_s=5)
        assert guarded.withheld == 1, reply
        assert "len(xs)" not in guarded.text and guarded.text.endswith(withheld_note(1))
        assert guarded.prose == left, guarded.text


def test_a_diff_or_a_console_session_that_solves_it_is_withheld():
    task, runner = failing(MEAN)
    for reply in (
        "Change it like this:\n```diff\n-    return sum(xs) / len(x)\n+    return sum(xs) / len(xs)\n```",
        "```diff\n def mean(xs):\n-    return sum(xs) / len(x)\n+    return sum(xs) / len(xs)\n```",
        "```pycon\n>>> def mean(xs):\n...     return sum(xs) / len(xs)\n>>> mean([1, 2, 3])\n2.0\n```",
    ):
        guarded = guard_reply(reply, task, runner, timeout_s=5)
        assert guarded.withheld == 1 and "len(xs)" not in guarded.text, reply


CAPITALS = (
    "def count_vowels(s):\n"
    "    return sum(1 for c in s if c in 'aeiou')\n\n"
    "assert count_vowels('AEIOU') == 5\n"
)


def test_a_comparison_of_literals_solves_nothing_and_is_shown():
    # The bug is case: capitals are never counted. With `'a' in 'aeiou'` (True) in place of
    # `c in 'aeiou'` every letter counts, and the one check, all vowels, cannot tell that from
    # the fix: the trial passed and the guard withheld an example that solves nothing.
    task, runner = failing(CAPITALS)
    reply = (
        "Python compares letters exactly: `'a' in 'aeiou'` is `True`, but `'A' in 'aeiou'` is `False`, "
        "and `'A'.lower() in 'aeiou'` is `True` again. Which letters does your check pass?"
    )
    guarded = guard_reply(reply, task, runner, timeout_s=5)
    assert guarded.text == reply and guarded.withheld == 0 and guarded.checked == 3
    assert {s.reason for s in guarded.snippets} == {
        "it compares literals only (always True or always False), like a literal shown as it is"
    }
    # The fix itself is still withheld, and so is a comparison of literals that fixes one.
    assert guard_reply("Use `c.lower() in 'aeiou'`.", task, runner, timeout_s=5).withheld == 1
    task, runner = failing("later = 'banana' < 'apple'\nassert later\n")
    guarded = guard_reply("Turn it round: `'banana' > 'apple'`.", task, runner, timeout_s=5)
    assert guarded.withheld == 1 and guarded.snippets[0].reason == "it passes in place of part of line 1"


class _FlakyRunner:
    """A sandbox whose first ``breaks`` trials cannot decide (a fork lost under load), then works."""

    def __init__(self, inner: LiveForkRunner, breaks: int, status: str = "sandbox_error") -> None:
        self.inner, self.breaks, self.status = inner, breaks, status
        self.specs: list[TrialSpec] = []

    def run(self, spec: TrialSpec) -> TrialOutcome:
        self.specs.append(spec)
        if len(self.specs) <= self.breaks:
            return TrialOutcome(self.status, detail="the trial process was lost")  # type: ignore[arg-type]
        return self.inner.run(spec)


@pytest.mark.parametrize("status", ["sandbox_error", "timeout"])
def test_a_trial_that_could_not_decide_is_run_again_before_anything_is_withheld(status: str):
    task, runner = failing(MEAN)
    flaky = _FlakyRunner(runner, breaks=1, status=status)
    wrong = "def mean(xs):\n    return sum(xs) / 2"
    guarded = guard_reply(f"Still wrong:\n\n{block(wrong)}", task, flaky, timeout_s=5)
    assert guarded.withheld == 0 and guarded.snippets[0].reason == "no trial of it passed"
    assert flaky.specs[0] == flaky.specs[1] and guarded.trials == len(flaky.specs)

    flaky = _FlakyRunner(runner, breaks=2, status=status)  # twice: withheld to be safe, as before
    guarded = guard_reply(f"Still wrong:\n\n{block(wrong)}", task, flaky, timeout_s=5)
    assert (
        guarded.withheld == 1
        and f"ended with {status}, so it was withheld to be safe" in guarded.snippets[0].reason
    )


VOWEL_LOOP = (
    "def count_vowels(word):\n"
    "    count = 0\n"
    "    for letter in word:\n"
    '        if letter in "aeiou":\n'
    "            count += 1\n"
    "    return count\n\n\n"
    'assert count_vowels("banana") == 3\n'
    'assert count_vowels("Apple") == 2\n'
)
FIX = '`letter.lower() in "aeiou"`'


@pytest.mark.parametrize(
    ("reply", "left"),
    [
        (  # the hint 3: a lead-in, then the block that solves it
            "Python compares letters exactly, so 'A' never matches anything in \"aeiou\". Make each "
            "letter lower case before you compare it. For example:\n\n"
            '```python\nif letter.lower() in "aeiou":\n```',
            "Python compares letters exactly, so 'A' never matches anything in \"aeiou\". Make each "
            "letter lower case before you compare it.",
        ),
        (  # the code in the last clause of a sentence: the clause goes
            f"On line 4, capitals are never counted. Python compares letters exactly, so {FIX} would "
            "count them too. Try it!",
            "On line 4, capitals are never counted. Python compares letters exactly. Try it!",
        ),
        (  # a first clause that cannot stand alone: the sentence goes
            f"If you write {FIX} on line 4, every check passes. You are close!",
            "You are close!",
        ),
        (  # a list item led in with a colon
            'Two steps:\n\n- Look at line 4.\n- Then change it to this: `if letter.lower() in "aeiou":`\n\n'
            "You are close.",
            "Two steps:\n\n- Look at line 4.\n\nYou are close.",
        ),
    ],
    ids=["for-example-block", "last-clause", "dependent-first-clause", "list-item"],
)
def test_a_reply_with_code_withheld_still_reads_well(reply: str, left: str):
    task, runner = failing(VOWEL_LOOP)
    guarded = guard_reply(reply, task, runner, timeout_s=5)
    assert guarded.withheld == 1 and "lower()" not in guarded.text
    assert guarded.text == f"{left}\n\nOne example was withheld because it would give away the solution."
    assert whole(guarded.text)


def test_several_pieces_withheld_get_one_note_and_the_rest_is_kept():
    task, runner = failing(VOWEL_LOOP)
    reply = (
        "Capital letters are the trouble: `'A' in 'aeiou'` is `False`. You could write "
        f'{FIX}, or:\n\n```python\nif letter.casefold() in "aeiou":\n```\n\n'
        "Either way, run the cell again."
    )
    guarded = guard_reply(reply, task, runner, timeout_s=5)
    assert guarded.withheld == 2 and guarded.checked == 3
    assert guarded.text == (
        "Capital letters are the trouble: `'A' in 'aeiou'` is `False`.\n\nEither way, run the cell again."
        "\n\n2 examples were withheld because they would give away the solution."
    )
    assert whole(guarded.text)


def test_the_students_own_code_is_shown_without_a_trial():
    task, runner = failing(VOWELS)
    reply = "Your check `assert count_vowels('Apple') == 2` on line 4 is right; look at line 2:\n\n" + block(
        "    return sum(1 for c in word if c in 'aeiou')"
    )
    guarded = guard_reply(reply, task, runner, timeout_s=5)
    assert guarded.withheld == 0 and guarded.trials == 0 and guarded.text == reply


def test_quoting_a_part_of_the_students_line_is_shown_even_where_the_cell_checks_nothing():
    # No assert: any edit that stops the NameError "passes". "sum(xs) was 3" quotes line 2; put
    # back into line 2 alone it only deletes code around it, so it is not judged there.
    task, runner = failing("def mean(xs):\n    return sum(xs) / len(x)\n\nmean([1, 2])\n")
    reply = "At that moment, sum(xs) was int 3; xs was [1, 2]. Which name does the division use?"
    guarded = guard_reply(reply, task, runner, timeout_s=5)
    assert guarded.withheld == 0 and guarded.text == reply, guarded.snippets


def test_a_part_of_the_students_code_moved_to_the_failing_line_is_still_judged():
    # The right expression stands on line 3 already; saying "use it on line 2" gives the fix away.
    code = (
        "def mean(xs):\n    total = sum(xs) / len(x)\n    n = len(xs)\n    return total\n\n"
        "assert mean([2, 4]) == 3\n"
    )
    task, runner = failing(code)
    guarded = guard_reply("On line 2, divide by `len(xs)`.", task, runner, timeout_s=5)
    assert guarded.withheld == 1, guarded.snippets


def test_a_fix_that_fails_the_extra_checks_is_shown_and_one_that_passes_them_is_withheld():
    code = "def double(x):\n    return x + 2\n"
    task, runner = failing(code, checks=("assert double(3) == 6", "assert double(0) == 0"))
    half_right = "def double(x):\n    return 6"
    assert guard_reply(block(half_right), task, runner, timeout_s=5).withheld == 0
    right = "def double(x):\n    return x * 2"
    assert guard_reply(block(right), task, runner, timeout_s=5).withheld == 1


def test_pandas_column_fix_is_withheld_and_listing_the_columns_is_shown():
    pd = pytest.importorskip("pandas")
    sales = pd.DataFrame({"region": ["n", "s", "n"], "units": [1, 2, 3], "price": [2.0, 3.0, 4.0]})
    code = (
        'sales["revenue"] = sales["units"] * sales["Price"]\n'
        'by_region = sales.groupby("region")["revenue"].sum()'
    )
    task, runner = failing(code, {"sales": sales})
    assert task.failures[0].error_type == "KeyError"
    guarded = guard_reply('Use `sales["price"]` on line 1.', task, runner, timeout_s=10)
    assert guarded.withheld == 1
    shown = "Print `list(sales.columns)` and compare the names with line 1."
    assert guard_reply(shown, task, runner, timeout_s=10).text == shown


class _BrokenRunner:
    def __init__(self, raises: bool = False) -> None:
        self.raises = raises
        self.specs: list[TrialSpec] = []

    def run(self, spec: TrialSpec) -> TrialOutcome:
        self.specs.append(spec)
        if self.raises:
            raise RuntimeError("the sandbox is gone")
        return TrialOutcome("sandbox_error", detail="the snapshot process stopped answering")


@pytest.mark.parametrize("raises", [False, True])
def test_when_the_sandbox_cannot_decide_the_code_is_withheld_to_be_safe(raises: bool):
    task, _ = failing(MEAN)
    runner = _BrokenRunner(raises)
    guarded = guard_reply(
        "Maybe:\n" + block("def mean(xs):\n    return 0"), task, runner, timeout_s=5, max_trials=5
    )
    assert guarded.withheld == 1 and runner.specs
    assert "withheld to be safe" in guarded.snippets[0].reason


def test_a_timeout_withholds_and_so_does_running_out_of_trials():
    task, runner = failing(MEAN)
    slow = "def mean(xs):\n    while True:\n        pass"
    guarded = guard_reply(block(slow), task, runner, timeout_s=0.5)
    assert guarded.withheld == 1 and "timeout" in guarded.snippets[0].reason
    guarded = guard_reply(block("def mean(xs):\n    return 0"), task, runner, timeout_s=5, max_trials=0)
    assert guarded.withheld == 1 and guarded.trials == 0 and "no time left" in guarded.snippets[0].reason


def test_trials_use_the_cells_checks_and_the_given_sandbox_policy():
    from nbrefine.sandbox import TrialPolicy

    task, _ = failing("def f(x):\n    return x\n", checks=("assert f(2) == 4",))
    runner = _BrokenRunner()
    policy = TrialPolicy(allow_network=True)
    guard_reply(block("def f(x):\n    return x * x"), task, runner, timeout_s=3, policy=policy)
    assert runner.specs and all(s.checks[0] == "assert f(2) == 4" for s in runner.specs)
    assert all(s.policy is policy and s.timeout_s == 3 for s in runner.specs)


# --------------------------------------------------------------------------- prompts


def test_explain_request_asks_for_no_code():
    task, _ = failing(MEAN)
    request = teaching_request(task, Redactor(environ={}), mode="explain", level=1)
    assert request.system == TEACHING_SYSTEM_PROMPT and request.system != SYSTEM_PROMPT
    both = request.system + request.user
    assert not re.search(r"Reply with[^\n]*```python", both)
    assert "```python block" not in both and "corrected cell" not in request.user
    assert "write no code" in request.user and "Do not suggest a fix" in request.user
    # The labelled sections of the repair prompt are reused: the cell, the failure, the values.
    assert "## The cell" in request.user and "## How it failed in the kernel" in request.user
    assert "name 'x' is not defined" in request.user
    assert request.user.count("## Your task") == 1 and "Fix the cell" not in request.user
    assert request.context is not None and request.context.code == MEAN


def test_teaching_request_is_redacted():
    task, _ = failing('token = "sk-ant-api03-' + "a" * 40 + '"\nprint(tokn)\n')
    request = teaching_request(
        task, Redactor(environ={}), mode="hint", level=2, previous_hints=["sk-ant-api03-" + "b" * 40]
    )
    assert "sk-ant-api03" not in request.user


def test_graduated_levels_carry_earlier_hints_then_stop_without_allow_solution():
    task, runner = failing(VOWELS)
    hints = [
        "Have a look at line 2 and think about capital letters.",
        "'A' in 'Apple' is upper case, and 'aeiou' has only lower-case letters.",
        "Make each letter lower case before you compare it; str has a method for that.",
    ]
    provider = ScriptedProvider(hints)
    ledger, key = HintLedger(), HintLedger.key(task, cell_id="cell-7")
    policy = TeachingPolicy(mode="graduated")
    results = [
        teach(task, provider, runner, Redactor(environ={}), policy, ledger=ledger, key=key) for _ in range(4)
    ]
    assert [r.step.header() for r in results] == [
        "Hint 1 of 3",
        "Hint 2 of 3",
        "Hint 3 of 3",
        "No hints left for this cell",
    ]
    assert [r.hints_used for r in results] == [1, 2, 3, 3]
    assert [r.text for r in results[:3]] == hints
    # The header counts; only the last hint adds a note, and no line counts them again.
    assert [r.last_note for r in results] == ["", "", "That was the last hint for this cell.", ""]
    assert results[2].render() == f"Hint 3 of 3\n\n{hints[2]}\n\nThat was the last hint for this cell."
    assert results[3].render().startswith("No hints left for this cell\n\nYou've used all the hints")
    assert not any("used:" in r.render() for r in results)
    first, second, third = (r.user for r in provider.requests)
    assert "Give hint 1 of 3: a gentle nudge" in first and "already given" not in first
    assert "Give hint 2 of 3: more specific" in second and hints[0] in second and hints[1] not in second
    assert "Give hint 3 of 3: nearly there" in third and hints[0] in third and hints[1] in third
    assert "do not repeat" in third
    assert [r.next_label for r in results] == ["Another hint", "Another hint", "", ""]
    assert results[3].status == "exhausted" and len(provider.requests) == 3  # no model call
    assert "instructor" in results[3].text and not results[3].more_available


def test_graduated_with_allow_solution_hands_over_to_the_fix_loop_after_the_last_hint():
    task, runner = failing(VOWELS)
    policy = TeachingPolicy(mode="graduated", max_hints=2, allow_solution=True)
    ledger, key = HintLedger(), "cell:x"
    tutor = OfflineTutor()
    steps = [
        teach(task, tutor, runner, Redactor(environ={}), policy, ledger=ledger, key=key) for _ in range(3)
    ]
    assert [s.status for s in steps] == ["hint", "hint", "fix_loop"]
    assert [s.next_label for s in steps] == [
        "Another hint",
        "Show the full solution",
        "Show the full solution",
    ]
    assert steps[2].step.kind == "solution" and steps[2].step.header() == "The full solution"
    assert next_step(policy, 2).runs_fix_loop and not next_step(policy, 1).runs_fix_loop
    assert next_step(TeachingPolicy(mode="fix"), 0).runs_fix_loop


def test_next_step_per_mode():
    assert next_step(TeachingPolicy(mode="explain"), 0).header() == "What this error means"
    assert next_step(TeachingPolicy(mode="explain", max_hints=1), 1).kind == "exhausted"
    hint = TeachingPolicy(mode="hint")
    assert [next_step(hint, n).level for n in range(5)] == [1, 2, 3, 3, 3]
    assert next_step(hint, 4).header() == "Hint 5"


def test_offline_tutor_explains_and_hints_without_code():
    task, runner = failing(VOWELS)
    explained = tutor_text(task, mode="explain")
    assert (
        "line 4" in explained
        and "AssertionError" in explained
        and "count_vowels('Apple') gave 1" in explained
    )
    nudge, specific, nearly = (tutor_text(task, mode="hint", level=n) for n in (1, 2, 3))
    assert "line 4" in nudge and len(nudge) < len(specific)
    assert "capital letters" in nearly
    for text in (explained, nudge, specific, nearly):
        assert guard_reply(text, task, runner, timeout_s=5).withheld == 0
    pd = pytest.importorskip("pandas")
    sales = pd.DataFrame({"units": [1], "price": [2.0]})
    task, _ = failing('sales["revenue"] = sales["units"] * sales["Price"]', {"sales": sales})
    assert "'price'" in tutor_text(task, mode="hint", level=3)
    task, _ = failing("totl = 3\nprint(total)")
    assert "totl" in tutor_text(task, mode="hint", level=3)


# The offline tutor's remedies must fit the error seen. Each remedy family has words only it uses;
# a hint may use a family's words only where that family applies to the error.
_REMEDIES = {
    "convert": ("str()", "int()", "float()", "convert"),
    "import": ("import",),
    "install": ("%pip",),
    "spelling": ("spelling", "spelled", "capital letters"),
    "arguments": ("arguments",),
    "none": ("None",),
    "positions": ("length minus 1",),
}
LOOP_MEAN = (
    "def mean(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(x)\n\n"
    "m = mean([1, 2, 3])"
)
_HINT_CASES = [
    # (code, namespace, words hint 3 must have, remedy families that fit the error)
    (LOOP_MEAN, None, ("len()", "loop variable", "`xs`", "collection"), ()),
    ("age = '3'\nnext_year = age + 1", None, ("int()",), ("convert",)),
    ("price = '3.5'\nok = price < 4", None, ("float()",), ("convert",)),
    ("count = 5\nfor i in count:\n    print(i)", None, ("range(",), ()),
    ("sum = 0\nfor v in [1, 2]:\n    sum += v\ntotal = sum([3, 4])", None, ("`sum`", "hides"), ()),
    ("n = 5\nfirst = n[0]", None, ("square brackets",), ()),
    ("def area(w, h):\n    return w * h\n\nsize = area(3)", None, ("area()", "def line"), ("arguments",)),
    ("xs = [3, 1, 2]\nys = xs.sort()\nlowest = ys[0]", None, ("None", "sort()"), ("none",)),
    ("tags = ['a', 'b']\ncounts = {tags: 1}", None, ("tuple",), ()),
    ("a, b = [1, 2, 3]", None, ("names on the left",), ()),
    ("n = int('abc')", None, ("int()",), ("convert",)),
    ("todo = []\nnext_task = todo.pop()", None, ("empty",), ()),
    ("totl = 3\nprint(total)", None, ("totl",), ("spelling", "import")),
    ("xs = [1]\nxs.push(2)", None, ("list",), ("spelling",)),
    ("r = print('x')\nr.upper()", None, ("None",), ("none",)),
    ("xs = []\nm = sum(xs) / len(xs)", None, ("empty",), ()),
    ("import nosuchmodule_nbrefine", None, ("%pip",), ("install", "spelling", "import")),
]


_HINT_IDS = [
    "len-of-loop-item",
    "str-plus-int",
    "str-less-than-int",
    "int-not-iterable",
    "builtin-shadowed-not-callable",
    "int-not-subscriptable",
    "missing-argument",
    "none-from-sort",
    "unhashable-list",
    "too-many-to-unpack",
    "invalid-int-literal",
    "pop-from-empty",
    "name-typo",
    "no-such-method",
    "none-attribute",
    "divide-by-empty",
    "no-such-module",
]


@pytest.mark.parametrize(("code", "namespace", "wanted", "fits"), _HINT_CASES, ids=_HINT_IDS)
def test_offline_hints_suggest_only_remedies_that_fit_the_error(code, namespace, wanted, fits):
    task, runner = failing(code, namespace)
    nearly = tutor_text(task, mode="hint", level=3)
    explained = tutor_text(task, mode="explain")
    for word in wanted:
        assert word in nearly, (word, nearly)
    for family, words in _REMEDIES.items():
        if family not in fits:
            for text in (nearly, explained):
                assert not any(w in text for w in words), (family, text)
    assert guard_reply(nearly, task, runner, timeout_s=5).withheld == 0, nearly  # no code in it
    assert whole(nearly) and whole(explained)  # they stand in for a hint left too little


def test_the_len_hint_is_grounded_in_the_loop_and_the_close_name_in_scope():
    task, _ = failing(LOOP_MEAN)
    nearly = tutor_text(task, mode="hint", level=3)
    assert "str()" not in nearly and "int()" not in nearly  # it is no str/int mix-up
    assert "`x` is the loop variable of the loop over `xs`" in nearly and "int 3" in nearly
    assert "A name in scope close to `x` that is a collection: `xs`." in nearly
    explained = tutor_text(task, mode="explain")
    assert "len()" in explained and "text added to a number" not in explained


def test_an_offline_tier_fact_is_used_only_when_its_trial_passes():
    # The offline tier's first candidate turns age into a number; the check wants text.
    code = "age = '3'\nlabel = 1 + age\nassert label == '13'"
    task, runner = failing(code)
    unverified = tutor_text(task, mode="hint", level=3)
    verified = tutor_text(task, mode="hint", level=3, runner=runner)
    assert "`age` is text (a str) here: int() turns it into a whole number." in unverified
    assert "`1` is a number here: str() turns it into text." in verified
    assert "`age` is text" not in verified
    result = teach(
        task,
        OfflineTutor(),
        runner,
        Redactor(environ={}),
        TeachingPolicy(mode="hint"),
        ledger=HintLedger(),
        key="k",
    )
    assert result.status == "hint" and result.withheld == 0


def test_a_reply_that_is_all_code_gets_nbrefines_own_hint_instead():
    task, runner = failing(MEAN)
    provider = ScriptedProvider([block(MEAN_FIXED)])
    result = teach(
        task,
        provider,
        runner,
        Redactor(environ={}),
        TeachingPolicy(mode="hint"),
        ledger=HintLedger(),
        key="k",
    )
    assert result.withheld == 1 and "len(xs)" not in result.text
    assert "Here is nbrefine's own hint instead: Have a look at line 2" in result.text
    assert whole(result.text) and result.requests == 1  # a block of code: not asked for again


def test_a_provider_error_counts_nothing_and_says_so_kindly():
    task, runner = failing(MEAN)
    provider = ScriptedProvider([ProviderRateLimitError("rate limited (HTTP 429)")])
    ledger = HintLedger()
    result = teach(
        task, provider, runner, Redactor(environ={}), TeachingPolicy(mode="hint"), ledger=ledger, key="k"
    )
    assert result.status == "error" and ledger.used("k") == 0 and result.more_available
    assert one_line(result.message) and "Nothing was counted" in result.message


def test_the_ledger_counts_per_cell_id_or_per_code():
    task, _ = failing(MEAN)
    assert HintLedger.key(task, "abc") == "cell:abc"
    edited = RepairTask(code=MEAN.replace("\n\n", "\n\n# a comment\n"), failures=task.failures)
    assert HintLedger.key(task) == HintLedger.key(edited)  # comments and spacing do not reset the count
    ledger = HintLedger()
    assert ledger.record("k", "one") == 1 and ledger.record("k", "two") == 2
    assert ledger.hints("k") == ("one", "two") and ledger.used("other") == 0


# --------------------------------------------------------------------------- the policy


def test_policy_from_metadata_and_its_validation():
    policy = TeachingPolicy.from_metadata(
        {"mode": "hint", "max_hints": 3, "allow_solution": False, "lock": True}
    )
    assert policy == TeachingPolicy("hint", 3, False, True)
    assert policy.source == "notebook metadata" and policy.to_metadata()["lock"] is True
    assert TeachingPolicy.from_metadata(policy.to_metadata()) == policy
    assert TeachingPolicy.from_metadata({}) == TeachingPolicy()
    assert policy_from_notebook({"kernelspec": {}}) is None
    assert policy_from_notebook({"nbrefine": {"mode": "explain"}}) == TeachingPolicy("explain")
    bad = [
        ({"mode": "solve"}, "teaching mode must be one of fix, hint, explain, graduated"),
        ({"mode": 3}, "teaching mode"),
        ({"max_hints": 0}, "max_hints must be a whole number of at least 1"),
        ({"max_hints": "3"}, "max_hints"),
        ({"max_hints": True}, "max_hints"),
        ({"lock": "yes"}, "locked must be true or false"),
        ({"allow_solution": 1}, "allow_solution must be true or false"),
        ({"mode": "hint", "allow_solution": True}, "allow_solution only applies to graduated mode"),
        ({"mode": "hint", "max_hint": 3}, "unknown key 'max_hint'"),
    ]
    for meta, message in bad:
        with pytest.raises(ValueError, match=re.escape(message)) as info:
            TeachingPolicy.from_metadata(meta)
        assert one_line(str(info.value)) and str(info.value).startswith("nbrefine metadata: ")
    with pytest.raises(ValueError, match="expected an object"):
        TeachingPolicy.from_metadata(["hint"])  # type: ignore[arg-type]


def test_notebook_metadata_policy_installs_in_a_kernel_policy_holder():
    import nbrefine.engine as teaching
    from nbrefine.engine.kernel_state import reset

    metadata = {"nbrefine": {"mode": "hint", "max_hints": 3, "allow_solution": False, "lock": True}}
    policy = teaching.notebook_policy(metadata)
    assert policy == json.loads(json.dumps(metadata["nbrefine"])) and teaching.notebook_policy({}) is None
    with pytest.raises(ValueError, match="unknown key"):
        teaching.notebook_policy({"nbrefine": {"mood": "hint"}})
    reset()
    try:
        teaching.install_notebook_policy(policy)
        assert teaching.kernel_policy_holder().policy == TeachingPolicy("hint", 3, locked=True)
        assert teaching.kernel_policy_holder().policy.source == "notebook metadata"
        with pytest.raises(PolicyLockedError):
            teaching.install_notebook_policy({"mode": "fix"})
    finally:
        reset()
    assert teaching.kernel_policy_holder().policy == TeachingPolicy()


def test_strictness_orders_the_modes():
    order = [
        TeachingPolicy("fix"),
        TeachingPolicy("graduated", allow_solution=True),
        TeachingPolicy("graduated"),
        TeachingPolicy("hint"),
        TeachingPolicy("hint", max_hints=5),
        TeachingPolicy("hint", max_hints=2),
        TeachingPolicy("explain"),
    ]
    assert sorted(order, key=TeachingPolicy.strictness) == order
    assert set(MODES) == {"fix", "hint", "explain", "graduated"}


@pytest.mark.parametrize(
    ("locked", "loosened", "what"),
    [
        (TeachingPolicy("hint", 3, locked=True), TeachingPolicy("fix", locked=True), "fix mode"),
        (TeachingPolicy("hint", 3, locked=True), TeachingPolicy("hint", 5, locked=True), "more than 3 hints"),
        (
            TeachingPolicy("hint", 3, locked=True),
            TeachingPolicy("hint", None, locked=True),
            "more than 3 hints",
        ),
        (
            TeachingPolicy("hint", 3, locked=True),
            TeachingPolicy("graduated", 3, locked=True),
            "graduated mode",
        ),
        (
            TeachingPolicy("graduated", locked=True),
            TeachingPolicy("graduated", allow_solution=True, locked=True),
            "showing the full solution",
        ),
        (TeachingPolicy("explain", locked=True), TeachingPolicy("hint", locked=True), "hint mode"),
        (TeachingPolicy("hint", 3, locked=True), TeachingPolicy("hint", 3), "unlocking"),
    ],
)
def test_a_locked_gate_refuses_to_loosen(locked: TeachingPolicy, loosened: TeachingPolicy, what: str):
    holder = PolicyHolder(locked)
    with pytest.raises(PolicyLockedError) as info:
        holder.set(loosened)
    message = str(info.value)
    assert one_line(message) and what in message
    assert (
        message.startswith("Your instructor has set this notebook to ") and "isn't available here" in message
    )
    assert isinstance(info.value, PermissionError) and isinstance(info.value, NbrefineError)
    assert holder.policy is locked and not locked.allows(loosened)


def test_config_and_cell_options_cannot_loosen_a_locked_policy_but_may_tighten_it():
    holder = PolicyHolder()
    apply_policy_line("--mode hint --max-hints 3 --lock", holder)
    assert holder.policy == TeachingPolicy("hint", 3, locked=True) and holder.policy.source == "setup cell"
    for loosen in (
        lambda: holder.configure(mode="fix"),  # %config Refine.mode = 'fix'
        lambda: holder.configure(max_hints=10),
        lambda: holder.effective("fix"),  # %%refine --mode fix
        lambda: holder.effective(max_hints=4),
        lambda: holder.effective("graduated", allow_solution=True),
        lambda: apply_policy_line("--mode fix", holder),
    ):
        with pytest.raises(PolicyLockedError, match="hint mode, up to 3 hints per cell"):
            loosen()
    assert holder.policy == TeachingPolicy("hint", 3, locked=True)
    # Tightening is fine: per cell, and for the whole kernel.
    assert holder.effective("explain") == TeachingPolicy("explain", 3, locked=True)
    assert holder.effective(max_hints=1) == TeachingPolicy("hint", 1, locked=True)
    assert holder.effective() is holder.policy
    assert holder.configure(max_hints=2) == TeachingPolicy("hint", 2, locked=True)
    holder.set(TeachingPolicy("explain", 1, locked=True, source="setup cell"))
    assert holder.policy.mode == "explain"


def test_an_unlocked_gate_allows_anything():
    holder = PolicyHolder(TeachingPolicy("explain", 1))
    for policy in (
        TeachingPolicy("fix"),
        TeachingPolicy("graduated", 3, allow_solution=True),
        TeachingPolicy("hint", None),
    ):
        holder.set(policy)
        assert holder.policy == policy
    assert holder.configure(mode="hint", max_hints=2) == TeachingPolicy("hint", 2)
    assert holder.configure(no_hint_cap=True) == TeachingPolicy("hint", None)
    holder.configure(max_hints=2)
    assert (
        holder.effective("fix") == TeachingPolicy("fix", 2)
        and holder.effective("fix").source == "cell options"
    )
    # Graduated with the solution, then hint: the solution option does not carry over.
    holder.set(TeachingPolicy("graduated", allow_solution=True))
    assert holder.configure(mode="hint") == TeachingPolicy("hint", 3)


def test_policy_line_parsing():
    assert parse_policy_args(["--mode", "graduated", "--allow-solution"]) == TeachingPolicy(
        "graduated", allow_solution=True
    )
    assert parse_policy_args(["--mode", "hint", "--max-hints", "none"]).max_hints is None
    assert parse_policy_args(["--lock"], base=TeachingPolicy("hint", 2)) == TeachingPolicy(
        "hint", 2, locked=True
    )
    for words, message in (
        (["--mode", "solve"], "invalid choice"),
        (["--max-hints", "0"], "at least 1"),
        (["--max-hints", "three"], "whole number"),
        (["--unlock"], "unrecognized arguments"),
        (["--mode", "hint", "--allow-solution"], "allow_solution only applies to graduated mode"),
    ):
        with pytest.raises(ValueError, match=message) as info:
            parse_policy_args(words)
        assert one_line(str(info.value)) and str(info.value).startswith("%refine policy: ")
    with pytest.raises(ValueError, match="cannot parse"):
        apply_policy_line("--mode 'hint", PolicyHolder())


def test_describe_is_plain():
    assert TeachingPolicy("hint", 3, locked=True).describe() == "hint mode, up to 3 hints per cell, locked"
    assert TeachingPolicy("graduated").describe() == "graduated hints (3 hints per cell, no full solution)"
    assert TeachingPolicy("explain", 1).describe() == "explain mode, up to 1 explanation per cell"
    assert TeachingPolicy().describe() == "fix mode (verified fixes)"


# --------------------------------------------------------------------------- the notebooks


def _notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def test_the_teaching_notebooks_are_valid_and_tagged():
    names = [p.name for p in _notebooks()]
    assert names == ["data-walkthrough.ipynb", "exercise-sheet.ipynb"]
    for path in _notebooks():
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        ids = [cell.get("id") for cell in notebook.cells]
        assert all(ids) and len(set(ids)) == len(ids), path
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        assert any("%refine policy --mode hint --max-hints 3 --lock" in c.source for c in code), path
        assert any("raises-exception" in c.metadata.get("tags", []) for c in code), path
        assert all(not c.outputs and c.execution_count is None for c in code), path
        policy = policy_from_notebook(notebook.metadata)
        assert policy == TeachingPolicy("hint", 3, locked=True), path


@pytest.mark.parametrize("name", ["exercise-sheet.ipynb", "data-walkthrough.ipynb"])
def test_the_teaching_notebooks_run_top_to_bottom_offline(name: str, tmp_path: Path, monkeypatch):
    """What CI does with nbclient, without an API key."""
    nbclient = pytest.importorskip("nbclient")
    for var in ("ANTHROPIC_API_KEY", "NBREFINE_PROVIDER", "NBREFINE_MODEL"):
        monkeypatch.delenv(var, raising=False)
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # cells expected to fail carry the raises-exception tag
    errors = [
        cell
        for cell in notebook.cells
        if cell.cell_type == "code" and any(o.get("output_type") == "error" for o in cell.outputs)
    ]
    assert errors and all("raises-exception" in c.metadata.get("tags", []) for c in errors)

"""The no-solution guard, for the class reports of ``nbrefine fix --mode ...`` over nbgrader folders.

nbgrader puts a student's answer and its autograder test in two cells; when the answer fails, the
test cell fails too, on a name the answer was meant to define. A hint for the *test* cell that
shows the code defining that name gives the answer away: the guard must withhold it although
it neither resembles the test cell nor redefines anything in it.
"""

from __future__ import annotations

from typing import Any

import pytest
from failed_cells import run_failing_cell

from nbrefine.engine import RepairTask
from nbrefine.engine.teaching import guard_reply, withheld_note
from nbrefine.grounding import Redactor
from nbrefine.sandbox import LiveForkRunner

pytestmark = pytest.mark.timeout(120)


def failing(code: str, namespace: dict[str, Any]) -> tuple[RepairTask, LiveForkRunner]:
    """Run ``code`` for real on ``namespace``; the task and a runner on the state before."""
    before = dict(namespace)
    failure = run_failing_cell(code, namespace)
    return RepairTask(code=code, failures=(failure,), namespace=before), LiveForkRunner(
        dict(before), Redactor(environ={})
    )


TEST_CELL = "assert total == 8.0"  # nbgrader's autograder cell; the answer cell above it failed


def test_the_answer_to_the_cell_above_is_withheld_from_the_test_cells_hint() -> None:
    task, runner = failing(TEST_CELL, {"prices": [2.5, 4.0, 1.5]})
    reply = "Just use this:\n\n```python\ntotal = sum(prices)\ntotal\n```\n\nThen the test passes."

    guarded = guard_reply(reply, task, runner, timeout_s=5)

    assert guarded.withheld == 1, guarded.snippets
    assert "sum(prices)" not in guarded.text
    assert guarded.text == f"Then the test passes.\n\n{withheld_note(1)}"  # "Just use this:" went too
    assert guarded.snippets[0].reason == "it passes run before the cell"


def test_code_before_the_cell_that_does_not_make_it_pass_is_shown() -> None:
    task, runner = failing(TEST_CELL, {"prices": [2.5, 4.0, 1.5]})
    reply = "Something like this shape, but check the numbers:\n\n```python\ntotal = max(prices)\n```"

    guarded = guard_reply(reply, task, runner, timeout_s=5)

    assert guarded.withheld == 0 and guarded.text == reply

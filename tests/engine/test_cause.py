"""Where a failure is caused (nbrefine.engine.cause), and what a repair that spans cells does in a real
IPython shell: the fix lands in the defining cell, the checks cell stays as it was, a cascade is not
patched, a guess nothing checks is a proposal, and every cell that uses a changed definition must
keep passing. The model is a scripted provider whose replies look like real ones."""

from __future__ import annotations

import re

import pytest
from IPython.core.error import UsageError

import nbrefine
from nbrefine.engine.accept import plan_for
from nbrefine.engine.cause import Situation, find_cause
from nbrefine.grounding.history import ExecutedCell, NotebookCell
from nbrefine.providers.scripted import ScriptedProvider

SEARCH = (
    "def search(x, seq):\n"
    "    for i, v in enumerate(seq):\n"
    "        if x < v:\n"
    "            return i\n"
    "    return len(seq) - 1"
)
SEARCH_FIXED = SEARCH.replace("x < v", "x <= v").replace("len(seq) - 1", "len(seq)")
CHECKS = "assert search(-100, ()) == 0\nassert search(7, (1, 5, 8)) == 2"

#: The most common real shape: asked to fix the checks cell, the model puts the corrected function
#: above the unchanged asserts, in one block, with prose before and after.
REDEFINED_IN_CHECKS = (
    "`search` returns `len(seq) - 1` when `x` is larger than every element, but the insertion point "
    "is then `len(seq)`; an empty tuple gives -1 instead of 0.\n\n"
    f"```python\n{SEARCH_FIXED}\n\n{CHECKS}\n```\n\nThe asserts are unchanged."
)


def refine(shell, cell: str, replies: list[str], options: str = "--max-attempts 1"):
    provider = ScriptedProvider(replies)
    nbrefine.register_provider("cause-test", lambda settings: provider)
    with pytest.raises(nbrefine.NbrefineError):
        shell.run_cell_magic("refine", f"--provider cause-test {options}", cell)
    return nbrefine.last_session(), provider


# --------------------------------------------------------------------------- find_cause, no kernel


def _failing_assert(cell: str):
    from nbrefine.grounding.capture import Failure

    return Failure("AssertionError", "", lineno=1, line=cell.splitlines()[0])


def test_a_failed_assert_on_a_function_another_cell_defines_is_that_cells() -> None:
    namespace: dict = {}
    exec(SEARCH, namespace)
    namespace["search"].__module__ = "__main__"
    situation = Situation(
        source=CHECKS,
        error=AssertionError(),
        failures=(_failing_assert(CHECKS),),
        executed=(ExecutedCell(1, SEARCH, "search"),),
        namespace=namespace,
        cell_id="checks",
        count=2,
    )
    cause = find_cause(situation)
    assert cause.kind == "checked"
    assert [c.cell_id for c in cause.causes] == ["search"]
    assert cause.failing.readonly == "a cell of checks"
    assert "search" in cause.sentence() and "must not change" in cause.sentence()


def test_a_name_an_earlier_failed_cell_would_bind_is_a_cascade() -> None:
    broken = "import pandas as pd\nfor x in range(3)\n    print(x)"  # a missing colon: it never ran
    situation = Situation(
        source="df = pd.DataFrame({'a': [1]})",
        error=NameError("name 'pd' is not defined", name="pd"),
        executed=(ExecutedCell(1, broken, "load", failed=True),),
        cell_id="frame",
        count=2,
    )
    cause = find_cause(situation)
    assert cause.kind == "cascade"
    assert cause.causes[0].cell_id == "load"
    assert "fails because In [1] (cell 'load') failed" in cause.sentence()


def test_a_key_an_earlier_failed_cell_would_add_is_a_cascade() -> None:
    failed = "data['density'] = data['population'] / data['aera']"
    situation = Situation(
        source="data['density'].max()",
        error=KeyError("density"),
        executed=(ExecutedCell(1, "data = {}", "make"), ExecutedCell(2, failed, "density", failed=True)),
        namespace={"data": {}},
        cell_id="use",
        count=3,
    )
    assert find_cause(situation).kind == "cascade"


def test_a_name_defined_only_below_is_run_first_never_invented() -> None:
    notebook = [
        NotebookCell("use", "sample = rng.random()", status="failed"),
        NotebookCell("make", "import random\nrng = random.Random(0)", status="not_run"),
    ]
    situation = Situation(
        source="sample = rng.random()",
        error=NameError("name 'rng' is not defined", name="rng"),
        notebook=notebook,
        cell_id="use",
        count=1,
    )
    cause = find_cause(situation)
    assert cause.kind == "below"
    assert cause.causes[0].role == "moved" and cause.causes[0].cell_id == "make"
    plan = plan_for(cause, cause.failing, {"make": notebook[1].source})
    assert [m.cell.cell_id for m in plan.moves] == ["make"] and not plan.changes
    assert [cell.cell_id for cell, _ in plan.runs] == ["make", "use"]


def test_a_locked_nbgrader_cell_is_read_only_and_names_the_solution_cell() -> None:
    namespace: dict = {}
    exec(SEARCH, namespace)
    namespace["search"].__module__ = "__main__"
    notebook = [
        NotebookCell("search", SEARCH, solution=True),
        NotebookCell("tests", "r = search(-100, ())\nassert r == 0", readonly="an nbgrader test cell"),
    ]
    situation = Situation(
        source="r = search(-100, ())\nassert r == 0",
        error=AssertionError(),
        failures=(_failing_assert("x\nassert r == 0"),),
        executed=(ExecutedCell(1, SEARCH, "search"),),
        notebook=notebook,
        namespace=namespace,
        cell_id="tests",
        count=2,
    )
    failures = (type(situation.failures[0])("AssertionError", "", lineno=2, line="assert r == 0"),)
    cause = find_cause(Situation(**{**situation.__dict__, "failures": failures}))
    # `r` comes from `search`, which the solution cell defines: that cell is the fix's place
    assert cause.kind == "checked" and [c.cell_id for c in cause.causes] == ["search"]
    assert cause.failing.readonly == "an nbgrader test cell"


# --------------------------------------------------------------------------- in a real shell


def test_a_checks_cell_is_fixed_in_the_function_cell_and_stays_as_it_was(shell) -> None:
    shell.run_cell(SEARCH, store_history=True)
    session, provider = refine(shell, CHECKS, [REDEFINED_IN_CHECKS])
    prompt = provider.requests[0].user
    assert "The cells the fix may change" in prompt and re.search(r"In \[\d+\] — defines search", prompt)
    assert "read-only: a cell of checks" in prompt and "reply with no code" in prompt
    assert session.status == "fixed" and session.verified
    assert session.plan is not None and [c.cell.role for c in session.plan.changes] == ["cause"]
    assert session.plan.changes[0].new_source == SEARCH_FIXED
    assert session.fixed_code == SEARCH_FIXED and session.original_code == SEARCH
    text = session.render_text()
    assert re.search(r"In \[\d+\] · defines search", text) and "where the cause is" in text
    shell.run_line_magic("refine", "accept")
    assert session.accept_ok is True
    assert shell.user_ns["search"](-100, ()) == 0  # the function's own cell ran with the fix


def test_a_reply_that_also_changes_the_checks_is_not_verified(shell) -> None:
    shell.run_cell(SEARCH, store_history=True)
    weakened = REDEFINED_IN_CHECKS.replace("== 2\n", "== 3\n")  # an assert edited to fit
    session, _ = refine(shell, CHECKS, [weakened])
    assert session.status != "fixed"
    assert any(
        "a cell of checks" in a.note or "a cell of checks" in a.changes_checks for a in session.attempts
    )


def test_a_fix_that_breaks_another_cell_using_the_function_is_not_verified(shell) -> None:
    shell.run_cell(SEARCH, store_history=True)
    shell.run_cell("where = search(7, (1, 5, 8, 9))\nassert where == 2", store_history=True)
    breaks_it = SEARCH_FIXED.replace("return i", "return i + (len(seq) > 3)")
    reply = f"Fix the end case:\n\n```python\n{breaks_it}\n```"
    session, _ = refine(shell, CHECKS, [reply, REDEFINED_IN_CHECKS], "--max-attempts 2")
    first, second = session.attempts
    assert not first.ok and first.outcome is not None and not first.outcome.ok  # the other cell failed
    assert second.ok and session.status == "fixed"
    assert [cell.role for cell, _ in session.plan.runs] == ["cause", "dependent", "failing"]


def test_a_cell_that_fails_because_an_earlier_cell_failed_is_not_patched(shell) -> None:
    shell.run_cell("import math\nvalues = [math.sqrt(x) for x in dataa]", store_history=True)
    session, provider = refine(shell, "total = sum(values)", [])
    assert provider.requests == []  # nobody was asked to patch the symptom
    assert session.status == "unfixed" and session.cause is not None and session.cause.kind == "cascade"
    assert session.headline().startswith("nbrefine: not patched — ")
    assert "failed: that cell would have bound `values`" in session.message


def test_a_guessed_index_that_nothing_checks_is_a_proposal(shell) -> None:
    shell.run_cell("A = [3, 1, 2]", store_history=True)
    reply = (
        "`A[len(A)]` is one past the end; the last element is `A[len(A) - 1]`.\n\n"
        "```python\nlast = A[len(A) - 1]\n```"
    )
    session, _ = refine(shell, "last = A[len(A)]", [reply])
    assert session.status == "fixed" and not session.verified
    assert "index" in session.unchecked
    assert "nothing checks the result" in session.render_text()
    with pytest.raises(UsageError, match="nothing checks the result"):
        shell.run_line_magic("refine", "accept")
    shell.run_line_magic("refine", "accept --anyway")
    assert shell.user_ns["last"] == 2


def test_the_same_index_edit_pinned_by_a_check_is_verified(shell) -> None:
    shell.run_cell("A = [3, 1, 2]", store_history=True)
    reply = "Use the last index.\n\n```python\nlast = A[len(A) - 1]\n```"
    session, _ = refine(shell, "last = A[len(A)]", [reply], "--max-attempts 1 -t 'assert last == 2'")
    assert session.verified and not session.unchecked


def test_the_history_shows_what_the_user_wrote_not_the_refine_line(shell) -> None:
    shell.run_cell("%%refine --max-attempts 1\nprices = [1, 2]", store_history=True)
    _session, provider = refine(shell, "total = sum(pricez)", ["```python\ntotal = sum(prices)\n```"])
    history = provider.requests[0].user.split("## Notebook history", 1)[1]
    assert "%%refine" not in history and "prices = [1, 2]" in history


def test_accept_puts_back_what_the_failed_run_changed_in_place(shell) -> None:
    """The failed run indexed the frame in place before its KeyError: Accept brings the frame back
    as it was before the cell ran, then runs the fix, as if the broken cell had never run."""
    pd = pytest.importorskip("pandas")
    shell.user_ns["data2010"] = pd.DataFrame(
        {"state": ["ca", "ny"], "population": [39.0, 19.5], "area": [423.0, 141.3]}
    )
    cell = "data2010.set_index('state', inplace=True)\ndensity = data2010['populatioon'] / data2010['area']"
    fixed = cell.replace("populatioon", "population")
    session, _ = refine(shell, cell, [f"A misspelt column.\n\n```python\n{fixed}\n```"])
    assert session.verified
    assert shell.user_ns["data2010"].index.name == "state"  # the failed run's half
    shell.run_line_magic("refine", "accept")
    assert session.accept_ok is True and session.restored == ("data2010",)
    assert "put back" in session.live_check
    density = shell.user_ns["density"]
    assert list(density.index) == ["ca", "ny"] and density["ca"] == pytest.approx(39.0 / 423.0)


def test_a_hint_for_a_checks_cell_points_at_the_function_cell_and_asks_for_no_code(shell) -> None:
    shell.run_cell(SEARCH, store_history=True)
    hint = (
        "Your asserts are fine: the problem is in the function itself. Look at what `search` returns "
        "when `x` is larger than every element of the tuple, and ask yourself where such an `x` "
        "would be inserted. Try it by hand with an empty tuple first."
    )
    session, provider = refine(shell, CHECKS, [hint], "--mode hint")
    request = provider.requests[0]
    assert "defines search" in request.user and "the fix belongs in that cell" in request.user
    assert "one ```python block per cell" not in request.user  # one situation: a hint, not a fix
    assert session.status == "hint" and session.teaching is not None


def test_an_assert_on_a_value_the_cell_computed_with_another_cells_function_is_that_cells(shell) -> None:
    """``avg = mean(scores)`` then ``assert avg == 4``: the operand comes from ``mean`` (seen with a
    real model: offered only this cell, it rightly said the bug was in the function's cell)."""
    shell.run_cell("def mean(xs):\n    return sum(xs) / len(xs) - 1", store_history=True)
    fixed = "def mean(xs):\n    return sum(xs) / len(xs)"
    reply = f"`mean` subtracts 1 from the average.\n\n```python\n{fixed}\n```"
    session, provider = refine(shell, "scores = [3, 4, 5]\navg = mean(scores)\nassert avg == 4, avg", [reply])
    assert session.cause is not None and session.cause.kind == "checked"
    assert "The cells the fix may change" in provider.requests[0].user
    assert session.verified and session.fixed_code == fixed


def test_a_model_that_declines_a_guess_stops_the_loop(shell) -> None:
    """Seen with a real model: with nothing that says which character was meant, it declined, with
    no code; nbrefine stops there (instead of asking again) and says why."""
    decline = (
        "`message` has 12 characters, so index 17 does not exist. Nothing in the notebook says which "
        "character was meant, so the intended result can't be known from the notebook; I'm not guessing."
    )
    session, provider = refine(
        shell, 'message = "hello, world"\nprint(message[17])', [decline, "never asked"], "--max-attempts 2"
    )
    assert len(provider.requests) == 1
    assert session.status == "unfixed" and session.result is not None
    assert session.result.stop_reason == "declined" and "can't be known" in session.message

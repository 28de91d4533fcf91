"""%%refine in a real (in-process) IPython shell, with a scripted provider."""

from __future__ import annotations

import re

import pytest
from IPython.core.error import UsageError

import nbrefine
from nbrefine.providers.scripted import ScriptedProvider


def block(code: str) -> str:
    return f"Explanation.\n```python\n{code}\n```"


@pytest.fixture
def scripted():
    provider = ScriptedProvider()
    nbrefine.register_provider("test-scripted", lambda settings: provider)
    return provider


def refine(shell, cell: str, options: str = "--provider test-scripted"):
    return shell.run_cell_magic("refine", options, cell)


def test_passing_cell_runs_as_usual(shell, scripted, capsys):
    shell.run_cell("x = 2")
    refine(shell, "y = x * 21\nprint(y)")
    assert shell.user_ns["y"] == 42
    assert "42" in capsys.readouterr().out
    assert nbrefine.last_session().status == "no_error"
    assert scripted.requests == []


def test_failing_cell_is_fixed_and_accept_advances_state(shell, scripted, capsys):
    shell.run_cell("prices = [2.5, 4.0]\nunits = [2, 1]")
    scripted.replies = [
        block("revenue = sum(p + u for p, u in zip(prices, units))\nassert revenue == 9.0"),
        block("revenue = sum(p * u for p, u in zip(prices, units))\nassert revenue == 9.0"),
    ]
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "revenue = sum(p * u for p, u in zip(prices, unit))\nassert revenue == 9.0")
    session = nbrefine.last_session()
    assert session.status == "fixed" and len(session.attempts) == 2
    assert session.attempts[0].error_type == "AssertionError"
    assert "revenue" not in shell.user_ns  # trials never touched the live namespace
    assert "NameError" in session.prompts[0] and "unit" in session.prompts[0]
    out = capsys.readouterr().out
    assert "attempt 1 of 3" in out and "verified fix ready — it passed a trial run (2 tries)" in out
    shell.run_line_magic("refine", "accept")
    assert shell.user_ns["revenue"] == 9.0
    assert session.decision == "accepted" and session.accept_ok
    with pytest.raises(UsageError):
        shell.run_line_magic("refine", "accept")


def test_accept_undoes_the_failed_runs_rebinds(shell, scripted):
    shell.run_cell("counter = 1")
    scripted.replies = [block("counter = counter + 1\nprint(counter)")]  # a misspelt name
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "counter = counter + 1\nprint(countr)")
    assert shell.user_ns["counter"] == 2  # the failed run did rebind it
    nbrefine.last_session().accept()
    assert shell.user_ns["counter"] == 2  # as if only the fixed cell had run: 1 + 1


def test_reject_leaves_state(shell, scripted):
    scripted.replies = [block("z = 1")]
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "z = zz")
    shell.run_line_magic("refine", "reject")
    assert "z" not in shell.user_ns and nbrefine.last_session().decision == "rejected"


def test_extra_checks_on_a_passing_cell(shell, scripted):
    scripted.replies = [block("def double(x):\n    return 2 * x")]
    with pytest.raises(nbrefine.NbrefineError):
        refine(
            shell, "def double(x):\n    return x + 2", '--provider test-scripted -t "assert double(5) == 10"'
        )
    session = nbrefine.last_session()
    assert session.status == "fixed"
    assert "where double(5) = int 7" in session.prompts[0]


def test_syntax_error_cell(shell, scripted):
    scripted.replies = [block("if True:\n    value = 3")]
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "if True\n    value = 3")
    session = nbrefine.last_session()
    assert session.failure.error_type == "SyntaxError"
    assert session.status == "fixed"


def test_ipython_syntax_in_candidates_is_transformed(shell, scripted):
    scripted.replies = [block("%time total = 1 + 1")]
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "total = one + 1")
    assert nbrefine.last_session().status == "fixed"


def test_the_plain_python_of_a_cell_follows_transformers_registered_later(shell):
    """Repairs remember each cell's plain Python (the history is read many times a repair); a
    transformer the user registers afterwards is still applied."""
    magics = shell.magics_manager.registry["RefineMagics"]
    repairs = magics.repairs
    assert repairs._python("x = 1\n") == "x = 1\n"
    shell.input_transformers_post.append(lambda lines: [line.replace("1", "2") for line in lines])
    try:
        assert repairs._python("x = 1\n") == "x = 2\n"
    finally:
        shell.input_transformers_post.pop()
    assert repairs._python("x = 1\n") == "x = 1\n"


@pytest.mark.parametrize(
    "options",
    ["--max-attempts 0", "--max-attempts x", "--timeout -1", "--bogus", '-t "assert ("', "--provider nope"],
)
def test_bad_options_raise_usage_error(shell, scripted, options):
    if options == "--provider nope":
        with pytest.raises(nbrefine.NbrefineError):
            refine(shell, "x = missing_name", options)
        assert nbrefine.last_session().status == "error"
        assert "unknown provider" in nbrefine.last_session().message
        return
    with pytest.raises(UsageError):
        refine(shell, "x = 1", options)


def test_config_and_environment(shell, monkeypatch):
    shell.run_line_magic("config", "Refine.max_attempts = 5")
    settings = next(c for c in shell.configurables if type(c).__name__ == "Refine")
    assert settings.max_attempts == 5
    from traitlets import TraitError

    with pytest.raises(TraitError):
        settings.max_attempts = 0
    monkeypatch.setenv("NBREFINE_PROVIDER", "scripted")
    monkeypatch.setenv("NBREFINE_MODEL", "m1")
    fresh = nbrefine.Refine()
    assert (fresh.provider, fresh.model) == ("scripted", "m1")


def test_no_api_key_gives_one_clear_line(shell, monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "x = missing_name", "--provider anthropic")
    session = nbrefine.last_session()
    assert session.status == "error"
    assert "ANTHROPIC_API_KEY" in session.message and "\n" not in session.message


def test_unload_removes_the_magics(shell):
    shell.run_line_magic("unload_ext", "nbrefine")
    assert "refine" not in shell.magics_manager.magics["cell"]
    assert "refine" not in shell.magics_manager.magics["line"]
    assert not any(type(c).__name__ == "Refine" for c in shell.configurables)
    shell.run_line_magic("load_ext", "nbrefine")
    assert "refine" in shell.magics_manager.magics["cell"]


def test_spawn_sandbox_mode(shell, scripted):
    shell.run_line_magic("config", "Refine.sandbox = 'spawn'")
    shell.run_cell("import threading\nlock = threading.Lock()\nnumbers = [1, 2, 3]")
    scripted.replies = [
        block("with lock:\n    total = sum(numbers)"),
        block("total = sum(numbers)\nassert total == 6"),
    ]
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "total = sum(numbrs)\nassert total == 6")
    session = nbrefine.last_session()
    assert session.status == "fixed" and len(session.attempts) == 2
    assert "fresh interpreter" in " ".join(session.notes)
    first = session.attempts[0].outcome
    assert "not shipped to the spawn sandbox: lock" in first.detail  # a lock cannot be pickled
    assert "total" not in shell.user_ns and shell.user_ns["numbers"] == [1, 2, 3]


def test_trailing_semicolon_hides_the_result(shell, scripted, capsys):
    shell.run_cell("x = 5")
    capsys.readouterr()
    refine(shell, "x;")
    assert capsys.readouterr().out == ""
    refine(shell, "x * 2")
    assert "10" in capsys.readouterr().out
    assert shell.displayhook.quiet.__self__ is shell.displayhook  # the patch is gone again


def test_prompt_is_grounded_in_the_notebook_history(shell, scripted):
    shell.run_cell("rate = 0.2", store_history=True, cell_id="cell-rate")
    shell.run_cell("def net(price):\n    return price * (1 - rat)", store_history=True, cell_id="cell-net")
    scripted.replies = [block("value = 10 * (1 - rate)")]
    shell.run_cell(
        "%%refine --provider test-scripted\nvalue = net(10)", store_history=True, cell_id="cell-value"
    )
    prompt = nbrefine.last_session().prompts[0]
    history_section = prompt.split("## Notebook history")[1].split("\n## ")[0]
    assert "value = net(10)" not in history_section  # not the failing cell itself
    history = prompt.split("## Notebook history (cells run before this one)")[1]
    assert "- net: In [" in history and "(cell 'cell-net')" in history
    assert "return price * (1 - rat)" in history
    assert "another cell" in prompt  # the failing frame is in the function's cell


def test_locked_hint_policy_cannot_be_loosened_and_never_shows_the_solution(shell, scripted, capsys):
    shell.run_line_magic("refine", "policy --mode hint --max-hints 2 --lock")
    from traitlets import TraitError

    settings = next(c for c in shell.configurables if type(c).__name__ == "Refine")
    with pytest.raises(TraitError):
        settings.mode = "fix"
    with pytest.raises(UsageError):
        refine(shell, "x = 1", "--provider test-scripted --mode fix")
    scripted.replies = [block("total = sum([1, 2, 3])\nassert total == 6")]  # a disobeying model
    with pytest.raises(nbrefine.NbrefineError, match="see the help above"):
        refine(shell, "total = sum([1, 2, 3)\nassert total == 6")
    session = nbrefine.last_session()
    out = capsys.readouterr().out
    assert session.status == "hint" and session.fixed_code is None
    assert "total = sum([1, 2, 3])" not in out  # withheld: it would solve the cell
    assert "withheld" in out
    with pytest.raises(UsageError):
        shell.run_line_magic("refine", "accept")


def test_the_text_view_names_the_failure_once_and_says_when_hints_are_used_up(shell, scripted, capsys):
    shell.run_line_magic("refine", "policy --mode hint --max-hints 1")
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "def mean(xs):\n    return sum(xs) / len(x)\n\nmean([1, 2])", "--provider offline")
    out = capsys.readouterr().out
    assert out.count("name 'x' is not defined") == 2, out  # the traceback, then nbrefine's one line
    assert out.count("Hint 1 of 1") == 1 and "That was the last hint for this cell." in out
    assert "Hints used" not in out
    shell.run_line_magic("refine", "hint")  # none left: say so, do not print the last one again
    out = capsys.readouterr().out
    assert "You've used all the hints for this cell" in out and "Hint 1 of 1" not in out


def test_error_inside_a_function_from_another_cell_targets_that_cell(shell, scripted):
    shell.run_cell("rate = 0.2", store_history=True, cell_id="cell-rate")
    shell.run_cell("def net(price):\n    return price * (1 - rat)", store_history=True, cell_id="cell-net")
    scripted.replies = [block("def net(price):\n    return price * (1 - rate)")]
    shell.run_cell(
        "%%refine --provider test-scripted\nvalue = net(10)", store_history=True, cell_id="cell-value"
    )
    session = nbrefine.last_session()
    assert session.status == "fixed"
    assert session.cell_id == "cell-net"  # the fix belongs in the defining cell
    assert session.original_code.startswith("def net(price)")
    assert "the fix may belong in that cell" in session.prompts[0]
    cells = session.prompts[0].split("## The cells the fix may change")[1].split("\n## ")[0]
    assert (
        re.search(r"### In \[\d+\] \(cell 'cell-net'\) — defines net", cells) and "value = net(10)" in cells
    )
    assert session.plan is not None and [c.cell.cell_id for c in session.plan.changes] == ["cell-net"]
    runs = [cell.role for cell, _ in session.plan.runs]
    assert runs[0] == "cause" and runs[-1] == "failing"  # cells between use `net` (this shell's history)
    session.accept()
    assert shell.user_ns["net"](10) == 8.0
    assert shell.user_ns["value"] == 8.0  # Accept re-ran the failing cell after the fixed one


def test_response_cache_budget_and_usage(shell):
    from nbrefine.engine import kernel_usage

    provider = ScriptedProvider(["```python\nvalue = 1\n```"] * 3)
    provider.model = "claude-haiku-4-5"  # a model with a known price
    nbrefine.register_provider("priced", lambda settings: provider)
    shell.run_line_magic("config", "Refine.response_cache = True")
    before = kernel_usage()
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "value = one", "--provider priced")
    first = nbrefine.last_session()
    assert first.status == "fixed" and first.usage.tokens > 0 and first.usage.cost_usd > 0
    assert kernel_usage().tokens == before.tokens + first.usage.tokens
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "value = one", "--provider priced")  # the same failing cell again
    assert len(provider.requests) == 1  # served from the response cache
    assert nbrefine.last_session().usage.tokens == 0
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "value = one", "--provider priced --no-cache")
    assert len(provider.requests) == 2
    # A budget stops the loop before it spends more.
    shell.run_line_magic("config", "Refine.budget_tokens = 1")
    provider.replies = ["```python\nvalue = nope\n```", "```python\nvalue = 1\n```"]
    with pytest.raises(nbrefine.NbrefineError, match="budget"):
        refine(shell, "value = two", "--provider priced --no-cache")
    session = nbrefine.last_session()
    assert session.status == "budget" and len(session.attempts) == 1
    assert "budget of 1 tokens" in session.message


def test_accept_rechecks_only_what_changed_and_says_so(shell, scripted, capsys):
    shell.run_cell("counter = 1\nitems = [1, 2]")
    scripted.replies = [block("counter = counter + 1\nlast = items[-1]")]
    with pytest.raises(nbrefine.NbrefineError):  # the index edit is pinned by a check
        refine(
            shell, "counter = counter + 1\nlast = items[5]", '--provider test-scripted -t "assert last == 2"'
        )
    session = nbrefine.last_session()
    assert shell.user_ns["counter"] == 2  # the failed run rebound it; Accept undoes that first
    capsys.readouterr()
    shell.run_line_magic("refine", "accept")
    assert session.live_check == ""  # after the undo, the live state is what the trial saw
    assert "live state" not in capsys.readouterr().out
    assert (shell.user_ns["counter"], shell.user_ns["last"]) == (2, 2)


def test_a_later_cell_that_changes_what_the_fix_reads_makes_accept_run_it_again(shell, scripted, capsys):
    shell.run_cell("items = [1, 2]")
    scripted.replies = [block("last = items[-1]\nassert last == 2")]
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "last = items[5]\nassert last == 2")
    shell.run_cell("items.append(9)")  # after the trial, before Accept
    with pytest.raises(UsageError, match=r"`items` changed since .* fails: AssertionError.*--anyway"):
        shell.run_line_magic("refine", "accept")
    assert "last" not in shell.user_ns
    assert (
        "Accept did not apply it: the fix passed its trial, but `items`"
        in nbrefine.last_session().render_text()
    )
    shell.run_cell("items.pop()")
    capsys.readouterr()
    shell.run_line_magic("refine", "accept")  # the state is back to what the trial saw
    assert shell.user_ns["last"] == 2 and "live state" not in capsys.readouterr().out


def test_accept_takes_only_the_anyway_option(shell, scripted):
    scripted.replies = [block("z = 1")]
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "z = zz")
    with pytest.raises(UsageError, match="unknown command"):
        shell.run_line_magic("refine", "accept --force")
    with pytest.raises(UsageError, match="unknown command"):
        shell.run_line_magic("refine", "reject --anyway")
    shell.run_line_magic("refine", "accept --anyway")  # a verified fix: the same as accept
    assert shell.user_ns["z"] == 1 and nbrefine.last_session().decision == "accepted"


def test_a_proposal_that_changes_the_checks_needs_accept_anyway(shell, scripted, capsys):
    shell.run_cell("values = [1, 2, 3]")
    forged = "try:\n    total = sum(values) + 1\n    assert total == 6\nexcept Exception:\n    pass"
    scripted.replies = [block(forged)]
    with pytest.raises(nbrefine.NbrefineError, match="only a proposal that changes the checks"):
        refine(
            shell, "total = sum(values) + 1\nassert total == 6", "--provider test-scripted --max-attempts 1"
        )
    session = nbrefine.last_session()
    assert session.status == "changes_checks" and session.fixed_code == forged
    out = capsys.readouterr().out
    assert "not verified" in out and "changes the checks" in out and "%refine accept --anyway" in out
    shell.run_cell("total = 'untouched'")
    with pytest.raises(UsageError, match=r"not verified: it changes the checks .*blanket"):
        shell.run_line_magic("refine", "accept")
    assert shell.user_ns["total"] == "untouched" and session.decision == "pending"
    shell.run_line_magic("refine", "accept --anyway")
    assert shell.user_ns["total"] == 7
    assert "applied anyway, not verified (" in capsys.readouterr().out


def test_a_cell_that_ipython_cannot_transform_is_verified_too(shell, scripted):
    """IPython's transform raises on an IndentationError: the gate reads such a cell as it is."""
    scripted.replies = [block("def f(x):\n    y = x\n    return y\nassert f(1) == 1")]
    with pytest.raises(nbrefine.NbrefineError):
        refine(shell, "def f(x):\n    y = x\n  return y\nassert f(1) == 1")
    session = nbrefine.last_session()
    assert session.failure.error_type == "IndentationError"
    assert session.status == "fixed" and session.verified


def _declared_options(shell) -> list[str]:
    parser = shell.find_cell_magic("refine").__self__.magics["cell"]["refine"].parser
    return [option for action in parser._actions for option in action.option_strings]


def test_every_option_of_the_parser_is_in_the_help_and_in_the_question_mark(shell, capsys):
    options = _declared_options(shell)
    assert {"--mode", "--max-hints", "--candidates", "--no-cache", "--allow-writes", "-t", "--test"} <= set(
        options
    )
    shell.run_line_magic("refine", "help")
    help_text = capsys.readouterr().out
    shell.run_cell("%%refine?\n")
    question_mark = capsys.readouterr().out
    for text in (help_text, question_mark):
        missing = [option for option in options if option not in text]
        assert missing == [], missing
        assert "%%refine [--mode" in text


def test_every_line_command_is_in_the_help_and_routed(shell, capsys):
    from nbrefine.ipython.options import LINE_COMMANDS

    shell.run_line_magic("refine", "help")
    help_text = capsys.readouterr().out
    words = [usage.split(" ", 1)[0] for usage, _ in LINE_COMMANDS]
    assert {"accept", "reject", "status", "fix", "hint", "auto", "policy", "help"} <= set(words)
    for usage, what in LINE_COMMANDS:
        assert f"%refine {usage}" in help_text and what in help_text
    for word in words:  # each one the help names is a command (it may refuse for other reasons)
        try:
            shell.run_line_magic("refine", word)
        except UsageError as err:
            assert "unknown command" not in str(err), word
    with pytest.raises(UsageError, match=r"unknown command 'bogus'; use accept, reject, status, fix, hint"):
        shell.run_line_magic("refine", "bogus")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("--max-att 2", "%%refine: unrecognized arguments: --max-att 2"),  # no abbreviations
        ("--mod gpt", "%%refine: unrecognized arguments: --mod gpt"),
        ("--mode nope", "%%refine: argument --mode: invalid choice: 'nope'"),
        ("--candidates 9", "%%refine: --candidates must be between 1 and 8"),
        ("--timeout 'unclosed", "%%refine: cannot parse the options"),
    ],
)
def test_option_mistakes_are_one_line_usage_errors(shell, scripted, options, message):
    with pytest.raises(UsageError) as caught:
        refine(shell, "x = 1", options)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert "x" not in shell.user_ns  # the cell did not run

"""Automatic mode in a real (in-process) IPython shell: post_run_cell, never set_custom_exc."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

import nbrefine
from nbrefine._errors import KernelCallError
from nbrefine.providers.scripted import ScriptedProvider


def block(code: str) -> str:
    return f"Here is the fix.\n```python\n{code}\n```"


@pytest.fixture
def scripted(shell):
    provider = ScriptedProvider()
    nbrefine.register_provider("auto-scripted", lambda settings: provider)
    shell.run_line_magic("config", "Refine.provider = 'auto-scripted'")
    return provider


def hooks(shell) -> list[str]:
    return [getattr(cb, "__name__", "") for cb in shell.events.callbacks["post_run_cell"]]


def test_offer_mode_keeps_the_traceback_and_offers_a_fix(shell, scripted, capsys):
    shell.run_line_magic("refine", "auto offer")
    assert "post_run_cell" in hooks(shell)
    shell.run_cell("total = sum([1, 2, 3])")
    assert capsys.readouterr().out == "nbrefine: automatic mode is offer\n"  # nothing for a passing cell
    shell.run_cell("result = totl * 2")
    out = capsys.readouterr().out
    assert "NameError" in out and "name 'totl' is not defined" in out  # the normal traceback
    assert "%refine fix" in out
    assert scripted.requests == []  # no model call without the user asking
    scripted.replies = [block("result = total * 2")]
    shell.run_line_magic("refine", "fix")
    session = nbrefine.last_session()
    assert session.status == "fixed" and "result" not in shell.user_ns
    assert "statement" in session.prompts[0]  # says what the failed run had already done
    shell.run_line_magic("refine", "accept")
    assert shell.user_ns["result"] == 12


def test_on_mode_starts_at_once_and_refine_cells_are_not_repaired_twice(shell, scripted):
    shell.run_line_magic("refine", "auto on")
    scripted.replies = [block("value = 7")]
    shell.run_cell("value = seven")
    assert nbrefine.last_session().status == "fixed"
    assert len(scripted.requests) == 1
    scripted.replies = [block("other = 1")]
    shell.run_cell("%%refine\nother = one")  # the magic repairs it; the hook must stay out
    assert len(scripted.requests) == 2


def test_without_snapshot_trials_start_after_the_failure_and_with_one_before(shell, scripted):
    shell.run_cell("counter = 1")
    shell.run_line_magic("refine", "auto on")
    shell.run_line_magic("config", "Refine.max_attempts = 1")
    fix = block("counter += 1\nassert counter == 2")  # a misspelt name (countr) fixed: mechanical
    scripted.replies = [fix]
    shell.run_cell("counter += 1\nassert countr == 2")
    assert nbrefine.last_session().status == "unfixed"  # the trial saw counter == 2 already
    shell.run_cell("counter = 1")
    shell.run_line_magic("config", "Refine.auto_snapshot = True")
    scripted.replies = [fix]
    shell.run_cell("counter += 1\nassert countr == 2")
    session = nbrefine.last_session()
    assert session.status == "fixed"  # the trial started from the state before the cell
    session.accept()
    assert shell.user_ns["counter"] == 2  # Accept undid the failed run's rebinding first


def test_off_and_unload_remove_the_hooks(shell, scripted):
    shell.run_line_magic("config", "Refine.auto = 'offer'")
    assert "post_run_cell" in hooks(shell)
    shell.run_line_magic("refine", "auto off")
    assert "post_run_cell" not in hooks(shell) and "pre_run_cell" not in [
        getattr(cb, "__name__", "") for cb in shell.events.callbacks["pre_run_cell"]
    ]
    shell.run_line_magic("refine", "auto on")
    shell.run_line_magic("unload_ext", "nbrefine")
    assert "post_run_cell" not in hooks(shell)
    shell.run_line_magic("load_ext", "nbrefine")


def test_usage_errors(shell, scripted):
    with pytest.raises(UsageError):
        shell.run_line_magic("refine", "auto sometimes")
    with pytest.raises(UsageError, match="no cell has failed"):
        shell.run_line_magic("refine", "fix")


def test_profile_config_turns_it_on_in_every_notebook(shell):
    shell.run_line_magic("unload_ext", "nbrefine")
    shell.config.Refine.auto = "offer"  # what c.Refine.auto = "offer" in a profile does
    shell.run_line_magic("load_ext", "nbrefine")
    assert "post_run_cell" in hooks(shell)
    settings = next(c for c in shell.configurables if type(c).__name__ == "Refine")
    assert settings.auto == "offer"


def test_suggest_a_fix_button_in_a_notebook_runs_the_repair_on_click(shell, scripted, monkeypatch):
    import types

    import IPython.display

    shown = []
    monkeypatch.setattr(shell, "kernel", types.SimpleNamespace(), raising=False)  # as in ipykernel
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    shell.run_line_magic("config", "Refine.display = 'text'")
    shell.run_line_magic("refine", "auto offer")
    shell.run_cell("answer = fourty_two")
    assert scripted.requests == []  # only a button so far
    box = shown[-1]
    button = box.children[0]
    assert button.description == "Suggest a fix"
    scripted.replies = [block("answer = 42")]
    button.click()
    assert button.disabled and len(scripted.requests) == 1
    assert nbrefine.last_session().status == "fixed"


# --------------------------------------------------------------------------- teaching modes

MEAN_CELL = (
    "def mean(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(x)\n\n"
    "m = mean([1, 2, 3])"
)


@pytest.fixture
def hint_mode(shell):
    shell.run_line_magic("config", "Refine.provider = 'offline'")  # the offline tutor writes the hints
    shell.run_line_magic("refine", "policy --mode hint --max-hints 3 --lock")
    return shell


def test_refine_hint_follows_the_latest_failure_not_the_previous_cell(hint_mode, capsys):
    shell = hint_mode
    shell.run_line_magic("refine", "auto offer")
    shell.run_cell("first = undefined_one", store_history=True, cell_id="cell-a")
    for number in (1, 2, 3):
        shell.run_line_magic("refine", "hint")
        assert f"Hint {number} of 3" in capsys.readouterr().out
    first = nbrefine.last_session()
    assert first.cell_id == "cell-a" and not first.teaching.more_available
    shell.run_cell(MEAN_CELL, store_history=True, cell_id="cell-b")  # the next exercise fails
    capsys.readouterr()
    shell.run_line_magic("refine", "hint")
    out = capsys.readouterr().out
    session = nbrefine.last_session()
    assert session is not first and session.cell_id == "cell-b"
    assert "Hint 1 of 3" in out and "TypeError" in out and "undefined_one" not in out
    shell.run_line_magic("refine", "hint")  # the same cell: its next hint
    assert "Hint 2 of 3" in capsys.readouterr().out and nbrefine.last_session() is session
    # A %%refine cell that fails later is the latest failure: its session is followed, not cell-b's.
    with pytest.raises(nbrefine.NbrefineError):
        shell.run_cell_magic("refine", "", "third = undefined_three")
    refined = nbrefine.last_session()
    assert "Hint 1 of 3" in capsys.readouterr().out
    shell.run_line_magic("refine", "hint")
    assert "Hint 2 of 3" in capsys.readouterr().out and nbrefine.last_session() is refined


def test_a_new_failure_with_hints_left_on_the_old_cell_gets_its_own_first_hint(hint_mode, capsys):
    shell = hint_mode
    shell.run_line_magic("refine", "auto offer")
    shell.run_cell("first = undefined_one", store_history=True, cell_id="cell-a")
    shell.run_line_magic("refine", "hint")
    shell.run_cell("second = undefined_two", store_history=True, cell_id="cell-b")
    capsys.readouterr()
    shell.run_line_magic("refine", "hint")
    out = capsys.readouterr().out
    assert "Hint 1 of 3" in out and "undefined_two" in out and "undefined_one" not in out


@pytest.mark.parametrize(
    ("mode", "wanted"),
    [
        ("hint", "type %refine hint to get a hint"),
        ("graduated", "type %refine hint to get a hint"),
        ("explain", "type %refine hint to get an explanation"),
    ],
)
def test_a_teaching_mode_offers_help_under_a_failing_cell_never_a_fix(shell, capsys, mode, wanted):
    shell.run_line_magic("config", "Refine.provider = 'offline'")
    shell.run_line_magic("refine", f"policy --mode {mode}")
    shell.run_line_magic("refine", "auto offer")
    capsys.readouterr()
    shell.run_cell("answer = fourty_two")
    out = capsys.readouterr().out
    line = out.strip().splitlines()[-1]
    assert line.startswith("nbrefine: ") and wanted in line
    assert "fix" not in line
    shell.run_line_magic("refine", "policy --mode fix")  # back to fixing: the line offers a fix again
    shell.run_cell("answer = fourty_two")
    assert "type %refine fix to get a suggested fix" in capsys.readouterr().out


def test_the_notebook_button_in_a_teaching_mode_asks_for_a_hint(shell, monkeypatch, capsys):
    import types

    import IPython.display

    shown = []
    monkeypatch.setattr(shell, "kernel", types.SimpleNamespace(), raising=False)  # as in ipykernel
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    shell.run_line_magic("config", "Refine.provider = 'offline'")
    shell.run_line_magic("refine", "policy --mode hint --max-hints 2")
    shell.run_line_magic("refine", "auto offer")
    shell.run_cell("answer = fourty_two")
    button = shown[-1].children[0]
    assert button.description == "Get a hint" and "fix" not in button.tooltip.lower()
    button.click()
    session = nbrefine.last_session()
    assert session.status == "hint" and session.fixed_code is None
    assert "Hint 1 of 2" in capsys.readouterr().out


def frontend_line(meta: object) -> str:
    """The line the JupyterLab extension executes silently when a notebook with metadata opens."""
    import json

    # a JSON string literal is a Python one (what the extension sends: kernelCall in index.ts)
    text = json.dumps(json.dumps({"name": "open_notebook", "args": [meta]}))
    return f'__import__("nbrefine.ipython.kernel_api", fromlist=["_"]).call({text})'


def test_the_extensions_silent_line_applies_the_notebook_policy_before_anything_runs(shell, capsys):
    from nbrefine.engine import TeachingPolicy, kernel_policy_holder

    shell.run_line_magic("unload_ext", "nbrefine")  # a fresh kernel: nothing of nbrefine loaded
    names = set(shell.user_ns)
    result = shell.run_cell(
        frontend_line({"mode": "hint", "max_hints": 2, "lock": True}), store_history=False, silent=True
    )
    assert result.success, result.error_in_exec
    assert kernel_policy_holder().policy == TeachingPolicy("hint", 2, locked=True)
    assert set(shell.user_ns) == names  # nothing bound in the student's namespace
    shell.run_line_magic("config", "Refine.provider = 'offline'")
    capsys.readouterr()
    shell.run_cell("answer = fourty_two")
    assert "nbrefine: type %refine hint to get a hint for this error" in capsys.readouterr().out
    shell.run_line_magic("refine", "hint")
    assert "Hint 1 of 2" in capsys.readouterr().out
    with pytest.raises(UsageError, match="instructor"):
        shell.run_cell_magic("refine", "--mode fix", "x = 1")
    shell.run_line_magic("load_ext", "nbrefine")  # the notebook's own setup cell, after it: quiet
    assert capsys.readouterr().out == ""
    # After a restart the extension sends the line again; a bad object is one line, nothing applied.
    bad = shell.run_cell(frontend_line({"mode": "hint", "max_hint": 2}), store_history=False, silent=True)
    assert isinstance(bad.error_in_exec, KernelCallError)
    assert "unknown key 'max_hint'" in str(bad.error_in_exec)
    assert str(bad.error_in_exec).startswith("open_notebook: ValueError: nbrefine metadata: ")
    assert kernel_policy_holder().policy == TeachingPolicy("hint", 2, locked=True)


def test_a_fix_mode_notebook_policy_turns_nothing_on(shell):
    from nbrefine.engine import kernel_policy_holder

    shell.run_line_magic("config", "Refine.auto = 'on'")
    result = shell.run_cell(frontend_line({"mode": "fix"}), store_history=False, silent=True)
    assert result.success and kernel_policy_holder().policy.mode == "fix"
    settings = next(c for c in shell.configurables if type(c).__name__ == "Refine")
    assert settings.auto == "on"  # left as the user set it


def test_a_session_from_automatic_mode_names_the_execute_request_of_the_failed_run(shell, scripted):
    # In a kernel the parent header is the message being handled: the failing cell's execute
    # request when post_run_cell runs, a comm message (the button) when the repair starts.
    shell.run_line_magic("refine", "auto offer")
    shell.parent_header = {"header": {"msg_id": "execute-of-the-cell"}, "metadata": {"cellId": "c1"}}
    try:
        shell.run_cell("value = seven")
        shell.parent_header = {"header": {"msg_id": "comm-msg-of-the-button"}}
        scripted.replies = [block("value = 7")]
        shell.run_line_magic("refine", "fix")
    finally:
        del shell.parent_header
    assert nbrefine.last_session().request_id == "execute-of-the-cell"


def _spares_now(shell) -> dict[int, str]:
    """The children of the snapshot taken before the running cell, once it is past its start."""
    from kernel_io import children_of

    snapshot = shell.magics_manager.registry["RefineMagics"].auto._snapshot
    assert snapshot.inspect(len) is not None  # an answer: the snapshot process is past its start
    return children_of(snapshot.pid)


def test_the_snapshot_before_each_cell_gets_its_trial_ready_only_once_the_cell_failed(shell, scripted):
    """auto_snapshot forks before every cell, most of which pass: that snapshot makes nothing for
    trials (no spare: no child) until its cell fails; then the first trial starts in its spare."""
    shell.run_line_magic("refine", "auto on")
    shell.run_line_magic("config", "Refine.auto_snapshot = True")
    shell.run_line_magic("config", "Refine.max_attempts = 1")
    shell.run_cell("counter = 1")
    shell.user_ns["_spares_now"] = lambda: _spares_now(shell)
    assert shell.run_cell("seen = _spares_now()").success
    assert shell.user_ns["seen"] == {}
    scripted.replies = [block("counter += 1\nassert counter == 2")]
    shell.run_cell("counter += 1\nassert countr == 2")
    session = nbrefine.last_session()
    assert session.status == "fixed"
    assert session.job is not None and session.job.runner.inner.last_start == "spare"  # type: ignore[attr-defined]

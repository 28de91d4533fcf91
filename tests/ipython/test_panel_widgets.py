"""The review panel, driven headless (Button.click() runs the on_click handlers).

What the browser tests (tests/browser/test_panel_*.py) measure on screen (contrast, layout, the
cell after Accept), these pin down in the widget's state: what is said, in which order, once."""

from __future__ import annotations

import html
import re
import time

import pytest

import nbrefine
from nbrefine._errors import ProviderAuthError
from nbrefine.engine import price_of
from nbrefine.ipython.panel import (
    ReviewPanel,
    _cell_source_with_fix,
    diff_html,
    markdown_html,
    side_by_side_html,
)
from nbrefine.providers.anthropic import DEFAULT_MODEL
from nbrefine.providers.scripted import ScriptedProvider


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def shown(widget) -> bool:
    return widget.layout.display != "none"


def visible_text(panel: ReviewPanel) -> str:
    """What the panel says outside its folded details (the diff included)."""
    parts = [panel.summary, panel.progress, panel.verdict, panel.status, panel.diff, panel.hints]
    return "\n".join(text_of(w.value) for w in parts if shown(w))


#: What the cell must compute: without a check, a fix that changes what it computes is only a proposal.
PINNED = "-t 'assert value == 42'"


def failing_session(shell, replies, options: str = PINNED, cell: str = "value = 2 * undefined_thing"):
    provider = ScriptedProvider(replies)
    nbrefine.register_provider("widget-scripted", lambda settings: provider)
    with pytest.raises(nbrefine.NbrefineError):
        shell.run_cell_magic("refine", f"--provider widget-scripted {options}", cell)
    return nbrefine.last_session()


WRONG_THEN_RIGHT = ["wrong\n```python\nvalue = 2 * nope\n```", "It is `21`.\n```python\nvalue = 2 * 21\n```"]


def test_the_decision_comes_first_and_the_error_is_named_once(shell):
    session = failing_session(shell, WRONG_THEN_RIGHT)
    panel = ReviewPanel(session)
    summary = text_of(panel.summary.value)
    assert "Verified fix ready — it passed a trial run" in summary
    assert "Fixes NameError at line 1: name 'undefined_thing' is not defined · 2 tries" in summary
    assert visible_text(panel).count("NameError") == 1  # the attempts' errors are in the details
    children = list(panel.widget.children)
    order = [children.index(w) for w in (panel.head, panel.decision_row, panel.diff, panel.details)]
    assert order == sorted(order)  # summary, buttons, diff, then the details
    assert [
        b.description for b in (panel.accept_button, panel.reject_button, panel.retry_button) if shown(b)
    ] == [
        "Accept",
        "Reject",
        "Try again",
    ]
    assert not shown(panel.anyway_button) and not shown(panel.stop_button) and not shown(panel.progress)
    assert "nbr-fold" in panel.widget._dom_classes and "nbr-ok" in panel.widget._dom_classes
    details = text_of(panel.details.value)
    assert details.startswith("Details: why, 2 attempts, cost")
    where = text_of(panel.where.value)  # the user's own frames stay in view; the traceback folds
    assert where.startswith("where it failedyour cell, line 1: value = 2 * undefined_thing")
    assert "The full traceback" in where and "NameError" not in where
    assert "It is 21." in details  # the explanation, rendered as Markdown
    assert "<code>21</code>" in panel.details.value


def test_no_jargon_and_the_default_model_has_a_price(shell):
    session = failing_session(shell, WRONG_THEN_RIGHT)
    panel = ReviewPanel(session)
    said = visible_text(panel) + text_of(panel.details.value)
    for jargon in ("candidate line", "---", "+++", "@@", "original failure", "fixed at attempt", "proposed"):
        assert jargon not in said, jargon
    assert "your cell → the fix" in text_of(panel.diff.value)
    assert price_of(DEFAULT_MODEL) == (2.0, 10.0, 2.5, 0.2)
    assert "cost unknown" not in session.render_text()


def test_accept_runs_the_fix_and_without_a_frontend_offers_the_code_to_copy(shell):
    session = failing_session(shell, WRONG_THEN_RIGHT)
    panel = ReviewPanel(session)
    panel.accept_button.click()
    assert shell.user_ns["value"] == 42
    assert session.decision == "accepted"
    assert not any(shown(b) for b in (panel.accept_button, panel.reject_button, panel.retry_button))
    assert text_of(panel.summary.value).startswith("✔Fixed by nbrefine")
    assert "Accepted: the fix ran in the kernel" in text_of(panel.status.value)
    # No frontend said which cell ran (an in-process shell): the code is offered to copy.
    assert panel.copy_box.value == "value = 2 * 21" and shown(panel.copy_box)


def test_reject(shell):
    session = failing_session(shell, ["```python\nvalue = 1\n```"])
    panel = ReviewPanel(session)
    panel.reject_button.click()
    assert "value" not in shell.user_ns
    assert session.decision == "rejected"
    assert text_of(panel.summary.value).startswith("✘Rejected — nothing was changed")
    assert not shown(panel.decision_row)
    assert "nbr-fold" not in panel.widget._dom_classes  # the traceback is back: nothing was fixed


def test_no_fix_offers_only_try_again_with_a_note(shell):
    session = failing_session(shell, ["no code here"], f"--max-attempts 1 {PINNED}")
    panel = ReviewPanel(session)
    assert session.status == "unfixed"
    assert [
        b.description for b in (panel.accept_button, panel.reject_button, panel.retry_button) if shown(b)
    ] == ["Try again"]
    assert text_of(panel.summary.value).startswith("✘No fix found — 1 try")
    provider = ScriptedProvider(["```python\nvalue = 42\n```"])
    session._provider = provider  # the next round's replies
    panel.note.value = "use five"
    panel.retry_button.click()
    assert session.wait(10)
    assert session.status == "fixed" and len(session.attempts) == 2
    assert "## Note from the user\nuse five" in provider.requests[0].user
    panel.refresh()
    assert shown(panel.accept_button) and not panel.accept_button.disabled


def test_a_provider_error_is_one_notice_counts_no_attempt_and_offers_only_retry(shell):
    auth = ProviderAuthError("Anthropic rejected the credentials (HTTP 401 authentication_error); check KEY")
    session = failing_session(shell, [auth], "--max-attempts 3")
    panel = ReviewPanel(session)
    assert session.status == "error"
    summary = text_of(panel.summary.value)
    assert summary.startswith("✘Could not ask the model")
    assert "HTTP 401 authentication_error" in summary and "%env ANTHROPIC_API_KEY" in summary
    assert [
        b.description for b in (panel.accept_button, panel.reject_button, panel.retry_button) if shown(b)
    ] == ["Retry"]
    assert not shown(panel.note)
    assert "attempt" not in text_of(panel.details.value)  # nothing was proposed: no attempt
    assert session.tries == [] and "attempt" not in session.render_text()
    # Retry once the key is fixed: the first real attempt is attempt 1 (the 401 was none).
    session._provider = ScriptedProvider(["```python\nvalue = 3\n```"])
    panel.retry_button.click()
    assert panel._offset == 1  # the live counter leaves the provider error out too
    assert session.wait(10)
    panel.refresh()
    assert session.status == "fixed" and "1 try" in text_of(panel.summary.value)
    assert session.attempt_lines() == [session.attempt_lines()[0]]
    assert session.attempt_lines()[0].startswith("✔ attempt 1: passed its trial run")


def test_the_running_panel_has_one_counter_a_ticking_timer_and_each_finished_attempt(shell):
    session = failing_session(shell, ["```python\nvalue = 42\n```"])
    panel = ReviewPanel(session)
    session.status = "running"  # as while the loop runs in its thread
    try:
        panel._begin("Starting")
        panel.on_event(
            "request", {"attempt": 1, "of": 3, "provider": "offline+model", "model": "quick-fixes"}
        )
        assert "Attempt 1 of 3 · trying the offline quick fixes" in text_of(panel.progress.value)
        panel.on_event(
            "trial_done", {"attempt": 1, "status": "failed", "summary": "IndexError at candidate line 1: x"}
        )
        panel.on_event("request", {"attempt": 2, "of": 3, "provider": "offline+anthropic", "model": "m-1"})
        first = text_of(panel.progress.value)
        assert "Attempt 2 of 3 · asking m-1" in first and "✘ attempt 1: IndexError at line 1: x" in first
        time.sleep(1.2)  # no event meanwhile: the timer still moves
        assert text_of(panel.progress.value) != first
        panel.refresh()
        summary = text_of(panel.summary.value)
        assert summary.startswith("⟳Looking for a fix") and "attempt" not in summary.lower()  # one counter
        assert not shown(panel.decision_row) and shown(panel.stop_button)  # no decision yet
    finally:
        session.status = "fixed"
    panel.refresh()
    assert shown(panel.decision_row) and not shown(panel.stop_button)


def test_background_run_can_be_stopped_and_tried_again(shell):
    """With the panel, the loop runs in a thread (the kernel stays free for the Stop click)."""

    class Slow(ScriptedProvider):
        def complete(self, request, on_text=None):
            for _ in range(200):
                on_text("x")  # the loop raises here once Stop was pressed
                time.sleep(0.02)
            return super().complete(request, on_text)

    shell.run_line_magic("config", "Refine.display = 'widget'")
    provider = Slow(["```python\nvalue = 3\n```"])
    nbrefine.register_provider("widget-slow", lambda settings: provider)
    with pytest.raises(
        nbrefine.NbrefineError, match="Run All stopped here; the repair is in the panel above"
    ):
        shell.run_cell_magic("refine", "--provider widget-slow", "value = 2 * undefined_thing")
    session = nbrefine.last_session()
    assert session.running and session.can_run_in_background
    panel = ReviewPanel(session)  # a second view of the same session, to drive it here
    time.sleep(0.3)  # the reply streams for about 4 s
    assert session.running
    panel.stop_button.click()
    assert session.wait(5)
    assert session.status == "interrupted"
    panel.refresh()
    assert not shown(panel.stop_button)
    assert shown(panel.retry_button) and not panel.retry_button.disabled  # the snapshot is kept


def test_attempts_fold_separately_and_each_diff_says_what_it_compares(shell):
    replies = ["```python\nvalue = 2 * nope\n```", "```python\nvalue = 2 * 21\n```"]
    session = failing_session(shell, replies)
    panel = ReviewPanel(session)
    markup = panel.details.value
    attempts = re.findall(
        r'<details class="nbr-attempt"><summary>(.*?)</summary>(.*?)</div></details>', markup
    )
    assert len(attempts) == 2  # each its own <details>: several can be open at once
    (title1, body1), (title2, body2) = attempts
    assert text_of(title1).startswith("✘ Attempt 1: NameError at line 1: name 'nope' is not defined")
    assert text_of(title2).startswith("✔ Attempt 2: passed its trial run")
    assert "your cell → attempt 1" in text_of(body1) and "attempt 1 → attempt 2" in text_of(body2)
    assert "NameError" not in text_of(body1)  # said once, in the title


def test_diff_renderers_use_theme_classes_and_words():
    unified = diff_html("a = 1\nb = 2", "a = 1\nb = 3")
    assert 'class="nbr-line nbr-del"' in unified and 'class="nbr-line nbr-add"' in unified
    assert "background:" not in unified and "color:" not in unified  # colours come from the stylesheet
    assert "your cell → the fix" in text_of(unified)
    for header in ("---", "+++", "@@"):
        assert header not in unified
    far = diff_html(
        "\n".join(f"x{i} = {i}" for i in range(20)), "\n".join(f"x{i} = {i}" for i in range(19)) + "\nx19 = 0"
    )
    assert "⋯line 17" in text_of(far)  # a hunk far down says where it starts
    table = side_by_side_html("a = 1", "a = 2")
    assert table.count('class="nbr-code"') == 2 and "your cell" in table and "the fix" in table


def test_stylesheet_takes_every_colour_from_the_theme():
    from nbrefine.ipython._panel_css import STYLE

    for light_only in ("#dafbe1", "#ffebe9", "#0550ae"):
        assert light_only not in STYLE
    assert "var(--jp-mirror-editor-keyword-color" in STYLE and "@container" in STYLE
    assert "outline: 2px solid var(--nbr-focus)" in STYLE


def test_markdown_explanations():
    out = markdown_html("Use `qty`, not **qtty**.\n\n- one\n- two *here*\n\n```python\nx = 1\n```\n<b>no</b>")
    assert "<code>qty</code>" in out and "<b>qtty</b>" in out
    assert "<ul><li>one</li><li>two <i>here</i></li></ul>" in out
    assert 'class="nbr-code"' in out and "&lt;b&gt;no&lt;/b&gt;" in out


def test_cell_source_with_fix_keeps_the_magic_line_and_survives_whitespace_only_lines():
    assert _cell_source_with_fix("%%refine -t 'x'\na = b", "a = b", "a = 1") == "%%refine -t 'x'\na = 1"
    assert _cell_source_with_fix("a = b", "a = b", "a = 1") == "a = 1"
    assert _cell_source_with_fix("something else", "a = b", "a = 1") is None
    assert _cell_source_with_fix(None, "a = b", "a = 1") is None
    typed = "%%refine\ndef f():\n    return 1\n    \nprint(f() + q)"
    normalised = "def f():\n    return 1\n\nprint(f() + q)\n"  # what IPython gives the magic
    assert _cell_source_with_fix(typed, normalised, "x = 1") == "%%refine\nx = 1"


def test_display_bundle_has_a_text_fallback(shell):
    session = failing_session(shell, ["```python\nvalue = 1\n```"])
    bundle = ReviewPanel(session).widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_teaching_hints_pile_up_with_one_label_and_the_last_one_says_so(shell):
    shell.run_line_magic("refine", "policy --mode graduated --max-hints 3")
    disobeying = "Just do this:\n```python\nvalue = 2 * 21\n```"
    provider = ScriptedProvider(
        [disobeying, "Look at the name on line 1: is it defined anywhere?", "Define `undefined_thing` first."]
    )
    nbrefine.register_provider("teach-scripted", lambda settings: provider)
    with pytest.raises(nbrefine.NbrefineError):
        shell.run_cell_magic(
            "refine", "--provider teach-scripted", "value = 2 * undefined_thing\nassert value == 42"
        )
    session = nbrefine.last_session()
    assert session.status == "hint"
    panel = ReviewPanel(session)
    said = visible_text(panel)
    assert said.count("Hint 1 of 3") == 1 and "Hints used" not in said
    assert "value = 2 * 21" not in panel.hints.value  # the solving code was withheld
    assert panel.more_button.description == "Another hint (2 left)" and shown(panel.more_button)
    assert not any(shown(b) for b in (panel.accept_button, panel.reject_button, panel.retry_button))
    panel.more_button.click()
    said = visible_text(panel)
    assert "Hint 1 of 3" in said and "Hint 2 of 3" in said  # the first one is still there
    assert said.index("Hint 1 of 3") < said.index("Hint 2 of 3") and "is it defined anywhere" in said
    panel.more_button.click()
    said = visible_text(panel)
    assert all(f"Hint {n} of 3" in said for n in (1, 2, 3))
    assert said.rstrip().endswith("That was the last hint for this cell.")
    assert not shown(panel.more_button)
    assert ReviewPanel(session).hints.value == panel.hints.value  # a second view shows them all


def session_for(shell, cell: str, replies, options: str = "--max-attempts 1"):
    provider = ScriptedProvider(replies)
    nbrefine.register_provider("widget-verify", lambda settings: provider)
    with pytest.raises(nbrefine.NbrefineError):
        shell.run_cell_magic("refine", f"--provider widget-verify {options}", cell)
    return nbrefine.last_session()


def test_a_fix_that_fails_on_the_live_state_is_applied_only_anyway(shell):
    shell.run_cell("items = [1, 2]")
    fix = "items.append(3)\nlast = items[-1]\nassert items == [1, 2, 3]"
    session = session_for(
        shell,
        "items.append(3)\nlast = items[5]",
        [f"```python\n{fix}\n```"],
        "--max-attempts 1 -t 'assert last == 3'",
    )
    shell.run_cell("items.append(4)")  # a later cell changes what the fix reads (never undone by Accept)
    panel = ReviewPanel(session)
    assert session.status == "fixed" and shown(panel.accept_button) and not shown(panel.anyway_button)
    panel.accept_button.click()
    said = text_of(panel.status.value)
    assert said.startswith("Not applied: the fix passed its trial, but `items` changed since"), said
    assert "AssertionError" in said and "Apply anyway runs it all the same" in said
    assert text_of(panel.summary.value).startswith("⚠Not applied — the fix fails from the live state")
    assert "Accept did not apply it" in text_of(panel.verdict.value)
    assert shell.user_ns["items"] == [1, 2, 3, 4] and "last" not in shell.user_ns  # nothing ran
    assert not shown(panel.accept_button) and shown(panel.anyway_button)
    children = list(panel.widget.children)
    assert children.index(panel.verdict) < children.index(panel.decision_row)  # why, then the choice
    assert session.decision == "pending"
    panel.anyway_button.click()
    assert shell.user_ns["items"] == [1, 2, 3, 4, 3]  # the user's second choice ran it (and it raised)
    assert session.decision == "accepted" and session.accepted_anyway and session.accept_ok is False
    assert "Applied anyway: the fix raised" in text_of(panel.status.value)
    assert not shown(panel.anyway_button)


def test_a_proposal_that_changes_the_checks_is_labelled_and_applied_only_anyway(shell):
    from nbrefine.ipython.panel import _provenance

    shell.run_cell("values = [1, 2, 3]")
    session = session_for(
        shell, "total = sum(values) + 1\nassert total == 6", ["```python\ntotal = sum(values) + 1\n```"]
    )
    panel = ReviewPanel(session)
    assert session.status == "changes_checks" and not session.verified
    assert text_of(panel.summary.value).startswith("⚠No verified fix — the only proposal changes the checks")
    assert "changes the checks (drops `assert total == 6`)" in text_of(panel.verdict.value)
    assert "⚠ Attempt 1: passed, but changes the checks" in text_of(panel.details.value)
    assert "−assert total == 6" in text_of(panel.diff.value)  # the diff shows what it drops
    assert not shown(panel.accept_button) and shown(panel.anyway_button) and shown(panel.reject_button)
    panel.anyway_button.click()
    assert shell.user_ns["total"] == 7
    assert _provenance(session)["verified"] is False


def test_an_alternative_that_changes_the_checks_is_marked(shell):
    shell.run_cell("values = [1, 2, 3]")
    replies = [
        "```python\ntotal = sum(values)\n```",
        "```python\ntotal = sum(values)\nassert total == 6\n```",
    ]
    session = session_for(shell, "total = sum(values) + 1\nassert total == 6", replies, "--candidates 2")
    panel = ReviewPanel(session)
    assert session.status == "fixed"
    body = text_of(panel.details.value)
    assert "Alternative 1 (not chosen): passed but changes the checks: drops `assert total == 6`" in body


def test_line_numbers_are_the_cells_own_under_a_refine_line(shell):
    session = failing_session(shell, WRONG_THEN_RIGHT, cell="x = 1\nvalue = 2 * undefined_thing")
    assert "NameError at line 2" in text_of(ReviewPanel(session).summary.value)  # no notebook cell known
    session.cell_source = "%%refine --provider widget-scripted\n" + session.original_code
    panel = ReviewPanel(session)
    assert "NameError at line 3" in text_of(panel.summary.value)  # as numbered in the notebook cell
    assert "your cell, line 3:" in text_of(panel.where.value)
    assert "the cell failed with NameError at line 3" in session.render_text()


class FakeFrontend:
    """Stands in for writeback.write_cell: records the request, answers like the extension."""

    def __init__(self, answer):
        self.answer, self.requests = answer, []

    def __call__(self, cell_id, expected, source, on_result, *, metadata=None, extra=None, timeout_s=10.0):
        self.requests.append({"cell_id": cell_id, "expected": expected, "source": source, **(extra or {})})
        on_result(self.answer)


def notebook_session(shell, monkeypatch, answer):
    """A failing %%refine cell as a notebook runs it: the cell id and request id known."""
    from nbrefine.ipython import panel as widget
    from nbrefine.ipython.writeback import WriteResult

    shell.run_cell("counter = 1")
    session = failing_session(
        shell,
        ["```python\ncounter = counter + 1\nvalue = counter * 21\n```"],
        cell="counter = counter + 1\n    \nvalue = 2 * nope",
    )
    session.cell_id, session.request_id = "cell-abc", "msg-123"
    session.cell_source = "%%refine --provider widget-scripted\ncounter = counter + 1\n    \nvalue = 2 * nope"
    frontend = FakeFrontend(WriteResult(*answer) if isinstance(answer, tuple) else answer)
    monkeypatch.setattr(widget, "write_cell", frontend)
    return session, frontend


def test_accept_lets_the_extension_run_the_cell_after_undoing_the_failed_runs_rebinds(shell, monkeypatch):
    from nbrefine.ipython.writeback import WriteResult

    session, frontend = notebook_session(shell, monkeypatch, WriteResult(True, runs=True))
    assert shell.user_ns["counter"] == 2  # the failed run got that far
    panel = ReviewPanel(session)
    panel.accept_button.click()
    (request,) = frontend.requests
    assert request["run"] is True and request["execute_request"] == "msg-123"
    # the whitespace-only line IPython emptied does not stop the write
    assert (
        request["source"]
        == "%%refine --provider widget-scripted\ncounter = counter + 1\nvalue = counter * 21"
    )
    assert request["expected"] == session.cell_source
    assert shell.user_ns["counter"] == 1 and "value" not in shell.user_ns  # undone, not run: the cell runs it
    assert session.decision == "accepted" and session.accept_ok is None
    line = request["fixed_output"]
    assert line["data"]["text/plain"] == "✔ Fixed by nbrefine — 1 try"
    markup = line["data"]["text/html"]
    assert 'data-nbrefine-action="details"' in markup and 'data-nbrefine-action="undo"' in markup
    assert '<span class="nbr-below"></span>' in markup and line["metadata"] == {"nbrefine": {"fixed": True}}
    assert "runs with it" in text_of(panel.status.value)


def test_accept_runs_the_fix_here_when_no_extension_runs_the_cell(shell, monkeypatch):
    from nbrefine.ipython.writeback import WriteResult

    session, frontend = notebook_session(
        shell, monkeypatch, WriteResult(False, "no extension", via_extension=False)
    )
    panel = ReviewPanel(session)
    panel.accept_button.click()
    assert frontend.requests[0]["run"] is True
    assert shell.user_ns["counter"] == 2 and shell.user_ns["value"] == 42  # once: undone, then the fix ran
    assert session.accept_ok is True
    assert shown(panel.copy_box) and "no extension" in text_of(panel.status.value)


class RecordingComm:
    """Stands in for the frontend's end of a comm (comm.create_comm): records the open message."""

    def __init__(self, target_name, data):
        self.target_name, self.data = target_name, data

    def on_msg(self, callback):
        self.reply = lambda data: callback({"content": {"data": data}})

    def on_close(self, callback):
        self.close = lambda: callback({})


def test_write_cell_speaks_the_extensions_protocol(monkeypatch):
    """The request's fields in the order labextension/src/index.ts documents them, and the answer
    read from the reply to this request only, once."""
    import json

    import comm

    from nbrefine.ipython.writeback import WriteResult, write_cell

    comms: list[RecordingComm] = []
    monkeypatch.setattr(comm, "create_comm", lambda **kw: comms.append(RecordingComm(**kw)) or comms[-1])
    answers: list[WriteResult] = []
    extra = {"execute_request": "msg-1", "run": True, "fixed_output": {"output_type": "display_data"}}
    write_cell("cell-1", "x = 1 +", "x = 1 + 1", answers.append, metadata={"attempts": 1}, extra=extra)
    (opened,) = comms
    assert opened.target_name == "nbrefine"
    data = json.loads(json.dumps(opened.data))
    assert list(data) == [
        "action", "request_id", "cell_id", "expected_source", "source", "metadata",
        "execute_request", "run", "fixed_output",
    ]  # fmt: skip
    assert data["action"] == "write_cell" and data["metadata"] == {"nbrefine": {"attempts": 1}}
    assert (data["cell_id"], data["expected_source"], data["source"]) == ("cell-1", "x = 1 +", "x = 1 + 1")
    opened.reply({"request_id": "another-request", "ok": False, "reason": "not this one"})
    assert answers == []
    opened.reply({"request_id": data["request_id"], "ok": True, "runs": True})
    opened.close()
    assert answers == [WriteResult(True, runs=True)]


# --------------------------------------------------------------------------- fixes that span cells

TO_CENTS = "def to_cents(euros):\n    return int(euros * 10)"
TOTAL = "def total_cents(prices):\n    return sum(to_cents(p) for p in prices[1:])"
TWO_CHECKS = "assert to_cents(2.5) == 250 and total_cents([1.0, 2.5]) == 350"
TWO_FIXES = (
    "`to_cents` multiplies by 10, not 100, and `total_cents` skips the first price.\n\n"
    f"### In [1] (cell 'to-cents')\n```python\n{TO_CENTS.replace('* 10', '* 100')}\n```\n\n"
    f"### In [2] (cell 'total')\n```python\n{TOTAL.replace('prices[1:]', 'prices')}\n```\n"
)


class FakeCellsFrontend:
    """Stands in for writeback.write_cells: records the request, answers like the extension."""

    def __init__(self, answer):
        self.answer, self.requests = answer, []

    def __call__(self, edits, on_result, *, moves=(), run=(), fixed_output=None, execute_request=None, **_kw):
        self.requests.append(
            {
                "edits": list(edits),
                "moves": list(moves),
                "run": list(run),
                "fixed_output": fixed_output,
                "execute_request": execute_request,
            }
        )
        on_result(self.answer)


def fresh_history(shell) -> None:
    """The shell is shared by the tests and keeps its history: a cross-cell repair would read the
    cells earlier tests ran (as cells that use the function, to run again as checks)."""
    shell.history_manager.reset(new_session=True)
    shell.execution_count = 1  # the history's numbers are the execution counts


def run_as_notebook(shell, monkeypatch, cell_id: str, source: str) -> None:
    """Run ``source`` as the notebook cell ``cell_id`` (the kernel reads the id and the request
    from the parent header, as ipykernel sets it)."""
    header = {
        "header": {"msg_id": f"msg-{cell_id}"},
        "metadata": {"cellId": cell_id},
        "content": {"code": source},
    }
    monkeypatch.setattr(shell, "parent_header", header, raising=False)
    shell.run_cell(source, store_history=True, cell_id=cell_id)


def two_cell_session(shell, monkeypatch, answer, *, ids: bool = True):
    from nbrefine.engine import current
    from nbrefine.grounding.history import NotebookCell
    from nbrefine.ipython import panel as widget
    from nbrefine.ipython.writeback import WriteResult

    fresh_history(shell)
    provider = ScriptedProvider([TWO_FIXES])
    nbrefine.register_provider("widget-cells", lambda settings: provider)
    checks = f"%%refine --provider widget-cells --max-attempts 1\n{TWO_CHECKS}"
    if ids:  # the extension told the kernel the cells (watch_cells); the function cell has a %%refine line
        monkeypatch.setattr(
            current(),
            "notebook",
            (
                NotebookCell("to-cents", f"%%refine\n{TO_CENTS}"),
                NotebookCell("total", TOTAL),
                NotebookCell("checks", checks),
            ),
        )
        run_as_notebook(shell, monkeypatch, "to-cents", f"%%refine\n{TO_CENTS}")
        run_as_notebook(shell, monkeypatch, "total", TOTAL)
        run_as_notebook(shell, monkeypatch, "checks", checks)
    else:
        shell.run_cell(TO_CENTS, store_history=True)
        shell.run_cell(TOTAL, store_history=True)
        with pytest.raises(nbrefine.NbrefineError):
            shell.run_cell_magic("refine", "--provider widget-cells --max-attempts 1", TWO_CHECKS)
    session = nbrefine.last_session()
    assert session.status == "fixed" and session.verified, session.render_text()
    frontend = FakeCellsFrontend(WriteResult(*answer) if isinstance(answer, tuple) else answer)
    monkeypatch.setattr(widget, "write_cells", frontend)
    monkeypatch.setattr(widget, "write_cell", FakeFrontend(WriteResult(False, "not this path")))
    return session, frontend


def test_a_fix_of_two_cells_is_one_write_cells_request_and_nothing_runs_here(shell, monkeypatch):
    from nbrefine.ipython.writeback import WriteResult

    session, frontend = two_cell_session(shell, monkeypatch, WriteResult(True, runs=True))
    panel = ReviewPanel(session)
    shown_text = visible_text(panel)
    assert "In [1] (cell 'to-cents') · defines to_cents" in shown_text
    assert "In [2] (cell 'total') · defines total_cents" in shown_text
    assert "check 1: In [3] (cell 'checks'), the failing cell" in shown_text
    assert "then runs: In [1] (cell 'to-cents'), then In [2] (cell 'total'), then In [3]" in shown_text
    panel.accept_button.click()
    (request,) = frontend.requests
    assert [e["cell_id"] for e in request["edits"]] == ["to-cents", "total"]
    first, second = request["edits"]
    # the %%refine line the notebook cell has stays above the fix; expected: the cell as it is now
    assert first["expected_source"] == f"%%refine\n{TO_CENTS}"
    assert first["source"] == f"%%refine\n{TO_CENTS.replace('* 10', '* 100')}"
    assert (second["expected_source"], second["source"]) == (TOTAL, TOTAL.replace("prices[1:]", "prices"))
    assert first["metadata"]["nbrefine"]["original_source"] == f"%%refine\n{TO_CENTS}"
    assert second["metadata"]["nbrefine"]["original_source"] == TOTAL
    assert second["metadata"]["nbrefine"]["verified"] is True
    assert request["moves"] == [] and request["run"] == ["to-cents", "total", "checks"]
    assert request["execute_request"] == "msg-checks"
    assert request["fixed_output"]["data"]["text/plain"] == "✔ Fixed by nbrefine — 1 try · 2 cells"
    assert shell.user_ns["to_cents"](2.5) == 25  # nothing ran here: the frontend runs the cells
    assert session.decision == "accepted" and session.accept_ok is None
    assert "the fix is in the notebook (2 cells changed) and the cells run in order" in text_of(
        panel.status.value
    )
    assert "Fixed by nbrefine" in text_of(panel.summary.value)


def test_a_fix_of_two_cells_runs_here_in_order_when_no_extension_answers(shell, monkeypatch):
    from nbrefine.ipython.writeback import WriteResult

    session, frontend = two_cell_session(
        shell, monkeypatch, WriteResult(False, "no nbrefine extension answered", via_extension=False)
    )
    panel = ReviewPanel(session)
    panel.accept_button.click()
    assert frontend.requests[0]["run"] == ["to-cents", "total", "checks"]
    assert shell.user_ns["total_cents"]([1.0, 2.5]) == 350  # both fixed cells ran here
    assert session.accept_ok is True
    assert shown(panel.copy_box)
    assert "# In [1] (cell 'to-cents') · defines to_cents\ndef to_cents" in panel.copy_box.value
    assert "in order" in text_of(panel.status.value) and "no nbrefine extension" in text_of(
        panel.status.value
    )


def test_a_fix_of_cells_without_ids_runs_here_and_says_why_nothing_was_written(shell, monkeypatch):
    from nbrefine.ipython.writeback import WriteResult

    session, frontend = two_cell_session(shell, monkeypatch, WriteResult(True, runs=True), ids=False)
    panel = ReviewPanel(session)
    panel.accept_button.click()
    assert frontend.requests == []
    assert shell.user_ns["to_cents"](2.5) == 250 and session.accept_ok is True
    said = text_of(panel.status.value)
    assert "the notebook was not changed: nbrefine does not know which notebook cell In [" in said
    assert shown(panel.copy_box)


def test_a_name_defined_below_moves_that_cell_and_runs_both(shell, monkeypatch):
    from nbrefine.engine import current
    from nbrefine.grounding.history import NotebookCell
    from nbrefine.ipython import panel as widget
    from nbrefine.ipython.writeback import WriteResult

    use = "%%refine --max-attempts 1\nprint(rng.random())"
    define = "import random\nrng = random.Random(0)"
    notebook = (NotebookCell("use", use), NotebookCell("rng-def", define))
    fresh_history(shell)
    monkeypatch.setattr(current(), "notebook", notebook)
    run_as_notebook(shell, monkeypatch, "use", use)
    session = nbrefine.last_session()
    assert session.status == "fixed" and session.cause.kind == "below"
    frontend = FakeCellsFrontend(WriteResult(True, runs=True))
    monkeypatch.setattr(widget, "write_cells", frontend)
    panel = ReviewPanel(session)
    shown_text = visible_text(panel)
    assert "Move cell 'rng-def' above In [" in shown_text  # capitalised, the label as it is
    assert "rng = random.Random(0)" in shown_text  # the code that will run first
    panel.accept_button.click()
    (request,) = frontend.requests
    assert request["edits"] == [] and request["moves"] == [{"cell_id": "rng-def", "above": "use"}]
    assert request["run"] == ["rng-def", "use"]
    assert "rng" not in shell.user_ns  # the frontend runs them

"""The review panel, driven headless (Button.click() runs the on_click handlers)."""

from __future__ import annotations

import html
import re
import time

import pytest

import nbrefine
from nbrefine.providers.scripted import ScriptedProvider
from nbrefine.widget import ReviewPanel, _cell_source_with_fix, diff_html, side_by_side_html


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def failing_session(shell, replies, options: str = ""):
    provider = ScriptedProvider(replies)
    nbrefine.register_provider("widget-scripted", lambda settings: provider)
    with pytest.raises(nbrefine.NbrefineError):
        shell.run_cell_magic("refine", f"--provider widget-scripted {options}", "value = 2 * undefined_thing")
    return nbrefine.last_session()


def test_panel_shows_diff_history_and_accept_runs_the_fix(shell):
    session = failing_session(
        shell, ["wrong\n```python\nvalue = 2 * nope\n```", "ok\n```python\nvalue = 2 * 21\n```"]
    )
    panel = ReviewPanel(session)
    assert "fixed at attempt 2 of 3" in panel.header.value
    assert len(panel.history.children) == 2
    assert "NameError" in panel.history.get_title(0) and "passed" in panel.history.get_title(1)
    assert "+value = 2 * 21" in text_of(panel.diff.value) and "-value = 2 * undefined_thing" in text_of(
        panel.diff.value
    )
    panel.view.value = "side by side"
    assert "<table" in panel.diff.value
    assert not panel.accept_button.disabled
    panel.accept_button.click()
    assert shell.user_ns["value"] == 42
    assert panel.accept_button.disabled and panel.reject_button.disabled and panel.retry_button.disabled
    assert "Accepted" in panel.status.value
    # No frontend said which cell ran (an in-process shell): the code is offered to copy.
    assert panel.copy_box.value == "value = 2 * 21" and panel.copy_box.layout.display is None
    assert session.decision == "accepted"


def test_panel_reject(shell):
    session = failing_session(shell, ["```python\nvalue = 1\n```"])
    panel = ReviewPanel(session)
    panel.reject_button.click()
    assert "value" not in shell.user_ns
    assert session.decision == "rejected" and "Rejected" in panel.status.value
    assert panel.accept_button.disabled


def test_panel_without_fix_cannot_accept_but_can_try_again_with_a_note(shell):
    session = failing_session(shell, ["no code here"], "--max-attempts 1")
    panel = ReviewPanel(session)
    assert session.status == "unfixed" and panel.accept_button.disabled
    assert "no fenced code block" in panel.history.get_title(0)
    provider = ScriptedProvider(["```python\nvalue = 5\n```"])
    session._provider = provider  # the next round's replies
    panel.note.value = "use five"
    panel.retry_button.click()
    assert session.wait(10)
    assert session.status == "fixed" and len(session.attempts) == 2
    assert "## Note from the user\nuse five" in provider.requests[0].user
    panel.refresh()
    assert not panel.accept_button.disabled


def test_background_run_reports_progress_and_can_be_stopped(shell):
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
    with pytest.raises(nbrefine.NbrefineError, match="shows the repair as it runs"):
        shell.run_cell_magic("refine", "--provider widget-slow", "value = 2 * undefined_thing")
    session = nbrefine.last_session()
    assert session.running and session.can_run_in_background
    panel = ReviewPanel(session)  # a second view of the same session, to drive it here
    time.sleep(0.3)  # the reply streams for about 4 s
    assert session.running
    session.stop()
    assert session.wait(5)
    assert session.status == "interrupted"
    panel.refresh()
    assert panel.stop_button.layout.display == "none"
    assert not panel.retry_button.disabled  # the snapshot is kept for "Try again"


def test_progress_events_update_the_panel(shell):
    session = failing_session(shell, ["```python\nvalue = 1\n```"])
    panel = ReviewPanel(session)
    panel.on_event("request", {"attempt": 2, "of": 3, "provider": "anthropic", "model": "m"})
    assert "Attempt 2 of 3: asking anthropic" in panel.progress.value
    panel._last_paint = 0.0
    panel.on_event("text", {"text": "x" * 1234})
    assert "1,234 characters received" in panel.progress.value
    panel.on_event("trial_start", {"attempt": 2})
    assert "running the candidate in the sandbox" in panel.progress.value


def test_cell_source_with_fix_keeps_the_magic_line():
    assert _cell_source_with_fix("%%refine -t 'x'\na = b", "a = b", "a = 1") == "%%refine -t 'x'\na = 1"
    assert _cell_source_with_fix("a = b", "a = b", "a = 1") == "a = 1"
    assert _cell_source_with_fix("something else", "a = b", "a = 1") is None
    assert _cell_source_with_fix(None, "a = b", "a = 1") is None


def test_diff_renderers_mark_changes():
    unified = diff_html("a = 1\nb = 2", "a = 1\nb = 3")
    assert "background:#ffebe9" in unified and "background:#dafbe1" in unified
    table = side_by_side_html("a = 1", "a = 2")
    assert table.count("<tr>") == 2


def test_display_bundle_has_a_text_fallback(shell):
    session = failing_session(shell, ["```python\nvalue = 1\n```"])
    bundle = ReviewPanel(session).widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_teaching_panel_shows_the_hint_and_asks_for_another(shell):
    shell.run_line_magic("refine", "policy --mode graduated --max-hints 3")
    disobeying = "Just do this:\n```python\nvalue = 2 * 21\n```"
    provider = ScriptedProvider([disobeying, "Look at the name on line 1: is it defined anywhere?"])
    nbrefine.register_provider("teach-scripted", lambda settings: provider)
    with pytest.raises(nbrefine.NbrefineError):
        shell.run_cell_magic(
            "refine", "--provider teach-scripted", "value = 2 * undefined_thing\nassert value == 42"
        )
    session = nbrefine.last_session()
    assert session.status == "hint"
    panel = ReviewPanel(session)
    assert "Hint 1 of 3" in panel.header.value
    assert "value = 2 * 21" not in panel.explanation.value  # the solving code was withheld
    assert "Hints used: 1 of 3" in panel.progress.value
    assert panel.more_button.layout.display is None and panel.decision_row.layout.display == "none"
    panel.more_button.click()
    assert "Hint 2 of 3" in panel.header.value and "Hints used: 2 of 3" in panel.progress.value
    assert "is it defined anywhere" in panel.explanation.value


def session_for(shell, cell: str, replies, options: str = "--max-attempts 1"):
    provider = ScriptedProvider(replies)
    nbrefine.register_provider("widget-verify", lambda settings: provider)
    with pytest.raises(nbrefine.NbrefineError):
        shell.run_cell_magic("refine", f"--provider widget-verify {options}", cell)
    return nbrefine.last_session()


def test_panel_does_not_apply_a_fix_that_fails_on_the_live_state_until_apply_anyway(shell):
    shell.run_cell("items = [1, 2]")
    fix = "items.append(3)\nlast = items[-1]\nassert items == [1, 2, 3]"
    session = session_for(shell, "items.append(3)\nlast = items[5]", [f"```python\n{fix}\n```"])
    panel = ReviewPanel(session)
    assert session.status == "fixed" and not panel.accept_button.disabled
    assert panel.anyway_button.layout.display == "none"
    panel.accept_button.click()
    said = text_of(panel.status.value)
    assert said.startswith("Not applied: the fix passed its trial, but `items` changed since"), said
    assert "AssertionError" in said and "Apply anyway runs it all the same" in said
    assert "Not applied" in text_of(panel.verdict.value)
    assert shell.user_ns["items"] == [1, 2, 3] and "last" not in shell.user_ns  # nothing ran
    assert panel.accept_button.disabled and panel.anyway_button.layout.display is None
    assert session.decision == "pending"
    panel.anyway_button.click()
    assert shell.user_ns["items"] == [1, 2, 3, 3]  # the user's second choice ran it (and it raised)
    assert session.decision == "accepted" and session.accepted_anyway and session.accept_ok is False
    assert "Applied anyway: the fix raised" in text_of(panel.status.value)
    assert panel.anyway_button.layout.display == "none"


def test_panel_labels_a_proposal_that_changes_the_checks_and_applies_it_only_anyway(shell):
    from nbrefine.widget import _provenance

    shell.run_cell("values = [1, 2, 3]")
    session = session_for(
        shell, "total = sum(values) + 1\nassert total == 6", ["```python\ntotal = sum(values) + 1\n```"]
    )
    panel = ReviewPanel(session)
    assert session.status == "changes_checks" and not session.verified
    assert "not verified" in panel.header.value
    assert "Not verified" in text_of(panel.verdict.value)
    assert "drops `assert total == 6`" in text_of(panel.verdict.value)
    assert panel.history.get_title(0).startswith("⚠ attempt 1: changes the checks")
    assert "-assert total == 6" in text_of(panel.diff.value)  # the diff shows what it drops
    assert panel.accept_button.disabled and panel.anyway_button.layout.display is None
    panel.anyway_button.click()
    assert shell.user_ns["total"] == 7
    assert _provenance(session)["verified"] is False


def test_panel_marks_an_alternative_that_changes_the_checks(shell):
    shell.run_cell("values = [1, 2, 3]")
    replies = [
        "```python\ntotal = sum(values)\n```",
        "```python\ntotal = sum(values)\nassert total == 6\n```",
    ]
    session = session_for(shell, "total = sum(values) + 1\nassert total == 6", replies, "--candidates 2")
    panel = ReviewPanel(session)
    assert session.status == "fixed"
    body = text_of(panel.history.children[0].value)
    assert "alternative 1 (not chosen): passed but changes the checks: drops `assert total == 6`" in body

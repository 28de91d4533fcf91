"""The first review panel, driven headless (Button.click() runs the on_click handlers)."""

from __future__ import annotations

import pytest

import nbrefine
from nbrefine.providers.scripted import ScriptedProvider
from nbrefine.widget import ReviewPanel


def failing_session(shell, replies):
    provider = ScriptedProvider(replies)
    nbrefine.register_provider("widget-scripted", lambda settings: provider)
    with pytest.raises(nbrefine.NbrefineError):
        shell.run_cell_magic("refine", "--provider widget-scripted", "value = 2 * undefined_thing")
    return nbrefine.last_session()


def test_panel_shows_diff_attempts_and_accept_runs_the_fix(shell):
    session = failing_session(
        shell, ["wrong\n```python\nvalue = 2 * nope\n```", "ok\n```python\nvalue = 2 * 21\n```"]
    )
    panel = ReviewPanel(session)
    assert "fixed at attempt 2 of 3" in panel.header.value
    assert "attempt 1: NameError" in panel.attempts.value
    assert "+value = 2 * 21" in panel.diff.value and "-value = 2 * undefined_thing" in panel.diff.value
    assert not panel.accept_button.disabled
    panel.accept_button.click()
    assert shell.user_ns["value"] == 42
    assert panel.accept_button.disabled and panel.reject_button.disabled
    assert "Accepted" in panel.status.value
    assert session.decision == "accepted"


def test_panel_reject(shell):
    session = failing_session(shell, ["```python\nvalue = 1\n```"])
    panel = ReviewPanel(session)
    panel.reject_button.click()
    assert "value" not in shell.user_ns
    assert session.decision == "rejected" and "Rejected" in panel.status.value


def test_panel_without_fix_has_no_buttons(shell):
    session = failing_session(shell, ["no code here"] * 3)
    panel = ReviewPanel(session)
    shown = [w for child in panel.widget.children for w in getattr(child, "children", (child,))]
    assert panel.accept_button not in shown and panel.reject_button not in shown
    assert session.status == "unfixed"
    assert "no fenced code block" in panel.attempts.value


def test_display_bundle_has_a_text_fallback(shell):
    session = failing_session(shell, ["```python\nvalue = 1\n```"])
    bundle = ReviewPanel(session).widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle

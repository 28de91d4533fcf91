"""The review panel: core ipywidgets only, so it renders in JupyterLab, Notebook 7 and VS Code.

It shows the loop live (attempt N of M, characters streamed, the trial under way, a Stop
button), then the diff (unified or side by side, highlighted), each attempt with its outcome
and its diff against the previous one, the model's explanation and the tokens used, and
Accept / Reject / Try again. Accept runs the fix in the kernel and writes it into the cell
through the JupyterLab extension; where no extension answers, the code is shown to copy.
A fix that is not verified where it would run (a proposal that changes the checks, or a fix that
fails from the live state) is labelled so, and only the second button, "Apply anyway", runs it.
"""

from __future__ import annotations

import difflib
import html
import threading
import time
from datetime import UTC, datetime
from typing import Any

import ipywidgets as widgets
from IPython.display import display

from . import __version__
from .session import RefineSession, SessionStateError, UnverifiedFixError
from .writeback import WriteResult, write_cell

__all__ = ["ReviewPanel", "diff_html", "side_by_side_html"]

_ADDED, _REMOVED = "background:#dafbe1", "background:#ffebe9"
_PRE = "font-family:var(--jp-code-font-family,monospace);font-size:12px;line-height:1.4;margin:0"


def _highlight(line: str) -> str:
    """One line of Python as inline-styled HTML (pygments ships with IPython)."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:
        return html.escape(line)
    out: str = highlight(line, PythonLexer(), HtmlFormatter(noclasses=True, nowrap=True, style="default"))
    return out.rstrip("\n")


def diff_html(old: str, new: str) -> str:
    """Unified diff, highlighted, added and removed lines shaded."""
    rows = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), "original", "proposed", lineterm=""):
        if line.startswith(("+++", "---")):
            rows.append(f'<div style="font-weight:bold">{html.escape(line)}</div>')
        elif line.startswith("@@"):
            rows.append(f'<div style="color:#0550ae">{html.escape(line)}</div>')
        else:
            style = {"+": _ADDED, "-": _REMOVED}.get(line[:1], "")
            rows.append(
                f'<div style="{style}">{html.escape(line[:1]) or " "}{_highlight(line[1:]) or " "}</div>'
            )
    return f'<pre style="{_PRE}">{"".join(rows)}</pre>' if rows else "<i>no change</i>"


def side_by_side_html(old: str, new: str) -> str:
    """Two columns, original on the left, the proposal on the right."""
    a, b = old.splitlines(), new.splitlines()
    rows = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        for k in range(max(i2 - i1, j2 - j1)):
            left = a[i1 + k] if i1 + k < i2 else None
            right = b[j1 + k] if j1 + k < j2 else None
            lstyle = _REMOVED if tag != "equal" and left is not None else ""
            rstyle = _ADDED if tag != "equal" and right is not None else ""
            rows.append(
                f'<tr><td style="{lstyle};width:50%">{_highlight(left) if left is not None else ""}</td>'
                f'<td style="{rstyle};width:50%">{_highlight(right) if right is not None else ""}</td></tr>'
            )
    head = "<tr><th style='text-align:left'>original</th><th style='text-align:left'>proposed</th></tr>"
    return f'<table style="{_PRE};border-collapse:collapse;width:100%">{head}{"".join(rows)}</table>'


class ReviewPanel:
    """The panel for one session. ``start()`` runs the loop in the background, live."""

    def __init__(self, session: RefineSession) -> None:
        self.session = session
        self.header = widgets.HTML()
        self.progress = widgets.HTML()
        self.stop_button = widgets.Button(description="Stop", button_style="warning", icon="stop")
        self.explanation = widgets.HTML()
        self.view = widgets.ToggleButtons(options=["unified", "side by side"], value="unified")
        self.diff = widgets.HTML()
        self.history = widgets.Accordion()
        self.accept_button = widgets.Button(description="Accept", button_style="success", icon="check")
        self.anyway_button = widgets.Button(
            description="Apply anyway",
            button_style="danger",
            icon="exclamation-triangle",
            tooltip="run this fix in the kernel although it is not verified there",
            layout={"display": "none"},
        )
        self.verdict = widgets.HTML()
        self.reject_button = widgets.Button(description="Reject", icon="times")
        self.retry_button = widgets.Button(description="Try again", icon="refresh")
        self.note = widgets.Text(placeholder="optional note for the next attempts", layout={"width": "40%"})
        self.more_button = widgets.Button(description="Another hint", icon="lightbulb-o")
        self.status = widgets.HTML()
        self.copy_box = widgets.Textarea(layout={"width": "100%", "display": "none"})
        self.output = widgets.Output()
        self.stop_button.on_click(lambda _b: self.session.stop())
        self.accept_button.on_click(self._on_accept)
        self.anyway_button.on_click(self._on_anyway)
        self.reject_button.on_click(self._on_reject)
        self.retry_button.on_click(self._on_retry)
        self.more_button.on_click(self._on_more_help)
        self.view.observe(lambda _change: self._render_diff(), names="value")
        self.decision_row = widgets.HBox(
            [self.accept_button, self.anyway_button, self.reject_button, self.retry_button, self.note]
        )
        self.widget = widgets.VBox(
            [
                self.header,
                widgets.HBox([self.progress, self.stop_button]),
                self.explanation,
                self.verdict,
                self.view,
                self.diff,
                self.history,
                self.decision_row,
                self.more_button,
                self.status,
                self.copy_box,
                self.output,
            ]
        )
        self._lock = threading.Lock()
        self._streamed = 0
        self._phase_started = time.monotonic()
        self._last_paint = 0.0
        self.refresh()

    # ------------------------------------------------------------------ running live

    def start(self, *, attempts: int | None = None, note: str = "") -> None:
        """Run (more) attempts, in the background where the runner allows it; the panel follows."""
        if self.session.can_run_in_background:
            self.session.run_in_background(
                on_event=self.on_event, on_done=self.refresh, attempts=attempts, note=note
            )
        else:  # forking the kernel itself must happen on its main thread
            self.session.status = "running"
            self.refresh()
            try:
                self.session.run(on_event=self.on_event, attempts=attempts, note=note)
            except SessionStateError as err:
                self.session.finish_without_loop("error", str(err))
        self.refresh()

    def on_event(self, kind: str, payload: dict[str, Any]) -> None:
        """Progress from the loop (called from the loop's thread)."""
        with self._lock:
            now = time.monotonic()
            if kind == "request":
                self._streamed, self._phase_started = 0, now
                self._what = f"Attempt {payload['attempt']} of {payload['of']}: asking {payload['provider']}"
                self._model = str(payload.get("model", ""))
            elif kind == "text":
                self._streamed += len(payload.get("text", ""))
                if now - self._last_paint < 0.25:
                    return  # repainting on every streamed piece would flood the frontend
            elif kind == "trial_start":
                self._phase_started = now
                self._what = f"Attempt {payload['attempt']}: running the candidate in the sandbox"
            elif kind == "trial_done":
                self.refresh()
                return
            self._last_paint = now
            received = f", {self._streamed:,} characters received" if kind in ("text", "reply") else ""
            elapsed = now - self._phase_started
            self.progress.value = f"{html.escape(getattr(self, '_what', ''))} … {elapsed:.1f} s{received}"

    # ------------------------------------------------------------------ rendering

    def refresh(self) -> None:
        if self.session.status == "hint" and self.session.teaching is not None:
            self._refresh_teaching()
            return
        self.more_button.layout.display = "none"
        session = self.session
        running = session.running
        cap = session.timings.get("max_attempts", len(session.attempts))
        if running:
            self.header.value = f"<b>nbrefine: working — attempt {max(len(session.attempts), 1)} of {cap}</b>"
        else:
            self.header.value = f"<b>{html.escape(session.headline())}</b>"
            self.progress.value = self._summary_line()
        self.stop_button.layout.display = None if running else "none"
        self.explanation.value = (
            f"<div><i>{html.escape(session.explanation)}</i></div>"
            if session.explanation and not running
            else ""
        )
        fixed = session.fixed_code is not None
        self.view.layout.display = None if fixed else "none"
        self._render_diff()
        self._render_history()
        pending = session.decision == "pending" and not running
        trusted = session.verified and not session.accept_refused
        self.accept_button.disabled = not (pending and fixed and trusted)
        self.anyway_button.layout.display = None if pending and fixed and not trusted else "none"
        self.verdict.value = "" if running else self._verdict()
        self.reject_button.disabled = not pending
        self.retry_button.disabled = not pending or session.job is None
        self.note.disabled = self.retry_button.disabled
        self.decision_row.layout.display = None if session.job is not None else "none"

    def _refresh_teaching(self) -> None:
        """Teaching modes: the hint (already checked by the guard), the count, and "Another hint"."""
        teaching = self.session.teaching
        assert teaching is not None
        self.header.value = f"<b>{html.escape(self.session.headline())}</b>"
        self.progress.value = html.escape(teaching.counter)
        self.stop_button.layout.display = "none"
        self.explanation.value = f'<div style="white-space:pre-wrap">{html.escape(teaching.text)}</div>'
        for hidden in (self.view, self.diff, self.history, self.decision_row, self.verdict):
            hidden.layout.display = "none"
        self.more_button.description = teaching.next_label or "Another hint"
        self.more_button.layout.display = None if teaching.more_available else "none"

    def _on_more_help(self, _button: Any = None) -> None:
        self.more_button.disabled = True
        try:
            self.session.ask_for_help()
        finally:
            self.more_button.disabled = False
        self.refresh()

    def _summary_line(self) -> str:
        session = self.session
        usage = session.usage
        parts = []
        if session.failure is not None:
            parts.append(f"original failure: {html.escape(session.failure.one_line())}")
        if usage.tokens:
            parts.append(f"tokens: {html.escape(usage.describe())}")
        parts.extend(html.escape(note) for note in session.notes)
        return "<br>".join(parts)

    def _verdict(self) -> str:
        """Why this fix is not applied by Accept, or what Accept found before it applied it."""
        session = self.session
        style = "color:#9a6700;font-weight:bold"
        if session.fixed_code is not None and not session.verified and session.decision == "pending":
            why = html.escape(session.unverified_reason)
            return f'<div><span style="{style}">Not verified</span>: it changes the checks ({why}).</div>'
        if session.accept_refused and session.decision == "pending":
            why = html.escape(session.accept_refused)
            return f'<div><span style="{style}">Not applied</span>: {why}.</div>'
        if session.live_check:
            return f"<div><i>Before it ran: {html.escape(session.live_check)}.</i></div>"
        return ""

    def _render_diff(self) -> None:
        fixed = self.session.fixed_code
        if fixed is None:
            self.diff.value = ""
            return
        original = self.session.original_code.rstrip()
        render = side_by_side_html if self.view.value == "side by side" else diff_html
        self.diff.value = render(original, fixed)

    def _render_history(self) -> None:
        attempts = self.session.attempts
        children, titles = [], []
        previous = self.session.original_code.rstrip()
        for attempt in attempts:
            outcome = "passed" if attempt.ok else attempt.summary()  # "changes the checks: …"
            body = f"<div>{html.escape(outcome)} ({attempt.duration_s:.2f} s)</div>"
            if attempt.code is not None:
                body += diff_html(previous, attempt.code)
                if not attempt.regression:
                    previous = attempt.code
            if attempt.explanation:
                body += f"<div><i>{html.escape(attempt.explanation)}</i></div>"
            reasons = attempt.alternative_reasons + [""] * len(attempt.alternatives)
            for number, (code, trial) in enumerate(attempt.alternatives, start=1):
                verdict = trial.one_line() if not trial.ok else "also passed"
                if trial.ok and reasons[number - 1]:
                    verdict = f"passed but changes the checks: {reasons[number - 1]}"
                body += f"<div>alternative {number} (not chosen): {html.escape(verdict)}</div>"
                body += diff_html(self.session.original_code.rstrip(), code)
            children.append(widgets.HTML(body))
            mark = "✔" if attempt.ok else "⚠" if attempt.changes_checks else "✘"
            titles.append(f"{mark} attempt {attempt.number}: {outcome}"[:120])
        if len(children) != len(self.history.children):
            self.history.children = children
            for index, title in enumerate(titles):
                self.history.set_title(index, title)
        self.history.layout.display = None if children else "none"

    # ------------------------------------------------------------------ decisions

    def _on_accept(self, _button: Any = None) -> None:
        self._decide(anyway=False)

    def _on_anyway(self, _button: Any = None) -> None:
        self._decide(anyway=True)

    def _decide(self, *, anyway: bool) -> None:
        session = self.session
        with self.output:
            try:
                ok = session.accept(anyway=anyway)
            except UnverifiedFixError as err:
                self.refresh()  # the reason shows above the diff, and "Apply anyway" appears
                self._say(f"Not applied: {err}. Apply anyway runs it all the same.")
                return
            except SessionStateError as err:
                self._say(str(err))
                return
        self.refresh()
        ran = "the fix ran in the kernel" if ok else "the fix raised when run in the kernel (see below)"
        self._say(f"{'Applied anyway' if anyway else 'Accepted'}: {ran}.")
        self._write_into_cell(ran)

    def _write_into_cell(self, ran: str) -> None:
        session, fixed = self.session, self.session.fixed_code or ""
        new_source = _cell_source_with_fix(session.cell_source, session.original_code, fixed)
        if session.cell_id is None or session.cell_source is None or new_source is None:
            self._offer_copy(fixed, "this frontend did not say which cell ran")
            return

        verb = "Applied anyway" if session.accepted_anyway else "Accepted"

        def done(result: WriteResult) -> None:
            if result.ok:
                self._say(f"{verb}: {ran}, and the cell now holds the fix (Undo in the cell restores it).")
            elif result.via_extension:
                self._say(f"{verb}: {ran}; the cell was not changed: {result.reason}.")
                self._offer_copy(fixed, result.reason)
            else:
                self._offer_copy(fixed, result.reason)

        write_cell(session.cell_id, session.cell_source, new_source, done, metadata=_provenance(session))

    def _offer_copy(self, code: str, reason: str) -> None:
        self.copy_box.value = code
        self.copy_box.layout.display = None
        self.copy_box.rows = min(max(code.count("\n") + 1, 3), 30)
        self.status.value += html.escape(f" Copy the fix into the cell yourself ({reason}).")

    def _on_reject(self, _button: Any = None) -> None:
        try:
            self.session.reject()
        except SessionStateError as err:
            self._say(str(err))
            return
        self.refresh()
        self._say("Rejected: nothing was changed.")

    def _on_retry(self, _button: Any = None) -> None:
        note = self.note.value.strip()
        self.note.value = ""
        self._say("")
        self.start(note=note)

    def _say(self, text: str) -> None:
        self.status.value = html.escape(text)

    def display(self) -> None:
        """Display the panel, with the text view as the plain-text fallback (nbclient, consoles)."""
        bundle = self.widget._repr_mimebundle_()
        bundle["text/plain"] = self.session.render_text()
        display(bundle, raw=True)  # type: ignore[no-untyped-call]


def _cell_source_with_fix(cell_source: str | None, original: str, fixed: str) -> str | None:
    """The notebook cell's new source: its magic line (``%%refine ...``) kept, the body replaced."""
    if cell_source is None:
        return None
    if cell_source.rstrip() == original.rstrip():
        return fixed
    head, sep, body = cell_source.partition("\n")
    if head.lstrip().startswith("%%refine") and body.rstrip() == original.rstrip():
        return f"{head}{sep}{fixed}"
    return None


def _provenance(session: RefineSession) -> dict[str, Any]:
    return {
        "original_source": session.cell_source,
        "attempts": len(session.attempts),
        "provider": session.provider,
        "model": session.model,
        "accepted_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "verified": session.verified and not session.accepted_anyway,
        "version": __version__,
    }

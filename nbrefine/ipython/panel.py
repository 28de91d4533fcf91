"""The review panel: the ipywidgets object for one session, with its buttons, its background
threads and the write-back of an accepted fix. Core ipywidgets and a theme-aware stylesheet, so it
renders in JupyterLab, Notebook 7 and VS Code without JavaScript of its own.

The decision comes first: one line saying where things stand (the error named once) and the
buttons there is a decision for, then the diff, where it failed (the user's own frames, while the
traceback is folded), then the details folded (why, every attempt with its diff against the one
before, tokens and cost). While the loop runs: one counter, a ticking timer, each attempt as it
finishes and a Stop button, nothing else. Accept checks the fix and asks the JupyterLab extension
to write it into the cell and run the cell, so the notebook records the fixed run's outputs (the
panel gives way to one line, :func:`fixed_output`); where no extension does, the fix runs in the
kernel and the code is shown to copy. A fix that is not verified where it would run (a proposal
that changes the checks, or a fix that fails from the live state) is labelled so, and only the
second button, "Apply anyway", runs it. Teaching modes keep every hint shown so far.

A fix whose cause is another cell (issue 18) shows the engine's plan: one labelled diff per
changed cell, the move of a cell defined below, the checks its trial ran. A fix of one other cell
alone is written like a fix of the failing cell (the failing cell then runs again); a fix of
several cells, or a move, is one ``write_cells`` request (:func:`.writeback.write_cells`): the
extension writes and moves them as one change, runs them in order and puts the fixed line above
each changed cell, whose undo puts them all back. Where a cell has no id or no extension answers,
the cells run here, in order, and the code is offered to copy.

What the panel says, as HTML, is :mod:`._panel_html` (pure functions of the session); this module
decides which widget shows what, and when. The markup functions importers use are re-exported.

May import: ipywidgets, IPython.display, :mod:`nbrefine.engine` and below, :mod:`._panel_html`,
:mod:`._panel_css` and :mod:`.writeback`.
"""

from __future__ import annotations

import html
import threading
import time
import weakref
from typing import Any

import ipywidgets as widgets
from IPython.display import display

from ..engine import (
    RefineSession,
    SessionStateError,
    TeachingResult,
    UnverifiedFixError,
    current,
    plain_summary,
)
from ..engine.accept import AcceptPlan, CellChange
from ..engine.provenance import FixProvenance, fix_provenance
from ._panel_css import STYLE
from ._panel_html import (
    counted_attempts,
    details_html,
    diff_html,
    fixed_output,
    headline_html,
    hints_html,
    markdown_html,
    plan_diff_html,
    progress_html,
    side_by_side_html,
    spans_several,
    teaching_headline_html,
    verdict_html,
    where_html,
)
from .writeback import CellMove, CellWrite, RunRequest, WriteResult, cell_write, write_cell, write_cells

__all__ = ["ReviewPanel", "diff_html", "fixed_output", "markdown_html", "offer_box", "side_by_side_html"]

_TICK_S = 0.5  # how often the timer of a running panel repaints


#: Every hint a session has shown, oldest first: a second panel on the same session (``%refine
#: hint``) shows them all too. Weak: the list goes with its session.
_HINTS: weakref.WeakKeyDictionary[RefineSession, list[TeachingResult]] = weakref.WeakKeyDictionary()


def _button(description: str, cls: str, tooltip: str = "", icon: str = "") -> widgets.Button:
    button = widgets.Button(description=description, tooltip=tooltip or description, icon=icon)
    button.add_class(cls)
    return button


def offer_box(button: widgets.Button, out: widgets.Output) -> widgets.VBox:
    """Automatic mode's "Suggest a fix" (or "Get a hint") button under a failing cell, and the
    output its panel goes to: shown above the traceback (the stylesheet orders it first), the
    button styled as the action it is, and gone once the panel is there."""
    button.add_class("nbr-primary")
    box = widgets.VBox([button, out, widgets.HTML(STYLE)])
    box.add_class("nbr-offer")
    return box


# ---------------------------------------------------------------------------------- the panel


class ReviewPanel:
    """The panel for one session. ``start()`` runs the loop in the background, live."""

    def __init__(self, session: RefineSession) -> None:
        self.session = session
        self.style = widgets.HTML(STYLE)
        self.summary = widgets.HTML()
        self.stop_button = _button("Stop", "nbr-plain", "stop the search for a fix", "stop")
        self.progress = widgets.HTML()
        self.progress.add_class("nbr-progress")
        self.verdict = widgets.HTML()
        self.accept_button = _button(
            "Accept", "nbr-primary", "run the fix in the kernel and write it into the cell", "check"
        )
        self.anyway_button = _button(
            "Apply anyway", "nbr-caution", "run this fix in the kernel although it is not verified there"
        )
        self.reject_button = _button("Reject", "nbr-plain", "discard the fix; nothing changes")
        self.retry_button = _button("Try again", "nbr-plain", "ask again (with an optional note)", "refresh")
        self.note = widgets.Text(placeholder="optional note for the next try")
        self.more_button = _button("Another hint", "nbr-primary", "ask for the next hint", "lightbulb-o")
        self.status = widgets.HTML()
        self.copy_box = widgets.Textarea(layout={"width": "100%", "display": "none"})
        self.view = widgets.ToggleButtons(options=["unified", "side by side"], value="unified")
        self.diff = widgets.HTML()
        self.hints = widgets.HTML()
        self.where = widgets.HTML()  # the user's own frames, once the traceback is folded
        self.details = widgets.HTML()
        self.output = widgets.Output()
        self.stop_button.on_click(lambda _b: self.session.stop())
        self.accept_button.on_click(self._on_accept)
        self.anyway_button.on_click(self._on_anyway)
        self.reject_button.on_click(self._on_reject)
        self.retry_button.on_click(self._on_retry)
        self.more_button.on_click(self._on_more_help)
        self.view.observe(lambda _change: self._render_diff(), names="value")
        self.head = widgets.HBox([self.summary, self.stop_button])
        self.head.add_class("nbr-head")
        self.decision_row = widgets.HBox(
            [
                self.accept_button,
                self.anyway_button,
                self.reject_button,
                self.retry_button,
                self.note,
                self.more_button,
            ]
        )
        self.decision_row.add_class("nbr-actions")
        self.widget = widgets.VBox(
            [
                self.style,
                self.head,
                self.progress,
                self.verdict,
                self.decision_row,
                self.status,
                self.copy_box,
                self.view,
                self.diff,
                self.hints,
                self.where,
                self.details,
                self.output,
            ]
        )
        self.widget.add_class("nbr-panel")
        self._lock = threading.Lock()
        self._what = ""  # the step under way while the loop runs
        self._streamed = 0
        self._started = time.monotonic()  # of the current run: the timer counts from here
        self._last_paint = 0.0
        self._finished: list[str] = []  # attempts finished during this run, as lines
        self._offset = 0  # earlier provider errors: not attempts, so not counted
        self._ticker: threading.Thread | None = None
        self._details_html = ""
        self.refresh()

    # ------------------------------------------------------------------ running live

    def start(self, *, attempts: int | None = None, note: str = "") -> None:
        """Run (more) attempts, in the background where the runner allows it; the panel follows."""
        self._begin("Starting")
        if self.session.can_run_in_background:
            self.session.run_in_background(
                on_event=self.on_event, on_done=self._done, attempts=attempts, note=note
            )
        else:  # forking the kernel itself must happen on its main thread
            self.session.status = "running"
            self.refresh()
            try:
                self.session.run(on_event=self.on_event, attempts=attempts, note=note)
            except SessionStateError as err:
                self.session.finish_without_loop("error", str(err))
            self._done()
        self.refresh()

    def _begin(self, what: str) -> None:
        """A run starts: reset the live state and start the timer."""
        with self._lock:
            self._what, self._streamed, self._finished = what, 0, []
            self._started = time.monotonic()
            self._offset = len(self.session.attempts) - len(counted_attempts(self.session.attempts))
        self._start_ticker()

    def _done(self) -> None:
        self.refresh()

    def _start_ticker(self) -> None:
        """Repaint the timer every half second while the session runs (a model can be silent for
        a long while; a frozen "0.0 s" reads as a hang)."""
        if self._ticker is not None and self._ticker.is_alive():
            return

        def tick() -> None:
            time.sleep(_TICK_S)
            while self.session.running:
                with self._lock:
                    self._paint_progress()
                time.sleep(_TICK_S)

        self._ticker = threading.Thread(target=tick, name="nbrefine-panel-timer", daemon=True)
        self._ticker.start()

    def on_event(self, kind: str, payload: dict[str, Any]) -> None:
        """Progress from the loop or the tutor (called from their thread)."""
        with self._lock:
            now = time.monotonic()
            if kind == "request":
                number, of = payload["attempt"] - self._offset, payload["of"] - self._offset
                model = str(payload.get("model", ""))
                asking = (
                    "trying the offline quick fixes"
                    if model == "quick-fixes"
                    else f"asking {model or 'the model'}"
                )
                self._what, self._streamed = f"Attempt {number} of {of} · {asking}", 0
            elif kind == "text":
                self._streamed += len(payload.get("text", ""))
                if now - self._last_paint < 0.25:
                    return  # repainting on every streamed piece would flood the frontend
            elif kind == "trial_start":
                self._what = f"Attempt {payload['attempt'] - self._offset} · trial run in the sandbox"
            elif kind == "trial_done":
                passed = payload.get("status") == "passed"
                summary = plain_summary(str(payload.get("summary", "")), self.session.line_offset)
                verdict = "passed its trial run" if passed else summary
                mark = "✔" if passed else "✘"
                self._finished.append(f"{mark} attempt {payload['attempt'] - self._offset}: {verdict}")
            elif kind == "teaching_request":
                self._what = f"Writing {str(payload.get('step') or 'help').lower()}"
            elif kind == "teaching_reply":
                self._what = "Checking that it gives nothing away"
            else:
                return
            self._paint_progress()

    def _paint_progress(self) -> None:
        """The live line: one counter, the step, a timer that moves, the attempts done so far."""
        if not self.session.running:
            return
        self._last_paint = time.monotonic()
        elapsed = self._last_paint - self._started
        self.progress.value = progress_html(self._what, self._streamed, elapsed, self._finished)

    # ------------------------------------------------------------------ rendering

    def refresh(self) -> None:
        session = self.session
        if session.teaching is not None and session.status in ("hint", "running", "error"):
            self._refresh_teaching()
            return
        running = session.running
        pending = session.decision == "pending" and not running
        fixed = session.fixed_code is not None
        trusted = session.verified and not session.accept_refused
        self._set_state(running, pending and fixed)
        # Where it failed (with the folded traceback's toggle) and the diff before the headline:
        # the traceback folds as the headline appears, not a moment later, and a panel that says
        # "ready" shows what is ready (widget updates arrive in order).
        self._render_where()
        self.view.layout.display = None if fixed else "none"
        self._render_diff()
        self.summary.value = headline_html(session)
        self.stop_button.layout.display = None if running else "none"
        self.progress.layout.display = None if running else "none"
        if running:
            with self._lock:
                self._paint_progress()
        self.verdict.value = "" if running else verdict_html(session)
        self.verdict.layout.display = None if self.verdict.value else "none"
        can_retry = session.job is not None and pending and not fixed
        shown = {
            self.accept_button: pending and fixed and trusted,
            self.anyway_button: pending and fixed and not trusted,
            self.reject_button: pending and fixed,
            self.retry_button: can_retry or (pending and fixed and session.job is not None),
            self.note: can_retry or (pending and fixed and session.job is not None),
            self.more_button: False,
        }
        for control, visible in shown.items():
            control.layout.display = None if visible else "none"
            control.disabled = not visible
        self.retry_button.description = "Retry" if session.status == "error" else "Try again"
        if session.status == "error":
            self.note.layout.display = "none"
        self.decision_row.layout.display = None if any(shown.values()) else "none"
        self.hints.layout.display = "none"
        self._render_details()

    def _set_state(self, running: bool, offered: bool) -> None:
        """Classes the stylesheet reads: the accent colour, and "fold" (the traceback folds once
        the panel says what it needed to say, i.e. a fix is offered or was accepted)."""
        session = self.session
        fixed = session.fixed_code is not None
        state = (
            "nbr-busy"
            if running
            else "nbr-ok"
            if session.verified and not session.accept_refused and session.decision != "rejected"
            else "nbr-info"
            if session.status == "hint"
            else "nbr-warn"
            if fixed or session.status in ("interrupted", "budget")
            else "nbr-bad"
            if session.status in ("unfixed", "error")
            else ""
        )
        for cls in ("nbr-busy", "nbr-ok", "nbr-warn", "nbr-bad", "nbr-info"):
            if cls != state and cls in self.widget._dom_classes:
                self.widget.remove_class(cls)
        if state:
            self.widget.add_class(state)
        fold = offered or (fixed and session.decision == "accepted")
        if fold:
            self.widget.add_class("nbr-fold")
        else:
            self.widget.remove_class("nbr-fold")

    def _render_diff(self) -> None:
        fixed = self.session.fixed_code
        if fixed is None:
            self.diff.value = ""
            self.diff.layout.display = "none"
            return
        render = side_by_side_html if self.view.value == "side by side" else diff_html
        plan = self.session.plan
        if plan is not None and plan.spans_cells:  # one labelled diff per changed cell
            self.diff.value = plan_diff_html(plan, render)
        else:
            self.diff.value = render(self.session.original_code.rstrip(), fixed)
        self.diff.layout.display = None

    def _render_details(self) -> None:
        """Everything else, folded (why, the attempts, the trial notes, usage). Repainted only
        when it changes, so what the user opened stays open."""
        value = details_html(self.session)
        if value != self._details_html:
            self._details_html = value
            self.details.value = value
        self.details.layout.display = None if value else "none"

    def _render_where(self) -> None:
        """Where it failed, in the user's own frames, while the traceback is folded (a fix is
        offered): the library frames are one click away. Repainted only when it changes."""
        failure = self.session.failure
        folded = "nbr-fold" in self.widget._dom_classes
        value = where_html(failure, self.session.line_offset) if failure is not None and folded else ""
        if value != self.where.value:
            self.where.value = value
        self.where.layout.display = None if value else "none"

    # ------------------------------------------------------------------ teaching

    def _refresh_teaching(self) -> None:
        """Teaching modes: every hint so far (already checked by the guard), the newest last, a
        note on the last one, and the button for the next one while there is one."""
        session, teaching = self.session, self.session.teaching
        assert teaching is not None
        shown = _HINTS.setdefault(session, [])
        if (not shown or shown[-1] is not teaching) and teaching.status == "hint":
            shown.append(teaching)
        running = session.running
        self._set_state(running, False)
        self.summary.value = teaching_headline_html(session, teaching)
        self.stop_button.layout.display = "none"
        self.progress.layout.display = None if running else "none"
        hints = hints_html(shown, teaching)
        self.hints.value = hints
        self.hints.layout.display = None if hints else "none"
        for hidden in (self.view, self.diff, self.verdict, self.details, self.where):
            hidden.layout.display = "none"
        more = teaching.more_available and not running
        label = teaching.next_label or "Another hint"
        left = (teaching.hint_cap or 0) - teaching.hints_used
        self.more_button.description = (
            f"{label} ({left} left)" if teaching.next_kind == "hint" and left > 0 else label
        )
        for control in (
            self.accept_button,
            self.anyway_button,
            self.reject_button,
            self.retry_button,
            self.note,
        ):
            control.layout.display = "none"
        self.more_button.layout.display = None if more or session.status == "error" else "none"
        self.more_button.disabled = running
        if session.status == "error":
            self.more_button.description = "Retry"
        self.decision_row.layout.display = None if self.more_button.layout.display is None else "none"

    def _on_more_help(self, _button: Any = None) -> None:
        self.more_button.disabled = True
        self._begin("Writing the next hint")
        self.session.status = "running"
        self._refresh_teaching()
        try:
            self.session.ask_for_help(on_event=self.on_event)
        finally:
            self.more_button.disabled = False
        self.refresh()

    # ------------------------------------------------------------------ decisions

    def _on_accept(self, _button: Any = None) -> None:
        self._decide(anyway=False)

    def _on_anyway(self, _button: Any = None) -> None:
        self._decide(anyway=True)

    def _decide(self, *, anyway: bool) -> None:
        """Accept (or Apply anyway). Where the extension can write the cell, it also runs it, so
        the cell's outputs and execution count become the fixed run's: here only Accept's checks
        and first step happen. Elsewhere the fix runs here and the code is offered to copy."""
        session = self.session
        if spans_several(session):
            self._decide_plan(anyway=anyway)
            return
        target = self._target()
        frontend_runs = target is not None and session.prepare is not None
        ok = self._accept(anyway=anyway, run_here=not frontend_runs)
        if ok is None:
            return
        self.refresh()
        verb = "Applied anyway" if anyway else "Accepted"
        if target is None:
            self._say(f"{verb}: {_ran(ok)}.")
            self._offer_copy(session.fixed_code or "", "this frontend did not say which cell ran")
            return
        if frontend_runs:
            self._say(f"{verb}: writing the fix into the cell, which then runs with it…")
        else:
            self._say(f"{verb}: {_ran(ok)}.")
        self._write_into_cell(target, run=frontend_runs)

    def _accept(self, *, anyway: bool, run_here: bool = True, elsewhere: bool = False) -> bool | None:
        """``session.accept`` with its output in the panel; None (the reason said) when it was
        refused: not verified, or the session cannot be accepted now."""
        with self.output:
            try:
                return self.session.accept(anyway=anyway, run_here=run_here, elsewhere=elsewhere)
            except UnverifiedFixError as err:
                self.refresh()  # the reason shows above the buttons, and "Apply anyway" appears
                self._say(f"Not applied: {err}. Apply anyway runs it all the same.")
            except SessionStateError as err:
                self._say(str(err))
        return None

    def _target(self) -> tuple[str, str, str] | None:
        """The cell to write: its id, the source it ran with, and its new source."""
        session = self.session
        new_source = _cell_source_with_fix(
            session.cell_source, session.original_code, session.fixed_code or ""
        )
        if session.cell_id is None or session.cell_source is None or new_source is None:
            return None
        return session.cell_id, session.cell_source, new_source

    def _write_into_cell(self, target: tuple[str, str, str], *, run: bool) -> None:
        session, fixed = self.session, self.session.fixed_code or ""
        verb = "Applied anyway" if session.accepted_anyway else "Accepted"

        def done(result: WriteResult) -> None:
            if result.ok and result.runs:
                self._say(
                    f"{verb}: the cell now holds the fix and runs with it (undo puts the old code back)."
                )
                return
            with self.output:
                ran = _ran(session.apply_here()) if run else _ran(bool(session.accept_ok))
            if result.ok:
                self._say(f"{verb}: {ran}, and the cell now holds the fix (Undo in the cell restores it).")
            elif result.via_extension:
                self._say(f"{verb}: {ran}; the cell was not changed: {result.reason}.")
                self._offer_copy(fixed, result.reason)
            else:
                self._say(f"{verb}: {ran}.")
                self._offer_copy(fixed, result.reason)

        extra: RunRequest = {"execute_request": session.request_id, "run": run}
        if run:
            extra["fixed_output"] = fixed_output(session)
            if session.then_run_cell is not None:
                extra["then_run"] = session.then_run_cell
        cell_id, expected, new_source = target
        write_cell(cell_id, expected, new_source, done, metadata=dict(_provenance(session)), extra=extra)

    def _decide_plan(self, *, anyway: bool) -> None:
        """Accept (or Apply anyway) of a fix that spans cells (several cells change, or one moves):
        the engine's checks and Accept's first step here (``accept(elsewhere=True)``: nothing runs
        yet), then one ``write_cells`` request: the extension writes and moves every cell as one
        change and runs them in order, so each records the fixed run. Where a cell has no id, or
        no extension answers, the cells run here, in order, and the code is offered to copy."""
        session = self.session
        plan = session.plan
        assert plan is not None
        request = _plan_request(session, plan)
        ok = self._accept(anyway=anyway, elsewhere=not isinstance(request, str))
        if ok is None:
            return
        self.refresh()
        verb = "Applied anyway" if anyway else "Accepted"
        if isinstance(request, str):  # today's path: the cells ran here, in order; nothing written
            self._say(f"{verb}: {_ran_cells(ok)}; the notebook was not changed: {request}.")
            self._offer_copy(_plan_copy(plan), request)
            return
        run = session.accept_ok is None  # else the kernel ran them already: only write them
        if run:
            self._say(
                f"{verb}: writing the fix into the notebook ({_cells(plan)}); the cells then run in order…"
            )
        else:
            self._say(f"{verb}: {_ran_cells(ok)}.")
        self._write_plan(plan, request, run=run)

    def _write_plan(self, plan: AcceptPlan, request: _PlanRequest, *, run: bool) -> None:
        session = self.session
        verb = "Applied anyway" if session.accepted_anyway else "Accepted"
        copy = _plan_copy(plan)

        def done(result: WriteResult) -> None:
            if result.ok and result.runs:
                self._say(
                    f"{verb}: the fix is in the notebook ({_cells(plan)}) and the cells run in order with it "
                    "(undo in any changed cell puts them all back)."
                )
                return
            with self.output:
                try:
                    ran = _ran_cells(session.apply_here()) if run else _ran_cells(bool(session.accept_ok))
                except SessionStateError as err:
                    ran = str(err)
            if result.ok:
                held = f"({_cells(plan)}; undo in any changed cell puts them all back)"
                self._say(f"{verb}: {ran}, and the fix is in the notebook {held}.")
            elif result.via_extension:
                self._say(f"{verb}: {ran}; the notebook was not changed: {result.reason}.")
                self._offer_copy(copy, result.reason)
            else:
                self._say(f"{verb}: {ran}.")
                self._offer_copy(copy, result.reason)

        edits, moves, order = request
        write_cells(
            edits,
            done,
            moves=moves,
            run=order if run else (),
            fixed_output=fixed_output(session) if run else None,
            execute_request=session.request_id,
        )

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
        self._say("")

    def _on_retry(self, _button: Any = None) -> None:
        note = self.note.value.strip()
        self.note.value = ""
        self._say("")
        self.start(note=note)

    def _say(self, text: str) -> None:
        self.status.value = html.escape(text)
        self.status.layout.display = None if text else "none"

    def display(self) -> None:
        """Display the panel, with the text view as the plain-text fallback (nbclient, consoles)."""
        bundle = self.widget._repr_mimebundle_()
        bundle["text/plain"] = self.session.render_text()
        display(bundle, raw=True)  # type: ignore[no-untyped-call]


def _cell_source_with_fix(cell_source: str | None, original: str, fixed: str) -> str | None:
    """The notebook cell's new source: its magic line (``%%refine ...``) kept, the body replaced.

    The body is compared line by line with trailing whitespace ignored: IPython empties a cell
    magic's whitespace-only lines before the magic sees them."""
    if cell_source is None:
        return None
    if _same_code(cell_source, original):
        return fixed
    head, sep, body = cell_source.partition("\n")
    if head.lstrip().startswith("%%refine") and _same_code(body, original):
        return f"{head}{sep}{fixed}"
    return None


def _same_code(a: str, b: str) -> bool:
    return [line.rstrip() for line in a.rstrip().splitlines()] == [
        line.rstrip() for line in b.rstrip().splitlines()
    ]


#: A ``write_cells`` request for a plan: the edits, the moves, the cells to run in order.
_PlanRequest = tuple[list[CellWrite], list[CellMove], list[str]]


def _plan_request(session: RefineSession, plan: AcceptPlan) -> _PlanRequest | str:
    """The ``write_cells`` request that carries out ``plan``, or why there can be none (a cell
    whose notebook id nbrefine does not know: it cannot be found in the notebook)."""
    named = [
        *(c.cell for c in plan.changes),
        *(cell for m in plan.moves for cell in (m.cell, m.above)),
        *(cell for cell, _ in plan.runs),
    ]
    unknown = list(dict.fromkeys(cell.label for cell in named if cell.cell_id is None))
    if unknown:
        return f"nbrefine does not know which notebook cell {' and '.join(unknown)} is"
    edits = []
    for change in plan.changes:
        expected, new = _change_sources(session, change)
        assert change.cell.cell_id is not None
        provenance = _provenance(session, original_source=expected)
        edits.append(cell_write(change.cell.cell_id, expected, new, dict(provenance)))
    moves: list[CellMove] = [
        {"cell_id": m.cell.cell_id or "", "above": m.above.cell_id or ""} for m in plan.moves
    ]
    return edits, moves, [cell.cell_id or "" for cell, _ in plan.runs]


def _change_sources(session: RefineSession, change: CellChange) -> tuple[str, str]:
    """A changed cell's source now (as the kernel knows it) and its new source, a ``%%refine``
    first line the notebook cell has kept above the fix. The failing cell's is the source it ran
    with; another cell's, the notebook's as the extension last sent it (``watch_cells``), when its
    code is the one the repair read; else the repair's own copy."""
    cell = change.cell
    if cell.cell_id is not None and cell.cell_id == session.cell_id and session.cell_source is not None:
        whole: str | None = session.cell_source
    else:
        known = current().notebook or ()
        whole = next((c.source for c in known if c.cell_id == cell.cell_id), None)
    new = _cell_source_with_fix(whole, cell.source, change.new_source) if whole is not None else None
    if whole is None or new is None:
        return cell.source, change.new_source
    return whole, new


def _plan_copy(plan: AcceptPlan) -> str:
    """A plan as code to copy where no extension writes it: each changed cell under its label,
    the moves as comments first."""
    parts = [f"# {m.label}" for m in plan.moves]
    parts += [f"# {c.label}\n{c.new_source.rstrip()}" for c in plan.changes]
    return "\n\n".join(parts)


def _cells(plan: AcceptPlan) -> str:
    """What a plan does to the notebook, in a few words: "2 cells changed", "1 cell moved"."""
    moved = {m.cell.key for m in plan.moves}
    changed = {c.cell.key for c in plan.changes} - moved
    parts = [
        f"{len(s)} cell{'s' if len(s) > 1 else ''} {what}"
        for s, what in ((moved, "moved"), (changed, "changed"))
        if s
    ]
    return ", ".join(parts)


def _ran_cells(ok: bool) -> str:
    return (
        "the cells ran in the kernel, in order, with the fix"
        if ok
        else "the cells raised when run in the kernel with the fix (see below)"
    )


def _provenance(session: RefineSession, *, original_source: str | None = None) -> FixProvenance:
    """The cell's provenance: the same keys ``nbrefine fix`` writes (engine/provenance.py);
    ``original_source``: that of another cell than the session's (a fix that spans cells)."""
    return fix_provenance(
        original_source=(session.cell_source or "") if original_source is None else original_source,
        attempts=len(counted_attempts(session.attempts)),
        provider=session.provider,
        model=session.model,
        verified=session.verified and not session.accepted_anyway,
        error_type=session.failure.error_type if session.failure is not None else None,
        explanation=session.explanation,
    )


def _ran(ok: bool) -> str:
    return "the fix ran in the kernel" if ok else "the fix raised when run in the kernel (see below)"

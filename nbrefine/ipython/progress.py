"""What ``%%refine`` prints: one line per step while the loop runs in the foreground, the line
that ends a failed cell (and stops "Run All" there), and the line ``%refine accept`` answers with.

May import: :mod:`nbrefine.engine` and the standard library (no IPython: it only prints).
"""

from __future__ import annotations

import time
from typing import Any

from ..engine import RefineSession, plain_summary

__all__ = ["Progress", "say_accepted", "stop_message"]


class Progress:
    """Prints one line per step while the loop runs here, and records timings on the session."""

    def __init__(self, session: RefineSession, failed_at: float) -> None:
        self.session = session
        self.failed_at = failed_at
        self.started = failed_at
        self.shown = 0  # attempt numbers as the user sees them: provider errors are not attempts

    def __call__(self, kind: str, payload: dict[str, Any]) -> None:
        now = time.perf_counter()
        timings = self.session.timings
        if kind == "request":
            timings.setdefault("prompt_ready_s", now - self.failed_at)
            self.started = now
            offset = len(self.session.attempts) - len(self.session.tries)  # earlier provider errors
            self.shown = payload["attempt"] - offset
            model = payload["model"]
            asking = "trying the offline quick fixes" if model == "quick-fixes" else f"asking {model}"
            print(f"nbrefine: attempt {self.shown} of {payload['of'] - offset}: {asking} …", flush=True)
        elif kind == "trial_start":
            timings.setdefault("reply_s", []).append(now - self.started)
            self.started = now
        elif kind == "trial_done":
            timings.setdefault("trial_s", []).append(now - self.started)
            timings.setdefault("trial_start_s", []).append(payload["start_latency_s"])
            summary = plain_summary(str(payload["summary"]), self.session.line_offset)
            verdict = "passed its trial run" if payload["status"] == "passed" else summary
            print(f"nbrefine:   attempt {self.shown}: {verdict}", flush=True)


def stop_message(session: RefineSession) -> str:
    """The one line that ends a failed %%refine cell (and stops "Run All" there). It does not
    repeat the error (the traceback and the panel say it) and stays true while the panel moves
    on: it points at the panel rather than at a state that is about to change."""
    stopped = "nbrefine: this cell failed, so Run All stopped here"
    if session.status == "hint":
        return f"{stopped}; see the help above (%refine hint asks for more)"
    if session.status == "running":
        return f"{stopped}; the repair is in the panel above"
    if session.status == "fixed":
        return f"{stopped}; a verified fix is ready above (Accept, or %refine accept)"
    if session.status == "changes_checks":
        return f"{stopped}; no verified fix, only a proposal that changes the checks (see above)"
    if session.status == "error":
        return f"{stopped}; nbrefine could not get a fix: {session.message}"
    return f"{stopped}; {session.headline().removeprefix('nbrefine: ')}"


def say_accepted(session: RefineSession, *, anyway: bool) -> None:
    """``%refine accept [--anyway]``: apply the fix and say how that went, in one line."""
    why = session.unverified_reason or session.accept_refused
    ok = session.accept(anyway=anyway)
    head = "accepted" if not anyway else "applied anyway" + (f", not verified ({why})" if why else "")
    print(
        f"nbrefine: {head}; the fix ran in the kernel"
        + ("" if ok else " and raised (see above)")
        + (f". Before that: {session.live_check}." if session.live_check else "")
    )

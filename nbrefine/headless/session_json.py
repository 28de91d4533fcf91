"""A ``%%refine`` session as JSON: the one view of a session that leaves its kernel.

A headless run (``nbrefine fix``, a batch job, ``nbrefine bench``) reads the session a cell made
through :class:`~nbrefine.headless.kernel.KernelDriver`; in the kernel, the in-kernel API
(``nbrefine.ipython.kernel_api``) computes it with :func:`session_json`. :class:`SessionJSON` is the
shape both sides agree on; the host imports only the TypedDicts.

May import: the engine (for annotations only) and the standard library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypedDict

if TYPE_CHECKING:
    from ..engine import Attempt, RefineSession, Status, StopReason, TeachingResult
    from ..engine.accept import AcceptPlan
    from ..engine.cause import Cause

__all__ = [
    "AttemptJSON",
    "CellChangeJSON",
    "FailureJSON",
    "PlanJSON",
    "SessionJSON",
    "TeachingJSON",
    "session_json",
]


class FailureJSON(TypedDict):
    error_type: str
    message: str
    one_line: str


class AttemptJSON(TypedDict):
    number: int
    ok: bool  # a verified fix
    error_type: str | None  # of its trial ("NoCode": the reply held no code)
    error_message: str
    outcome: str | None  # its trial's status
    summary: str
    note: str
    cycle: bool
    regression: bool
    declined: bool  # the provider declined (the offline tier has no fix)
    provider_error: bool
    model: str | None
    input_tokens: int
    output_tokens: int
    duration_s: float


class TeachingJSON(TypedDict):
    status: str  # "hint", "exhausted", "fix_loop" or "error"
    mode: str
    header: str
    text: str  # the hint or explanation given, or why there is none ("error")
    hints_used: int
    hint_cap: int | None
    withheld: int
    model: str


class CellChangeJSON(TypedDict):
    cell_id: str | None
    label: str  # "In [1] (cell 'search') · defines search"
    source: str  # the new source (as the user sees it: no %%refine line)
    diff: str


class PlanJSON(TypedDict):
    """What Accept does (engine/accept.py): read by ``nbrefine fix`` to write the cells."""

    spans_cells: bool
    note: str  # where the cause is, one sentence
    changes: list[CellChangeJSON]
    moves: list[dict[str, str | None]]  # {"cell_id", "above"}: moved just above that cell
    runs: list[dict[str, str | None]]  # {"cell_id", "source"}: run in this order


class SessionJSON(TypedDict):
    status: Status
    message: str
    stop_reason: StopReason | Literal[""]  # "": the loop has not stopped (or never ran)
    decision: str
    accept_ok: bool | None
    accept_refused: str
    original_code: str
    fixed_code: str | None
    explanation: str
    diff: str
    model: str
    failure: FailureJSON | None
    attempts: list[AttemptJSON]
    teaching: TeachingJSON | None
    cause: dict[str, Any] | None  # {"kind", "sentence", "cells": [cell ids]}; None: not found yet
    unchecked: str  # the fix runs, but nothing checks what it changes: a proposal ("" : not so)
    needs_review: list[str]  # what the fix adds that its cell did not do: never applied by itself
    plan: PlanJSON | None
    live_check: str  # what Accept found about the live state (and put back), "" : nothing


def session_json(s: RefineSession) -> SessionJSON:
    """``s`` as plain JSON data."""
    failure = s.failure
    return {
        "status": s.status,
        "message": s.message,
        "stop_reason": s.result.stop_reason if s.result is not None else "",
        "decision": s.decision,
        "accept_ok": s.accept_ok,
        "accept_refused": s.accept_refused,
        "original_code": s.original_code,
        "fixed_code": s.fixed_code,
        "explanation": s.explanation,
        "diff": s.diff(),
        "model": s.model,
        "failure": None
        if failure is None
        else {"error_type": failure.error_type, "message": failure.message, "one_line": failure.one_line()},
        "attempts": [_attempt(a) for a in s.attempts],
        "teaching": None if s.teaching is None else _teaching(s.teaching),
        "cause": None if s.cause is None else _cause(s.cause),
        "unchecked": s.unchecked,
        "needs_review": list(s.needs_review),
        "plan": None if s.plan is None else _plan(s.plan),
        "live_check": s.live_check,
    }


def _cause(c: Cause) -> dict[str, Any]:
    return {"kind": c.kind, "sentence": c.sentence(), "cells": [cell.cell_id for cell in c.causes]}


def _plan(p: AcceptPlan) -> PlanJSON:
    return {
        "spans_cells": p.spans_cells,
        "note": p.note,
        "changes": [
            {"cell_id": c.cell.cell_id, "label": c.label, "source": c.new_source, "diff": c.diff()}
            for c in p.changes
        ],
        "moves": [{"cell_id": m.cell.cell_id, "above": m.above.cell_id} for m in p.moves],
        "runs": [{"cell_id": cell.cell_id, "source": source} for cell, source in p.runs],
    }


def _attempt(a: Attempt) -> AttemptJSON:
    reply = a.reply
    return {
        "number": a.number,
        "ok": a.ok,
        "error_type": a.error_type,
        "error_message": a.error_message,
        "outcome": a.outcome.status if a.outcome is not None else None,
        "summary": a.summary(),
        "note": a.note,
        "cycle": a.cycle,
        "regression": a.regression,
        "declined": reply is not None and reply.stop_reason == "declined",
        "provider_error": a.note.startswith("provider error"),
        "model": reply.model if reply is not None else None,
        "input_tokens": reply.input_tokens if reply is not None else 0,
        "output_tokens": reply.output_tokens if reply is not None else 0,
        "duration_s": a.duration_s,
    }


def _teaching(t: TeachingResult) -> TeachingJSON:
    return {
        "status": t.status,
        "mode": t.mode,
        "header": t.step.header(),
        "text": t.text if t.status != "error" else t.message,
        "hints_used": t.hints_used,
        "hint_cap": t.hint_cap,
        "withheld": t.withheld,
        "model": t.model,
    }

"""The engine's contracts: statuses, attempts and results, and the events a run sends.

- :data:`Status`: the one list of what a repair came to, shared by the loop (its
  :class:`LoopResult`), the session, the CLI and the panel; :data:`StopReason`: why the loop stopped.
- :class:`Attempt` (one round: request, reply, candidate, trial) and :class:`LoopResult`.
- :class:`TrialRunner` (what runs a candidate's trial) and :data:`Verifier`.
- The events: ``on_event(kind, payload)`` gets one :data:`EventKind` and its payload, the
  :data:`LoopEvent` of that kind (a plain dict at run time, its ``"kind"`` included).

May import: the standard library, :mod:`nbrefine.providers.base` and :mod:`nbrefine.sandbox`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict, get_args

from ..providers.base import ProviderReply, ProviderRequest
from ..sandbox import TrialOutcome, TrialSpec, TrialStatus

__all__ = [
    "EVENT_KINDS",
    "STATUSES",
    "STOP_REASONS",
    "Attempt",
    "EventCallback",
    "EventKind",
    "GuardDoneEvent",
    "LoopEvent",
    "LoopResult",
    "ReplyEvent",
    "RequestEvent",
    "Status",
    "StopReason",
    "TeachingReplyEvent",
    "TeachingRequestEvent",
    "TextEvent",
    "TrialDoneEvent",
    "TrialRunner",
    "TrialStartEvent",
    "Verifier",
    "emit",
]

# --------------------------------------------------------------------------- statuses

#: What a repair came to. The loop ends with ``fixed`` (a verified fix), ``changes_checks`` (only
#: an unverified proposal: it passed by changing the checks), ``unfixed``, ``budget`` (stopped by
#: the budget), ``interrupted`` or ``error`` (the provider or the sandbox failed); a session is also
#: ``running``, ``no_error`` (the cell ran without error) or ``hint`` (a teaching turn answered).
Status = Literal[
    "running",
    "no_error",
    "fixed",
    "changes_checks",
    "unfixed",
    "budget",
    "interrupted",
    "error",
    "hint",
]
STATUSES: tuple[Status, ...] = get_args(Status)

#: Why the loop stopped.
StopReason = Literal[
    "passed",
    "max_attempts",
    "cycle",
    "regression",
    "declined",
    "provider_error",
    "sandbox_error",
    "budget",
    "interrupted",
]
STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)


# --------------------------------------------------------------------------- attempts and results


class TrialRunner(Protocol):
    def run(self, spec: TrialSpec) -> TrialOutcome: ...


#: ``verify(candidate, outcome)``: why a passed trial does not count as verified ("" when it does).
Verifier = Callable[[str, TrialOutcome], str]


@dataclass
class Attempt:
    """One round: the request sent, the reply, the candidate and what its trial did."""

    number: int
    request: ProviderRequest
    reply: ProviderReply | None = None
    code: str | None = None
    explanation: str = ""
    outcome: TrialOutcome | None = None
    note: str = ""
    regression: bool = False
    cycle: bool = False
    provider_s: float = 0.0
    extra_replies: list[ProviderReply] = field(default_factory=list)  # best-of-N: the other replies
    alternatives: list[tuple[str, TrialOutcome]] = field(default_factory=list)  # and their trials
    alternative_reasons: list[str] = field(default_factory=list)  # why a passing one is not verified
    #: why its passed trial does not count as verified ("" when it does or did not pass)
    changes_checks: str = ""
    #: how long before its (last) reply was in the earliest of the trials it used started, its code
    #: block complete in the stream (nbrefine.engine.early): the wait saved at most; 0.0: none early
    trial_early_s: float = 0.0

    @property
    def replies(self) -> list[ProviderReply]:
        """Every reply this attempt paid for."""
        return ([self.reply] if self.reply else []) + self.extra_replies

    @property
    def passed(self) -> bool:
        """Its trial passed (verified or not)."""
        return self.outcome is not None and self.outcome.ok

    @property
    def ok(self) -> bool:
        """It is a verified fix: its trial passed and it left the checks alone."""
        return self.passed and not self.changes_checks

    @property
    def error_type(self) -> str | None:
        if self.outcome is not None:
            return self.outcome.error_type
        return "NoCode" if self.code is None else "Cycle"

    @property
    def error_message(self) -> str:
        if self.changes_checks:
            return f"changes the checks: {self.changes_checks}"
        return self.outcome.error_message if self.outcome is not None else self.note

    @property
    def stdout(self) -> str:
        return self.outcome.stdout if self.outcome is not None else ""

    @property
    def duration_s(self) -> float:
        return self.provider_s + (self.outcome.duration_s if self.outcome is not None else 0.0)

    def summary(self) -> str:
        text = self.outcome.one_line() if self.outcome is not None else self.note
        if self.changes_checks:
            text = f"changes the checks: {self.changes_checks} (its trial {text})"
        return text + (f" [{self.note}]" if self.note and self.outcome is not None else "")

    def feedback(self) -> str:
        text = self.outcome.render() if self.outcome is not None else self.note
        if self.changes_checks:
            text += (
                f"\nNot counted as a fix: it changes the checks ({self.changes_checks}). Keep every "
                "assert of the cell and every extra check, do not hide errors with try/except, and "
                "do not touch nbrefine or the trial process."
            )
        return text


@dataclass
class LoopResult:
    status: Status  # one the loop ends with (see Status)
    stop_reason: StopReason
    message: str
    attempts: list[Attempt] = field(default_factory=list)
    fixed_code: str | None = None  # the fix; with status "changes_checks", the unverified proposal
    explanation: str = ""
    unverified: str = ""  # status "changes_checks": why the proposal is not verified

    @property
    def input_tokens(self) -> int:
        return sum(r.input_tokens for a in self.attempts for r in a.replies)

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for a in self.attempts for r in a.replies)


# --------------------------------------------------------------------------- events

EventKind = Literal[
    "request",  # the loop sends attempt N's request
    "text",  # a piece of the streamed reply
    "reply",  # the whole reply is in
    "trial_start",  # a candidate's trial starts
    "trial_done",  # and ended
    "teaching_request",  # a teaching turn asks its tutor
    "teaching_reply",  # the tutor answered (not shown before the guard checked it)
    "guard_done",  # the guard checked the code in that answer
]
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)


class RequestEvent(TypedDict):
    kind: Literal["request"]
    attempt: int  # numbered from 1 over the session's runs ("Try again" goes on counting)
    of: int  # the last attempt this run may make
    chars: int  # the prompt's length
    provider: str
    model: str


class TextEvent(TypedDict):
    kind: Literal["text"]
    text: str


class ReplyEvent(TypedDict):
    kind: Literal["reply"]
    attempt: int
    chars: int


class TrialStartEvent(TypedDict):
    kind: Literal["trial_start"]
    attempt: int


class TrialDoneEvent(TypedDict):
    kind: Literal["trial_done"]
    attempt: int
    status: TrialStatus
    summary: str  # TrialOutcome.one_line()
    start_latency_s: float


class TeachingRequestEvent(TypedDict):
    kind: Literal["teaching_request"]
    step: str  # "Hint 2 of 3", ...
    provider: str
    model: str


class TeachingReplyEvent(TypedDict):
    kind: Literal["teaching_reply"]
    chars: int


class GuardDoneEvent(TypedDict):
    kind: Literal["guard_done"]
    withheld: int
    checked: int
    trials: int


LoopEvent = (
    RequestEvent
    | TextEvent
    | ReplyEvent
    | TrialStartEvent
    | TrialDoneEvent
    | TeachingRequestEvent
    | TeachingReplyEvent
    | GuardDoneEvent
)

#: ``on_event(kind, payload)``: ``payload`` is the :data:`LoopEvent` of that kind. The adapters
#: (panel, terminal progress) read it as a dict, so the callback's type says ``dict``.
EventCallback = Callable[[EventKind, dict[str, Any]], None]


def emit(on_event: EventCallback | None, event: LoopEvent) -> None:
    """Send ``event`` to ``on_event`` (if any); it gets a copy, so it cannot change ours."""
    if on_event is not None:
        on_event(event["kind"], dict(event))

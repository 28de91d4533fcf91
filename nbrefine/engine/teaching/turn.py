"""One teaching turn: the next explanation or hint for a failing cell, guarded before it is shown.

May import: the standard library, :mod:`nbrefine._errors`, :mod:`nbrefine.grounding`,
:mod:`nbrefine.providers.base`, :mod:`nbrefine.sandbox`, the engine's loop and prompt, and the
modules of this package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..._errors import ProviderError
from ...grounding.redaction import Redactor
from ...providers.base import DECLINED, Provider, ProviderReply, ProviderRequest
from ...sandbox import TrialPolicy
from ..prompt import RepairTask
from ..types import EventCallback, TrialRunner, emit
from .guard import GuardedReply, guard_reply
from .hints import HintLedger, StepKind, TeachingStep, exhausted_text, next_step
from .policy import TeachingPolicy
from .prompt import teaching_request
from .tutor import OfflineTutor

#: What one request for help came to (see :class:`TeachingResult`).
TeachingStatus = Literal["hint", "exhausted", "fix_loop", "error"]


@dataclass(frozen=True)
class TeachingResult:
    """The outcome of one request for help in a teaching mode.

    ``status``: ``"hint"`` (``text`` is the guarded explanation or hint to show), ``"exhausted"``
    (no hints left: ``text`` says so kindly), ``"fix_loop"`` (fix mode, or the solution the
    graduated policy allows: run the normal repair loop) or ``"error"`` (``message`` says why;
    nothing was counted)."""

    step: TeachingStep
    status: TeachingStatus
    text: str = ""
    mode: str = "fix"
    hints_used: int = 0
    hint_cap: int | None = None
    next_kind: StepKind = "exhausted"  # what asking again gives: next_step(...).kind
    withheld: int = 0
    checked: int = 0
    message: str = ""
    provider: str = ""
    model: str = ""
    request: ProviderRequest | None = field(default=None, repr=False)
    reply: ProviderReply | None = field(default=None, repr=False)
    guard: GuardedReply | None = field(default=None, repr=False)

    @property
    def last_note(self) -> str:
        """ "That was the last hint for this cell." under the last one ('' under the others): the
        header ("Hint 3 of 3") already says how many there are, so nothing else counts them."""
        if self.status != "hint" or self.next_kind == self.step.kind:
            return ""
        return f"That was the last {'explanation' if self.mode == 'explain' else 'hint'} for this cell."

    @property
    def more_available(self) -> bool:
        """Whether asking again gives another hint (or the solution the policy allows)."""
        return self.next_kind not in ("exhausted", "fix")

    @property
    def next_label(self) -> str:
        """The label of the panel's button that asks again ('' when there is nothing more)."""
        return {
            "hint": "Another hint",
            "explain": "Explain again",
            "solution": "Show the full solution",
        }.get(self.next_kind, "")

    def render(self, *, header: bool = True) -> str:
        """Plain text for a terminal or a text panel: the header ("Hint 2 of 3"; left out with
        ``header=False``, under a headline that says it), the text, the note under the last one."""
        parts = [self.step.header() if header else ""]
        parts += [self.text if self.status != "error" else self.message, self.last_note]
        return "\n\n".join(p for p in parts if p)


def teach(
    task: RepairTask,
    provider: Provider,
    runner: TrialRunner,
    redactor: Redactor,
    policy: TeachingPolicy,
    *,
    ledger: HintLedger,
    key: str,
    timeout_s: float = 10.0,
    trial_policy: TrialPolicy | None = None,
    max_tokens: int = 800,
    budget: int = 12000,
    user_note: str = "",
    on_event: EventCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> TeachingResult:
    """Give the next explanation or hint for the failing cell ``key`` under ``policy``.

    The reply never streams to the student: it is shown only after :func:`guard_reply` has
    checked it. With :class:`OfflineTutor` as ``provider`` no model is asked. A reply that is
    all code (withheld) or declined gets nbrefine's own hint at the same level instead.
    ``KeyboardInterrupt`` propagates when ``should_stop`` turns true while the reply streams."""
    used = ledger.used(key)
    step = next_step(policy, used)
    common: dict[str, Any] = {"mode": policy.mode, "hint_cap": policy.hint_cap}
    if step.runs_fix_loop:
        return TeachingResult(step, "fix_loop", hints_used=used, next_kind=step.kind, **common)
    if step.kind == "exhausted":
        return TeachingResult(
            step, "exhausted", exhausted_text(policy), hints_used=used, next_kind="exhausted", **common
        )
    mode = "explain" if step.kind == "explain" else "hint"
    level = step.level or 1
    request = teaching_request(
        task,
        redactor,
        mode=mode,
        level=level,
        previous_hints=ledger.hints(key),
        budget=budget,
        max_tokens=max_tokens,
        number=step.number,
        total=step.total,
        user_note=user_note,
    )
    emit(
        on_event,
        {
            "kind": "teaching_request",
            "step": step.header(),
            "provider": provider.name,
            "model": provider.model,
        },
    )

    def check_stop(_piece: str) -> None:  # pieces are never shown: only the guarded whole is
        if should_stop is not None and should_stop():
            raise KeyboardInterrupt

    tutor = OfflineTutor()
    grounding: dict[str, Any] = {"runner": runner, "timeout_s": timeout_s, "policy": trial_policy}
    try:
        if isinstance(provider, OfflineTutor):
            reply = provider.reply(task, mode=mode, level=level, **grounding)
        else:
            reply = provider.complete(request, check_stop)
    except ProviderError as err:
        message = (
            f"nbrefine couldn't get a hint this time ({err}). Nothing was counted, so you can ask again."
        )
        return TeachingResult(
            step, "error", message=message, hints_used=used, next_kind=step.kind, request=request, **common
        )
    emit(on_event, {"kind": "teaching_reply", "chars": len(reply.text)})
    text = reply.text if reply.stop_reason != DECLINED else ""
    guarded = guard_reply(text, task, runner, timeout_s=timeout_s, policy=trial_policy)
    emit(
        on_event,
        {
            "kind": "guard_done",
            "withheld": guarded.withheld,
            "checked": guarded.checked,
            "trials": guarded.trials,
        },
    )
    shown = guarded.text.strip()
    if len(" ".join(guarded.prose.split())) < 40:  # nothing much left: nbrefine's own hint too
        own = tutor.reply(task, mode=mode, level=level, **grounding).text
        what = "explanation" if mode == "explain" else "hint"
        instead = f"Here is nbrefine's own {what} instead: {own}" if shown else own
        shown = "\n\n".join(p for p in (guarded.prose, f"{guarded.note} {instead}".strip()) if p)
    hints_used = ledger.record(key, shown)
    return TeachingResult(
        step,
        "hint",
        shown,
        hints_used=hints_used,
        next_kind=next_step(policy, hints_used).kind,
        withheld=guarded.withheld,
        checked=guarded.checked,
        provider=provider.name,
        model=reply.model,
        request=request,
        reply=reply,
        guard=guarded,
        **common,
    )

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
from .rewrite import complete_sentences, prose_words, reads_whole
from .tutor import OfflineTutor
from .tutor_prompt import teaching_request

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
    requests: int = 0  # how many times the tutor was asked for this one (asked again: 2)

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


#: Leftovers of a reply with code withheld that are too little to help: under this share of the
#: reply's words, under this many words, or no complete sentence (:func:`too_little_left`).
LEFT_SHARE = 0.4
LEFT_WORDS = 12


def too_little_left(text: str, guarded: GuardedReply) -> bool:
    """Whether what the guard left of the reply ``text`` is too little to show as a hint: under
    40 characters, or, with code withheld, under :data:`LEFT_WORDS` words, under :data:`LEFT_SHARE`
    of the reply's words, or no complete sentence."""
    prose = guarded.prose
    if len(" ".join(prose.split())) < 40:
        return True
    if not guarded.withheld:
        return False
    left = prose_words(prose)
    return left < LEFT_WORDS or left < LEFT_SHARE * prose_words(text) or not complete_sentences(prose)


def why_not_shown(guarded: GuardedReply, mode: str = "hint") -> str:
    """For the request that asks again: what the guard withheld from the last reply, and why
    ("Your last hint quoted code that is the fix itself (`lst = new`): describe what to look at
    without writing it.")."""
    noun = "explanation" if mode == "explain" else "hint"
    withheld = [s for s in guarded.snippets if s.withheld]
    quoted = [
        s.code.strip()
        for s in withheld
        if s.kind != "block"
        and "\n" not in s.code.strip()
        and "`" not in s.code
        and len(s.code.strip()) <= 80
    ]
    shown = ", ".join(f"`{code}`" for code in list(dict.fromkeys(quoted))[:3])
    safe = bool(withheld) and all("to be safe" in s.reason for s in withheld)
    what = "code that nbrefine could not check in time" if safe else "code that is the fix itself"
    if shown:
        first = f"Your last {noun} quoted {what} ({shown}): describe what to look at without writing it."
    else:
        first = f"Your last {noun} held {what}, in a block: describe what to look at without writing it."
    return (
        f"{first} nbrefine withholds such code from the student, and too little of your {noun} was "
        "left without it to help, so it was not shown. Write it again in words only: name the cell "
        "line and what to look at there, without that code, a corrected line or any other code that "
        "would make the cell pass."
    )


def _asks_again(guarded: GuardedReply) -> bool:
    """Whether a reply left too little is worth asking again for: its withheld code was written
    into the prose (quoted in a sentence), as a model trying to write a hint does. One that
    answered with a block of code gets nbrefine's own hint at once, as before."""
    return any(s.withheld and s.kind != "block" for s in guarded.snippets)


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
    max_requests: int = 2,
) -> TeachingResult:
    """Give the next explanation or hint for the failing cell ``key`` under ``policy``.

    The reply never streams to the student: it is shown only after :func:`guard_reply` has
    checked it. With :class:`OfflineTutor` as ``provider`` no model is asked. When the guard
    withheld code quoted in the reply's sentences and too little is left (:func:`too_little_left`),
    the tutor is asked again for the same hint, up to ``max_requests`` requests in all, each
    request after the first saying what was withheld and why (:func:`why_not_shown`); the hint
    counts once. A reply still left too little, one that is all code in a block, or declined gets
    nbrefine's own hint at the same level instead, after what is left of it when that reads whole.
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

    def check_stop(_piece: str) -> None:  # pieces are never shown: only the guarded whole is
        if should_stop is not None and should_stop():
            raise KeyboardInterrupt

    tutor = OfflineTutor()
    grounding: dict[str, Any] = {"runner": runner, "timeout_s": timeout_s, "policy": trial_policy}
    answers: list[_Answer] = []
    not_shown = ""
    while True:
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
            not_shown=not_shown,
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
        try:
            if isinstance(provider, OfflineTutor):
                reply = provider.reply(task, mode=mode, level=level, **grounding)
            else:
                reply = provider.complete(request, check_stop)
        except ProviderError as err:
            if answers:  # asking again failed: what the first answers give, or nbrefine's own hint
                break
            message = (
                f"nbrefine couldn't get a hint this time ({err}). Nothing was counted, so you can ask again."
            )
            return TeachingResult(
                step,
                "error",
                message=message,
                hints_used=used,
                next_kind=step.kind,
                request=request,
                requests=1,
                **common,
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
        answers.append(_Answer(request, reply, text, guarded))
        if not too_little_left(text, guarded):
            break
        asked_all = len(answers) >= max_requests or isinstance(provider, OfflineTutor)
        if asked_all or not _asks_again(guarded):
            break
        not_shown = why_not_shown(guarded, mode)
    last = answers[-1]
    request, reply, guarded = last.request, last.reply, last.guarded
    shown = guarded.text.strip()
    if too_little_left(last.text, guarded):  # nothing much left: nbrefine's own hint too
        own = tutor.reply(task, mode=mode, level=level, **grounding).text
        guarded, prose = _best_leftover(answers)
        note = guarded.note
        what = "explanation" if mode == "explain" else "hint"
        instead = f"Here is nbrefine's own {what} instead: {own}" if prose or note else own
        shown = "\n\n".join(p for p in (prose, f"{note} {instead}".strip()) if p)
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
        requests=len(answers),
        **common,
    )


@dataclass(frozen=True)
class _Answer:
    """One request to the tutor for this hint, its reply, the reply's text and what the guard
    made of it."""

    request: ProviderRequest
    reply: ProviderReply
    text: str
    guarded: GuardedReply


def _best_leftover(answers: list[_Answer]) -> tuple[GuardedReply, str]:
    """Of the answers left too little, the one whose leftover reads whole and is longest (the
    latest of equals), with that leftover, to show above nbrefine's own hint; when none reads
    whole, the last answer without its leftover (its note still says what was withheld)."""
    whole = [a.guarded for a in answers if a.guarded.prose and reads_whole(a.guarded.prose)]
    if whole:
        best = max(reversed(whole), key=lambda g: prose_words(g.prose))
        return best, best.prose
    return answers[-1].guarded, ""

"""The refine loop: ask, trial, feed back; stop on a pass, the attempt cap, a cycle or regressions.

:func:`refine` runs up to ``max_attempts`` attempts for a :class:`~nbrefine.engine.prompt.RepairTask`
(after any earlier ones), sends its events to ``on_event`` and returns a
:class:`~nbrefine.engine.types.LoopResult`. Best-of-N asks for several candidates per round. With
``early_trials``, a candidate's trial starts while its reply still streams (:mod:`.early`).

May import: the standard library, :mod:`nbrefine._errors`, the layers below the engine, and the
engine's types, prompt, early and verify.
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import time
import tokenize
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from .._errors import ProviderError
from ..grounding.redaction import Redactor
from ..providers.base import DECLINED, Provider, ProviderReply, ProviderRequest, TextCallback
from ..sandbox import TrialOutcome, TrialPolicy, TrialSpec
from .early import CandidateKey, EarlyTrials, StreamedReply, candidate_key
from .prompt import ParsedReply, RepairTask, build_request, parse_reply
from .types import (
    Attempt,
    EventCallback,
    LoopResult,
    Status,
    StopReason,
    TrialRunner,
    Verifier,
    emit,
)
from .verify import ChecksVerifier

__all__ = ["LoopConfig", "normalize_code", "refine", "verifier_for"]


def _plain(code: str) -> str:
    return code


@dataclass(frozen=True)
class LoopConfig:
    max_attempts: int = 3
    timeout_s: float = 10.0
    max_tokens: int = 4096
    prompt_budget: int = 16000
    regressions_to_stop: int = 2
    trial_policy: TrialPolicy = field(default_factory=TrialPolicy)
    #: Called with this run's attempts before each new one; a reason (one line) stops the loop
    #: with status "budget".
    budget: Callable[[list[Attempt]], str | None] | None = None
    candidates: int = 1  # best-of-N: candidates asked for per round (in parallel)
    #: Turns IPython syntax into Python before a candidate is read (the trial runner does the same).
    transform: Callable[[str], str] = _plain
    #: What "verified" means for this task; None: :class:`nbrefine.engine.verify.ChecksVerifier` for the task.
    verifier: Verifier | None = None
    #: Reads a reply into a candidate (a repair that spans cells reads labelled blocks per cell).
    parse: Callable[[str], ParsedReply] = parse_reply
    #: Start a candidate's trial as soon as its code block is complete in the stream (best-of-N: as
    #: soon as its reply is in), on the loop's thread while the reply streams in another. Only for
    #: runners that do not fork the calling process (a Snapshot forks in its own process, a
    #: SpawnRunner execs): a LiveForkRunner would fork the kernel while the stream's thread runs,
    #: whose locks the child would inherit held. Off unless asked: the job asks for it where its
    #: runner allows it (``Refine.early_trials``).
    early_trials: bool = False


def verifier_for(task: RepairTask, config: LoopConfig) -> Verifier:
    """The verifier the loop (and Accept) use for ``task``."""
    if config.verifier is not None:
        return config.verifier
    return ChecksVerifier.for_failures(
        task.code, task.failures, len(task.checks), label=task.label, transform=config.transform
    )


def _diff_size(old: str, new: str) -> int:
    """How many lines a candidate changes (best-of-N prefers the smallest change)."""
    return sum(
        1
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="")
        if line[:1] in "+-"
    )


def _smallest_first(old: str, new: str) -> tuple[int, int, str]:
    """Best-of-N's order among passing candidates: the smallest change, then the shortest code,
    then the code itself, so that the choice never depends on which reply came in first."""
    return _diff_size(old, new), len(new), new


def normalize_code(code: str) -> str:
    """Equal for candidates that differ only in whitespace and comments."""
    try:
        return ast.dump(ast.parse(code))
    except (SyntaxError, ValueError):
        pass
    try:
        tokens = tokenize.generate_tokens(io.StringIO(code).readline)
        kept = [t.string for t in tokens if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT)]
        return " ".join(kept)
    except (tokenize.TokenError, SyntaxError):
        return re.sub(r"\s+", " ", re.sub(r"#[^\n]*", "", code)).strip()


def _baseline_progress(task: RepairTask) -> tuple[int, int, int]:
    in_code = [f for f in task.failures if f.where == task.label]
    if in_code:
        return (0, in_code[0].statements_done, 0)
    return (1, 10**6, -len(task.failures))


class _Loop:
    def __init__(
        self,
        task: RepairTask,
        provider: Provider,
        runner: TrialRunner,
        redactor: Redactor,
        config: LoopConfig,
        on_event: EventCallback | None,
        user_note: str,
        earlier: list[Attempt],
        should_stop: Callable[[], bool],
    ) -> None:
        self.task, self.provider, self.runner, self.redactor = task, provider, runner, redactor
        self.config, self.user_note, self.should_stop = config, user_note, should_stop
        self.on_event = on_event
        self.verify = verifier_for(task, config)
        self.attempts: list[Attempt] = list(earlier)
        self.first_attempt = len(earlier) + 1
        self.seen_code = {normalize_code(task.code): 0}
        self.seen_errors: dict[str, int] = {}
        self.best_progress = _baseline_progress(task)
        self.regressions_in_row = 0
        self.early = self._early_trials()
        self.replies_in: float | None = None  # when this attempt's (last) reply was in
        for attempt in earlier:  # "Try again": carry on from earlier rounds
            if attempt.code is not None:
                self.seen_code.setdefault(normalize_code(attempt.code), attempt.number)
            failure = attempt.outcome.first_failure if attempt.outcome else None
            if failure is not None:
                self.seen_errors.setdefault(failure.signature(), attempt.number)
            if attempt.outcome is not None and not attempt.regression and not attempt.changes_checks:
                self.best_progress = max(self.best_progress, attempt.outcome.progress())

    def run(self) -> LoopResult:
        first = self.first_attempt
        try:
            for number in range(first, first + self.config.max_attempts):
                if self.should_stop():
                    raise KeyboardInterrupt
                over = self.config.budget(self.attempts[first - 1 :]) if self.config.budget else None
                if over:
                    return self._result("budget", "budget", over)
                stop = self._one_attempt(number)
                if stop is not None:
                    return stop
        except KeyboardInterrupt:
            return self._result("interrupted", "interrupted", "Interrupted: the refine loop was stopped.")
        return self._result(
            "unfixed", "max_attempts", f"No candidate passed in {len(self.attempts)} attempt(s)."
        )

    def _one_attempt(self, number: int) -> LoopResult | None:
        request = build_request(
            self.task,
            self.attempts,
            self.redactor,
            budget=self.config.prompt_budget,
            max_tokens=self.config.max_tokens,
            user_note=self.user_note,
        )
        attempt = Attempt(number, request)
        self.attempts.append(attempt)
        emit(
            self.on_event,
            {
                "kind": "request",
                "attempt": number,
                "of": self.first_attempt + self.config.max_attempts - 1,
                "chars": len(request.user),
                "provider": self.provider.name,
                "model": self.provider.model,
            },
        )
        started = time.monotonic()
        self.early, self.replies_in = self._early_trials(), None
        try:
            replies = self._ask(request)
        except ProviderError as err:
            attempt.note = f"provider error: {err}"
            return self._result("error", "provider_error", str(err))
        finally:  # until the reply was in, not until an early trial that outlasts it is done
            attempt.provider_s = (self.replies_in or time.monotonic()) - started
        attempt.reply, attempt.extra_replies = replies[0], replies[1:]
        emit(self.on_event, {"kind": "reply", "attempt": number, "chars": len(attempt.reply.text)})
        if len(replies) > 1:
            return self._best_of(attempt, replies)
        if attempt.reply.stop_reason == DECLINED:
            attempt.note = f"declined: {attempt.reply.text.strip()}"
            return self._result("unfixed", "declined", attempt.reply.text.strip())
        parsed = self.config.parse(attempt.reply.text)
        attempt.code, attempt.explanation = parsed.code, parsed.explanation
        if parsed.code is None and parsed.declined:
            attempt.note = f"declined: {parsed.reason}"
            return self._result("unfixed", "declined", parsed.explanation or str(parsed.reason))
        if parsed.code is None:
            attempt.note = f"no code: {parsed.reason}"
            return None
        earlier = self.seen_code.get(normalize_code(parsed.code))
        if earlier is not None:
            attempt.cycle = True
            repeated = "the original cell" if earlier == 0 else f"attempt {earlier}"
            attempt.note = f"same code as {repeated}"
            return self._result("unfixed", "cycle", f"Stopped: attempt {number} repeated {repeated}.")
        self.seen_code[normalize_code(parsed.code)] = number
        return self._judge(attempt, parsed)

    def _ask(self, request: ProviderRequest) -> list[ProviderReply]:
        """One reply, or ``config.candidates`` replies asked for in parallel (the first streams)."""
        count = max(self.config.candidates, 1)
        if count == 1 and self.config.early_trials:
            stream = StreamedReply(self.provider.complete, self.config.parse, self.early)
            reply, self.replies_in = stream.ask(request, self._on_text, self._fresh)
            return [reply]
        if count == 1:
            return [self.provider.complete(request, self._on_text)]
        with ThreadPoolExecutor(max_workers=count) as pool:
            futures = [pool.submit(self._complete_timed, request, self._on_text if i == 0 else None)
                       for i in range(count)]  # fmt: skip
            if self.config.early_trials:
                self._try_as_they_arrive(futures)
            timed = [future.result() for future in futures]  # the first error, as without early trials
        self.replies_in = max(ended for _, ended in timed)
        return [reply for reply, _ in timed]

    def _complete_timed(
        self, request: ProviderRequest, on_text: TextCallback | None
    ) -> tuple[ProviderReply, float]:
        return self.provider.complete(request, on_text), time.monotonic()

    def _try_as_they_arrive(self, futures: list[Future[tuple[ProviderReply, float]]]) -> None:
        """Best-of-N: trial each reply's candidate once that reply is in, while the others stream;
        where the runner runs several trials at once (a snapshot with twins), in parallel."""
        at_once = getattr(self.runner, "at_once", 1)
        if not isinstance(at_once, int) or at_once < 2:
            for key in self._arriving(futures):
                self.early.run(key)
            return
        with ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="nbrefine-trial") as trials:
            running = []
            try:
                running = [trials.submit(self.early.run, key) for key in self._arriving(futures)]
                for trial in running:
                    trial.result()
            except BaseException:
                self.early.cancel_all()  # an interrupt: the trials under way go too
                raise

    def _arriving(self, futures: list[Future[tuple[ProviderReply, float]]]) -> Iterator[CandidateKey]:
        """The fresh candidates of the replies, in the order they come in."""
        for future in as_completed(futures):
            if future.exception() is not None:
                continue  # raised in turn by the caller
            reply, _ = future.result()
            if self.should_stop():
                raise KeyboardInterrupt
            key = None if reply.stop_reason == DECLINED else candidate_key(self.config.parse(reply.text))
            if key is not None and self._fresh(key[0]):
                yield key

    def _early_trials(self) -> EarlyTrials:
        cancel = getattr(self.runner, "cancel", None)
        return EarlyTrials(self._run_trial, cancel if callable(cancel) else None)

    def _fresh(self, code: str) -> bool:
        """Not a repeat of the cell or an earlier candidate (a repeat is a cycle, never tried)."""
        return normalize_code(code) not in self.seen_code

    def _best_of(self, attempt: Attempt, replies: list[ProviderReply]) -> LoopResult | None:
        """Trial every new candidate; keep the passing one with the smallest diff, else the best."""
        parsed = [self.config.parse(r.text) for r in replies if r.stop_reason != DECLINED]
        if not parsed:
            attempt.note = f"declined: {replies[0].text.strip()}"
            return self._result("unfixed", "declined", replies[0].text.strip())
        fresh: dict[str, ParsedReply] = {}
        for candidate in parsed:
            if candidate.code is not None and normalize_code(candidate.code) not in self.seen_code:
                fresh.setdefault(normalize_code(candidate.code), candidate)
        if not fresh:
            with_code = [c for c in parsed if c.code is not None]
            attempt.code = with_code[0].code if with_code else None
            attempt.cycle = bool(with_code)
            attempt.note = (
                "every candidate repeated earlier code" if with_code else "no code in any candidate"
            )
            return self._result("unfixed", "cycle", f"Stopped: {attempt.note}.") if with_code else None
        tried = [(c, self._trial(attempt, c)) for c in fresh.values()]
        for key in fresh:
            self.seen_code[key] = attempt.number
        why = [self.verify(c.code or "", o) if o.ok else "" for c, o in tried]
        verified = [pair for pair, reason in zip(tried, why, strict=True) if pair[1].ok and not reason]
        passing = verified or [pair for pair in tried if pair[1].ok]  # unverified only as a last resort
        chosen = (
            min(passing, key=lambda pair: _smallest_first(self.task.code, pair[0].code or ""))
            if passing
            else max(tried, key=lambda pair: pair[1].progress())
        )
        attempt.code, attempt.explanation = chosen[0].code, chosen[0].explanation
        others = [(c.code or "", o, r) for (c, o), r in zip(tried, why, strict=True) if c is not chosen[0]]
        attempt.alternatives = [(code, outcome) for code, outcome, _ in others]
        attempt.alternative_reasons = [reason for _, _, reason in others]
        return self._judge_outcome(attempt, chosen[1])

    def _trial(self, attempt: Attempt, candidate: ParsedReply) -> TrialOutcome:
        """The outcome of ``candidate``'s trial: the early one of exactly this candidate, else one
        run now. Its events come after the reply either way, as without early trials."""
        emit(self.on_event, {"kind": "trial_start", "attempt": attempt.number})
        early = self.early.take(candidate_key(candidate))
        if early is not None:
            outcome = early.outcome
            ahead = (self.replies_in or early.started) - early.started
            attempt.trial_early_s = max(attempt.trial_early_s, ahead)
        else:
            outcome = self._run_trial(candidate.code or "")
        emit(
            self.on_event,
            {
                "kind": "trial_done",
                "attempt": attempt.number,
                "status": outcome.status,
                "summary": outcome.one_line(),
                "start_latency_s": outcome.start_latency_s,
            },
        )
        return outcome

    def _run_trial(self, code: str) -> TrialOutcome:
        spec = TrialSpec(
            code=code,
            checks=self.task.checks,
            timeout_s=self.config.timeout_s,
            policy=self.config.trial_policy,
        )
        return self.runner.run(spec)

    def _on_text(self, piece: str) -> None:
        if self.should_stop():
            raise KeyboardInterrupt  # ends the stream; the loop reports "interrupted"
        emit(self.on_event, {"kind": "text", "text": piece})

    def _judge(self, attempt: Attempt, candidate: ParsedReply) -> LoopResult | None:
        return self._judge_outcome(attempt, self._trial(attempt, candidate))

    def _judge_outcome(self, attempt: Attempt, outcome: TrialOutcome) -> LoopResult | None:
        attempt.outcome = outcome
        if outcome.ok:
            attempt.changes_checks = self.verify(attempt.code or "", outcome)
            if not attempt.changes_checks:
                return self._result("fixed", "passed", f"Fixed at attempt {attempt.number}.", attempt)
            return None  # it passed by changing what is checked: keep looking for a verified fix
        if outcome.status == "sandbox_error":
            return self._result("error", "sandbox_error", f"The trial sandbox failed: {outcome.detail}")
        signature = outcome.first_failure.signature() if outcome.first_failure else outcome.status
        earlier = self.seen_errors.get(signature)
        if earlier is not None:
            attempt.cycle = True
            attempt.note = f"same error as attempt {earlier}"
            return self._result(
                "unfixed",
                "cycle",
                f"Stopped: attempt {attempt.number} failed with the same error as {earlier}.",
            )
        self.seen_errors[signature] = attempt.number
        return self._check_regression(attempt, outcome)

    def _check_regression(self, attempt: Attempt, outcome: TrialOutcome) -> LoopResult | None:
        progress = outcome.progress()
        if progress < self.best_progress:
            attempt.regression = True
            attempt.note = "regression: it fails earlier or fails more checks than its predecessor"
            self.regressions_in_row += 1
            if self.regressions_in_row >= self.config.regressions_to_stop:
                return self._result(
                    "unfixed",
                    "regression",
                    f"Stopped: {self.regressions_in_row} attempts in a row made it worse.",
                )
            return None
        self.best_progress = progress
        self.regressions_in_row = 0
        return None

    def _result(
        self, status: Status, reason: StopReason, message: str, fixed: Attempt | None = None
    ) -> LoopResult:
        refused = [a.outcome.detail for a in self.attempts if a.outcome and a.outcome.status == "refused"]
        if status == "unfixed" and refused:
            message += (
                f" The sandbox refused: {refused[-1]} (see the --allow-network/-subprocess/-writes options)."
            )
        proposal = next((a for a in reversed(self.attempts) if a.changes_checks), None)
        if status == "unfixed" and proposal is not None:
            # Offered only as a labelled, unverified proposal: Accept asks for a second choice.
            status, fixed = "changes_checks", proposal
            unverified = (
                f"attempt {proposal.number} passed its trial but changes the checks "
                f"({proposal.changes_checks})"
            )
            message = (
                f"No verified fix in {len(self.attempts)} attempt(s): {unverified}."
                if reason == "max_attempts"
                else f"No verified fix: {unverified}. {message}"
            )
        explanation = (
            fixed.explanation
            if fixed
            else next((a.explanation for a in reversed(self.attempts) if a.explanation), "")
        )
        return LoopResult(
            status=status,
            stop_reason=reason,
            message=message,
            attempts=self.attempts,
            fixed_code=fixed.code if fixed else None,
            explanation=explanation,
            unverified=fixed.changes_checks if fixed else "",
        )


def refine(
    task: RepairTask,
    provider: Provider,
    runner: TrialRunner,
    redactor: Redactor,
    config: LoopConfig | None = None,
    *,
    on_event: EventCallback | None = None,
    user_note: str = "",
    earlier_attempts: list[Attempt] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> LoopResult:
    """Run up to ``config.max_attempts`` attempts for ``task``, after any ``earlier_attempts``.

    Never raises for provider or candidate failures; ``should_stop`` (checked between steps
    and while the reply streams) ends the loop with status "interrupted"."""
    loop = _Loop(
        task,
        provider,
        runner,
        redactor,
        config or LoopConfig(),
        on_event,
        user_note,
        earlier_attempts or [],
        should_stop or (lambda: False),
    )
    return loop.run()

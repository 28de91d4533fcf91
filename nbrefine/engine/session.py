"""``RefineSession``: the result of one ``%%refine`` run, and the user's decision on it.

:class:`RefineJob` is what a session needs to run (built by an adapter: the magic, the CLI's
kernel); :class:`RefineSession` runs the loop or a teaching turn, in this thread or a background
one, and applies Accept / Reject; its text view is what the terminal and the notebook file show.
The kernel's latest session is kept by :mod:`.kernel_state` (:func:`last_session`).

May import: the standard library, :mod:`nbrefine._errors`, the layers below the engine and the
engine's other modules.
"""

from __future__ import annotations

import difflib
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .._errors import ProviderError, SessionStateError, UnverifiedFixError
from ..grounding.capture import Failure
from ..grounding.redaction import Redactor
from ..providers.base import Provider
from ..sandbox import TrialOutcome, TrialPolicy, TrialSpec
from ..sandbox.live import confined
from .accept import AcceptPlan
from .capabilities import added_capabilities, capabilities_of
from .cause import Cause
from .cost import Usage, total
from .kernel_state import add_to_kernel, current, expect_confined_runs, kernel_ledger
from .loop import LoopConfig, refine, verifier_for
from .multicell import CellsRepair
from .prompt import RepairTask
from .teaching import HintLedger, TeachingPolicy, TeachingResult, teach
from .types import Attempt, EventCallback, LoopResult, Status, TrialRunner
from .verdict import judge
from .verify import changed_names, drift, fingerprints_of, names_read, plain_python

__all__ = ["RefineSession", "SessionStateError", "UnverifiedFixError", "last_session", "session_for_request"]


def last_session() -> RefineSession | None:
    """The most recent session in this kernel, or ``None``."""
    session = current().session
    return session if isinstance(session, RefineSession) else None


def session_for_request(request_id: str) -> RefineSession | None:
    """The session made by the ``%%refine`` cell that the Jupyter execute request ``request_id``
    ran, or ``None``. This is how ``nbrefine fix`` and ``nbrefine bench`` find a cell's session:
    by the request, never by comparing source text, which IPython normalises (it empties
    whitespace-only lines of a cell magic's body)."""
    session = last_session()
    return session if session is not None and session.request_id == request_id else None


def _remember(session: RefineSession) -> None:
    state = current()
    if state.session is not None and state.session is not session:
        state.session.release()  # an older session's snapshot process is not needed any more
    state.session = session


@dataclass
class RefineJob:
    """What a session needs to run (more) attempts: built by an adapter, run by the core."""

    task: RepairTask
    provider: Callable[[], Provider]
    runner: TrialRunner
    redactor: Redactor
    config: LoopConfig
    free: Callable[[], None] = lambda: None  # frees the runner (the snapshot process)
    teaching_policy: TeachingPolicy = field(default_factory=TeachingPolicy)  # hint/explain/graduated: teach
    tutor: Callable[[], Provider] | None = None  # the provider for teaching modes
    fallback: Callable[[], TrialRunner] | None = None  # a runner once that one is freed
    background_ok: bool = False  # the runner may be driven from a thread (no fork in the kernel)
    on_finish: Callable[[RefineSession], None] | None = None  # adapters adjust the target cell
    #: A runner over the live state exactly as Accept will run the fix (None: Accept cannot check it)
    accept_runner: Callable[[], TrialRunner] | None = None
    prices: dict[str, Any] = field(default_factory=dict)  # Refine.prices, for the cost shown
    #: why no one is asked ("" : the loop runs): the cell fails because an earlier cell failed
    stop_before: str = ""
    repair: CellsRepair | None = None  # the cause is another cell: candidates span cells
    #: puts back, in the live kernel, the values before the cell ran of those of the given names
    #: that the failed run changed in place (from the snapshot); returns the names put back
    restore: Callable[[list[str], Mapping[str, str] | None], list[str]] | None = None
    #: once a fix is found: fetch from the snapshot, while it lives, what :attr:`restore` may need,
    #: and fingerprint those names in the live state as the failed run left them (with the callable)
    prefetch: Callable[[Callable[[list[str]], dict[str, str] | None]], None] | None = None
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.free()

    def current_runner(self) -> TrialRunner:
        if not self.released:
            return self.runner
        if self.fallback is None:
            raise SessionStateError("the snapshot of this session was released; run the cell again")
        return self.fallback()


#: Runs accepted code in the live kernel; returns True when it ran without error.
Applier = Callable[[str], bool]

_GREEN, _RED, _CYAN, _BOLD, _RESET = "\x1b[32m", "\x1b[31m", "\x1b[36m", "\x1b[1m", "\x1b[0m"


class RefineSession:
    """One failing cell, the attempts to fix it, and Accept / Reject.

    ``status``: a :data:`~nbrefine.engine.types.Status` (what the loop ended with, or ``"running"``,
    ``"no_error"``, ``"hint"``). ``decision``: ``"pending"``, ``"accepted"``, ``"rejected"``."""

    def __init__(
        self,
        original_code: str,
        *,
        provider: str = "",
        model: str = "",
        applier: Applier | None = None,
        remember: bool = True,
    ) -> None:
        self.original_code = original_code
        self.provider = provider
        self.model = model
        self.status: Status = "running"
        self.message = ""
        self.failures: tuple[Failure, ...] = ()
        self.notes: tuple[str, ...] = ()
        self.result: LoopResult | None = None
        self.decision = "pending"
        self.timings: dict[str, Any] = {}
        self.accept_ok: bool | None = None
        self.accept_refused = ""  # why the last Accept did not apply the fix ("" : it did, or none yet)
        self.accepted_anyway = False  # applied on the second choice, not as a verified fix
        self.live_check = ""  # what Accept found about the live state ("" : nothing changed)
        self.live_outcome: TrialOutcome | None = None  # the trial from the live state, if one ran
        self._trial_state: dict[str, str] | None = None  # fingerprints of what the passing trial read
        self.cell_id: str | None = None  # the notebook cell to write an accepted fix into
        self.cell_source: str | None = None  # that cell's whole source as it ran
        self.request_id: str | None = None  # the Jupyter execute request that ran the cell
        #: a fix written into the cell that defines what failed: the failing cell, which the
        #: frontend runs next (after the fixed cell ran and passed)
        self.then_run_cell: str | None = None
        self.job: RefineJob | None = None
        #: Accept's first step alone (undo the failed run's rebinds), for a frontend that runs the
        #: fixed cell itself so the notebook records its outputs; None: Accept runs it here
        self.prepare: Callable[[], None] | None = None
        self.teaching: TeachingResult | None = None  # the latest hint or explanation (teaching modes)
        self.cause: Cause | None = None  # where the failure is caused (engine.cause)
        self.plan: AcceptPlan | None = None  # what Accept does: the changed and moved cells, the runs
        #: the fix changes what the cell computes and nothing checks the result: a proposal
        self.unchecked = ""
        #: what the fix adds that its cell did not already do (a process, the network, a write
        #: outside the working folder, dynamic code...): it runs only on a second choice
        self.needs_review: tuple[str, ...] = ()
        self.restored: tuple[str, ...] = ()  # names Accept put back as they were before the cell ran
        self.on_accepted: Callable[[], None] | None = None  # the adapter's: the failed cell is fixed now
        #: Accept's first step (undo the failed run's rebinds), kept when :attr:`prepare` is not
        self.undo_failed_run: Callable[[], None] | None = None
        self._applier = applier
        self._provider: Provider | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if remember:
            _remember(self)

    # ------------------------------------------------------------------ results

    def finish(self, result: LoopResult) -> None:
        self.result = result
        self.status = result.status
        self.message = result.message

    def finish_without_loop(self, status: Status, message: str) -> None:
        self.status = status
        self.message = message

    # ------------------------------------------------------------------ running

    @property
    def running(self) -> bool:
        return self.status == "running"

    def run(
        self, *, on_event: EventCallback | None = None, attempts: int | None = None, note: str = ""
    ) -> None:
        """Run the loop (or ``attempts`` more attempts after the earlier ones) in this thread."""
        job = self.job
        if job is None:
            raise SessionStateError("this session has nothing to run")
        if self.decision != "pending":
            raise SessionStateError(f"this session was already {self.decision}")
        if job.stop_before:
            self.finish_without_loop("unfixed", job.stop_before)
            return
        self.status, self.message = "running", ""
        self._stop.clear()
        try:
            if self._provider is None:
                self._provider = job.provider()
            config = job.config if attempts is None else replace(job.config, max_attempts=attempts)
            if job.released:  # the fallback runner forks the kernel: not while a reply streams
                config = replace(config, early_trials=False)
            result = refine(
                job.task,
                self._provider,
                job.current_runner(),
                job.redactor,
                config,
                on_event=on_event,
                user_note=note,
                earlier_attempts=self.attempts,
                should_stop=self._stop.is_set,
            )
        except ProviderError as err:
            self.finish_without_loop("error", str(err))
            return
        except KeyboardInterrupt:  # while the provider was being set up; the loop handles its own
            self.finish_without_loop("interrupted", "Interrupted: the refine loop was stopped.")
            return
        self.model = self._provider.model
        self.provider = self._provider.name
        counted = len(self.attempts)
        self.finish(result)
        early = [a.trial_early_s for a in result.attempts[counted:] if a.trial_early_s]
        if early:  # how long before each reply was in its trial started (nbrefine.engine.early)
            self.timings.setdefault("trial_early_s", []).extend(early)
        if result.status == "fixed":
            started = time.perf_counter()
            self._trial_state = self._state_of(job.current_runner(), result.fixed_code or "")
            self.timings["state_s"] = time.perf_counter() - started
        add_to_kernel(total((r for a in result.attempts[counted:] for r in a.replies), job.prices))
        if job.on_finish is not None:
            job.on_finish(self)
        if result.status == "fixed" and result.fixed_code is not None:
            self.unchecked = unchecked_change(job.task, job.repair, result.fixed_code)
            self.needs_review = added_uses(job.task, job.repair, result.fixed_code, self.line_offset)
            if job.prefetch is not None:
                job.prefetch(self._live_fingerprints)

    def run_in_background(
        self,
        *,
        on_event: EventCallback | None = None,
        on_done: Callable[[], None] | None = None,
        attempts: int | None = None,
        note: str = "",
    ) -> threading.Thread:
        """Run in a thread (the kernel stays free, so a Stop button can be clicked)."""
        self.status = "running"

        def work() -> None:
            try:
                self.run(on_event=on_event, attempts=attempts, note=note)
            except Exception as err:  # never lose a failure silently in a thread
                self.finish_without_loop("error", f"{type(err).__name__}: {err}")
            finally:
                if last_session() is not self:
                    self.release()  # a newer session took over while this one ran
                if on_done is not None:
                    on_done()

        self._thread = threading.Thread(target=work, name="nbrefine-loop", daemon=True)
        self._thread.start()
        return self._thread

    def ask_for_help(self, *, on_event: EventCallback | None = None, note: str = "") -> None:
        """Teaching modes: the next explanation or hint, never code that solves the cell (the
        guard trial-runs any code in the reply). Runs the fix loop only where the policy allows."""
        job = self.job
        if job is None:
            raise SessionStateError("this session has nothing to run")
        self.status, self.message = "running", ""
        try:
            tutor = job.tutor() if job.tutor is not None else job.provider()
            result = teach(
                job.task,
                tutor,
                job.current_runner(),
                job.redactor,
                job.teaching_policy,
                ledger=kernel_ledger(),
                key=HintLedger.key(job.task, self.cell_id),
                timeout_s=job.config.timeout_s,
                trial_policy=job.config.trial_policy,
                budget=job.config.prompt_budget,
                user_note=note,
                on_event=on_event,
                should_stop=self._stop.is_set,
            )
        except ProviderError as err:
            self.finish_without_loop("error", str(err))
            return
        except KeyboardInterrupt:
            self.finish_without_loop("interrupted", "Interrupted: the request was stopped.")
            return
        self.teaching = result
        if result.status == "fix_loop":
            self.run(on_event=on_event)
            return
        self.provider, self.model = result.provider or self.provider, result.model or self.model
        status: Status = "error" if result.status == "error" else "hint"
        self.finish_without_loop(status, result.message)

    def _names(self, code: str) -> list[str] | None:
        job = self.job
        if job is None:
            return None
        return names_read(plain_python(code, job.config.transform), job.task.checks)

    def _state_of(self, runner: TrialRunner, code: str) -> dict[str, str] | None:
        """Fingerprints of the names ``code`` (and its checks) read, as ``runner`` sees them."""
        job, names = self.job, self._names(code)
        if job is None or job.accept_runner is None or names is None:
            return None  # no live state to compare with later, or code that cannot be read
        return fingerprints_of(runner, names, timeout_s=job.config.timeout_s, policy=job.config.trial_policy)

    def _live_fingerprints(self, names: list[str]) -> dict[str, str] | None:
        job = self.job
        if job is None or job.accept_runner is None or not names:
            return None
        runner = job.accept_runner()
        return fingerprints_of(runner, names, timeout_s=job.config.timeout_s, policy=job.config.trial_policy)

    @property
    def can_run_in_background(self) -> bool:
        return self.job is not None and self.job.background_ok and not self.job.released

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a background run; True when it has finished."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def stop(self) -> None:
        """Ask a running loop to stop; a trial under way is killed."""
        self._stop.set()
        cancel = getattr(self.job.runner if self.job else None, "cancel", None)
        if callable(cancel):
            cancel()

    def release(self) -> None:
        """Free the snapshot process; no more attempts can run after this."""
        if self.job is not None and not self.running:
            self.job.release()

    @property
    def attempts(self) -> list[Attempt]:
        return self.result.attempts if self.result else []

    @property
    def fixed_code(self) -> str | None:
        """The fix (status "fixed"), or the unverified proposal (status "changes_checks")."""
        if self.result and self.status in ("fixed", "changes_checks"):
            plan = self.plan
            if plan is not None and len(plan.changes) == 1 and not plan.moves:
                return plan.changes[0].new_source  # what the cell it belongs to will hold
            return self.result.fixed_code
        return None

    @property
    def verified(self) -> bool:
        """The fix passed its trial without changing the checks (see :mod:`nbrefine.engine.verify`),
        and something checks the result it changes (else it is a proposal: :attr:`unchecked`)."""
        return self.status == "fixed" and not self.unchecked and not self.needs_review

    @property
    def unverified_reason(self) -> str:
        """Status "changes_checks": why the proposal does not count as verified."""
        return self.result.unverified if self.result and self.status == "changes_checks" else ""

    @property
    def explanation(self) -> str:
        return self.result.explanation if self.result else ""

    @property
    def prompts(self) -> list[str]:
        """The exact user messages sent to the model, after redaction."""
        return [a.request.user for a in self.attempts]

    @property
    def system_prompts(self) -> list[str]:
        return [a.request.system for a in self.attempts]

    @property
    def failure(self) -> Failure | None:
        return self.failures[0] if self.failures else None

    @property
    def usage(self) -> Usage:
        """Tokens (incl. prompt-cache reads and writes) and estimated cost of this session."""
        prices = self.job.prices if self.job else {}
        return total((r for a in self.attempts for r in a.replies), prices)

    @property
    def tokens(self) -> tuple[int, int]:
        """(input, output) tokens the provider reported for this session."""
        if not self.result:
            return (0, 0)
        return (self.result.input_tokens, self.result.output_tokens)

    def diff(self, *, color: bool = False) -> str:
        """Unified diff from the original cell to the fix ('' when there is no fix)."""
        if self.fixed_code is None:
            return ""
        lines = difflib.unified_diff(
            self.original_code.rstrip().splitlines(),
            self.fixed_code.splitlines(),
            "original cell",
            "proposed fix",
            lineterm="",
        )
        if not color:
            return "\n".join(lines)
        return "\n".join(_color_diff_line(line) for line in lines)

    # ------------------------------------------------------------------ decision

    def accept(self, *, anyway: bool = False, run_here: bool = True, elsewhere: bool = False) -> bool:
        """Run the fix in the live kernel (the state advances as if the fixed cell had run).

        A fix is applied only where it is verified: it must not change the checks, and when a
        value it reads differs in the live kernel from what its trial saw, it is trial-run from
        the live state first. Otherwise :class:`UnverifiedFixError` says why, and nothing runs;
        ``anyway=True`` is the explicit second choice that applies it all the same.

        ``run_here=False`` (where :attr:`prepare` is set): everything but running the fix, which
        the frontend then does by running the cell (``accept_ok`` stays None); should it not,
        :meth:`apply_here` runs it. ``elsewhere=True``: the same for a driver that writes and runs
        every cell of :attr:`plan` itself (``nbrefine fix``), whatever the plan spans."""
        if self.running:
            self.wait()  # a headless caller (nbclient, a script) may accept while the loop runs
        fixed = self.fixed_code
        if fixed is None:
            raise SessionStateError(f"nothing to accept: the session status is {self.status!r}")
        if self.decision != "pending":
            raise SessionStateError(f"this fix was already {self.decision}")
        if self._applier is None:
            raise SessionStateError("this session has no kernel to run the fix in")
        if not anyway:
            started = time.perf_counter()
            self.accept_refused = self._why_not_apply(fixed)
            self.timings["accept_check_s"] = time.perf_counter() - started
            if self.accept_refused:
                raise UnverifiedFixError(self.accept_refused)
        self.accepted_anyway = anyway
        self.decision = "accepted"
        self.release()
        policy = self.live_policy()
        if elsewhere and self.undo_failed_run is not None:
            self.undo_failed_run()
            expect_confined_runs(self._run_keys(), policy)  # the driver runs the cells: confined there
            return True
        if not run_here and self.prepare is not None:
            self.prepare()
            expect_confined_runs(self._run_keys(), policy)  # the frontend runs the cells
            return True
        with confined(policy):
            return self._applied(self._applier(fixed))

    def _applied(self, ok: bool) -> bool:
        self.accept_ok = ok
        if ok and self.on_accepted is not None:
            self.on_accepted()
        return ok

    def live_policy(self) -> TrialPolicy:
        """What the accepted fix may do when it runs for real: what its trial could (the cell's
        ``--allow-*`` options), and what the cells it runs already did before (a cell that downloads
        its data may go on downloading it)."""
        job = self.job
        base = job.config.trial_policy if job is not None else TrialPolicy()
        originals = [self.original_code]
        if self.plan is not None:
            originals += [cell.source for cell, _ in self.plan.runs] + [
                c.cell.source for c in self.plan.changes
            ]
        did = frozenset[str]().union(*(capabilities_of(code) for code in originals))
        return replace(
            base,
            allow_network=base.allow_network or "network" in did,
            allow_subprocess=base.allow_subprocess or "process" in did,
            allow_writes=base.allow_writes or bool(did & {"write_outside", "home_dotfiles", "delete"}),
        )

    def _run_keys(self) -> list[str]:
        """How the runs Accept leaves to the frontend or the driver are recognised: cell ids, or the
        source that runs where a cell has none."""
        if self.plan is not None and self.plan.spans_cells:
            return [cell.cell_id or source for cell, source in self.plan.runs]
        fixed = self.fixed_code or ""
        return [k for k in (self.cell_id, fixed) if k] + ([self.then_run_cell] if self.then_run_cell else [])

    def apply_here(self) -> bool:
        """Run an accepted fix in the kernel after all: the frontend was to run the cell but did
        not (no extension answered, or it refused the write)."""
        fixed = self.fixed_code
        if (
            self.decision != "accepted"
            or self.accept_ok is not None
            or fixed is None
            or self._applier is None
        ):
            raise SessionStateError("there is no accepted fix waiting to run")
        with confined(self.live_policy()):
            return self._applied(self._applier(fixed))

    def _why_not_apply(self, fixed: str) -> str:
        if self.status == "fixed" and self.needs_review:
            return (
                f"the fix needs review: it adds what its cell did not do ({'; '.join(self.needs_review[:3])})"
            )
        if self.status == "fixed" and self.unchecked:
            return f"the fix runs, but nothing checks the result ({self.unchecked})"
        if not self.verified:
            return f"the proposal is not verified: it changes the checks ({self.unverified_reason})"
        if self.result is not None and self.result.fixed_code is not None:
            fixed = self.result.fixed_code  # the candidate as its trial ran it (all its cells)
        job = self.job
        if job is None or job.accept_runner is None:
            return ""
        runner = job.accept_runner()
        live = self._state_of(runner, fixed)
        what = self.live_check = drift(self._trial_state, live)
        if what and job.restore is not None:
            # The failed run may have changed in place what the fix reads (`df.set_index(...,
            # inplace=True)` before the KeyError): put those values back as they were before the
            # cell ran, so that the notebook ends as if the broken cell had never run.
            restored = job.restore(changed_names(self._trial_state, live) or [], live)
            if restored:
                names = ", ".join(f"`{n}`" for n in restored)
                said = f"the failed run had changed {names} in place; Accept put back the values from before"
                what = drift(self._trial_state, self._state_of(runner, fixed))
                self.live_check = said + (f"; {what}" if what else "")
                self.restored = tuple(restored)
        if not what:
            return ""
        spec = TrialSpec(fixed, job.task.checks, job.config.timeout_s, "candidate", job.config.trial_policy)
        outcome = self.live_outcome = runner.run(spec)
        reason = verifier_for(job.task, job.config)(fixed, outcome) if outcome.ok else ""
        if outcome.ok and not reason:
            self.live_check = f"{what}; it was trial-run again from the live state and passed there"
            return ""
        failed = f"fails: {outcome.one_line()}" if not outcome.ok else f"is not verified: {reason}"
        return f"the fix passed its trial, but {what}, and from the live state it {failed}"

    def reject(self) -> None:
        """Discard the proposed fix; the kernel state stays as the failed run left it."""
        if self.decision != "pending":
            raise SessionStateError(f"this session was already {self.decision}")
        if self.running:
            self.stop()
        self.decision = "rejected"
        self.release()

    # ------------------------------------------------------------------ text view

    @property
    def tries(self) -> list[Attempt]:
        """The attempts that proposed something: a provider error (a 401, a timeout) asked
        nothing of the model, so it is not counted as an attempt anywhere it is shown."""
        return [attempt for attempt in self.attempts if not provider_failed(attempt)]

    def attempt_lines(self) -> list[str]:
        """One line per attempt, numbered as shown to the user (provider errors left out)."""
        offset = self.line_offset
        return [
            f"{attempt_mark(a)} attempt {number}: {attempt_outcome(a, offset)} ({a.duration_s:.2f} s)"
            for number, a in enumerate(self.tries, start=1)
        ]

    @property
    def line_offset(self) -> int:
        """Lines of the notebook cell above the code under repair: 1 for a ``%%refine`` cell
        (whose body is the code), so that line numbers are those the user sees in the cell."""
        source = self.cell_source
        if source is None or source.rstrip() == self.original_code.rstrip():
            return 0
        return 1 if source.lstrip().startswith("%%") else 0

    def headline(self) -> str:
        """What the session amounts to, in one line, decision first ("verified fix ready")."""
        tries = count_tries(len(self.tries))
        pending = self.decision == "pending"
        if self.status == "fixed" and self.needs_review:
            text = (
                f"needs review — it adds what the cell did not do ({tries})"
                if pending
                else "applied anyway — it added what the cell did not do"
                if self.decision == "accepted"
                else "fix rejected — nothing was changed"
            )
        elif self.status == "fixed" and self.unchecked:
            text = (
                f"a proposal — it runs, but nothing checks the result ({tries})"
                if pending
                else "applied anyway — nothing checked the result"
                if self.decision == "accepted"
                else "proposal rejected — nothing was changed"
            )
        elif self.status == "unfixed" and self.cause is not None and self.cause.kind == "cascade":
            return f"nbrefine: not patched — {self.message}"
        elif self.status == "fixed":
            text = (
                f"verified fix ready — it passed a trial run ({tries})"
                if pending
                else f"fixed — {tries}"
                if self.decision == "accepted"
                else "fix rejected — nothing was changed"
            )
        elif self.status == "changes_checks":
            text = (
                "no verified fix — the only proposal changes the checks"
                if pending
                else "applied anyway — not verified"
                if self.decision == "accepted"
                else "proposal rejected — nothing was changed"
            )
        else:
            text = {
                "unfixed": f"no fix found ({tries})",
                "no_error": "the cell ran without error",
                "error": "could not get a fix",
                "interrupted": f"stopped ({tries})",
                "running": "looking for a fix",
                "hint": self.teaching.step.header() if self.teaching else "hint",
                "budget": "stopped by the budget",
            }.get(self.status, self.status)
        quiet = self.status in ("fixed", "changes_checks", "interrupted", "hint", "running")
        return f"nbrefine: {text}" + (f" — {self.message}" if self.message and not quiet else "")

    def render_text(self, *, color: bool = False, failure: bool = True) -> str:
        """The terminal's (and the notebook file's plain-text) view: the decision first, then the
        diff and how to act on it, then the details (attempts, explanation, usage). ``failure=False``
        leaves out the line naming the failure, for a terminal that printed it as the loop began."""
        bold = (lambda s: f"{_BOLD}{s}{_RESET}") if color else (lambda s: s)
        parts = [bold(self.headline())]
        if self.failure is not None and failure:
            parts.append("the cell failed with " + describe_failure(self.failure, self.line_offset))
        if self.status == "hint" and self.teaching is not None:
            parts.append(self.teaching.render(header=False))  # the headline says "Hint 1 of 3"
            return "\n".join(parts)
        if self.cause is not None and self.cause.kind not in ("here", "cascade"):
            parts.append("where the cause is: " + self.cause.sentence())
        if self.fixed_code is not None:
            plan = self.plan
            if plan is not None and plan.spans_cells:
                parts.extend(self._plan_lines(color))
            else:
                parts.append(self.diff(color=color))
            if self.needs_review:
                parts.append("Needs review before it runs: it " + "; it ".join(self.needs_review) + ".")
            if self.unchecked:
                parts.append(f"It runs, but nothing checks the result: {self.unchecked}.")
            parts.extend(self._next_step())
        lines = self.attempt_lines()
        if lines:
            parts.append("attempts:")
            parts.extend("  " + line for line in lines)
        if self.explanation:
            parts.append("why: " + self.explanation)
        if self.usage.tokens:
            parts.append("tokens: " + self.usage.describe())
        return "\n".join(parts)

    def _plan_lines(self, color: bool) -> list[str]:
        """A fix that spans cells: one labelled diff per changed cell, and the moves."""
        plan = self.plan
        if plan is None:
            return []
        lines = [move.label for move in plan.moves]
        for change in plan.changes:
            lines.append(f"{change.label}:")
            diff = change.diff()
            lines.append("\n".join(_color_diff_line(d) for d in diff.splitlines()) if color else diff)
        if plan.runs:
            lines.append("Accept runs, in order: " + ", ".join(cell.label for cell, _ in plan.runs))
        return lines

    def _next_step(self) -> list[str]:
        """How to act on the fix (or what was done with it), for the text view."""
        if self.decision != "pending":
            anyway = " (anyway: not verified)" if self.accepted_anyway else ""
            return [f"decision: {self.decision}{anyway}"]
        lines = []
        if self.accept_refused:
            lines.append(f"Accept did not apply it: {self.accept_refused}.")
        if self.unchecked or self.needs_review:
            lines.append("%refine accept --anyway applies it all the same, or %refine reject.")
        elif not self.verified:
            lines.append(
                f"This proposal is not verified: it changes the checks ({self.unverified_reason}). "
                "%refine accept --anyway runs it in the kernel all the same, or %refine reject."
            )
        elif self.accept_refused:
            lines.append("%refine accept --anyway runs it all the same, or %refine reject.")
        else:
            lines.append("Run %refine accept to apply it in the kernel, or %refine reject.")
        return lines

    def __repr__(self) -> str:
        return (
            f"<RefineSession status={self.status!r} attempts={len(self.attempts)} decision={self.decision!r}>"
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.render_text())


def unchecked_change(task: RepairTask, repair: CellsRepair | None, code: str) -> str:
    """What a passed candidate changes in what a cell computes when nothing checks the result
    ("" : nothing such, or something pins it): then it is a proposal, not a verified fix."""
    changes = repair.changes_of(code) if repair is not None else {"": code}
    originals = {c.key: c for c in task.cells}
    checks = list(task.checks) + [c.source for c in task.dependents]
    if repair is not None and repair.failing.key not in changes:
        checks.append(repair.failing.source)  # the failing cell runs after the change, as a check
    failed_assert = any(f.error_type == "AssertionError" for f in task.failures)
    known = _known_names(task)
    for key, new in changes.items():
        cell = originals.get(key)
        if cell is not None and cell.role == "moved":
            continue
        old = cell.source if cell is not None else task.code
        verdict = judge(old, new, checks=checks, failed_assert=failed_assert, known_names=known)
        if verdict.unchecked:
            return verdict.what or "it changes what the cell computes"
    return ""


def added_uses(
    task: RepairTask, repair: CellsRepair | None, code: str, line_offset: int = 0
) -> tuple[str, ...]:
    """What a passed candidate adds that the cells it changes did not already do, each named with
    its line as the user sees it in the failing cell (``line_offset``: its ``%%refine`` line) or in
    the other cell it names ("starts a process: subprocess.run (line 3)"), before anything runs."""
    changes = repair.changes_of(code) if repair is not None else {"": code}
    originals = {c.key: c for c in task.cells}
    found: list[str] = []
    for key, new in changes.items():
        cell = originals.get(key)
        old = cell.source if cell is not None else task.code
        where = f" in {cell.label}" if cell is not None and repair is not None else ""
        offset = line_offset if cell is None or cell.role == "failing" else 0
        found += [
            replace(use, line=use.line + offset).describe() + where for use in added_capabilities(old, new)
        ]
    return tuple(dict.fromkeys(found))


def _known_names(task: RepairTask) -> set[str]:
    """Names and keys a misspelling may have meant: the namespace's, and the columns or keys of
    the values the prompt summarised."""
    known = {name for name in task.namespace if not name.startswith("_")}
    for summary in task.values:
        value = task.namespace.get(summary.name)
        try:  # a DataFrame's columns, a dict's keys; whatever else a value does is not our business
            keys = list(value)[:200] if isinstance(value, dict) else getattr(value, "columns", None)
            known.update(str(k) for k in list(keys if keys is not None else ())[:200])
        except Exception:
            continue
    return known


def _color_diff_line(line: str) -> str:
    if line.startswith(("+++", "---")):
        return f"{_BOLD}{line}{_RESET}"
    if line.startswith("+"):
        return f"{_GREEN}{line}{_RESET}"
    if line.startswith("-"):
        return f"{_RED}{line}{_RESET}"
    if line.startswith("@@"):
        return f"{_CYAN}{line}{_RESET}"
    return line


def provider_failed(attempt: Attempt) -> bool:
    """The model could not be asked (no key, a 401, a timeout): nothing was proposed or tried."""
    return attempt.reply is None and attempt.note.startswith("provider error")


def count_tries(count: int) -> str:
    return "1 try" if count == 1 else f"{count} tries"


def attempt_mark(attempt: Attempt) -> str:
    return "✔" if attempt.ok else "⚠" if attempt.changes_checks else "✘"


def describe_failure(failure: Failure, line_offset: int = 0) -> str:
    """A failure in the user's words: "KeyError at line 2: 'Price'" (the prompt's labels, such
    as "candidate line 1", are for the model). ``line_offset``: lines of the notebook cell above
    the code (its ``%%refine`` line)."""
    place = ""
    if failure.where.startswith("check"):
        place = f" in {failure.where}"
    elif failure.lineno:
        place = f" at line {failure.lineno + line_offset}"
    detail = failure.one_line().partition(": ")[2] if ": " in failure.one_line() else ""
    return f"{failure.error_type}{place}" + (f": {detail}" if detail else "")


def attempt_outcome(attempt: Attempt, line_offset: int = 0) -> str:
    """What one attempt's trial run did, in a few words."""
    outcome = attempt.outcome
    if outcome is None:
        return attempt.note or "no candidate"
    if outcome.ok:
        text = "passed its trial run"
        if attempt.changes_checks:
            text = f"passed, but changes the checks: {attempt.changes_checks}"
    elif outcome.first_failure is not None:
        text = describe_failure(outcome.first_failure, line_offset)
        more = len(outcome.check_failures) - 1
        if more > 0:
            text += f" (and {more} more failed check{'s' if more > 1 else ''})"
    else:
        text = f"{outcome.status.replace('_', ' ')}" + (f": {outcome.detail}" if outcome.detail else "")
    return text + (f" [{attempt.note}]" if attempt.note else "")


def plain_summary(summary: str, line_offset: int = 0) -> str:
    """A trial's one-line summary (``TrialOutcome.one_line``) in the user's words: "at line 2" for
    the prompt's "at candidate line 1" under a ``%%refine`` line."""
    return re.sub(r" at candidate line (\d+)", lambda m: f" at line {int(m.group(1)) + line_offset}", summary)

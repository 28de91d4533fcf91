"""What a trial is: the candidate to run (:class:`TrialSpec`), what happened (:class:`TrialOutcome`,
with a typed :data:`TrialStatus`) and how trial processes are prepared (:class:`SandboxOptions`).

Shared by the fork and spawn sandboxes and by the engine that reads outcomes. May import the
standard library, :mod:`.hardening` (the policy) and the grounding types (failure capture).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, get_args

from ..grounding import Failure
from .hardening import TrialPolicy

__all__ = [
    "FLOOD_LIMIT",
    "OUTPUT_CAP",
    "TRIAL_STATUSES",
    "SandboxOptions",
    "TrialOutcome",
    "TrialSpec",
    "TrialStatus",
]

OUTPUT_CAP = 1_000_000  # characters of stdout/stderr kept per trial
#: Characters of output after which a trial is stopped. Fork and spawn trials write their
#: ``sys.stdout``/``sys.stderr`` straight to files (no Python object of the runner behind them
#: the candidate could reach): there, the trial's file size limit (``TrialPolicy.file_size_mb``)
#: is what stops a flood, as ``output_limit``.
FLOOD_LIMIT = 50_000_000

#: How a trial ended: ``passed``; ``failed`` (an exception or a failed assert/check); ``timeout``
#: (wall clock); ``cpu_limit``, ``memory_limit``, ``output_limit``; ``refused`` (the sandbox policy
#: refused an action: the outcome's ``detail`` says which); ``crashed`` (killed by a signal, e.g. a
#: segfault); ``exited`` (``sys.exit``/``os._exit``); ``interrupted`` (KeyboardInterrupt);
#: ``sandbox_error`` (the sandbox itself broke).
TrialStatus = Literal[
    "passed",
    "failed",
    "timeout",
    "cpu_limit",
    "memory_limit",
    "output_limit",
    "refused",
    "crashed",
    "exited",
    "interrupted",
    "sandbox_error",
]
TRIAL_STATUSES: tuple[TrialStatus, ...] = get_args(TrialStatus)


@dataclass(frozen=True)
class TrialSpec:
    """One candidate to try: plain Python (IPython syntax already transformed)."""

    code: str
    checks: tuple[str, ...] = ()
    timeout_s: float = 10.0
    label: str = "candidate"
    policy: TrialPolicy = field(default_factory=TrialPolicy)


@dataclass(frozen=True)
class TrialOutcome:
    """What happened when a candidate ran; ``status`` says how it ended (see :data:`TrialStatus`)."""

    status: TrialStatus
    failure: Failure | None = None
    check_failures: tuple[Failure, ...] = ()
    checks_total: int = 0
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    start_latency_s: float = 0.0
    statements_done: int = 0
    statements_total: int = 0
    detail: str = ""
    started_at: float = 0.0
    layers: tuple[str, ...] = ()  # sandbox hardening layers that were active
    #: why a ``passed`` cannot be trusted as verified ("" when nothing was seen): an assert or a
    #: check compared an object whose class's comparison (truth, container, arithmetic...) methods
    #: are not the built-in ones of a trusted type, or are no longer what they were when the trial
    #: started (``unittest.mock.ANY``, a ``float`` subclass with an ``__eq__`` of its own, whoever
    #: defined it); or a function it calls was replaced. The reporter of the trial sets it; a
    #: suspect pass is never verified (:class:`nbrefine.engine.verify.ChecksVerifier`)
    suspect: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "passed"

    @property
    def first_failure(self) -> Failure | None:
        return self.failure or (self.check_failures[0] if self.check_failures else None)

    @property
    def error_type(self) -> str | None:
        if self.ok:
            return None
        failure = self.first_failure
        return failure.error_type if failure else f"Trial{self.status.title().replace('_', '')}"

    @property
    def error_message(self) -> str:
        failure = self.first_failure
        return failure.message if failure else self.detail

    def progress(self) -> tuple[int, int, int]:
        """Orders outcomes: a finished body beats a partial one, fewer failed checks beat more."""
        finished = self.failure is None and self.status in ("passed", "failed")
        return (int(finished), self.statements_done, -len(self.check_failures))

    def one_line(self) -> str:
        if self.ok:
            return f"passed in {self.duration_s:.2f} s"
        failure = self.first_failure
        if failure is not None:
            extra = (
                f" (+{len(self.check_failures) - 1} more failed checks)"
                if len(self.check_failures) > 1
                else ""
            )
            return failure.one_line() + extra
        return f"{self.status}: {self.detail}"

    def render(self) -> str:
        """Feedback text for the next prompt."""
        parts = [f"Outcome: {self.status}" + (f" ({self.detail})" if self.detail else "")]
        if self.failure is not None:
            parts.append(self.failure.render())
        if self.check_failures:
            parts.append(f"{len(self.check_failures)} of {self.checks_total} checks failed:")
            parts.extend(failure.render() for failure in self.check_failures)
        for name, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            if text.strip():
                parts.append(f"{name}:\n{text}")
        return "\n".join(parts)


def _no_setup() -> None:
    return None


@dataclass(frozen=True)
class SandboxOptions:
    """How trial children are prepared.

    ``child_setup`` runs once in the snapshot process right after the fork (adapters use it
    to cut the child off from the kernel's display machinery). ``harden`` applies the
    layers of :mod:`.hardening` in every trial (off only for measurements)."""

    child_setup: Callable[[], None] = _no_setup
    harden: bool = True
    #: files trials must not read besides the usual credential files (the adapter adds the
    #: kernel's connection file)
    hidden_paths: tuple[str, ...] = ()
    #: whether a snapshot gets its first trial ready as soon as it is taken (else: once armed,
    #: see :meth:`~nbrefine.sandbox.fork.Snapshot.arm`)
    ready_ahead: bool = True
    output_cap: int = OUTPUT_CAP
    flood_limit: int = FLOOD_LIMIT

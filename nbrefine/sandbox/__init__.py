"""The trial sandbox: candidate code runs here, never in the kernel.

- :mod:`.trial`: what a trial is (:class:`TrialSpec`) and what came of it (:class:`TrialOutcome`);
- :mod:`.fork`: the default: trials in forks of a snapshot of the kernel (or of its live state);
- :mod:`.spawn` (and :mod:`._spawn_worker`): the fallback where forking is unsafe: a fresh
  interpreter that gets cloudpickled copies of the names a candidate uses;
- :mod:`.execute`: what runs inside a trial process, whichever sandbox started it;
- :mod:`.wire`: framed pickles between the kernel and its trials, and the process helpers;
- :mod:`.hardening`: the layers that confine every trial process (was ``nbrefine.limits``).

May import the standard library, :mod:`nbrefine._errors` and the grounding modules (failure
capture, value summaries, redaction); never the engine, the providers, IPython or the CLI.
"""

from __future__ import annotations

from .execute import run_checks
from .fork import LiveForkRunner, Snapshot, call_in_fork, fork_supported
from .hardening import PolicyRefusal, TrialPolicy
from .spawn import SpawnRunner, fork_unsafe_reason, names_to_ship
from .trial import TRIAL_STATUSES, SandboxOptions, TrialOutcome, TrialSpec, TrialStatus

__all__ = [
    "TRIAL_STATUSES",
    "LiveForkRunner",
    "PolicyRefusal",
    "SandboxOptions",
    "Snapshot",
    "SpawnRunner",
    "TrialOutcome",
    "TrialPolicy",
    "TrialSpec",
    "TrialStatus",
    "call_in_fork",
    "fork_supported",
    "fork_unsafe_reason",
    "names_to_ship",
    "run_checks",
]

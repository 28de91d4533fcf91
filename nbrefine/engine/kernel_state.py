"""What a kernel remembers between cells, in one holder.

Everything nbrefine keeps across the cells of one kernel (process) lives in a :class:`KernelState`:
its latest session (``nbrefine.last_session()``), what it has spent on repairs, the replies
already paid for (the response cache), the teaching policy holder (and its lock) and the hints each
failing cell has had. :func:`current` is this process's; :func:`reset` starts over (tests do; a
student could too, which is why the teaching lock is no security boundary: see
:mod:`nbrefine.engine.teaching.policy`). The functions below it are the kernel-wide shortcuts the
adapters use (``kernel_policy_holder()``, ``cached(provider)``, ``apply_policy_line(...)``...).

May import: the standard library, :mod:`nbrefine.grounding`, :mod:`nbrefine.sandbox`,
:mod:`nbrefine.providers` and the engine's cost and teaching modules (not the session module: it
imports this one; a session is held as a :class:`Releasable`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..grounding.history import NotebookCell
from ..providers.base import Provider
from ..providers.cache import CachingProvider, ResponseStore
from ..sandbox import TrialPolicy
from .cost import Usage
from .teaching.hints import HintLedger
from .teaching.policy import PolicyHolder, TeachingPolicy

__all__ = [
    "KernelState",
    "Releasable",
    "add_to_kernel",
    "apply_policy_line",
    "cached",
    "current",
    "expect_confined_runs",
    "install_notebook_policy",
    "kernel_ledger",
    "kernel_policy_holder",
    "kernel_usage",
    "reset",
    "take_confined_run",
]


class Releasable(Protocol):
    """What the state needs of a session: to free its snapshot process when it is not needed."""

    def release(self) -> None: ...


@dataclass(eq=False)
class KernelState:
    """The state of one kernel: its latest session, its spending, its response cache, its
    teaching policy and the hints given so far."""

    session: Releasable | None = None  # the latest RefineSession; an older one is released when it goes
    usage: Usage = field(default_factory=Usage)  # everything spent on repairs so far
    responses: ResponseStore = field(default_factory=ResponseStore)  # replies already paid for
    policy_holder: PolicyHolder = field(default_factory=PolicyHolder)  # the teaching policy and its lock
    ledger: HintLedger = field(default_factory=HintLedger)  # the hints per failing cell
    #: the notebook's code cells in order, where a driver said (``nbrefine fix`` does): what a
    #: repair knows of cells below, cells that failed and cells the notebook locks
    notebook: tuple[NotebookCell, ...] | None = None
    #: runs of an accepted fix that the frontend or a driver makes (cell id, or the source where a
    #: cell has none) -> the policy they run under (nbrefine.sandbox.live); taken when they start
    confined_runs: dict[str, TrialPolicy] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def spend(self, usage: Usage) -> None:
        """Add what a run spent (runs may end in background threads at the same time)."""
        with self._lock:
            self.usage = self.usage + usage


_current = KernelState()


def current() -> KernelState:
    """This kernel's (process's) state."""
    return _current


def reset() -> KernelState:
    """Start over with a fresh state: no session, nothing spent or cached, the default policy
    unlocked, no hints. The latest session is released (its snapshot process ends)."""
    global _current
    old, _current = _current, KernelState()
    if old.session is not None:
        old.session.release()
    return _current


def kernel_usage() -> Usage:
    """Everything this kernel has spent on repairs so far."""
    return _current.usage


def add_to_kernel(usage: Usage) -> None:
    _current.spend(usage)


def cached(inner: Provider) -> CachingProvider:
    """``inner`` behind this kernel's response cache (the same failing cell again costs nothing)."""
    return CachingProvider(inner, _current.responses)


def kernel_policy_holder() -> PolicyHolder:
    """The teaching policy holder of this kernel."""
    return _current.policy_holder


def kernel_ledger() -> HintLedger:
    """The hints each failing cell has had in this kernel."""
    return _current.ledger


def install_notebook_policy(meta: Mapping[str, Any], holder: PolicyHolder | None = None) -> TeachingPolicy:
    """Set the policy of a notebook's ``metadata["nbrefine"]`` object on the kernel's policy holder (run in
    the kernel, e.g. with what :func:`~nbrefine.engine.teaching.notebook_policy` gives).
    ``ValueError`` / :class:`~nbrefine.engine.teaching.PolicyLockedError`."""
    return (holder or kernel_policy_holder()).install(meta)


def apply_policy_line(
    line: str, holder: PolicyHolder | None = None, *, source: str = "setup cell"
) -> TeachingPolicy:
    """``%refine policy ARGS`` on the kernel's policy holder (see :meth:`PolicyHolder.apply_line`)."""
    return (holder or kernel_policy_holder()).apply_line(line, source=source)


def expect_confined_runs(keys: list[str], policy: TrialPolicy) -> None:
    """The next runs of these cells (ids, or sources) are an accepted fix's: confine them."""
    runs = current().confined_runs
    runs.clear()  # a newer Accept replaces what an older one left unrun
    runs.update(dict.fromkeys(keys, policy))


def take_confined_run(cell_id: str | None, source: str) -> TrialPolicy | None:
    """The policy of a run that starts now, if it is one of an accepted fix's (it is taken)."""
    runs = current().confined_runs
    for key in (cell_id, source, source.strip()):
        if key and key in runs:
            return runs.pop(key)
    return None

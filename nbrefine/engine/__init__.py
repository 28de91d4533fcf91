"""The repair engine: what one failing cell's repair (or teaching turn) is, and how it runs.

- :mod:`.types`: the contracts: :data:`Status`, :class:`Attempt`, :class:`LoopResult`, the events;
- :mod:`.prompt`: the repair task (:class:`RepairTask`), the prompt built from it and the reply parser;
- :mod:`.loop`: the refine loop (ask, trial, feed back; stop on a pass, the cap, a cycle, regressions);
- :mod:`.verify`: what "verified" means (the gate) and the state fingerprints Accept compares;
- :mod:`.cost`: token usage and cost of replies, attempts and sessions;
- :mod:`.state`: what a kernel remembers between cells, in one holder (:class:`KernelState`);
- :mod:`.teaching`: the teaching modes (policy, hint prompt, the no-solution guard, the offline tutor);
- :mod:`.session`: :class:`RefineSession`, one failing cell's run and the user's decision on it;
- :mod:`.job`: :class:`JobBuilder`, a failing cell's :class:`RefineJob` assembled without IPython
  (sandbox choice, grounding, provider and cache, budget) from a :class:`KernelAccess`;
- :mod:`.provenance`: the record an accepted fix leaves in its cell's metadata;
- :mod:`.config`: ``Refine``, the settings (imported as ``nbrefine.engine.config.Refine``).

Code outside the engine imports from this package (``from nbrefine.engine import refine``);
the modules of the engine import each other by module, never through this file.

May import: the standard library, :mod:`nbrefine._errors`, :mod:`nbrefine._argparse` and the
layers below (:mod:`nbrefine.sandbox`, :mod:`nbrefine.providers`, :mod:`nbrefine.grounding`); never
IPython, ipywidgets, comm, nbclient, nor nbrefine's adapters (the IPython magics and panel, the
CLI, batch and reports).
"""

from __future__ import annotations

from .cost import PRICES, Usage, price_of, total, usage_of
from .job import (
    CellRun,
    JobBuilder,
    KernelAccess,
    budget_check,
    partial_run_note,
    undo_rebinds,
)
from .loop import LoopConfig, normalize_code, refine, verifier_for
from .prompt import SYSTEM_PROMPT, ParsedReply, RepairTask, build_request, parse_reply
from .provenance import FixProvenance, fix_provenance, read_provenance
from .session import (
    RefineJob,
    RefineSession,
    SessionStateError,
    UnverifiedFixError,
    attempt_mark,
    attempt_outcome,
    count_tries,
    describe_failure,
    last_session,
    plain_summary,
    provider_failed,
    session_for_request,
)
from .state import (
    KernelState,
    add_to_kernel,
    apply_policy_line,
    cached,
    current,
    install_notebook_policy,
    kernel_gate,
    kernel_ledger,
    kernel_usage,
)
from .teaching import (
    MODES,
    TEACHING_MODES,
    HintLedger,
    OfflineTutor,
    PolicyGate,
    PolicyLockedError,
    TeachingPolicy,
    TeachingResult,
    notebook_policy_code,
    policy_from_notebook,
    teach,
)
from .types import (
    EVENT_KINDS,
    STATUSES,
    Attempt,
    EventCallback,
    EventKind,
    LoopEvent,
    LoopResult,
    Status,
    StopReason,
    TrialRunner,
    Verifier,
)
from .verify import Gate, drift, fingerprints_of, names_read, plain_python

__all__ = [
    "EVENT_KINDS",
    "MODES",
    "PRICES",
    "STATUSES",
    "SYSTEM_PROMPT",
    "TEACHING_MODES",
    "Attempt",
    "CellRun",
    "EventCallback",
    "EventKind",
    "FixProvenance",
    "Gate",
    "HintLedger",
    "JobBuilder",
    "KernelAccess",
    "KernelState",
    "LoopConfig",
    "LoopEvent",
    "LoopResult",
    "OfflineTutor",
    "ParsedReply",
    "PolicyGate",
    "PolicyLockedError",
    "RefineJob",
    "RefineSession",
    "RepairTask",
    "SessionStateError",
    "Status",
    "StopReason",
    "TeachingPolicy",
    "TeachingResult",
    "TrialRunner",
    "UnverifiedFixError",
    "Usage",
    "Verifier",
    "add_to_kernel",
    "apply_policy_line",
    "attempt_mark",
    "attempt_outcome",
    "budget_check",
    "build_request",
    "cached",
    "count_tries",
    "current",
    "describe_failure",
    "drift",
    "fingerprints_of",
    "fix_provenance",
    "install_notebook_policy",
    "kernel_gate",
    "kernel_ledger",
    "kernel_usage",
    "last_session",
    "names_read",
    "normalize_code",
    "notebook_policy_code",
    "parse_reply",
    "partial_run_note",
    "plain_python",
    "plain_summary",
    "policy_from_notebook",
    "price_of",
    "provider_failed",
    "read_provenance",
    "refine",
    "session_for_request",
    "teach",
    "total",
    "undo_rebinds",
    "usage_of",
    "verifier_for",
]

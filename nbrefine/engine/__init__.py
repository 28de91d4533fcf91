"""The repair engine: what one failing cell's repair (or teaching turn) is, and how it runs.

- :mod:`.types`: the contracts: :data:`Status`, :class:`Attempt`, :class:`LoopResult`, the events;
- :mod:`.prompt`: the repair task (:class:`RepairTask`), the prompt built from it and the reply parser;
- :mod:`.loop`: the refine loop (ask, trial, feed back; stop on a pass, the cap, a cycle, regressions);
- :mod:`.verify`: what "verified" means (the checks verifier) and the state fingerprints Accept compares;
- :mod:`.cost`: token usage and cost of replies, attempts and sessions;
- :mod:`.kernel_state`: what a kernel remembers between cells, in one holder (:class:`KernelState`);
- :mod:`.teaching`: the teaching modes (policy, hint prompt, the no-solution guard, the offline tutor);
- :mod:`.session`: :class:`RefineSession`, one failing cell's run and the user's decision on it;
- :mod:`.job`: :class:`JobBuilder`, a failing cell's :class:`RefineJob` assembled without IPython
  (sandbox choice, grounding, provider and cache, budget) from a :class:`KernelAccess`;
- :mod:`.provenance`: the record an accepted fix leaves in its cell's metadata;
- :mod:`.config`: ``Refine``, the settings (imported as ``nbrefine.engine.config.Refine``);
- :mod:`.modes`: the names of the teaching modes (the settings and the ``%%refine`` options declare them).

Code outside the engine imports from this package (``from nbrefine.engine import refine``),
which imports the module of a name at its first use (``%load_ext nbrefine`` reads only
:mod:`.config` and :mod:`.modes`); the modules of the engine import each other by module,
never through this file.

May import: the standard library, :mod:`nbrefine._errors`, :mod:`nbrefine._argparse` and the
layers below (:mod:`nbrefine.sandbox`, :mod:`nbrefine.providers`, :mod:`nbrefine.grounding`); never
IPython, ipywidgets, comm, nbclient, nor nbrefine's adapters (the IPython magics and panel, the
CLI, batch and reports).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cost import PRICES, Usage, price_of, total, usage_of
    from .job import (
        CellRun,
        JobBuilder,
        KernelAccess,
        budget_check,
        partial_run_note,
        undo_rebinds,
    )
    from .kernel_state import (
        KernelState,
        add_to_kernel,
        apply_policy_line,
        cached,
        current,
        install_notebook_policy,
        kernel_ledger,
        kernel_policy_holder,
        kernel_usage,
    )
    from .loop import LoopConfig, normalize_code, refine, verifier_for
    from .modes import MODES, TEACHING_MODES
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
    from .teaching import (
        HintLedger,
        OfflineTutor,
        PolicyHolder,
        PolicyLockedError,
        TeachingPolicy,
        TeachingResult,
        notebook_policy,
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
    from .verify import ChecksVerifier, drift, fingerprints_of, names_read, plain_python

# Where each name is defined: imported there at its first use (``from nbrefine.engine import
# refine`` works as before), so that the settings (``.config``) and the names of the modes
# (``.modes``) load without the rest: ``%load_ext nbrefine`` and a passing cell never pay for the
# loop, the sandbox, the grounding or the providers (issue 20). tests/ipython/test_magics_load.py
# checks that this table and ``__all__`` name the same things.
_MODULE_OF: dict[str, str] = {
    name: module
    for module, names in (
        (".cost", ("PRICES", "Usage", "price_of", "total", "usage_of")),
        (
            ".job",
            ("CellRun", "JobBuilder", "KernelAccess", "budget_check", "partial_run_note", "undo_rebinds"),
        ),
        (".loop", ("LoopConfig", "normalize_code", "refine", "verifier_for")),
        (".modes", ("MODES", "TEACHING_MODES")),
        (".prompt", ("SYSTEM_PROMPT", "ParsedReply", "RepairTask", "build_request", "parse_reply")),
        (".provenance", ("FixProvenance", "fix_provenance", "read_provenance")),
        (
            ".session",
            (
                "RefineJob",
                "RefineSession",
                "SessionStateError",
                "UnverifiedFixError",
                "attempt_mark",
                "attempt_outcome",
                "count_tries",
                "describe_failure",
                "last_session",
                "plain_summary",
                "provider_failed",
                "session_for_request",
            ),
        ),
        (
            ".kernel_state",
            (
                "KernelState",
                "add_to_kernel",
                "apply_policy_line",
                "cached",
                "current",
                "install_notebook_policy",
                "kernel_policy_holder",
                "kernel_ledger",
                "kernel_usage",
            ),
        ),
        (
            ".teaching",
            (
                "HintLedger",
                "OfflineTutor",
                "PolicyHolder",
                "PolicyLockedError",
                "TeachingPolicy",
                "TeachingResult",
                "notebook_policy",
                "policy_from_notebook",
                "teach",
            ),
        ),
        (
            ".types",
            (
                "EVENT_KINDS",
                "STATUSES",
                "Attempt",
                "EventCallback",
                "EventKind",
                "LoopEvent",
                "LoopResult",
                "Status",
                "StopReason",
                "TrialRunner",
                "Verifier",
            ),
        ),
        (".verify", ("ChecksVerifier", "drift", "fingerprints_of", "names_read", "plain_python")),
    )
    for name in names
}

if not TYPE_CHECKING:  # hidden from mypy, which then checks every imported name against the block above

    def __getattr__(name: str) -> Any:
        module = _MODULE_OF.get(name)
        if module is None:  # AttributeError: `from nbrefine.engine import job` then imports the submodule
            raise AttributeError(f"module 'nbrefine.engine' has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value  # found without __getattr__ from now on
        return value


__all__ = [
    "EVENT_KINDS",
    "MODES",
    "PRICES",
    "STATUSES",
    "SYSTEM_PROMPT",
    "TEACHING_MODES",
    "Attempt",
    "CellRun",
    "ChecksVerifier",
    "EventCallback",
    "EventKind",
    "FixProvenance",
    "HintLedger",
    "JobBuilder",
    "KernelAccess",
    "KernelState",
    "LoopConfig",
    "LoopEvent",
    "LoopResult",
    "OfflineTutor",
    "ParsedReply",
    "PolicyHolder",
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
    "kernel_ledger",
    "kernel_policy_holder",
    "kernel_usage",
    "last_session",
    "names_read",
    "normalize_code",
    "notebook_policy",
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

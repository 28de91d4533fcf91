"""Teaching modes: explanations and graduated hints instead of answers.

- :mod:`.policy`: the modes, the instructor's :class:`TeachingPolicy` and the :class:`PolicyHolder`
  that holds a kernel's policy and its lock;
- :mod:`.hints`: hints per failing cell (:class:`HintLedger`) and what asking again gives
  (:func:`next_step`);
- :mod:`.tutor_prompt`: the tutor's prompt (:func:`teaching_request`);
- :mod:`.guard`: the guarantee that no code in a reply solves the cell (:func:`guard_reply`), and
  :mod:`.rewrite`: the reply without that code, every sentence reading whole (:func:`reads_whole`);
- :mod:`.texts` and :mod:`.tutor`: the offline tutor, nbrefine's own explanations and hints
  without a model;
- :mod:`.turn`: one teaching turn (:func:`teach`), which the session runs; a reply left too little
  once its code is withheld is asked for again, saying why.

The kernel's own policy holder and ledger are kept by :mod:`nbrefine.engine.kernel_state`
(``kernel_policy_holder()``, ``kernel_ledger()``, ``install_notebook_policy``, ``apply_policy_line``).

Inside, imports go one way: policy, then hints, then prompt, rewrite, guard and texts, then tutor,
then turn.
May import: the standard library, :mod:`nbrefine._errors`, :mod:`nbrefine._argparse`, the layers below
the engine and the engine's loop and prompt; never IPython or nbrefine's adapters (the magic, the
panel and the CLI adapt this package).
"""

from __future__ import annotations

from ..._errors import PolicyLockedError
from ..modes import MODES, TEACHING_MODES
from .guard import GuardedReply, SnippetCheck, guard_reply
from .hints import HintLedger, TeachingStep, next_step
from .policy import (
    PolicyHolder,
    TeachingPolicy,
    notebook_policy,
    parse_policy_args,
    policy_from_notebook,
)
from .rewrite import reads_whole, withheld_note
from .turn import TeachingResult, teach
from .tutor import OfflineTutor, tutor_text
from .tutor_prompt import TEACHING_SYSTEM_PROMPT, teaching_request

__all__ = [
    "MODES",
    "TEACHING_MODES",
    "TEACHING_SYSTEM_PROMPT",
    "GuardedReply",
    "HintLedger",
    "OfflineTutor",
    "PolicyHolder",
    "PolicyLockedError",
    "SnippetCheck",
    "TeachingPolicy",
    "TeachingResult",
    "TeachingStep",
    "guard_reply",
    "next_step",
    "notebook_policy",
    "parse_policy_args",
    "policy_from_notebook",
    "reads_whole",
    "teach",
    "teaching_request",
    "tutor_text",
    "withheld_note",
]

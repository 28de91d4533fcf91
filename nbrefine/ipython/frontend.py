"""What a front end runs in the kernel on nbrefine's behalf: the JupyterLab extension's set-up of a
notebook's teaching policy.

When a notebook whose metadata has an ``nbrefine`` object opens in JupyterLab (or Notebook 7), and
again after each kernel restart or change, the extension calls ``open_notebook`` of the in-kernel
API (:mod:`.kernel_api`), silently (no output, no execution count, no history)::

    __import__("nbrefine.ipython.kernel_api", fromlist=["_"]).call('{"name": "open_notebook", ...}')

so a student who opens a locked exercise sheet has its policy before running anything, exactly as
if the setup cell had run (``%load_ext nbrefine`` + ``%refine policy ...`` + ``%refine auto offer``).
An expression, so it binds no name in the student's namespace.

May import: :func:`nbrefine.load_ipython_extension`, :mod:`nbrefine.engine` and the standard library.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["open_notebook"]


def open_notebook(metadata_json: str, shell: Any) -> str:
    """Load nbrefine in ``shell``, install the policy of a notebook's ``metadata["nbrefine"]``
    object (given as JSON text) and, in a teaching mode, offer help under failing cells (automatic
    mode ``offer``, unless it is on already). Returns the policy in words.

    The metadata is checked before anything is loaded: ``ValueError`` (one line) for a bad one,
    :class:`~nbrefine.engine.teaching.PolicyLockedError` when it would loosen a policy locked earlier in
    this kernel (the stricter one stays)."""
    from .. import load_ipython_extension
    from ..engine import TeachingPolicy, install_notebook_policy
    from ..engine.config import Refine

    try:
        meta = json.loads(metadata_json)
    except ValueError as err:
        raise ValueError(f"nbrefine metadata: not JSON ({err})") from None
    TeachingPolicy.from_metadata(meta)
    # Not through the extension manager: a setup cell's own `%load_ext nbrefine` then loads it
    # quietly (nbrefine's loader does nothing the second time) instead of printing "already loaded".
    load_ipython_extension(shell)
    policy = install_notebook_policy(meta)
    settings = next((c for c in shell.configurables if isinstance(c, Refine)), None)
    if policy.teaching and settings is not None and settings.auto == "off":
        settings.auto = "offer"  # a "Get a hint" button under a failing cell, as the setup cell does
    return policy.describe()

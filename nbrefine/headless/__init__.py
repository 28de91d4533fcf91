"""Headless runs: a notebook run and repaired in a real Jupyter kernel, driven from outside it.

- :mod:`.kernel`: the one kernel driver (nbclient): start a kernel, run code in it, read values
  and ``%%refine`` sessions back;
- :mod:`.session_json`: a session as JSON (:class:`SessionJSON`), computed in the kernel;
- :mod:`.settings`: the ONE table of the ``Refine`` traits a command line sets in its kernel;
- :mod:`.notebook_files`: reading, validating and writing notebook files;
- :mod:`.fixer`: the repair of one notebook (:class:`Fixer`), with its results;
- :mod:`.notebook_run`: :func:`run_notebook`, one notebook's whole run (``nbrefine fix`` and each
  job of a batch).

``nbrefine fix`` (``nbrefine.cli``), each job of a batch (``nbrefine.batch``) and ``nbrefine bench``
run on these. The layers: cli > batch > reports > headless > engine.

May import: :mod:`nbrefine._errors`, the engine and the layers below it, the standard library,
nbclient, nbformat and jupyter_client; never IPython, nor :mod:`nbrefine.cli`, :mod:`nbrefine.batch`
or :mod:`nbrefine.reports`.
"""

from __future__ import annotations

from .fixer import (
    EXIT_FAILING,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CellResult,
    Fixer,
    FixOptions,
    ProviderChoice,
    RunResult,
    choose_provider,
)
from .kernel import TIMEOUT_ENAME, Execution, KernelDriver, SpareKernels, check_kernel, open_kernel
from .notebook_files import notebook_text, parse_notebook, read_notebook
from .notebook_run import NotebookRun, kernel_name_of, run_notebook
from .session_json import AttemptJSON, FailureJSON, SessionJSON, TeachingJSON

__all__ = [
    "EXIT_FAILING",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "TIMEOUT_ENAME",
    "AttemptJSON",
    "CellResult",
    "Execution",
    "FailureJSON",
    "FixOptions",
    "Fixer",
    "KernelDriver",
    "NotebookRun",
    "ProviderChoice",
    "RunResult",
    "SessionJSON",
    "SpareKernels",
    "TeachingJSON",
    "check_kernel",
    "choose_provider",
    "kernel_name_of",
    "notebook_text",
    "open_kernel",
    "parse_notebook",
    "read_notebook",
    "run_notebook",
]

"""One notebook's headless run, from its options to its results: :func:`run_notebook`.

``nbrefine fix`` on one notebook (``nbrefine.cli.fix.fix``) and each job of a batch
(``nbrefine.batch.notebook_job.repair_one``) run a notebook through this one function: pick and check its
kernel, check the teaching options against the notebook's policy, plan the cells, open the kernel,
run and repair the cells (:class:`~.fixer.Fixer`), and, if asked, read what the kernel spent on
model replies. What the callers do around it (files, reports, a batch's events) stays theirs.

May import: :mod:`nbrefine._errors`, the engine (for annotations), and the rest of this package.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import KernelCallError, KernelDiedError
from .fixer import Fixer, FixOptions, ProviderChoice, RunResult
from .kernel import KernelDriver, SpareKernels, check_kernel, open_kernel

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from ..engine import TeachingPolicy

__all__ = ["NotebookRun", "kernel_name_of", "run_notebook"]


@dataclass
class NotebookRun:
    """What :func:`run_notebook` did: the cells' results, the teaching policy the cells got, the
    kernel, what it spent (None: not asked, or not known) and each part's time."""

    run: RunResult
    policy: TeachingPolicy
    kernel_name: str
    usage: dict[str, Any] | None = None
    #: kernel_start_s, setup_s (loading nbrefine in the kernel), cells_s, shutdown_s
    timings: dict[str, float] = field(default_factory=dict)


def kernel_name_of(opts: FixOptions, notebook: NotebookNode) -> str:
    """The kernel a notebook runs in: ``--kernel``, else its kernelspec's, else python3."""
    return opts.kernel or notebook.metadata.get("kernelspec", {}).get("name") or "python3"


def run_notebook(
    opts: FixOptions,
    choice: ProviderChoice,
    notebook: NotebookNode,
    folder: Path,
    *,
    gate: str | None = None,
    on_line: Callable[[str], None] | None = None,
    on_start: Callable[[str], None] | None = None,
    on_kernel: Callable[[KernelDriver], None] | None = None,
    spares: SpareKernels | None = None,
    note: Callable[[str], None] | None = None,
    usage: bool = False,
) -> NotebookRun:
    """Run ``notebook`` cell by cell in a kernel started in ``folder``, repairing the selected
    cells that fail; the kernel is shut down before this returns. :class:`BadInputError` (one
    line) for what is wrong before any cell runs (the kernel, the teaching options, ``--cells``).

    ``gate``: a batch's request gate spec (see :class:`~.fixer.Fixer`); ``on_line``: each cell's
    progress line; ``on_start(kernel_name)``: everything checked, the kernel about to start;
    ``on_kernel(driver)``: the kernel is ready, no cell run yet; ``spares`` and ``note``: see
    :func:`~.kernel.open_kernel`; ``usage``: read what the kernel spent on model replies (when
    the run did not stop early). ``run.duration_s`` is the whole run, with the kernel's start and
    shutdown."""
    kernel_name = kernel_name_of(opts, notebook)
    check_kernel(kernel_name)
    fixer = Fixer(opts, choice, notebook, gate=gate, on_line=on_line)
    policy = fixer.check_teaching()
    cells = fixer.plan()
    if on_start is not None:
        on_start(kernel_name)
    timings: dict[str, float] = {}
    started = clock = time.perf_counter()
    spent: dict[str, Any] | None = None
    with open_kernel(notebook, kernel_name, folder, opts.cell_timeout, spares=spares, note=note) as kernel:
        timings["kernel_start_s"] = round(time.perf_counter() - clock, 3)
        if on_kernel is not None:
            on_kernel(kernel)
        clock = time.perf_counter()
        run = fixer.run(kernel, cells)
        timings["setup_s"] = round(fixer.setup_s, 3)
        timings["cells_s"] = round(time.perf_counter() - clock - fixer.setup_s, 3)
        if usage and not run.stopped:
            spent = _usage(kernel)
        clock = time.perf_counter()
    timings["shutdown_s"] = round(time.perf_counter() - clock, 3)
    run.duration_s = time.perf_counter() - started
    return NotebookRun(run, policy, kernel_name, spent, timings)


def _usage(kernel: KernelDriver) -> dict[str, Any] | None:
    """What this notebook's kernel spent on model replies (one kernel per notebook)."""
    try:
        value = kernel.call("usage")
    except (KernelDiedError, KernelCallError):
        return None
    return value if isinstance(value, dict) else None

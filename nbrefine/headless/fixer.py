"""Repair one notebook headlessly: run it cell by cell in a real kernel, fixing the cells that fail.

Each code cell runs wrapped in ``%%refine``, so a snapshot of the state before the cell exists.
When a cell fails and a fix passes its trial run, the fix is accepted (it runs for real in the
kernel, the state advances), the fixed source goes into the cell with its provenance in the cell's
metadata (:mod:`nbrefine.engine.provenance`), and the run goes on. Unfixed cells keep their error
output. ``nbrefine fix`` runs one :class:`Fixer` for one notebook; a batch job
(:func:`nbrefine.batch.notebook_job.repair_one`) runs one per notebook.

May import: :mod:`nbrefine._errors`, the engine and the layers below it (to read a notebook's
teaching policy, to name the providers, to write provenance), :mod:`nbrefine.grounding`,
:mod:`nbrefine._version` and the rest of this package; never IPython (the kernel is reached through
:mod:`.kernel`).
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import BadInputError, KernelCallError, KernelDiedError
from .._version import __version__
from ..grounding.text import clip
from .kernel import TIMEOUT_ENAME, Execution, KernelDriver
from .notebook_files import coalesce, first_line, nbf, plain_json, until_first_error
from .session_json import AttemptJSON, PlanJSON, SessionJSON, TeachingJSON
from .settings import TRAIT_FLAGS, cell_options, config_values

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from ..engine import TeachingPolicy

__all__ = [
    "EXIT_FAILING",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CellResult",
    "FixOptions",
    "Fixer",
    "ProviderChoice",
    "RunResult",
    "choose_provider",
]

#: ``nbrefine fix``'s exit statuses (a report records the one its run had).
EXIT_OK, EXIT_FAILING, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


@dataclass(frozen=True)
class FixOptions:
    notebook: Path
    output: Path | None  # None: --dry-run
    in_place: bool
    provider: str | None
    model: str | None
    max_attempts: int | None
    timeout: float | None
    cell_timeout: int
    report: Path | None
    kernel: str | None
    cells: frozenset[int] | None
    quick_fixes: bool
    mode: str | None = None  # teaching mode (the %%refine cell option)
    max_hints: int | None = None
    early_trials: bool = True  # trials started while a reply still streams (--no-early-trials)
    #: apply fixes that run but that nothing checks (they change what a cell computes): proposals
    apply_proposals: bool = False

    def trait_values(self) -> dict[str, Any]:
        """The Refine traits these options set (see :mod:`.settings`)."""
        return {flag.trait: getattr(self, flag.trait) for flag in TRAIT_FLAGS}


@dataclass(frozen=True)
class ProviderChoice:
    name: str
    requested: str
    note: str
    quick_fixes: bool
    model: str

    def describe(self) -> str:
        notes = []
        if self.requested in ("", "auto"):
            notes.append(
                "no ANTHROPIC_API_KEY set: only the offline quick fixes are used"
                if self.name == "offline"
                else "ANTHROPIC_API_KEY is set"
            )
        if self.name != "offline" and self.quick_fixes:
            notes.append("offline quick fixes first")
        if self.model:
            notes.append(f"model {self.model}")
        return f"provider: {self.name}" + (f" ({'; '.join(notes)})" if notes else "")


def choose_provider(opts: FixOptions) -> ProviderChoice:
    """The provider the run's kernels will use, resolved here once (auto: by the environment)."""
    from ..providers import available_providers, resolve_provider_name

    requested = opts.provider or os.environ.get("NBREFINE_PROVIDER", "").strip() or "auto"
    name, note = resolve_provider_name(requested, os.environ)
    if name not in available_providers():
        raise BadInputError(f"unknown provider {name!r}; available: auto, {', '.join(available_providers())}")
    model = opts.model if opts.model is not None else os.environ.get("NBREFINE_MODEL", "").strip()
    return ProviderChoice(name, requested, note, opts.quick_fixes, model)


def offline_model() -> str:
    """The model name the offline provider puts on its replies (to tell which tier fixed a cell)."""
    try:
        from ..providers.offline import OfflineProvider
    except ImportError:
        return "offline"
    try:
        return str(OfflineProvider().model)
    except Exception:
        return "offline"


# --------------------------------------------------------------------------- results


@dataclass
class CellResult:
    """What happened to one code cell."""

    number: int  # 1-based among the code cells (the numbers --cells uses)
    index: int  # position in the notebook
    cell_id: str | None
    selected: bool
    status: str = "not_run"  # "passed" | "fixed" | "unfixed" | "empty" | "skipped" | "not_run"
    error_type: str | None = None
    error_message: str = ""
    reason: str = ""  # why an unfixed cell stayed unfixed
    attempts: list[AttemptJSON] = field(default_factory=list)
    provider: str = ""
    model: str = ""
    repair_s: float = 0.0
    duration_s: float = 0.0
    original_source: str = ""
    fixed_source: str | None = None
    diff: str = ""
    explanation: str = ""
    hint: TeachingJSON | None = None  # teaching modes: the hint or explanation given
    cause: str = ""  # where the failure is caused, when another cell ("In [2] fails because In [1] failed")
    proposal: str = ""  # the fix runs, but nothing checks what it changes: not applied by default
    proposed_source: str | None = None  # that proposal
    changed_cells: list[dict[str, Any]] = field(default_factory=list)  # a fix in other cells: id, label, diff
    moved: list[dict[str, Any]] = field(default_factory=list)  # cells the fix moved: id, above
    accept_note: str = ""  # what Accept found about the live state, and put back

    @property
    def failed(self) -> bool:
        return self.status in ("fixed", "unfixed")

    def failing_text(self) -> str:
        """``KeyError: 'x' — why it stayed unfixed``, without saying the error twice."""
        error = first_line(self.error_message)
        detail = f"{self.error_type}: {error}" if self.error_type else error
        why = first_line(self.reason)
        if error and why.endswith(f": {error}"):
            why = why[: -len(error) - 2]
        return f"{detail} — {why}" if why else detail

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.number,
            "index": self.index,
            "id": self.cell_id,
            "selected": self.selected,
            "status": self.status,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "reason": self.reason,
            "attempts": self.attempts,
            "provider": self.provider,
            "model": self.model,
            "repair_s": round(self.repair_s, 3),
            "duration_s": round(self.duration_s, 3),
            "original_source": self.original_source,
            "fixed_source": self.fixed_source,
            "diff": self.diff,
            "explanation": self.explanation,
            "hint": self.hint,
            "cause": self.cause,
            "proposal": self.proposal,
            "proposed_source": self.proposed_source,
            "changed_cells": self.changed_cells,
            "moved": self.moved,
            "accept_note": self.accept_note,
        }


@dataclass
class RunResult:
    cells: list[CellResult]
    stopped: str = ""  # why the run stopped early (the kernel died)
    duration_s: float = 0.0

    @property
    def ran(self) -> list[CellResult]:
        return [c for c in self.cells if c.status not in ("not_run", "empty", "skipped")]

    @property
    def all_pass(self) -> bool:
        return not self.stopped and all(
            c.status in ("passed", "fixed", "empty", "skipped") for c in self.cells
        )

    def summary(self) -> dict[str, Any]:
        ran = self.ran
        fixed = [c for c in ran if c.status == "fixed"]
        after: Counter[int] = Counter(len(c.attempts) for c in fixed if len(c.attempts) > 1)
        by_type: dict[str, dict[str, int]] = {}
        for cell in ran:
            if cell.failed:
                row = by_type.setdefault(cell.error_type or "?", {"failed": 0, "fixed": 0, "unfixed": 0})
                row["failed"] += 1
                row["fixed" if cell.status == "fixed" else "unfixed"] += 1
        return {
            "cells_run": len(ran),
            "passed_as_they_were": sum(c.status == "passed" for c in ran),
            "failed": sum(c.failed for c in ran),
            "fixed_at_first_attempt": sum(len(c.attempts) == 1 for c in fixed),
            "fixed_after_attempts": {str(n): after[n] for n in sorted(after)},
            "unfixed": sum(c.status == "unfixed" for c in ran),
            "proposals": sum(bool(c.proposal) for c in ran),
            "fixed_in_another_cell": sum(bool(c.changed_cells or c.moved) for c in fixed),
            "not_run": sum(c.status == "not_run" for c in self.cells),
            "by_error_type": dict(sorted(by_type.items())),
        }


# --------------------------------------------------------------------------- the run


class Fixer:
    """Runs every code cell; repairs the selected ones that fail."""

    def __init__(
        self,
        opts: FixOptions,
        choice: ProviderChoice,
        notebook: NotebookNode,
        *,
        gate: str | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.opts, self.choice, self.notebook = opts, choice, notebook
        # A batch shares one model-request limit and budget between its kernels: ``gate`` is
        # its spec (see nbrefine.batch.gate), installed in the kernel with the extension.
        self.gate = gate
        self.on_line = on_line or _progress
        self.setup_s = 0.0  # loading nbrefine in the kernel (the batch reports it per notebook)
        self.offline_model = offline_model()
        self.refine_line = "%%refine" + cell_options(opts.trait_values())
        self.count = 0
        self.results: list[CellResult] = []

    # ---------------------------------------------------------------- set-up

    def check_teaching(self) -> TeachingPolicy:
        """``--mode`` / ``--max-hints`` go on every ``%%refine`` line, where a locked notebook
        policy refuses a loosening: refuse it now, once, before any kernel starts. Returns the
        policy the cells get (a setup cell of the notebook may still change it)."""
        from ..engine import PolicyHolder, PolicyLockedError, policy_from_notebook

        try:
            policy = policy_from_notebook(self.notebook.metadata)
        except ValueError as err:
            raise BadInputError(f"the notebook's nbrefine policy is not valid: {err}") from None
        try:
            return PolicyHolder(policy).effective(self.opts.mode, self.opts.max_hints)
        except (PolicyLockedError, ValueError) as err:
            raise BadInputError(f"--mode/--max-hints: {err}") from None

    def setup_args(self) -> tuple[dict[str, Any], dict[str, Any] | None, str | None, bool]:
        """The arguments of the in-kernel ``setup_run``: the ``%config`` traits, the notebook's
        policy (an instructor's, if any), the batch's gate spec, and sessions published by the
        cells that make them."""
        from ..engine import notebook_policy

        try:
            policy = notebook_policy(self.notebook.metadata)  # an instructor's policy, if any
        except ValueError as err:
            raise BadInputError(f"the notebook's nbrefine policy is not valid: {err}") from None
        # Most cells of a notebook pass: their snapshots get no trial ready ahead (Refine.trials_ahead).
        config = {**config_values(self.opts.trait_values()), "trials_ahead": False}
        return config, policy, self.gate, True

    def plan(self) -> list[CellResult]:
        results = []
        number = 0
        for index, cell in enumerate(self.notebook.cells):
            if cell.cell_type != "code":
                continue
            number += 1
            selected = self.opts.cells is None or number in self.opts.cells
            result = CellResult(number, index, cell.get("id"), selected, original_source=cell.source)
            if not cell.source.strip():
                result.status = "empty"
            elif "skip-execution" in cell.metadata.get("tags", []):
                result.status = "skipped"
            results.append(result)
        if self.opts.cells is not None and results and max(self.opts.cells) > len(results):
            raise BadInputError(f"--cells: the notebook has only {len(results)} code cell(s)")
        if self.opts.cells is not None and not results:
            raise BadInputError("--cells: the notebook has no code cells")
        return results

    def run(self, kernel: KernelDriver, results: list[CellResult]) -> RunResult:
        started = time.perf_counter()
        args = self.setup_args()
        try:
            kernel.call("setup_run", *args)
        except KernelCallError as err:
            raise BadInputError(f"the kernel cannot load nbrefine: {err}") from None
        self.setup_s = time.perf_counter() - started
        todo = [r for r in results if r.status == "not_run"]
        run = RunResult(results)
        self.results = results
        self.tell_notebook(kernel)
        for position, result in enumerate(todo, 1):
            if result.status != "not_run":
                continue  # a fix of an earlier cell already ran it (a cell moved above it)
            cell_started = time.perf_counter()
            try:
                self.run_cell(kernel, result)
            except KernelDiedError as err:
                message = "the kernel died while the cell ran" + (f" ({err})" if str(err) else "")
                result.status = "unfixed"
                result.error_type = "DeadKernelError"
                result.error_message = message
                result.reason = "the run stopped here"
                self.notebook.cells[result.index].outputs = [
                    nbf().v4.new_output("error", ename="DeadKernelError", evalue=message, traceback=[])
                ]
                run.stopped = f"the kernel died while cell {result.number} ran; later cells were not run"
            result.duration_s = time.perf_counter() - cell_started
            self.on_line(f"[{position}/{len(todo)}] cell {result.number}: {self.describe(result)}")
            if run.stopped:
                break
        return run

    def describe(self, result: CellResult) -> str:
        if result.status == "passed":
            return "ok"
        head = f"{result.error_type} → " if result.error_type else ""
        if result.status == "fixed":
            n = len(result.attempts)
            return f"{head}fixed at attempt {n} ({result.provider}, {result.repair_s:.2f} s)"
        return clip(f"still failing: {result.failing_text()}", 240)

    # ---------------------------------------------------------------- one cell

    def run_cell(self, kernel: KernelDriver, result: CellResult) -> None:
        self._run_cell(kernel, result)
        cell = self.notebook.cells[result.index]
        for output in cell.outputs:  # the accepted run's result carries the kernel's own count
            if output.get("output_type") == "execute_result":
                output["execution_count"] = cell.execution_count

    def _run_cell(self, kernel: KernelDriver, result: CellResult) -> None:
        cell = self.notebook.cells[result.index]
        source = cell.source
        head = source.partition("\n")[0]
        as_is = head.lstrip().startswith("%%refine")
        # ``%refine accept|reject|status`` cells drive nbrefine themselves, and a cell tagged
        # raises-exception is meant to fail: run them as they are.
        expected_error = "raises-exception" in cell.metadata.get("tags", [])
        wrapped = (
            result.selected and not as_is and not expected_error and not head.lstrip().startswith("%refine")
        )
        code = f"{self.refine_line}\n{source}" if wrapped else source
        self.count += 1
        cell.execution_count = self.count
        run = kernel.run(code, result.index, store_history=True, count=self.count)
        if run.timed_out:
            result.status = "unfixed"
            result.error_type = TIMEOUT_ENAME
            result.error_message = run.evalue
            result.reason = "see --cell-timeout"
            timeout = nbf().v4.new_output("error", ename=TIMEOUT_ENAME, evalue=run.evalue, traceback=[])
            cell.outputs = [*coalesce(run.outputs), timeout]
            return
        if run.ok or expected_error:
            cell.outputs = coalesce(run.outputs)
            result.status = "passed"  # with raises-exception, failing is passing
            return
        result.status = "unfixed"
        result.error_type = run.ename or None
        result.error_message = first_line(run.evalue)
        if not result.selected or not (wrapped or as_is) or run.ename != "RefineStop":
            cell.outputs = coalesce(run.outputs)
            result.reason = "" if result.selected else "not selected by --cells"
            return
        session = kernel.session(run, result.index)
        if session is None:
            _no_session(result, cell, run)
            return
        self.take_session(result, session)
        teaching = session["teaching"]
        if teaching and teaching["status"] != "fix_loop":
            _take_hint(result, cell, run, teaching, as_is)
            return
        if session["cause"] is not None and session["cause"]["kind"] not in ("here",):
            result.cause = session["cause"]["sentence"]
        if session["status"] == "fixed" and session["needs_review"]:
            self._propose(result, cell, run, session, as_is, review=True)
            return
        if session["status"] == "fixed" and session["unchecked"] and not self.opts.apply_proposals:
            self._propose(result, cell, run, session, as_is)
            return
        if session["status"] != "fixed" or session["fixed_code"] is None:
            cell.outputs = coalesce(run.outputs if as_is else until_first_error(run.outputs))
            message = session["message"] or "no fix"
            unfixed = session["status"] in ("unfixed", "changes_checks")  # the latter says it is unverified
            result.reason = message if unfixed else f"{session['status']}: {message}"
            return
        plan = session["plan"]
        if plan is not None and plan["spans_cells"]:
            self._accept_plan(kernel, result, run, session, plan, as_is)
            return
        self._accept(kernel, result, cell, run, session, as_is)

    def _propose(
        self,
        result: CellResult,
        cell: Any,
        run: Execution,
        session: SessionJSON,
        as_is: bool,
        review: bool = False,
    ) -> None:
        """A fix that runs but that nothing checks (``--apply-proposals`` applies it), or one that
        adds what its cell did not do (``review``: never applied here; a person decides): reported,
        kept in the notebook's metadata, not run."""
        cell.outputs = coalesce(run.outputs if as_is else until_first_error(run.outputs))
        result.proposed_source = session["fixed_code"]
        if review:
            adds = "; ".join(session["needs_review"][:3])
            result.proposal = f"needs review: it {adds}"
            result.reason = f"needs review, not applied: the fix adds what the cell did not do ({adds})"
        else:
            result.proposal = session["unchecked"]
            result.reason = (
                f"a proposal, not applied: it runs, but nothing checks the result ({session['unchecked']})"
            )
        cell.metadata["nbrefine"] = {
            "proposal": session["fixed_code"],
            "unchecked": session["unchecked"],
            "needs_review": session["needs_review"],
            "error_type": result.error_type,
            "version": __version__,
        }

    # ---------------------------------------------------------------- a fix in other cells

    def tell_notebook(self, kernel: KernelDriver) -> None:
        """Tell the kernel the notebook's code cells in order (ids, sources, locks): a repair there
        then knows the cells below, and the cells nbgrader locks."""
        cells = [
            {"id": c.get("id"), "source": c.source, "metadata": dict(c.metadata)}
            for c in self.notebook.cells
            if c.cell_type == "code" and c.get("id")
        ]
        kernel.call("tell_notebook", plain_json(cells))

    def _index_of(self, cell_id: str | None) -> int | None:
        return next(
            (i for i, c in enumerate(self.notebook.cells) if cell_id and c.get("id") == cell_id), None
        )

    def _move(self, cell_id: str | None, above: str | None) -> bool:
        """Move cell ``cell_id`` just above cell ``above``; the results follow their cells."""
        source, target = self._index_of(cell_id), self._index_of(above)
        if source is None or target is None:
            return False
        cell = self.notebook.cells.pop(source)
        self.notebook.cells.insert(self._index_of(above) or 0, cell)
        for result in self.results:
            found = self._index_of(result.cell_id)
            if found is not None:
                result.index = found
        return True

    def _accept_plan(
        self,
        kernel: KernelDriver,
        result: CellResult,
        run: Execution,
        session: SessionJSON,
        plan: PlanJSON,
        as_is: bool,
    ) -> None:
        """Accept a fix that spans cells: write every changed cell (with its provenance), move the
        moved ones, then run the plan's cells in order, each with its own outputs."""
        from ..engine import fix_provenance

        failing = self.notebook.cells[result.index]
        failing.outputs = coalesce(run.outputs if as_is else until_first_error(run.outputs))
        ids = [c["cell_id"] for c in plan["changes"]] + [m["cell_id"] for m in plan["moves"]]
        if any(self._index_of(cell_id) is None for cell_id in ids):
            result.reason = "not applied: the fix is for a cell nbrefine cannot find in the notebook"
            return
        try:
            after = kernel.call("accept_plan", run.request_id, index=result.index)
        except KernelCallError as err:
            result.reason = f"not applied: {err}"
            return
        if after is None or after["decision"] == "pending":
            refused = after["accept_refused"] if after is not None else ""
            result.reason = f"not applied: {refused or 'Accept refused it'}"
            return
        for move in plan["moves"]:
            self._move(move["cell_id"], move["above"])
            result.moved.append({"id": move["cell_id"], "above": move["above"]})
        for change in plan["changes"]:
            cell = self.notebook.cells[self._index_of(change["cell_id"]) or 0]
            original = cell.source
            head = original.partition("\n")[0]
            keep_head = head.lstrip().startswith("%%refine") and not change["source"].lstrip().startswith(
                "%%"
            )
            cell.source = f"{head}\n{change['source']}" if keep_head else change["source"]
            cell.metadata["nbrefine"] = fix_provenance(
                original_source=original,
                attempts=len(result.attempts),
                provider=result.provider,
                model=result.model,
                verified=True,
                error_type=result.error_type,
                explanation=result.explanation,
            )
            result.changed_cells.append(
                {"id": change["cell_id"], "label": change["label"], "diff": change["diff"]}
            )
            if change["cell_id"] == result.cell_id:
                result.fixed_source = cell.source
        raised = self._run_plan(kernel, plan)
        if raised:
            result.reason = (
                f"the fix passed its trial run but raised when its cells ran in the kernel: {raised}"
            )
            return
        result.status = "fixed"
        result.diff = "\n".join(f"{c['label']}\n{c['diff']}" for c in plan["changes"]) or result.diff
        self.tell_notebook(kernel)

    def _run_plan(self, kernel: KernelDriver, plan: PlanJSON) -> str:
        """Run the plan's cells in order, each at its place; the first error ("" : none)."""
        for step in plan["runs"]:
            index = self._index_of(step["cell_id"])
            if index is None:
                return f"cell {step['cell_id']!r} is not in the notebook"
            cell = self.notebook.cells[index]
            self.count += 1
            cell.execution_count = self.count
            ran = kernel.run(cell.source, index, store_history=True, count=self.count)
            cell.outputs = coalesce(ran.outputs)
            owner = next((r for r in self.results if r.cell_id == step["cell_id"]), None)
            if owner is not None and owner.status == "not_run":
                owner.status = "passed" if ran.ok else "unfixed"
            if not ran.ok:
                return f"{ran.ename}: {first_line(ran.evalue)}"
        return ""

    def _accept(
        self,
        kernel: KernelDriver,
        result: CellResult,
        cell: Any,
        run: Execution,
        session: SessionJSON,
        as_is: bool,
    ) -> None:
        """Accept the verified fix in the kernel (it runs for real) and write it into the cell."""
        from ..engine import fix_provenance

        try:
            accepted, after = kernel.run_call("accept", run.request_id, index=result.index)
        except KernelCallError as err:
            cell.outputs = coalesce(run.outputs if as_is else until_first_error(run.outputs))
            result.reason = f"not applied: {err}"
            return
        if after is not None and after["decision"] == "pending":  # Accept ran nothing: see accept()
            cell.outputs = coalesce(run.outputs if as_is else until_first_error(run.outputs))
            result.reason = f"not applied: {after['accept_refused'] or 'Accept refused it'}"
            return
        result.accept_note = after["live_check"] if after is not None else ""
        source = cell.source
        fixed_code = session["fixed_code"] or ""
        head = source.partition("\n")[0]
        result.fixed_source = f"{head}\n{fixed_code}" if as_is else fixed_code
        cell.source = result.fixed_source
        cell.outputs = coalesce(accepted.outputs)
        provenance = fix_provenance(
            original_source=source,
            attempts=len(result.attempts),
            provider=result.provider,
            model=result.model,
            verified=True,  # Accept applies only a verified fix (above: else it stays pending)
            error_type=result.error_type,
            explanation=result.explanation,
        )
        if accepted.ok and after and after["accept_ok"]:
            result.status = "fixed"
        else:
            errors = [o for o in accepted.outputs if o.get("output_type") == "error"]
            raised = f"{errors[0].get('ename')}: {errors[0].get('evalue')}" if errors else accepted.evalue
            result.reason = f"the fix passed its trial run but raised when accepted in the kernel: {raised}"
            provenance["accept_failed"] = raised
        cell.metadata["nbrefine"] = provenance

    def take_session(self, result: CellResult, session: SessionJSON) -> None:
        failure = session["failure"]
        if failure:
            result.error_type = failure["error_type"] or result.error_type
            result.error_message = first_line(failure["message"] or "") or result.error_message
        result.attempts = list(session["attempts"])
        result.repair_s = sum(float(a["duration_s"] or 0.0) for a in result.attempts)
        result.diff = session["diff"] or ""
        result.explanation = session["explanation"] or ""
        last = result.attempts[-1] if result.attempts else None
        result.model = (last["model"] if last else None) or session["model"] or ""
        result.provider = self.provider_of(last["model"] if last else None)

    def provider_of(self, model: str | None) -> str:
        """Which provider answered, from the model name on its reply."""
        if self.choice.name == "offline":
            return "offline"
        if self.choice.quick_fixes and model == self.offline_model:
            return "offline"
        return self.choice.name


def _no_session(result: CellResult, cell: Any, run: Execution) -> None:
    """RefineStop, yet no session of this cell (nbrefine itself failed): report the error the cell
    raised, from its traceback, rather than RefineStop."""
    cell.outputs = coalesce(run.outputs)
    raised = next((o for o in run.outputs if o.get("output_type") == "error"), None)
    if raised is not None and raised.get("ename") != "RefineStop":
        result.error_type = str(raised.get("ename") or "") or result.error_type
        result.error_message = first_line(str(raised.get("evalue") or ""))
    result.reason = "nbrefine found no %%refine session for this cell"


def _take_hint(result: CellResult, cell: Any, run: Execution, hint: TeachingJSON, as_is: bool) -> None:
    """A teaching mode answered instead of a fix: the cell keeps its source and its traceback;
    the hint goes below it (a %%refine cell of the notebook printed it already) and into
    ``metadata.nbrefine``."""
    result.hint = hint
    header = hint["header"] or "no hint"
    failed = hint["status"] == "error"
    result.reason = f"no hint: {hint['text']}" if failed else f"{header} given ({hint['mode']} mode)"
    outputs = coalesce(run.outputs if as_is else until_first_error(run.outputs))
    if not as_is and not failed:
        outputs.append(_hint_output(hint))
    cell.outputs = outputs
    cell.metadata["nbrefine"] = {
        "mode": hint["mode"],
        "hint_header": hint["header"],
        "hint": hint["text"],
        "error_type": result.error_type,
        "version": __version__,
    }


def _hint_output(hint: TeachingJSON) -> Any:
    title = f"nbrefine · {hint['header']} ({hint['mode']} mode)"
    text = str(hint["text"] or "")
    data = {"text/plain": f"{title}\n{text}", "text/markdown": f"**{title}**\n\n{text}"}
    return nbf().v4.new_output("display_data", data=data)


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)

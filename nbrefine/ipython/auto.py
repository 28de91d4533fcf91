"""Automatic mode: offer (or start) a repair after any failing cell, not only ``%%refine`` ones.

Built on IPython's ``post_run_cell`` event, not ``set_custom_exc``: that is a single slot
other extensions also take, it hides the normal traceback, and it is dropped the first time
it raises. The normal traceback appears exactly as before; below it, in ``offer`` mode, a
small "Suggest a fix" button (in a terminal, a line saying to type ``%refine fix``); under a
teaching policy, "Get a hint" (``%refine hint``) instead, never an offer of a fix. No model is
called until the user asks, except in ``on`` mode, which the user turned on for that.

Passing cells pay one attribute check (measured by ``bench/bench_auto.py``) and import nothing:
the engine, the sandbox and the panel are imported at the first failure (``bench/bench_load.py``,
tests/ipython/test_magics_load.py). Optionally (``Refine.auto_snapshot``), a snapshot of the state is forked
before every cell so trials see what the failing cell saw (that loads the sandbox at the first
cell); without it they start from the state the failure left, and the prompt says what the
failed run had already bound.

May import: IPython (through the shell it is given), :mod:`nbrefine._errors`; lazily (in the methods
that run after a failure, or for a snapshot before every cell), :mod:`nbrefine.engine` and below
and :mod:`.panel`, ipywidgets (to tell whether a panel can show); :mod:`.repairs` for types only.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import RefineStop, SandboxError

if TYPE_CHECKING:
    from ..engine import RefineSession, TeachingPolicy
    from ..sandbox import Snapshot
    from .repairs import Repairs


class RefineMagics(Protocol):
    """What automatic mode needs of the magics (a Protocol: auto.py does not import magics.py,
    which imports it)."""

    ip: Any
    settings: Any
    running: bool

    @property
    def repairs(self) -> Repairs: ...


__all__ = ["AutoMode"]

MODES = ("off", "offer", "on")


@dataclass(frozen=True)
class FailedCell:
    """A failed cell as ``post_run_cell`` saw it."""

    raw_cell: str
    cell_id: str | None
    error: BaseException
    count: int | None  # its execution count
    request_id: str | None  # the execute request that ran it: Accept's write-back names it


class AutoMode:
    """Registers and removes the event callbacks; remembers the last failed cell."""

    def __init__(self, magics: RefineMagics) -> None:
        self.magics = magics
        self.ip: Any = magics.ip
        self.mode = "off"
        self.last_failure: FailedCell | None = None
        # The latest session when last_failure was recorded: while it is still the latest, no
        # session (%%refine, the button, %refine fix/hint) came after that failure.
        self._session_at_failure: RefineSession | None = None
        self._snapshot: Snapshot | None = None
        self._before: dict[str, Any] | None = None
        # execution count -> (notebook cell id, time it ran, whether it failed): O(1) per cell,
        # for the history and for finding the cell a failure is caused in
        self.runs: dict[int, tuple[str | None, float, bool]] = {}
        self.ip.events.register("post_run_cell", self.record)
        self.ip.events.register("pre_run_cell", self.confine)

    def confine(self, info: Any) -> None:
        """A cell the frontend (or nbrefine fix) runs for an accepted fix keeps its trial's
        capabilities while it runs (nbrefine.sandbox.live)."""
        if "nbrefine.engine.kernel_state" not in sys.modules:
            return  # no session yet in this process, so no accepted fix to confine: import nothing
        from ..engine.kernel_state import take_confined_run
        from ..sandbox.live import arm

        policy = take_confined_run(getattr(info, "cell_id", None), getattr(info, "raw_cell", "") or "")
        if policy is not None:
            arm(policy)

    def record(self, result: Any) -> None:
        info = result.info
        if info is not None and info.store_history and _armed():
            from ..sandbox.live import disarm

            disarm()  # the confined run is over
        if info is not None and info.store_history:  # not %%refine's inner run, nor Accept's
            failed = not bool(getattr(result, "success", True))
            self.runs[result.execution_count] = (info.cell_id, time.time(), failed)

    def mark_fixed(self, count: int | None) -> None:
        """An accepted fix of the run ``count`` ran without error: that cell no longer counts as
        failed (a later cell's NameError is not a cascade of it)."""
        if count is not None and count in self.runs:
            cell_id, ran_at, _ = self.runs[count]
            self.runs[count] = (cell_id, ran_at, False)

    def stop(self) -> None:
        """Remove every callback (unloading the extension)."""
        self.set_mode("off")
        self.ip.events.unregister("post_run_cell", self.record)
        self.ip.events.unregister("pre_run_cell", self.confine)

    # ------------------------------------------------------------------ switching

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"automatic mode must be one of {', '.join(MODES)}, not {mode!r}")
        if self.mode == "off" and mode != "off":
            self.ip.events.register("post_run_cell", self.post_run_cell)
        elif self.mode != "off" and mode == "off":
            self.ip.events.unregister("post_run_cell", self.post_run_cell)
        self.mode = mode
        self.snapshots(self.magics.settings.auto_snapshot)

    def snapshots(self, on: bool) -> None:
        """Fork a snapshot before every cell (only while automatic mode is on)."""
        callbacks = self.ip.events.callbacks["pre_run_cell"]
        wanted = on and self.mode != "off"
        if wanted and self.pre_run_cell not in callbacks:
            self.ip.events.register("pre_run_cell", self.pre_run_cell)
        elif not wanted and self.pre_run_cell in callbacks:
            self.ip.events.unregister("pre_run_cell", self.pre_run_cell)
            self._drop_snapshot()

    # ------------------------------------------------------------------ events

    def pre_run_cell(self, info: Any) -> None:
        if self.magics.running:
            return
        self._drop_snapshot()
        try:
            from ..grounding.redaction import Redactor  # the user asked for a fork before every cell
            from ..sandbox import Snapshot

            # Taken before every cell, most of which pass: its first trial is got ready only
            # once the cell has failed (armed below), not ahead.
            options = replace(self.magics.repairs.sandbox_options(), ready_ahead=False)
            self._snapshot = Snapshot.take(self.ip.user_ns, Redactor(), options)
            self._before = dict(self.ip.user_ns)
        except (SandboxError, OSError):
            self._snapshot = None

    def post_run_cell(self, result: Any) -> None:
        error = result.error_in_exec or result.error_before_exec
        if error is None:  # the common case: keep it to a couple of attribute reads
            if self._snapshot is not None:
                self._drop_snapshot()
            return
        if self.magics.running or not isinstance(error, Exception):
            return  # the nested run of a %%refine cell, or an interrupt
        info = result.info
        raw_cell = getattr(info, "raw_cell", "") or ""
        if raw_cell.lstrip().startswith(("%%refine", "%refine")) or isinstance(error, RefineStop):
            return
        if self._snapshot is not None:
            self._snapshot.arm()  # its first trial gets ready while the failure is offered
        cell_id = getattr(info, "cell_id", None)
        count = getattr(result, "execution_count", None)
        from ..engine import last_session  # the first failure loads the engine

        self.last_failure = FailedCell(raw_cell, cell_id, error, count, self.magics.repairs.request_id())
        self._session_at_failure = last_session()
        if self.mode == "on":
            self.repair_last()
        else:
            self._offer()

    # ------------------------------------------------------------------ repairing

    @property
    def has_new_failure(self) -> bool:
        """Whether the latest failure is a cell that no session covers yet: a cell failed after
        the latest session was made, so ``%refine hint`` must follow it, not that session."""
        if self.last_failure is None:
            return False  # nothing failed: no need to load the engine to know
        from ..engine import last_session

        return last_session() is self._session_at_failure

    def repair_last(self, failure: FailedCell | None = None) -> None:
        """Start a repair (or, under a teaching policy, the help) for the last cell that failed
        (``%refine fix``/``hint``, or ``on``), or for ``failure`` (its button)."""
        failure = failure or self.last_failure
        if failure is None:
            raise ValueError("no cell has failed since automatic mode was turned on")
        snapshot, before = None, None
        if failure is self.last_failure:  # the snapshot, if any, was taken before this cell only
            snapshot, before = self._snapshot, self._before
            self._snapshot, self._before = None, None  # the session owns them now
        session = self.magics.repairs.session_for_failure(
            failure.raw_cell,
            failure.cell_id,
            failure.error,
            snapshot=snapshot,
            before=before,
            failing_count=failure.count,
            request_id=failure.request_id,
        )
        self.magics.repairs.start_session(session)

    def _offer(self) -> None:
        from ..engine import kernel_policy_holder

        line, label, tooltip = _offer_texts(kernel_policy_holder().policy)
        if getattr(self.ip, "kernel", None) is None:
            print(line)
            return
        try:
            import ipywidgets as widgets
            from IPython.display import display
        except ImportError:
            print(line)
            return
        button = widgets.Button(description=label, icon="magic", tooltip=tooltip)
        out = widgets.Output()
        failure = self.last_failure

        def clicked(_button: Any) -> None:
            button.disabled = True
            with out:
                self.repair_last(failure)  # this cell's failure, even if others failed since

        button.on_click(clicked)
        from .panel import offer_box

        display(offer_box(button, out))  # type: ignore[no-untyped-call]

    def _drop_snapshot(self) -> None:
        if self._snapshot is not None:
            self._snapshot.close()
        self._snapshot, self._before = None, None


def _offer_texts(policy: TeachingPolicy) -> tuple[str, str, str]:
    """What is offered under a failing cell: the terminal line, the button's label and tooltip.
    A teaching policy offers its help (a hint, an explanation), never "a fix": even where the
    last hint leads to the solution (graduated with allow_solution), hints come first."""
    if policy.mode == "explain":
        return (
            "nbrefine: type %refine hint to get an explanation of this error",
            "Explain this error",
            "nbrefine: what this error means",
        )
    if policy.teaching:
        return (
            "nbrefine: type %refine hint to get a hint for this error",
            "Get a hint",
            "nbrefine: a hint, not the answer",
        )
    return (
        "nbrefine: type %refine fix to get a suggested fix for this error",
        "Suggest a fix",
        "nbrefine",
    )


def _armed() -> bool:
    """Whether a confined run is armed, without importing the sandbox when nothing could have."""
    if "nbrefine.sandbox.live" not in sys.modules:
        return False
    from ..sandbox.live import is_armed

    return is_armed()

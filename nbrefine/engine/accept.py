"""The one plan Accept carries out, read alike by the panel, ``%refine accept`` and ``nbrefine fix``.

The engine decides; the adapters only show and apply. An :class:`AcceptPlan` says which cells a
fix changes (each with its old and new source, labelled as the user knows it: "In [1] (cell
'search') · defines search"), which cell moves above which, the cells to run in notebook order
once written, and how to undo all of it.

May import: the standard library and the engine's cells, cause and multicell.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from .cause import Cause
from .cells import CellRef

__all__ = ["AcceptPlan", "CellChange", "CellMove", "plan_for"]


@dataclass(frozen=True)
class CellChange:
    """One cell the fix writes."""

    cell: CellRef
    new_source: str  # what the user will see in the cell (no %%refine line)

    @property
    def label(self) -> str:
        defines = ", ".join(self.cell.defines)
        role = {"failing": "the failing cell", "dependent": "uses the fix"}.get(self.cell.role, "")
        what = f"defines {defines}" if defines and self.cell.role != "failing" else role
        return f"{self.cell.label} · {what}" if what else self.cell.label

    def diff(self) -> str:
        lines = difflib.unified_diff(
            self.cell.source.rstrip().splitlines(),
            self.new_source.rstrip().splitlines(),
            f"{self.cell.label} as it ran",
            f"{self.cell.label} fixed",
            lineterm="",
        )
        return "\n".join(lines)


@dataclass(frozen=True)
class CellMove:
    """A cell that must run before the failing one: moved just above it."""

    cell: CellRef
    above: CellRef

    @property
    def label(self) -> str:
        where = f"cell '{self.cell.cell_id}'" if self.cell.cell_id else self.cell.label
        return f"move {where} above {self.above.label} and run it first"


@dataclass(frozen=True)
class AcceptPlan:
    """What Accept does, in order: write the changes, make the moves, run :attr:`runs`."""

    failing: CellRef
    changes: tuple[CellChange, ...] = ()
    moves: tuple[CellMove, ...] = ()
    runs: tuple[tuple[CellRef, str], ...] = ()  # (cell, the source it runs), notebook order
    note: str = ""  # the cause, in one sentence ("" : the failing cell itself)

    @property
    def spans_cells(self) -> bool:
        """The fix is more than a new source for the failing cell."""
        return bool(self.moves) or any(c.cell.key != self.failing.key for c in self.changes)

    def change_of(self, key: str) -> CellChange | None:
        return next((c for c in self.changes if c.cell.key == key), None)

    def undo(self) -> tuple[tuple[CellRef, str], ...]:
        """Every changed cell with the source it had: writing them back (and moving the moved
        cells back below) restores the notebook."""
        return tuple((c.cell, c.cell.source) for c in self.changes)

    def describe(self) -> list[str]:
        """One line per step, for the text view and the report."""
        lines = [m.label for m in self.moves]
        lines += [f"change {c.label}" for c in self.changes]
        if self.runs:
            lines.append("then run " + ", ".join(cell.label for cell, _ in self.runs))
        return lines


def plan_for(cause: Cause | None, failing: CellRef, changes: Mapping[str, str]) -> AcceptPlan:
    """The plan of a fix whose edits are ``changes`` (cell key -> new source) for ``cause``."""
    if cause is None or not cause.spans_cells:
        new = changes.get(failing.key, next(iter(changes.values()), failing.source))
        return AcceptPlan(failing, (CellChange(failing, new),), (), ((failing, new),))
    cells = {c.key: c for c in (*cause.cells, *cause.dependents)}
    edits: list[CellChange] = []
    moves: list[CellMove] = []
    runs: list[tuple[CellRef, str]] = []
    for cell in cause.causes:
        if cell.key not in changes:
            continue
        new = changes[cell.key]
        if cell.role == "moved":
            moves.append(CellMove(cell, failing))
        if cell.role != "moved" or new.strip() != cell.source.strip():
            edits.append(CellChange(cell, new))
        runs.append((cell, new))
    if any(c.key in changes for c in cause.causes):
        runs += [(d, d.source) for d in cause.dependents if d.key in cells]
    failing_new = changes.get(failing.key, failing.source)
    if failing.key in changes and failing_new.strip() != failing.source.strip():
        edits.append(CellChange(failing, failing_new))
    runs.append((failing, failing_new))
    return AcceptPlan(failing, tuple(edits), tuple(moves), tuple(runs), cause.sentence())

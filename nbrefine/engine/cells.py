"""The cells a repair is about: which may change, which are checks, and the edits of a candidate.

A failure surfaces in one cell and is often caused in another (the function a checks cell calls,
a cell above that failed, a cell below that should have run first). :class:`CellRef` names one
such cell as the prompt shows it to the model and as Accept writes it back; :class:`CellEdits`
is what a reply changes, cell by cell (:func:`nbrefine.engine.reply.split_reply` makes it).

May import: the standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["CellEdits", "CellRef", "CellRole"]

#: What a cell is to the repair: the cell that failed, the cell that defines what failed (or
#: failed itself, earlier), a read-only cell of checks, a cell that ran and uses a definition the
#: fix may change (re-run to keep it passing), a cell below that must run first (moved above).
CellRole = Literal["failing", "cause", "check", "dependent", "moved"]


@dataclass(frozen=True)
class CellRef:
    """One notebook cell as the repair sees it."""

    key: str  # stable within one repair: the nbformat cell id, else "In [N]"
    source: str  # the Python the user wrote (no %%refine line nbrefine or the CLI put above it)
    role: CellRole
    count: int | None = None  # its execution count, when it ran
    cell_id: str | None = None  # its nbformat cell id, when known
    defines: tuple[str, ...] = ()  # the functions and classes it defines at top level
    readonly: str = ""  # why it may not change ("": it may), e.g. "a cell of checks"
    index: int | None = None  # its position among the notebook's cells, when known

    @property
    def editable(self) -> bool:
        return not self.readonly

    @property
    def label(self) -> str:
        """How the prompt, the panel and the report name it: ``In [1] (cell 'search')``."""
        if self.count is not None:
            count = f"In [{self.count}]"
        else:
            count = "the failing cell" if self.role == "failing" else "a cell not run yet"
        return f"{count} (cell '{self.cell_id}')" if self.cell_id else count


@dataclass(frozen=True)
class CellEdits:
    """What one reply changes: the new whole source of each cell it changes (by key)."""

    changes: Mapping[str, str] = field(default_factory=dict)  # key -> new source; unchanged cells absent
    explanation: str = ""  # the reply's prose
    reason: str | None = None  # why nothing was taken (no code, a refusal, code for no cell)
    #: read-only cells the reply changed (their keys): the candidate "changes the checks"
    touched_readonly: tuple[str, ...] = ()
    declined: bool = False  # the model said the fix needs something else first (a cell to run)

    @property
    def empty(self) -> bool:
        return not self.changes

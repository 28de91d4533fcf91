"""The notebook's cells as the frontend holds them, kept in the kernel for the repairs.

A repair must know cells the kernel never ran: the cell below that defines a name the failing
cell uses, the cells nbgrader locks. When nbrefine loads, the kernel opens a comm to the
extension's target ``nbrefine`` asking to ``watch_cells``; the extension (``labextension/``)
answers with the notebook's code cells and sends them again before each cell of that notebook
runs (comm messages and execute requests share the shell channel, in order, so the list is fresh
when a cell fails). Each message is ``{"cells": [{"id", "source", "metadata"}, ...]}``, in
notebook order; it is read defensively (it comes from outside) into
:attr:`nbrefine.engine.kernel_state.KernelState.notebook`. Where no extension answers, the frontend
closes the comm and the repairs read the notebook as saved, if its path is known.

The messages come before every cell, passing ones too, and reading them needs the engine and the
grounding: until the engine is loaded (the first repair loads it, and then calls
:func:`take_told_cells`), the latest message is only kept, not read.

May import: comm, the standard library, :mod:`.writeback` (its comm target's name); lazily,
:mod:`nbrefine.engine` and :mod:`nbrefine.grounding`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .writeback import TARGET

if TYPE_CHECKING:
    from ..grounding.history import NotebookCell

__all__ = ["read_cells", "take_told_cells", "watch_cells"]

_MAX_CELLS = 5000
_MAX_SOURCE = 1 << 20  # a cell's source longer than this is cut (the list is for finding names)
_UNREAD: list[Any] = []  # the data of the latest message, while the engine is not loaded


def read_cells(data: Any) -> tuple[NotebookCell, ...] | None:
    """The cells of one message, or None when it holds no list of cells."""
    cells = data.get("cells") if isinstance(data, Mapping) else None
    if not isinstance(cells, list):
        return None
    from ..grounding.cellfacts import readonly_reason
    from ..grounding.history import NotebookCell

    out: list[NotebookCell] = []
    for cell in cells[:_MAX_CELLS]:
        if not isinstance(cell, Mapping):
            continue
        cell_id, source, metadata = cell.get("id"), cell.get("source"), cell.get("metadata")
        if not isinstance(cell_id, str) or not isinstance(source, str):
            continue
        metadata = metadata if isinstance(metadata, Mapping) else {}
        nbgrader = metadata.get("nbgrader")
        out.append(
            NotebookCell(
                cell_id=cell_id,
                source=source[:_MAX_SOURCE],
                readonly=readonly_reason(metadata),
                solution=bool(isinstance(nbgrader, Mapping) and nbgrader.get("solution")),
            )
        )
    return tuple(out)


def watch_cells() -> Any:
    """Ask the frontend for the notebook's cells, now and before each cell runs; None where this
    kernel has no comm support."""
    try:
        from comm import create_comm
    except ImportError:
        return None
    try:
        comm = create_comm(target_name=TARGET, data={"action": "watch_cells"})
    except Exception:  # not in a kernel (a terminal IPython): nothing to watch
        return None

    def on_msg(msg: dict[str, Any]) -> None:
        _UNREAD[:] = [(msg.get("content") or {}).get("data")]
        if "nbrefine.engine.kernel_state" in sys.modules:  # loaded: read it now, as the repairs will need it
            take_told_cells()

    comm.on_msg(on_msg)
    return comm


def take_told_cells() -> None:
    """Read the latest message the frontend sent, if it is not read yet, into the kernel state."""
    if not _UNREAD:
        return
    from ..engine import current

    cells = read_cells(_UNREAD.pop())
    if cells is not None:
        current().notebook = cells

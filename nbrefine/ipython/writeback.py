"""Write an accepted fix into its notebook cells, through nbrefine's JupyterLab extension.

The kernel opens a comm to the target ``nbrefine`` with the cell id, the source it expects
the cell to have now, and the new source. The extension (``labextension/``) finds the cell
in the notebook bound to this kernel, refuses if the cell is gone or was edited meanwhile,
replaces the source so that the editor's undo restores the original, stores provenance in
the cell's metadata, answers, and closes the comm. Where no extension is installed (VS Code,
Colab, other frontends) the frontend closes the comm at once: the caller falls back to
showing the code to copy. ``set_next_input`` is never used: from a button callback it
overwrites whichever cell runs next.

A fix that changes several cells (the function's cell and the failing cell) or moves a cell
(a name defined only below the failing cell) goes as one ``write_cells`` request
(:func:`write_cells`): the extension checks every cell first and writes nothing unless all
match, applies the edits and moves as one undoable change of the notebook, then runs the
cells in the order asked. :func:`undo_cells` asks it to put all those cells back.

The messages are typed here (:class:`WriteCellRequest`, :class:`WriteCellsRequest`,
:class:`UndoCellsRequest`, :class:`WriteCellAnswer`); their fields and order are the
extension's protocol (labextension/src/index.ts, apply.ts and cells.ts) and must not change
without it.

May import: comm and the standard library.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict, cast

__all__ = [
    "TARGET",
    "CellMove",
    "CellWrite",
    "FixedOutput",
    "RunRequest",
    "UndoCellsRequest",
    "WriteCellAnswer",
    "WriteCellRequest",
    "WriteCellsRequest",
    "WriteResult",
    "cell_write",
    "undo_cells",
    "write_cell",
    "write_cells",
]

TARGET = "nbrefine"


class FixedOutput(TypedDict):
    """The one line the extension puts above the fixed run's outputs: an nbformat
    ``display_data`` output, marked by ``metadata.nbrefine.fixed`` (apply.ts finds it by that)."""

    output_type: Literal["display_data"]
    data: dict[str, str]  # "text/html" and "text/plain"
    metadata: dict[str, dict[str, bool]]


class RunRequest(TypedDict, total=False):
    """The optional fields of a ``write_cell`` request (apply.ts): the execute request that ran
    the cell (the extension finds the cell and the text it ran by it), whether the frontend should
    run the cell once written, the line it then puts above the outputs, and (a fix written into
    the cell that defines what failed) the failing cell, which it runs next."""

    execute_request: str | None
    run: bool
    fixed_output: FixedOutput
    then_run: str


class WriteCellRequest(RunRequest):
    """The data of the comm's open message: what to write into which cell."""

    action: Literal["write_cell"]
    request_id: str
    cell_id: str
    expected_source: str  # the cell as it ran: the extension refuses an edited cell
    source: str
    metadata: dict[str, dict[str, Any]]  # {"nbrefine": the cell's provenance}


class CellWrite(TypedDict):
    """One cell of a ``write_cells`` request: the same four fields as a ``write_cell`` request."""

    cell_id: str
    expected_source: str  # the cell as it is now: the extension refuses the whole request otherwise
    source: str
    metadata: dict[str, dict[str, Any]]  # {"nbrefine": the cell's provenance}


class CellMove(TypedDict):
    """Move cell ``cell_id`` to just above cell ``above`` (e.g. the cell that defines a name the
    failing cell needs, moved above the failing cell)."""

    cell_id: str
    above: str


class WriteCellsRequest(TypedDict):
    """Several cells as one change (labextension/src/cells.ts): all ``edits`` and ``moves``
    (moves first, in order; then edits), one undo restores them all; then the frontend runs the
    cells of ``run`` in that order, each once the previous one finished, stopping at the first
    that fails, and puts ``fixed_output`` above the outputs of the changed cells when all passed.
    ``execute_request``: the execute request that ran the failing cell, as for ``write_cell``
    (its recorded code is the expected source of that cell, if it is one of the edits)."""

    action: Literal["write_cells"]
    request_id: str
    edits: list[CellWrite]
    moves: list[CellMove]
    run: list[str]  # cell ids
    fixed_output: NotRequired[FixedOutput]
    execute_request: NotRequired[str | None]


class UndoCellsRequest(TypedDict):
    """Put back every cell a ``write_cells`` request changed (source, position, metadata):
    ``request_id`` is that request's."""

    action: Literal["undo"]
    request_id: str


class WriteCellAnswer(TypedDict, total=False):
    """The extension's one answer (a comm message), read defensively: it comes from outside."""

    request_id: str
    ok: bool
    reason: str  # why nothing was written, when not ok
    runs: bool  # the frontend runs the cell itself now


@dataclass(frozen=True)
class WriteResult:
    ok: bool
    reason: str = ""
    via_extension: bool = True  # False: no extension answered; show the code to copy instead
    runs: bool = False  # the frontend runs the cell itself now (asked with ``run=True``)


Request = WriteCellRequest | WriteCellsRequest | UndoCellsRequest


def _ask(
    request: Callable[[str], Request],
    on_result: Callable[[WriteResult], None],
    timeout_s: float,
    request_id: str | None = None,
) -> str:
    """Open the comm with ``request(request_id)``; ``on_result`` gets the first of the answer to
    that request, the comm's close (no extension) and the timeout. Returns the request id."""
    request_id = request_id or uuid.uuid4().hex
    try:
        from comm import create_comm
    except ImportError:  # not in a kernel with comm support
        on_result(WriteResult(False, "this frontend has no comm support", via_extension=False))
        return request_id
    done = threading.Event()

    def answer(result: WriteResult) -> None:
        if not done.is_set():
            done.set()
            timer.cancel()
            on_result(result)

    def on_msg(msg: dict[str, Any]) -> None:
        # From outside: every field is read with .get and checked, whatever the frontend sent.
        data = cast("WriteCellAnswer", (msg.get("content") or {}).get("data") or {})
        if data.get("request_id") not in (None, request_id):
            return
        answer(WriteResult(bool(data.get("ok")), str(data.get("reason", "")), runs=data.get("runs") is True))

    def on_close(_msg: Any) -> None:
        answer(WriteResult(False, "no nbrefine extension answered in this frontend", via_extension=False))

    timer = threading.Timer(
        timeout_s,
        lambda: answer(
            WriteResult(False, f"the frontend did not answer in {timeout_s:g} s", via_extension=False)
        ),
    )
    timer.daemon = True
    comm = create_comm(target_name=TARGET, data=request(request_id))
    comm.on_msg(on_msg)
    comm.on_close(on_close)
    timer.start()
    return request_id


def write_cell(
    cell_id: str,
    expected_source: str,
    source: str,
    on_result: Callable[[WriteResult], None],
    *,
    metadata: dict[str, Any] | None = None,
    timeout_s: float = 10.0,
    extra: RunRequest | None = None,
) -> None:
    """Ask the frontend to write ``source`` into cell ``cell_id``; ``on_result`` gets the answer once.

    Asynchronous: the answer arrives as a comm message, which the kernel can only read once
    the current message (e.g. a button click) has been handled. ``extra``: more fields of the
    request (``execute_request``, ``run``, ``fixed_output``: see labextension/src/apply.ts)."""

    def request(request_id: str) -> WriteCellRequest:
        return {
            "action": "write_cell",
            "request_id": request_id,
            "cell_id": cell_id,
            "expected_source": expected_source,
            "source": source,
            "metadata": {"nbrefine": metadata or {}},
            **(extra or {}),
        }

    _ask(request, on_result, timeout_s)


def cell_write(
    cell_id: str, expected_source: str, source: str, provenance: dict[str, Any] | None = None
) -> CellWrite:
    """One edit of :func:`write_cells`; ``provenance`` goes to the cell's ``metadata.nbrefine``."""
    return {
        "cell_id": cell_id,
        "expected_source": expected_source,
        "source": source,
        "metadata": {"nbrefine": provenance or {}},
    }


def write_cells(
    edits: Sequence[CellWrite],
    on_result: Callable[[WriteResult], None],
    *,
    moves: Sequence[CellMove] = (),
    run: Sequence[str] = (),
    fixed_output: FixedOutput | None = None,
    execute_request: str | None = None,
    timeout_s: float = 10.0,
    request_id: str | None = None,
) -> str:
    """Ask the frontend to apply ``edits`` and ``moves`` as one change, then run the cells ``run``
    names, in order; ``on_result`` gets the answer once (``runs``: the frontend runs them now).

    Nothing is written unless every cell is there and holds its ``expected_source``. Returns the
    request id, which :func:`undo_cells` takes to put the cells back. Asynchronous, as
    :func:`write_cell`."""

    def request(request_id: str) -> WriteCellsRequest:
        data: WriteCellsRequest = {
            "action": "write_cells",
            "request_id": request_id,
            "edits": list(edits),
            "moves": list(moves),
            "run": list(run),
        }
        if fixed_output is not None:
            data["fixed_output"] = fixed_output
        if execute_request is not None:
            data["execute_request"] = execute_request
        return data

    return _ask(request, on_result, timeout_s, request_id)


def undo_cells(request_id: str, on_result: Callable[[WriteResult], None], *, timeout_s: float = 10.0) -> None:
    """Ask the frontend to put back what the ``write_cells`` request ``request_id`` changed: every
    cell's source, position and metadata. It refuses (``ok`` false, ``reason``) when one of those
    cells was changed since, or it knows no such request (a reload since: undo in the notebook)."""

    def request(rid: str) -> UndoCellsRequest:
        return {"action": "undo", "request_id": rid}

    _ask(request, on_result, timeout_s, request_id)

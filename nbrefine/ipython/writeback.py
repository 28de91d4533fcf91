"""Write an accepted fix into its notebook cell, through nbrefine's JupyterLab extension.

The kernel opens a comm to the target ``nbrefine`` with the cell id, the source it expects
the cell to have now, and the new source. The extension (``labextension/``) finds the cell
in the notebook bound to this kernel, refuses if the cell is gone or was edited meanwhile,
replaces the source so that the editor's undo restores the original, stores provenance in
the cell's metadata, answers, and closes the comm. Where no extension is installed (VS Code,
Colab, other frontends) the frontend closes the comm at once: the caller falls back to
showing the code to copy. ``set_next_input`` is never used: from a button callback it
overwrites whichever cell runs next.

The messages are typed here (:class:`WriteCellRequest`, :class:`WriteCellAnswer`); their fields
and order are the extension's protocol (labextension/src/index.ts and apply.ts) and must not
change without it.

May import: comm and the standard library.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, cast

__all__ = [
    "TARGET",
    "FixedOutput",
    "RunRequest",
    "WriteCellAnswer",
    "WriteCellRequest",
    "WriteResult",
    "write_cell",
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
    try:
        from comm import create_comm
    except ImportError:  # not in a kernel with comm support
        on_result(WriteResult(False, "this frontend has no comm support", via_extension=False))
        return
    request_id = uuid.uuid4().hex
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
    data: WriteCellRequest = {
        "action": "write_cell",
        "request_id": request_id,
        "cell_id": cell_id,
        "expected_source": expected_source,
        "source": source,
        "metadata": {"nbrefine": metadata or {}},
        **(extra or {}),
    }
    comm = create_comm(target_name=TARGET, data=data)
    comm.on_msg(on_msg)
    comm.on_close(on_close)
    timer.start()

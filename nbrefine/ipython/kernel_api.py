"""The in-kernel API: everything a caller outside the kernel runs in it, as named, typed functions.

``nbrefine fix`` (one notebook or a batch job), ``nbrefine bench`` and the JupyterLab extension
never send Python source of their own to a kernel: they send one fixed expression,
:func:`nbrefine.headless.kernel.call_code` of a name and JSON arguments (the extension
builds the same line in TypeScript)::

    __import__("nbrefine.ipython.kernel_api", fromlist=["_"]).call('{"name": "usage", "args": []}')

:func:`call` runs the function of that name from :data:`API` and publishes its JSON result as
display data of the MIME type :data:`MIME` (``{"kind": "result", "value": ...}``), which the caller
reads from the execute request's outputs (and drops). A failure (an unknown name, bad arguments,
an error inside the function) is raised as :class:`~nbrefine._errors.KernelCallError` with one
line, so the execute reply itself says ``error`` with that ``ename`` and ``evalue``.

A run set up with ``sessions=True`` (:func:`setup_run`) also publishes, at the end of every cell
that raised after making a ``%%refine`` session, that session as JSON (``{"kind": "session",
"request": ...}``): the driver then has it from the cell's own execute request, without asking
again (a cell that passed has no session to read).

The whole module is an expression's worth of names: it binds no name in the user's namespace.

May import: :mod:`nbrefine` (the extension's loader), IPython, the engine and the layers below it,
:mod:`nbrefine.batch.gate` (a batch job's request gate), :mod:`nbrefine.headless.session_json`
(the shape of a session as JSON), traitlets' ``Config`` (the settings, as ``%config`` makes them)
and the standard library.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import signal
from collections.abc import Callable
from typing import Any

from .._errors import KernelCallError

__all__ = [
    "API",
    "HANG_MESSAGE",
    "MIME",
    "accept",
    "accept_plan",
    "bench_disarm",
    "bench_prepare",
    "call",
    "open_notebook",
    "session",
    "setup_run",
    "tell_notebook",
    "usage",
    "warm_up",
]

#: The MIME type of what this module publishes (results, sessions); callers drop such outputs.
MIME = "application/vnd.nbrefine.kernel-api+json"
#: How ``nbrefine bench`` says a buggy program hung (its timer, :func:`bench_prepare`).
HANG_MESSAGE = "the program did not finish within {s:g} s (stopped by nbrefine bench)"


def _shell() -> Any:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("not in an IPython kernel")
    return shell


def _publish(payload: dict[str, Any]) -> None:
    from IPython.display import publish_display_data

    publish_display_data({MIME: payload})  # type: ignore[no-untyped-call]


# --------------------------------------------------------------------------- set-up


def setup_run(
    config: dict[str, Any],
    policy: dict[str, Any] | None = None,
    gate: str | None = None,
    sessions: bool = False,
) -> None:
    """Set up a headless run: load nbrefine (as ``%load_ext nbrefine``), show results as text, set
    the ``Refine`` traits of ``config`` (as ``%config Refine.<trait> = <value>``), install a
    notebook's teaching policy (its ``metadata["nbrefine"]``), put the model providers behind a
    batch's request gate (``gate``: its spec) and, with ``sessions``, publish each ``%%refine``
    cell's session at the cell's end."""
    from traitlets.config import Config

    shell = _shell()
    shell.run_line_magic("load_ext", "nbrefine")
    # What %config does for each, without the ~8 ms its first use spends loading IPython's lazy
    # magics (script magics and their parsers, in every batch kernel): none of them is a Refine.
    # The client has validated the values; one that is not valid raises here, and the run says so.
    settings = Config({"Refine": {"display": "text", **config}})
    for configurable in shell.configurables:
        configurable.update_config(settings)
    if policy is not None:
        from ..engine import install_notebook_policy

        install_notebook_policy(policy)
    if gate is not None:
        from ..batch.gate import install

        install(gate)
    if sessions and _publish_sessions not in shell.events.callbacks["post_run_cell"]:
        shell.events.register("post_run_cell", _publish_sessions)


def _publish_sessions(result: Any) -> None:
    """After a cell that raised: its ``%%refine`` session as JSON, if it made one (found by its
    request). A cell that passed has nothing for the run to read (and the cell's body, run inside
    it, ends in this hook too): no message, no lookup."""
    if getattr(result, "success", False):
        return
    from ..engine import session_for_request

    header = (getattr(_shell(), "parent_header", None) or {}).get("header") or {}
    request = header.get("msg_id")
    if not isinstance(request, str):
        return
    found = session_for_request(request)
    if found is not None:
        from ..headless.session_json import session_json

        found.wait()  # the loop's thread ends its bookkeeping after the cell has raised
        _publish({"kind": "session", "request": request, "value": session_json(found)})


def warm_up(provider: str = "") -> None:
    """Import and load now what the first repair needs (a batch's kernel started ahead does it
    while it waits for its notebook). Modules and caches only: no name of the user's, no setting."""
    from .repairs import warm_up as load

    load(provider)


def open_notebook(metadata: dict[str, Any]) -> str:
    """The JupyterLab extension's set-up of a notebook's teaching policy (its
    ``metadata["nbrefine"]``): see :func:`nbrefine.ipython.frontend.open_notebook`. The policy in
    words."""
    from .frontend import open_notebook as open_it

    return open_it(json.dumps(metadata), _shell())


# --------------------------------------------------------------------------- sessions


def session(request_id: str) -> dict[str, Any] | None:
    """The JSON of the session the ``%%refine`` cell run by execute request ``request_id`` made,
    or None (:class:`~nbrefine.headless.session_json.SessionJSON`)."""
    from ..engine import session_for_request
    from ..headless.session_json import session_json

    found = session_for_request(request_id)
    if found is None:
        return None
    found.wait()
    return dict(session_json(found))


def accept(request_id: str) -> dict[str, Any] | None:
    """Accept the fix of the session made by ``request_id``, as ``%refine accept`` does, printing
    nothing of its own; the session after it. A fix that is not verified on the live state stays
    pending: it is never applied without a person's second choice."""
    return _accept(request_id, elsewhere=False)


def accept_plan(request_id: str) -> dict[str, Any] | None:
    """Accept a fix that spans cells, as :func:`accept` does, but run nothing: ``nbrefine fix``
    writes the cells and runs them itself, in the plan's order, so that each cell gets its own
    outputs (the panel's extension does the same). The session after it."""
    return _accept(request_id, elsewhere=True)


def _accept(request_id: str, *, elsewhere: bool) -> dict[str, Any] | None:
    from ..engine import UnverifiedFixError, session_for_request

    found = session_for_request(request_id)
    if found is None:
        return None
    with contextlib.suppress(UnverifiedFixError):
        found.accept(elsewhere=elsewhere)
    return session(request_id)


def tell_notebook(cells: list[dict[str, Any]]) -> None:
    """The notebook's code cells in order (``{"id", "source", "metadata"}``), from the driver that
    runs it, for finding where a failure is caused (a cell below, a cell locked)."""
    from ..engine.kernel_state import current
    from ..grounding.cellfacts import readonly_reason
    from ..grounding.history import NotebookCell

    current().notebook = tuple(
        NotebookCell(
            cell_id=str(cell["id"]),
            source=str(cell["source"]),
            readonly=readonly_reason(cell.get("metadata") or {}),
            solution=bool((cell.get("metadata") or {}).get("nbgrader", {}).get("solution")),
        )
        for cell in cells
        if cell.get("id")
    )


def usage() -> dict[str, Any]:
    """What this kernel spent on model replies (:func:`nbrefine.engine.kernel_usage`)."""
    import dataclasses

    from ..engine import kernel_usage

    return dataclasses.asdict(kernel_usage())


# --------------------------------------------------------------------------- nbrefine bench


def _is_cell_file(filename: str) -> bool:
    return "ipykernel_" in filename or filename.startswith(("<ipython-input-", "<cell"))


def bench_prepare(hang_s: float, scripted_path: str = "", reset: bool = False) -> None:
    """Before a bench case: with ``reset``, empty the user's namespace (``%reset -f``); arm a
    one-shot timer that stops a hanging buggy program with TimeoutError; point the scripted
    provider at this case's remaining replies. The timer only fires into the cell body (run by
    %%refine inside the outer cell): never into nbrefine's capture or loop."""
    if reset:
        _shell().run_line_magic("reset", "-f")
    if scripted_path:
        os.environ["NBREFINE_SCRIPTED_REPLIES"] = scripted_path

    def on_alarm(signum: int, frame: Any) -> None:
        depth = 0
        while frame is not None:
            depth += _is_cell_file(frame.f_code.co_filename)
            frame = frame.f_back
        if depth >= 2:  # the outer %%refine cell and the body it runs
            raise TimeoutError(HANG_MESSAGE.format(s=hang_s))

    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, hang_s)


def bench_disarm() -> None:
    """After a bench case: the timer of :func:`bench_prepare` is stopped."""
    signal.setitimer(signal.ITIMER_REAL, 0)


# --------------------------------------------------------------------------- the call

#: Every function a caller outside the kernel may call, by name.
API: dict[str, Callable[..., Any]] = {
    f.__name__: f
    for f in (
        setup_run,
        warm_up,
        open_notebook,
        session,
        accept,
        accept_plan,
        tell_notebook,
        usage,
        bench_prepare,
        bench_disarm,
    )
}


def call(request: str) -> None:
    """Run the call ``request`` (JSON text: ``{"name": ..., "args": [...]}``) and publish its
    result (see the module's docstring); :class:`KernelCallError` (one line) when it fails."""
    name, args = _parse(request)
    function = API[name]
    try:
        inspect.signature(function).bind(*args)
    except TypeError as err:
        raise KernelCallError(f"{name}: bad arguments: {err}") from None
    try:
        value = function(*args)
    except KernelCallError:
        raise
    except Exception as err:
        lines = str(err).strip().splitlines()
        detail = f": {lines[0]}" if lines else ""
        raise KernelCallError(f"{name}: {type(err).__name__}{detail}") from None
    try:
        payload = json.loads(json.dumps({"kind": "result", "value": value}, default=str))
    except ValueError as err:
        raise KernelCallError(f"{name}: its result is not JSON: {err}") from None
    _publish(payload)


def _parse(request: str) -> tuple[str, list[Any]]:
    try:
        data = json.loads(request)
    except (TypeError, ValueError) as err:
        raise KernelCallError(f"a call must be JSON text: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise KernelCallError('a call must be {"name": ..., "args": [...]}')
    name, args = data["name"], data.get("args", [])
    if name not in API:
        raise KernelCallError(f"no such kernel call: {name!r}; known: {', '.join(sorted(API))}")
    if not isinstance(args, list):
        raise KernelCallError(f"{name}: the arguments must be a JSON list")
    return name, args

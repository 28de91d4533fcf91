"""The one kernel driver: runs code in a real Jupyter kernel through nbclient, from outside it.

``nbrefine fix`` (one notebook or a batch job) and ``nbrefine bench`` start their kernel with
:func:`open_kernel` and talk to it only through the :class:`KernelDriver` it yields: run a scratch
cell at a notebook position (:meth:`KernelDriver.run`), read a JSON value back
(:meth:`KernelDriver.value`), read the session a ``%%refine`` cell made
(:meth:`KernelDriver.session`). Nothing here imports IPython: whatever must happen in the kernel is
sent there as code that imports a module of nbrefine (see :mod:`.session_json`).

May import: :mod:`nbrefine._errors`, :mod:`nbrefine.grounding`, the standard library, nbclient,
nbformat and jupyter_client.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .._errors import BadInputError, KernelDiedError
from ..grounding.text import clip
from .notebook import first_line, nbf

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from .session_json import SessionJSON

__all__ = ["TIMEOUT_ENAME", "Execution", "KernelDriver", "check_kernel", "open_kernel"]

#: The error name of a cell stopped by the cell timeout (nbclient's ``error_on_timeout``).
TIMEOUT_ENAME = "CellTimeoutError"
_MARK = "@@nbrefine-value@@ "


@dataclass
class Execution:
    """One scratch cell's run: its outputs and its execute reply."""

    outputs: list[Any]
    reply: dict[str, Any]
    request_id: str = ""  # the execute request's msg_id: how the cell's session is found

    @property
    def ok(self) -> bool:
        return self.reply.get("status") == "ok"

    @property
    def timed_out(self) -> bool:
        return self.reply.get("ename") == TIMEOUT_ENAME

    @property
    def ename(self) -> str:
        return str(self.reply.get("ename") or "")

    @property
    def evalue(self) -> str:
        return str(self.reply.get("evalue") or "")

    def stdout(self) -> str:
        return "".join(
            o.get("text", "")
            for o in self.outputs
            if o.get("output_type") == "stream" and o.get("name") == "stdout"
        )


class KernelDriver:
    """Runs code in the notebook's kernel through nbclient, one scratch cell at a time."""

    def __init__(self, client: Any, log: Any = None) -> None:
        self.client = client
        self.log = log
        self.reply: dict[str, Any] = {}
        self.request_id = ""
        client.on_cell_executed = self._on_executed

    def _on_executed(self, cell: Any, cell_index: int, execute_reply: dict[str, Any] | None) -> None:
        self.reply = dict(execute_reply["content"]) if execute_reply else {}
        parent = (execute_reply or {}).get("parent_header") or {}
        self.request_id = str(parent.get("msg_id") or "")

    @property
    def pid(self) -> int:
        """The kernel's process id (0 when the provisioner does not say)."""
        provisioner = getattr(getattr(self.client, "km", None), "provisioner", None)
        pid = getattr(provisioner, "pid", None)
        return int(pid) if isinstance(pid, int) else 0

    @contextlib.contextmanager
    def cell_timeout(self, seconds: int) -> Iterator[None]:
        """Within the block, a cell may run ``seconds`` before it is interrupted."""
        before = self.client.timeout
        self.client.timeout = seconds
        try:
            yield
        finally:
            self.client.timeout = before

    def run(self, source: str, index: int, *, store_history: bool, count: int | None = None) -> Execution:
        """Run ``source`` as if it were the notebook's cell ``index`` (that cell is left as it was)."""
        from nbclient.exceptions import DeadKernelError

        notebook = self.client.nb
        cell = notebook.cells[index] if index < len(notebook.cells) else None
        scratch = nbf().v4.new_code_cell(source)
        cell_id = cell.get("id") if cell is not None and store_history else None
        self.reply, self.request_id = {}, ""
        try:
            with _sending_cell_id(self.client, cell_id):
                self.client.execute_cell(scratch, index, execution_count=count, store_history=store_history)
        except DeadKernelError:
            raise KernelDiedError(_log_tail(self.log).strip(" ()")) from None
        finally:
            if cell is not None:
                notebook.cells[index] = cell  # execute_cell puts the scratch cell in its place
        return Execution(list(scratch.outputs), self.reply, self.request_id)

    def value(self, expr: str, index: int) -> Any:
        """The JSON value of ``expr`` evaluated in the kernel (binds no user name)."""
        code = f"__import__('builtins').print({_MARK!r} + __import__('json').dumps({expr}, default=str))"
        run = self.run(code, index, store_history=False)
        for line in run.stdout().splitlines():
            if line.startswith(_MARK):
                return json.loads(line[len(_MARK) :])
        raise RuntimeError(f"no value from the kernel: {run.ename}: {run.evalue}")

    def session(self, run: Execution, index: int) -> SessionJSON | None:
        """The session the ``%%refine`` cell of ``run`` made, as JSON, or None. It is found by the
        request that ran the cell, never by its source text (see
        :func:`nbrefine.engine.session.session_for_request`)."""
        if not run.request_id:
            return None
        try:
            found = self.value(kernel_call("session_json_for", run.request_id), index)
        except (RuntimeError, ValueError):
            return None
        return cast("SessionJSON", found) if isinstance(found, dict) else None


def kernel_call(function: str, *args: Any, module: str = "nbrefine.headless.session_json") -> str:
    """An expression that calls ``module.function(*args)`` in the kernel, binding no user name
    (``args`` are given as literals)."""
    arguments = ", ".join(repr(a) for a in args)
    return f"__import__({module!r}, fromlist=['_']).{function}({arguments})"


@contextlib.contextmanager
def _sending_cell_id(client: Any, cell_id: str | None) -> Iterator[None]:
    """Within the block, execute requests carry ``cellId`` in their metadata, as JupyterLab's do:
    the kernel then knows which notebook cell runs (the history and a repair name cells by it).
    nbclient sends no metadata, so the client's ``execute`` is wrapped for the block."""
    kc = getattr(client, "kc", None)
    if kc is None or not cell_id:
        yield
        return

    def execute(code: str, silent: bool = False, store_history: bool = True, **options: Any) -> str:
        content = {
            "code": code,
            "silent": silent,
            "store_history": store_history,
            "user_expressions": options.get("user_expressions") or {},
            "allow_stdin": options.get("allow_stdin", getattr(kc, "allow_stdin", False)),
            "stop_on_error": options.get("stop_on_error", True),
        }
        msg = kc.session.msg("execute_request", content, metadata={"cellId": cell_id})
        kc.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    kc.execute = execute
    try:
        yield
    finally:
        del kc.execute  # back to the class's method


@contextlib.contextmanager
def open_kernel(notebook: NotebookNode, name: str, folder: Path, cell_timeout: int) -> Iterator[KernelDriver]:
    """A kernel ``name`` started in ``folder`` for ``notebook``, shut down when the block ends;
    :class:`BadInputError` (one line, with the kernel's last words) when it cannot start."""
    from nbclient import NotebookClient

    client = NotebookClient(
        notebook,
        kernel_name=name,
        timeout=cell_timeout,
        allow_errors=True,
        interrupt_on_timeout=True,
        error_on_timeout={
            "ename": TIMEOUT_ENAME,
            "evalue": f"the cell did not finish within {cell_timeout} s (interrupted)",
            "traceback": [],
        },
        coalesce_streams=False,
        record_timing=False,
        resources={"metadata": {"path": str(folder)}},
    )
    with contextlib.ExitStack() as stack:
        # The kernel process's own stderr (start-up warnings, a dying interpreter's last words)
        # goes to a file: shown when the kernel cannot start or dies, not mixed into our lines.
        log = stack.enter_context(tempfile.TemporaryFile(mode="w+b"))
        try:
            stack.enter_context(client.setup_kernel(cwd=str(folder), stderr=log))
        except Exception as err:
            detail = first_line(str(err)) or type(err).__name__
            raise BadInputError(f"cannot start the kernel {name!r}: {detail}{_log_tail(log)}") from None
        kc: Any = client.kc
        info = client.wait_for_reply(kc.kernel_info())
        if info is not None and "language_info" in info["content"]:
            notebook.metadata["language_info"] = info["content"]["language_info"]
        yield KernelDriver(client, log)


def check_kernel(name: str) -> None:
    """:class:`BadInputError` unless ``name`` is an installed Python kernel."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        raise BadInputError(
            f"no such kernel: {name!r} (see 'jupyter kernelspec list'; pick one with --kernel)"
        ) from None
    if (spec.language or "python").lower() != "python":
        raise BadInputError(f"kernel {name!r} runs {spec.language}; nbrefine needs a Python (IPython) kernel")


def _log_tail(log: Any) -> str:
    """The last line the kernel process wrote on its stderr, as '' or ' (kernel stderr: ...)'."""
    try:
        log.seek(0)
        lines = [
            ln.strip() for ln in log.read()[-4000:].decode("utf-8", "replace").splitlines() if ln.strip()
        ]
    except (OSError, ValueError):
        return ""
    lines = [ln for ln in lines if "running over TCP without encryption" not in ln]
    return f" (kernel stderr: {clip(lines[-1], 200)})" if lines else ""

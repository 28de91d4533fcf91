"""The one kernel driver: runs code in a real Jupyter kernel through nbclient, from outside it.

``nbrefine fix`` (one notebook or a batch job) and ``nbrefine bench`` start their kernel with
:func:`open_kernel` and talk to it only through the :class:`KernelDriver` it yields: run a scratch
cell at a notebook position (:meth:`KernelDriver.run`), call a function of the in-kernel API by
name with JSON arguments and read its JSON result back (:meth:`KernelDriver.call`), read the
session a ``%%refine`` cell made (:meth:`KernelDriver.session`). Nothing here imports IPython:
whatever must happen in the kernel is a function of ``nbrefine.ipython.kernel_api``, named here as
a string (:func:`call_code`).

May import: :mod:`nbrefine._errors`, :mod:`nbrefine.grounding`, this package's
:mod:`.notebook_files` and :mod:`.forked_kernels`, the standard library, nbclient, nbformat,
jupyter_client and jupyter_core.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from .._errors import BadInputError, KernelCallError, KernelDiedError
from ..grounding.text import clip
from .notebook_files import first_line, nbf, plain_json

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from .forked_kernels import ZygoteLink, Zygotes
    from .session_json import SessionJSON

__all__ = [
    "KERNEL_API",
    "TIMEOUT_ENAME",
    "Execution",
    "KernelDriver",
    "SpareKernels",
    "StartedKernel",
    "call_code",
    "check_kernel",
    "open_kernel",
    "shutdown",
    "start_kernel",
]

#: The error name of a cell stopped by the cell timeout (nbclient's ``error_on_timeout``).
TIMEOUT_ENAME = "CellTimeoutError"
#: The in-kernel API (imported there by name only: this side never imports IPython).
KERNEL_API = "nbrefine.ipython.kernel_api"
#: The MIME type of what the in-kernel API publishes: a call's result, a cell's session.
_API_MIME = "application/vnd.nbrefine.kernel-api+json"


@dataclass
class Execution:
    """One scratch cell's run: its outputs and its execute reply."""

    outputs: list[Any]  # without what the in-kernel API published (in ``published``)
    reply: dict[str, Any]
    request_id: str = ""  # the execute request's msg_id: how the cell's session is found
    published: list[dict[str, Any]] = field(default_factory=list)  # the in-kernel API's payloads

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
        self.requests = 0  # execute requests sent through :meth:`run`
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
        outputs, published = [], []
        for output in scratch.outputs:
            data = output.get("data") or {}
            if _API_MIME in data and isinstance(data[_API_MIME], dict):
                published.append(plain_json(data[_API_MIME]))
            else:
                outputs.append(output)
        self.requests += 1
        return Execution(outputs, self.reply, self.request_id, published)

    def run_call(self, name: str, *args: Any, index: int = 0) -> tuple[Execution, Any]:
        """Call ``name(*args)`` of the in-kernel API at notebook position ``index``, in one execute
        request: the run (its other outputs: what the call printed or ran) and the call's JSON
        result. :class:`KernelCallError` (one line) when the call fails in the kernel."""
        run = self.run(call_code(name, *args), index, store_history=False)
        if not run.ok:
            if run.ename == "KernelCallError":
                raise KernelCallError(first_line(run.evalue))
            detail = first_line(run.evalue)
            raise KernelCallError(f"{name}: {run.ename}: {detail}" if detail else f"{name}: {run.ename}")
        result = next((p for p in run.published if p.get("kind") == "result"), None)
        if result is None:
            raise KernelCallError(f"{name}: the kernel gave no result")
        return run, result.get("value")

    def call(self, name: str, *args: Any, index: int = 0) -> Any:
        """The JSON result of ``name(*args)`` of the in-kernel API (see :meth:`run_call`)."""
        return self.run_call(name, *args, index=index)[1]

    def session(self, run: Execution, index: int) -> SessionJSON | None:
        """The session the ``%%refine`` cell of ``run`` made, as JSON, or None. It is found by the
        request that ran the cell, never by its source text (see
        :func:`nbrefine.engine.session.session_for_request`): published by the cell's own run when
        the run was set up so (``setup_run(..., sessions=True)``), else asked for."""
        if not run.request_id:
            return None
        for payload in reversed(run.published):  # the last: a cell's body runs inside it, too
            if payload.get("kind") == "session" and payload.get("request") == run.request_id:
                value = payload.get("value")
                return cast("SessionJSON", value) if isinstance(value, dict) else None
        try:
            found = self.call("session", run.request_id, index=index)
        except KernelCallError:
            return None
        return cast("SessionJSON", found) if isinstance(found, dict) else None


def call_code(name: str, *args: Any) -> str:
    """The one line of Python that calls ``name(*args)`` of the in-kernel API (``args``: JSON
    values), binding no user name: ``KERNEL_API.call('{"name": ..., "args": [...]}')``."""
    request = json.dumps({"name": name, "args": list(args)})
    return f"__import__({json.dumps(KERNEL_API)}, fromlist=['_']).call({json.dumps(request)})"


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


@dataclass
class StartedKernel:
    """A kernel process started in ``folder`` (perhaps still booting) with its client, not yet
    given a notebook: :func:`open_kernel` makes one, or takes one a :class:`SpareKernels` made."""

    name: str
    folder: Path
    km: Any  # nbclient's kernel manager class (jupyter_client's AsyncKernelManager)
    kc: Any
    log: IO[bytes]  # the kernel process's stderr

    @property
    def pid(self) -> int:
        pid = getattr(getattr(self.km, "provisioner", None), "pid", None)
        return int(pid) if isinstance(pid, int) else 0

    def alive(self) -> bool:
        poll = getattr(getattr(self.km, "provisioner", None), "process", None)
        return poll is not None and poll.poll() is None


def start_kernel(name: str, folder: Path, warm_up: str = "", zygotes: Zygotes | None = None) -> StartedKernel:
    """Start kernel ``name`` in ``folder`` without waiting for it to be ready; ``warm_up`` (code)
    is queued as its first, silent request. With ``zygotes``, it is forked from the worker's warm
    zygote where it can be (:mod:`.forked_kernels`). :class:`BadInputError` (one line, with the kernel's
    last words) when it cannot start."""
    from jupyter_core.utils import run_sync

    started: StartedKernel = run_sync(_start)(name, folder, warm_up, zygotes)
    return started


#: How long a kernel may take to exit after its shutdown request: SIGTERM at half of it, SIGKILL at
#: the end (jupyter_client's default: 5 s). A kernel exits 0.2-0.3 s after the request, unless it
#: is caught in ipykernel's shutdown race (7.4 included): the control thread, flushing its streams
#: after the reply, blocks on the IOPub thread that the main thread is closing, and the kernel
#: sits until SIGTERM. One kernel in ten did in a batch; the last ones held the batch's end.
SHUTDOWN_WAIT_S = 2.0


async def _start(name: str, folder: Path, warm_up: str, zygotes: Zygotes | None) -> StartedKernel:
    from nbclient import NotebookClient

    # nbclient starts it, as it would for a notebook: its kernel manager, the history in memory.
    starter = NotebookClient(nbf().v4.new_notebook(), kernel_name=name)
    log = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 - the kernel's; closed at its shutdown
    try:
        km = starter.km = starter.create_kernel_manager()
        km.shutdown_wait_time = SHUTDOWN_WAIT_S
        if zygotes is not None:
            from .forked_kernels import zygote_provisioner

            km.provisioner = zygote_provisioner(km, zygotes)  # None: jupyter_client makes its own
        await starter.async_start_new_kernel(cwd=str(folder), stderr=log)
    except Exception as err:
        detail = first_line(str(err)) or type(err).__name__
        message = f"cannot start the kernel {name!r}: {detail}{_log_tail(log)}"
        log.close()
        raise BadInputError(message) from None
    kc = km.client()
    kc.start_channels()
    if warm_up:  # a silent request: no history, no execution count, nothing displayed
        kc.execute(warm_up, silent=True, store_history=False)
    return StartedKernel(name, folder, km, kc, log)


@contextlib.contextmanager
def open_kernel(
    notebook: NotebookNode,
    name: str,
    folder: Path,
    cell_timeout: int,
    *,
    spares: SpareKernels | None = None,
    note: Callable[[str], None] | None = None,
) -> Iterator[KernelDriver]:
    """A kernel ``name`` in ``folder`` for ``notebook``, shut down when the block ends;
    :class:`BadInputError` (one line, with the kernel's last words) when it cannot start.
    With ``spares``, the kernel started ahead for this notebook is used if it has the same name
    and folder (a dead one is replaced by a fresh start, said in one line to ``note``), and the
    kernel is shut down in the background."""
    client = _notebook_client(notebook, name, folder, cell_timeout)
    kernel = _ready(client, spares, note or (lambda line: None))
    try:
        kc: Any = client.kc
        info = client.wait_for_reply(kc.kernel_info())
        if info is not None and "language_info" in info["content"]:
            notebook.metadata["language_info"] = info["content"]["language_info"]
        yield KernelDriver(client, kernel.log)
    finally:
        client.kc = client.km = None
        if spares is not None:
            spares.retire(kernel)
        else:
            shutdown(kernel)


def _notebook_client(notebook: NotebookNode, name: str, folder: Path, cell_timeout: int) -> Any:
    from nbclient import NotebookClient

    return NotebookClient(
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


def _ready(client: Any, spares: SpareKernels | None, note: Callable[[str], None]) -> StartedKernel:
    """``client`` attached to a kernel ready to run: the spare kernel started for this notebook if
    it answers, else a fresh one started in the notebook's folder (``client.resources``)."""
    folder = Path(client.resources["metadata"]["path"])
    spare = spares.take(client.kernel_name, folder) if spares else None
    zygotes = spares.zygotes if spares else None
    if spare is not None:
        try:
            return _attach(client, spare)
        except BadInputError as err:
            reason = str(err).partition(": ")[2]
            note(f"the kernel started ahead could not be used ({reason}); starting a fresh one")
    try:
        return _attach(client, start_kernel(client.kernel_name, folder, zygotes=zygotes))
    except BadInputError as err:
        # jupyter_client picks free ports and the kernel binds them a moment later: another
        # process may take one in between. That kernel dies at once; one more start is cheap.
        if _PORT_TAKEN not in str(err):
            raise
        note("a port given to the kernel was taken before it could bind it; starting it again")
        return _attach(client, start_kernel(client.kernel_name, folder, zygotes=zygotes))


_PORT_TAKEN = "Address already in use"  # what zmq says when the kernel cannot bind a port


def _attach(client: Any, kernel: StartedKernel) -> StartedKernel:
    """Wait until ``kernel`` answers, then give it to ``client``; a kernel that dies first is
    shut down and reported as :class:`BadInputError`."""
    from jupyter_core.utils import run_sync

    try:
        if not kernel.alive():
            raise RuntimeError("the kernel died before it was used")
        run_sync(_answering)(kernel.kc, client.startup_timeout)
    except BaseException as err:
        detail = first_line(str(err)) or type(err).__name__
        message = f"cannot start the kernel {kernel.name!r}: {detail}{_log_tail(kernel.log)}"
        shutdown(kernel)  # also on Ctrl-C: no kernel is left behind
        if not isinstance(err, Exception):
            raise
        raise BadInputError(message) from None
    kernel.kc.allow_stdin = False
    client.km, client.kc = kernel.km, kernel.kc
    return kernel


_IOPUB_WAIT_S = 0.2  # for a kernel's iopub messages after its shell reply (then: ask again)


async def _answering(kc: Any, timeout: float) -> None:
    """Return when the kernel has answered a ``kernel_info`` request on shell and its iopub
    messages reach us (a SUB socket misses what was published before it connected). As
    jupyter_client's ``wait_for_ready``, but it waits for the messages of its own request, not a
    fixed 0.2 s for any: a kernel started ahead, idle, publishes nothing else."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg_id = kc.kernel_info()
        # Its iopub messages go out with the shell reply: missed (published before the SUB socket
        # connected, as for a kernel just forked), they never come, so the next request is sent
        # soon (it waited a whole second: the first notebook of a batch's run waited 1.4 s).
        if await _reply(kc.shell_channel, msg_id, 1.0) and await _reply(
            kc.iopub_channel, msg_id, _IOPUB_WAIT_S
        ):
            return
        if not await kc.is_alive():
            raise RuntimeError("the kernel died before it answered")
    raise RuntimeError(f"the kernel did not answer within {timeout:g} s")


async def _reply(channel: Any, msg_id: str, seconds: float) -> bool:
    """Whether a message in reply to ``msg_id`` comes on ``channel`` within ``seconds`` (the
    others are dropped: a warm-up's, an earlier attempt's)."""
    from queue import Empty

    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        try:
            msg = await channel.get_msg(timeout=left)
        except Empty:
            return False
        if msg["parent_header"].get("msg_id") == msg_id:
            return True
    return False


def shutdown(kernel: StartedKernel) -> None:
    """Stop ``kernel`` as nbclient does (a shutdown request, then SIGTERM and SIGKILL if it takes
    too long) and free its files. Runs in this thread's event loop (see :class:`SpareKernels`
    for another thread)."""
    from jupyter_core.utils import run_sync

    kernel.kc.stop_channels()
    try:
        run_sync(_stop)(kernel.km)
    finally:
        kernel.log.close()


async def _stop(km: Any) -> None:
    try:
        if await km.is_alive():
            await km.shutdown_kernel(now=False)
    except RuntimeError as err:  # already gone
        if "No kernel is running!" not in str(err):
            raise
    finally:
        await km.cleanup_resources()


class SpareKernels:
    """A batch worker's kernels: the one started ahead for its next notebook (:meth:`prepare`,
    :meth:`take`) and those shutting down in the background (:meth:`retire`). A notebook's kernel
    boots, and the last one exits, while the worker runs another notebook's cells; each kernel
    still serves one notebook only. The kernels are forked from the worker's zygote
    (:attr:`zygotes`; the one its batch started for every worker, given ``zygote``) where they
    can be. :meth:`close` (the block's end) stops them all and waits."""

    def __init__(self, zygote: ZygoteLink | None = None) -> None:
        from .forked_kernels import Zygotes

        self.spare: StartedKernel | None = None
        self.zygotes = Zygotes(zygote)
        self._stopping: list[threading.Thread] = []

    def __enter__(self) -> SpareKernels:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def prepare(self, name: str, folder: Path, warm_up: str = "") -> int:
        """Start the kernel for the next notebook (``name`` in ``folder``); its pid, 0 when it
        cannot start (the next notebook then starts its own and says why)."""
        if self.spare is not None:
            self.retire(self.spare)
            self.spare = None
        if not folder.is_dir():  # gone since it was queued: its notebook will say so itself
            return 0
        try:
            self.spare = start_kernel(name, folder, warm_up, self.zygotes)
        except BadInputError:
            return 0
        return self.spare.pid

    def take(self, name: str, folder: Path) -> StartedKernel | None:
        """The spare kernel if it is ``name`` in ``folder``; otherwise None (and it is retired)."""
        spare, self.spare = self.spare, None
        if spare is not None and (spare.name, spare.folder) != (name, folder):
            self.retire(spare)
            return None
        return spare

    def retire(self, kernel: StartedKernel) -> None:
        """Shut ``kernel`` down in a thread of its own: its exit takes a few tenths of a second
        that the next notebook need not wait for."""
        kernel.kc.stop_channels()  # here: its sockets belong to this thread's loop
        self._stopping = [t for t in self._stopping if t.is_alive()]
        thread = threading.Thread(target=_stop_in_thread, args=(kernel,), name="nbrefine-kernel-shutdown")
        thread.start()
        self._stopping.append(thread)

    def close(self) -> None:
        if self.spare is not None:
            self.retire(self.spare)
            self.spare = None
        for thread in self._stopping:
            thread.join()
        self._stopping = []
        self.zygotes.close()  # after its kernels: they would die with it


def _stop_in_thread(kernel: StartedKernel) -> None:
    # A loop of the thread's own: the kernel manager's sockets follow the loop that uses them.
    try:
        with contextlib.suppress(Exception):  # whatever went wrong, the process is killed below
            asyncio.run(_stop(kernel.km))
    finally:
        kernel.log.close()
        process = getattr(kernel.km.provisioner, "process", None)
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(kernel.pid, signal.SIGKILL)  # with the trial processes it forked
            process.wait()  # reaped: no zombie left either


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

"""``--cluster ADDRESS``: a batch's notebooks as tasks on a running dask.distributed scheduler.

One task per notebook, each :func:`~.notebook_job.repair_one` on some worker, which starts the notebook's
kernel there and sends back the repaired notebook's text and its report; the client writes them,
as with the local pool. The client reads each notebook and ships its text with the task, so the
workers need not see the client's files; a notebook runs in its own folder when the worker sees
that folder too (a shared file system), else in a scratch folder. Dask itself (the optional
``nbrefine[dask]`` extra) is imported only here and only when ``--cluster`` is used.

Tasks are handed out a window at a time (twice the cluster's threads, at least 8), so neither
the client nor the scheduler holds the whole batch. What a job reports while it runs (its start,
its cells' lines, its kernel) comes back as worker events on a topic of this run.

A worker that dies mid-notebook (killed, out of memory): the scheduler gives its task to another
worker, and the task itself counts its runs in a :class:`distributed.Variable`, so a notebook is
run at most twice; the second death is reported as the notebook's failure and the batch goes
on. (A scheduler configured to give up sooner, ``allowed-failures`` 0, raises ``KilledWorker``:
the client then resubmits the notebook once itself.) The dead worker's kernel exits with it: a
kernel forked from the worker's zygote gets its parent-death signal when the zygote ends with
the worker, one started as usual polls its parent process (``JPY_PARENT_PID``).

Each thread of a worker keeps its kernels as a local pool's worker does (a
:class:`~nbrefine.headless.SpareKernels`): they are forked from a zygote of its own and shut
down in the background; the next notebook is not known ahead, so none is started ahead. They
are closed (the shutdowns waited for) when the worker process exits.

Cancelling (Ctrl-C) cannot interrupt a running Dask task, so the client asks every worker to
kill the kernels of this run (``Client.run``); their jobs end at once, and tasks not started
yet are cancelled.

May import: this package, :mod:`nbrefine._errors`, :mod:`nbrefine._version`, the standard library and
(lazily) ``distributed``."""

from __future__ import annotations

import atexit
import contextlib
import json
import queue
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._version import __version__
from .dask_gate import _dd
from .gate import GateLedger, GateLimits
from .notebook_job import NotebookResult, NotebookTask, kill_kernel, repair_one, spare_kernels, warm_up
from .pool import Event

if TYPE_CHECKING:
    from ..headless import SpareKernels

__all__ = ["DaskExecutor", "require_distributed"]

MAX_RUNS = 2  # a notebook whose worker died runs once more, on another worker
_MIN_WINDOW = 8
_POLL_S = 0.5
_CONNECT_TIMEOUT = "30s"

# In each worker process: the kernels of the jobs running there, per batch run, so that a
# cancelled run can kill them (a Dask task cannot be interrupted from outside).
_KERNELS: dict[str, dict[int, int]] = {}
_CANCELLED: set[str] = set()
_REGISTRY_LOCK = threading.Lock()
# Each worker thread's SpareKernels (see the module's docstring), and all of them, for the exit.
_THREAD = threading.local()
_EVERY_THREADS_KERNELS: list[SpareKernels] = []


def require_distributed() -> None:
    """A one-line usage error when Dask's distributed scheduler client is not installed."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        from .._errors import BadInputError as CliError

        raise CliError("--cluster needs dask.distributed: pip install 'nbrefine[dask]'") from None


class DaskExecutor:
    """:class:`~.pool.Executor` over the workers of a running ``dask.distributed`` scheduler."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.run_id = uuid.uuid4().hex[:12]
        self.topic = f"nbrefine-{self.run_id}"
        self.client: Any = None
        self._futures: dict[str, Any] = {}  # key → future, for the tasks out on the cluster
        self._tasks: dict[str, tuple[NotebookTask, int]] = {}  # key → (task, runs so far)
        self._messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self._threads = (0, 0.0)  # the cluster's worker threads, and when they were counted

    # ---------------------------------------------------------------- connection

    def connect(self) -> Any:
        """Connect to the scheduler (a one-line usage error when it cannot be reached)."""
        if self.client is None:
            from .._errors import BadInputError as CliError

            try:
                self.client = _dd().Client(self.address, timeout=_CONNECT_TIMEOUT, set_as_default=False)
            except (OSError, TimeoutError, ValueError) as err:
                detail = _one_line(err) or type(err).__name__
                where = f"--cluster {self.address}"
                raise CliError(f"{where}: cannot reach a Dask scheduler ({detail})") from None
            self._check_workers()
        return self.client

    def _check_workers(self) -> None:
        """Every worker there now must run this nbrefine: a task pickled here names its functions
        by module, and a job's report must mean the same as on this machine."""
        from .._errors import BadInputError

        try:
            versions: dict[str, str] = self.client.run(worker_version)
        except Exception as err:  # a worker without nbrefine cannot even unpickle the call
            self.close()
            why = _one_line(err) or type(err).__name__
            raise BadInputError(
                f"--cluster {self.address}: a worker cannot run nbrefine ({why}); "
                "install it there: pip install 'nbrefine[dask]'"
            ) from None
        other = {address: v for address, v in versions.items() if v != __version__}
        if other:
            self.close()
            address, version = sorted(other.items())[0]
            raise BadInputError(
                f"--cluster {self.address}: {len(other)} worker(s) run nbrefine {version} ({address}), "
                f"this is {__version__}: install the same version on every worker"
            )

    def describe(self) -> str:
        info = self.connect().scheduler_info(n_workers=-1)
        workers = info.get("workers", {})
        threads = sum(int(w.get("nthreads", 0)) for w in workers.values())
        where = info.get("address", self.address)
        return f"on the Dask scheduler at {where} ({len(workers)} workers, {threads} threads)"

    def create_gate(self, limits: GateLimits, spent: GateLedger | None) -> Any:
        """The batch's shared request gate, on the scheduler (so it holds across workers)."""
        from .dask_gate import DaskGate

        return DaskGate.create(self.connect(), limits, spent)

    def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.unsubscribe_topic(self.topic)
            with contextlib.suppress(Exception):
                self.client.close()
            self.client = None

    # ---------------------------------------------------------------- Executor

    def run(self, tasks: Iterable[NotebookTask]) -> Iterator[Event | NotebookResult]:
        client = self.connect()
        client.subscribe_topic(self.topic, lambda event: self._messages.put(dict(event[1])))
        yield from self._warm_up()
        pending = iter(tasks)
        more = True
        while True:
            while more and len(self._futures) < self._window():
                task = next(pending, None)
                if task is None:
                    more = False
                    break
                self._submit(_shipped(task), 1)
            if not self._futures and not more:
                break
            try:
                message = self._messages.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            yield from self._handle(message)

    def cancel(self) -> None:
        if self.client is None:
            return
        with contextlib.suppress(Exception):
            # First on the workers: no job of this run starts any more, and the running ones
            # lose their kernels (their tasks then end on their own).
            self.client.run(_cancel_on_worker, self.run_id)
        with contextlib.suppress(Exception):
            self.client.cancel(list(self._futures.values()), force=True)
        self._futures.clear()
        self._tasks.clear()  # the client stays connected: the gate's figures are still read

    # ---------------------------------------------------------------- internals

    def _warm_up(self) -> Iterator[Event]:
        """The imports every job needs (nbclient alone takes seconds), once per worker there now,
        as the local pool's fork server does: a notebook's timings then hold only its own costs.
        (A worker that joins later pays them in its first notebook.)"""
        ready: dict[str, float] = self.client.run(warm_up)
        for address, seconds in ready.items():
            yield Event(-1, "ready", {"worker": address, "import_s": round(seconds, 3)})

    def _window(self) -> int:
        count, when = self._threads
        if time.monotonic() - when > 5.0:
            with contextlib.suppress(Exception):
                count = sum(self.client.nthreads().values())
            self._threads = (count, time.monotonic())
        return max(_MIN_WINDOW, 2 * count)

    def _submit(self, task: NotebookTask, runs: int) -> None:
        key = f"nbrefine-{self.run_id}-{task.index}-{runs}"
        future = self.client.submit(run_on_worker, task, self.run_id, self.topic, key=key, pure=False)
        self._futures[key] = future
        self._tasks[key] = (task, runs)
        future.add_done_callback(lambda f, key=key: self._messages.put({"done": key}))

    def _handle(self, message: dict[str, Any]) -> Iterator[Event | NotebookResult]:
        key = message.get("done")
        if key is None:
            yield from _events(message)
            return
        future = self._futures.pop(str(key), None)
        task, runs = self._tasks.pop(str(key), (None, 0))
        if future is None or task is None:
            return
        result = self._outcome(future, task, runs)
        if result is not None:
            _forget_runs(self.client, self.run_id, task.index)
            yield result

    def _outcome(self, future: Any, task: NotebookTask, runs: int) -> NotebookResult | None:
        """The task's result; None when it was handed to another worker."""
        KilledWorker = _dd().KilledWorker

        if future.status == "finished":
            result: NotebookResult = future.result()
            return result
        if future.status == "cancelled":
            message = "its task was cancelled on the cluster"
            return NotebookResult(task.index, task.path, "fail", message=message)
        err = future.exception()
        if isinstance(err, KilledWorker) and runs < MAX_RUNS:
            # The scheduler gave up on the task at once (its allowed-failures): run it once more.
            retry = {"index": task.index, "kind": "retry", "data": {"worker": "", "run": runs + 1}}
            self._messages.put(retry)
            self._submit(task, runs + 1)
            return None
        if isinstance(err, KilledWorker):
            message = f"the workers running it died, {runs} times: not run again"
        else:
            message = f"its task failed on the cluster: {type(err).__name__}: {_one_line(err)}"
        return NotebookResult(task.index, task.path, "fail", message=message)


def _events(message: dict[str, Any]) -> Iterator[Event]:
    index = int(message.get("index", -1))
    kind = str(message.get("kind", ""))
    data = dict(message.get("data") or {})
    if kind == "start" and int(data.get("run", 1)) > 1:
        yield Event(index, "retry", data)  # an earlier run's worker died: this one is the retry
    yield Event(index, kind, data)


def _shipped(task: NotebookTask) -> NotebookTask:
    """The task with the notebook's text, read here: a worker may not see the client's files.
    (A notebook that cannot be read goes as it is: its job reports why.)"""
    if task.text is not None:
        return task
    try:
        return replace(task, text=Path(task.path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return task


def _forget_runs(client: Any, run: str, index: int) -> None:
    with contextlib.suppress(Exception):
        _dd().Variable(_runs_name(run, index), client=client).delete()


def _runs_name(run: str, index: int) -> str:
    return f"nbrefine-{run}-runs-{index}"


def _one_line(err: BaseException | None) -> str:
    text = str(err or "").strip()
    return text.splitlines()[0][:200] if text else ""


# --------------------------------------------------------------------------- on a worker


def worker_version() -> str:
    """Run on every worker when the client connects (:meth:`DaskExecutor.connect`)."""
    return __version__


def run_on_worker(task: NotebookTask, run: str, topic: str) -> NotebookResult:
    """The Dask task of one notebook (runs in a worker process, in one of its threads)."""
    worker = _dd().get_worker()
    runs = _dd().Variable(_runs_name(run, task.index))
    earlier = _earlier_runs(runs)
    runs.set(json.dumps([*earlier, {"worker": worker.address, "started_at": time.time()}]))

    def emit(kind: str, data: dict[str, Any]) -> None:
        if kind == "kernel":
            _note_kernel(run, task.index, int(data.get("pid") or 0))
        worker.log_event(topic, {"index": task.index, "kind": kind, "data": data})

    if len(earlier) >= MAX_RUNS or run in _CANCELLED:
        return _not_run_again(task, earlier, worker.address, cancelled=run in _CANCELLED)
    after = earlier[-1]["worker"] if earlier else ""
    emit("start", {"worker": worker.address, "run": len(earlier) + 1, "after": after})
    try:
        with _scratch_if_unseen(task) as here:
            result = repair_one(here, emit, _thread_kernels())
    finally:
        with _REGISTRY_LOCK:
            _KERNELS.get(run, {}).pop(task.index, None)
    result.worker = worker.address
    result.attempts = [{**e, "died": True} for e in earlier]
    return result


def _thread_kernels() -> SpareKernels:
    kernels: SpareKernels | None = getattr(_THREAD, "kernels", None)
    if kernels is None:
        kernels = _THREAD.kernels = spare_kernels()
        with _REGISTRY_LOCK:
            if not _EVERY_THREADS_KERNELS:
                atexit.register(_close_kernels)
            _EVERY_THREADS_KERNELS.append(kernels)
    return kernels


def _close_kernels() -> None:
    """At the worker's exit: the kernels shutting down are waited for, the zygotes stopped."""
    for kernels in _EVERY_THREADS_KERNELS:
        with contextlib.suppress(Exception):  # one that fails must not keep the others open
            kernels.close()


def _earlier_runs(runs: Any) -> list[dict[str, Any]]:
    try:
        earlier = json.loads(runs.get(timeout=0))
    except TimeoutError:  # not set: this is the notebook's first run
        return []
    return earlier if isinstance(earlier, list) else []


def _not_run_again(
    task: NotebookTask, earlier: list[dict[str, Any]], address: str, *, cancelled: bool
) -> NotebookResult:
    workers = ", ".join(str(e.get("worker")) for e in earlier)
    message = (
        "not run: the batch was cancelled"
        if cancelled
        else f"the worker running it died, {len(earlier)} times ({workers}): not run again"
    )
    result = NotebookResult(task.index, task.path, "fail", message=message, worker=address)
    result.attempts = [{**e, "died": True} for e in earlier]
    result.started_at = result.ended_at = time.time()
    return result


@contextlib.contextmanager
def _scratch_if_unseen(task: NotebookTask) -> Iterator[NotebookTask]:
    """The notebook runs in its own folder where this worker sees it, else in a scratch one."""
    if Path(task.folder).is_dir():
        yield task
        return
    with tempfile.TemporaryDirectory(prefix="nbrefine-job-") as scratch:
        yield replace(task, folder=scratch)


def _note_kernel(run: str, index: int, pid: int) -> None:
    with _REGISTRY_LOCK:
        _KERNELS.setdefault(run, {})[index] = pid
        cancelled = run in _CANCELLED
    if cancelled:  # the run was cancelled while this kernel started
        kill_kernel(pid)


def _cancel_on_worker(run: str) -> int:
    """Run on every worker by :meth:`DaskExecutor.cancel`: kill this run's kernels there."""
    with _REGISTRY_LOCK:
        _CANCELLED.add(run)
        pids = list(_KERNELS.pop(run, {}).values())
    for pid in pids:
        kill_kernel(pid)
    return len(pids)

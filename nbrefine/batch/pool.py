"""The local executor: ``--jobs N`` worker processes, each running one notebook at a time.

A job drives its notebook's kernel (a process of its own) and waits on it most of the time, so
the client stays light: it feeds the workers one task each as they free up (the tasks are never
all in memory) and passes on what they send back, one :class:`Event` or
:class:`~nbrefine.batch.notebook_job.NotebookResult` at a time. Any executor with the same two methods
(:class:`Executor`) can replace it, e.g. one that sends each task to a cluster.

A worker keeps the kernel of its next notebook started ahead (booting while it runs the current
one) and shuts its last one down in the background (:class:`~nbrefine.headless.SpareKernels`):
each task carries the folder of the task that many places later in the queue, where its worker
most likely goes next. The client knows each worker's spare kernel too, and kills it with the
worker if the worker dies.

Workers ignore SIGINT (a Ctrl-C in a terminal reaches every process of the group): the client
decides, and :meth:`LocalPool.cancel` stops them with SIGTERM, which unwinds the running job so
its kernel is shut down; a worker that does not stop in time is killed, and its kernel with it.

May import: this package's :mod:`.notebook_job` and the standard library."""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import os
import queue
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from .notebook_job import (
    Emit,
    NotebookResult,
    NotebookTask,
    batch_zygote,
    kill_kernel,
    repair_one,
    spare_kernels,
    warm_up,
)

if TYPE_CHECKING:
    from ..headless import SpareKernels
    from ..headless.forked_kernels import Zygote, ZygoteLink

__all__ = ["Event", "Executor", "LocalPool"]

Job = Callable[[NotebookTask, Emit, "SpareKernels | None"], NotebookResult]

PRELOAD = (
    "nbrefine.batch._forkserver",  # first: nbformat without the grammars nbclient would build
    "jupyter_client.kernelspec",
    "nbclient",
    "nbformat",
    "nbrefine.headless",
    "nbrefine.engine",
    "nbrefine.providers.offline",
    "nbrefine.batch.pool",
)
_STOP_GRACE_S = 15.0  # how long a cancelled worker may take to shut its kernel down
_POLL_S = 0.2


@dataclass(frozen=True)
class Event:
    index: int  # the task's index
    # "ready" (index -1; data: worker, import_s), "start" (data: worker), "line", "note",
    # "kernel" (data: pid), "spare" (data: pid, the kernel started for the worker's next task)
    kind: str
    data: dict[str, Any] = field(default_factory=dict)


class Executor(Protocol):
    def run(self, tasks: Iterable[NotebookTask]) -> Iterator[Event | NotebookResult]:
        """Run every task; yield what the jobs report as it comes, a result last for each task."""
        ...

    def cancel(self) -> None:
        """Stop every job now; every kernel shut down when this returns."""
        ...


class _Cancelled(BaseException):
    """SIGTERM from the client: unwind the job (its kernel is shut down on the way out)."""


def _on_sigterm(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second one must not cut the clean-up short
    # The cancelled cell's asyncio task dies with its kernel; its "exception was never retrieved"
    # would only be noise on the user's terminal.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    raise _Cancelled()


def _worker(
    tasks: Any, out: Any, job: Job, environ: dict[str, str], cwd: str, spares: bool, zygote: ZygoteLink | None
) -> None:
    # Forked from the fork server, which started with the first batch of this process: take
    # the client's environment and folder as they are now (a provider's key, relative paths).
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    # Cancelled, the job's kernel and the spare are shut down (``kernels`` waits) before it ends.
    with contextlib.suppress(_Cancelled), _kernels(spares, zygote) as kernels:
        out.put(Event(-1, "ready", {"worker": os.getpid(), "import_s": round(warm_up(), 3)}))
        while True:
            task: NotebookTask | None = tasks.get()
            if task is None:
                return
            index = task.index
            out.put(Event(index, "start", {"worker": os.getpid()}))

            def emit(kind: str, data: dict[str, Any], index: int = index) -> None:
                out.put(Event(index, kind, data))

            out.put(job(task, emit, kernels))


@contextlib.contextmanager
def _kernels(spares: bool, zygote: ZygoteLink | None) -> Iterator[SpareKernels | None]:
    if not spares:  # (no zygote then: the pool starts one only for spare kernels)
        yield None
        return
    with spare_kernels(zygote) as kernels:
        yield kernels


def _give_main_a_spec() -> None:
    """An IPython shell in this process (a notebook, a test) replaces ``__main__`` with a module
    object that has no ``__spec__``, which multiprocessing reads when it starts workers: without
    one, no worker starts (``'__main__' has no attribute '__spec__'``)."""
    main = sys.modules.get("__main__")
    if main is not None and not hasattr(main, "__spec__"):
        main.__spec__ = None


class LocalPool:
    """:class:`Executor` over ``jobs`` worker processes on this machine."""

    def __init__(self, jobs: int, job: Job = repair_one, *, spare_kernels: bool = True) -> None:
        self.jobs = max(1, jobs)
        self.job = job
        self.spare_kernels = spare_kernels
        # Workers fork from a server that imported what every job needs once (nbclient alone
        # takes seconds): cheap to start, and no fork of the client, which has threads.
        _give_main_a_spec()
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(list(PRELOAD))
        self._tasks: Any = self._ctx.Queue()
        self._out: Any = self._ctx.Queue()
        self._workers: list[Any] = []
        self._busy: dict[int, tuple[int, int]] = {}  # worker pid → (task index, kernel pid)
        self._spares: dict[int, int] = {}  # worker pid → its spare kernel's pid
        self._paths: dict[int, str] = {}  # task index → path, for the tasks under way
        self._zygote: Zygote | None = None  # the workers' kernels are forked from it

    def run(self, tasks: Iterable[NotebookTask]) -> Iterator[Event | NotebookResult]:
        pending = _looking_ahead(tasks, self.jobs) if self.spare_kernels else iter(tasks)
        first = next(pending, None)
        if first is None:
            return
        if self.spare_kernels:
            # Started before the workers, it imports what the kernels need while they start
            # (half a second of CPU, paid once for all of them, not once by each).
            self._zygote = batch_zygote(first)
        pending = itertools.chain([first], pending)
        outstanding = 0
        for _ in range(self.jobs):
            outstanding += self._feed(pending)
        while outstanding:
            message = self._next()
            if message is None:
                continue
            if isinstance(message, NotebookResult):
                outstanding -= 1
                self._done(message.index)
                outstanding += self._feed(pending)
            else:
                self._note(message)
            yield message
        self._stop_idle()

    def cancel(self) -> None:
        kernels = [kernel for _, kernel in self._busy.values()] + list(self._spares.values())
        for proc in self._workers:
            if proc.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_GRACE_S
        for proc in self._workers:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        for pid in kernels:  # shut down by its job, unless the job had to be killed
            kill_kernel(pid) if _alive(pid) else None
        self._close()

    # ---------------------------------------------------------------- internals

    def _feed(self, pending: Iterator[NotebookTask]) -> int:
        task = next(pending, None)
        if task is None:
            return 0
        self._paths[task.index] = task.path
        self._tasks.put(task)
        if len([p for p in self._workers if p.is_alive()]) < self.jobs:
            self._start_worker()
        return 1

    def _start_worker(self) -> None:
        link = self._link()
        args = (self._tasks, self._out, self.job, dict(os.environ), os.getcwd(), self.spare_kernels, link)
        proc = self._ctx.Process(target=_worker, args=args, daemon=True)
        try:
            proc.start()
        finally:
            if link is not None:
                link.channel.close()  # the worker's now (a copy went with it)
        self._workers.append(proc)

    def _link(self) -> ZygoteLink | None:
        if self._zygote is None:
            return None
        try:
            return self._zygote.link()
        except RuntimeError:  # a ZygoteError: it is gone, and the workers start zygotes of their own
            self._zygote.close()
            self._zygote = None
            return None

    def _next(self) -> Event | NotebookResult | None:
        try:
            message: Event | NotebookResult = self._out.get(timeout=_POLL_S)
            return message
        except queue.Empty:
            return self._reap()

    def _note(self, event: Event) -> None:
        if event.kind == "start":
            self._busy[int(event.data["worker"])] = (event.index, 0)
        elif event.kind in ("kernel", "spare"):
            worker = next((w for w, (index, _) in self._busy.items() if index == event.index), None)
            pid = int(event.data.get("pid") or 0)
            if worker is not None and event.kind == "kernel":
                self._busy[worker] = (event.index, pid)
                if self._spares.get(worker) == pid:  # its spare became this task's kernel
                    del self._spares[worker]
            elif worker is not None:
                self._spares[worker] = pid

    def _done(self, index: int) -> None:
        self._paths.pop(index, None)
        for worker, (busy_index, _) in list(self._busy.items()):
            if busy_index == index:
                del self._busy[worker]

    def _reap(self) -> NotebookResult | None:
        """A worker that died on its own (killed, out of memory): its notebook is reported as
        failing, a new worker takes its place."""
        for proc in list(self._workers):
            if proc.is_alive() or proc.pid not in self._busy:
                continue
            index, kernel = self._busy.pop(proc.pid)
            self._workers.remove(proc)
            for pid in (kernel, self._spares.pop(proc.pid, 0)):
                kill_kernel(pid) if _alive(pid) else None
            self._start_worker()
            message = f"the worker process running it died ({_how(proc.exitcode)})"
            return NotebookResult(index, self._paths.get(index, "?"), "fail", message=message)
        return None

    def _stop_idle(self) -> None:
        for _ in self._workers:
            self._tasks.put(None)
        for proc in self._workers:
            proc.join(_STOP_GRACE_S)
            if proc.is_alive():
                proc.kill()
        self._close()

    def _close(self) -> None:
        for q in (self._tasks, self._out):
            q.cancel_join_thread()  # a killed worker may leave a half-read queue: never block on it
            q.close()
        self._workers = []
        if self._zygote is not None:  # its workers are gone: it ends with this socket's close
            self._zygote.close()
            self._zygote = None


def _looking_ahead(tasks: Iterable[NotebookTask], ahead: int) -> Iterator[NotebookTask]:
    """Each task with the folder of the task ``ahead`` places after it: with ``ahead`` workers
    taking turns, the one its worker most likely runs next. The last ones have none (their
    workers start no spare kernel). Holds ``ahead`` tasks in memory, not the queue."""
    held: deque[NotebookTask] = deque()
    for task in tasks:
        held.append(task)
        if len(held) > ahead:
            yield replace(held.popleft(), next_folder=task.folder)
    yield from held


def _how(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-exitcode).name}"
    return f"exit code {exitcode}"


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

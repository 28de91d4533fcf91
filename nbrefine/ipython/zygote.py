"""The kernel zygote: one warm process that forks a batch worker's kernels instead of starting them.

A kernel started the usual way (``python -m ipykernel_launcher -f FILE``) spends about half a
second of CPU importing ipykernel, IPython and what a repair needs, before it runs a line of the
notebook. A batch worker that runs notebook after notebook pays that for every one. The zygote
pays it once: it imports all that (nothing else: no user code, no shell, no socket, no thread) and
then, for each kernel the worker asks for, forks a child that becomes the kernel, in the
notebook's folder, with the environment, streams and connection file the kernel manager chose,
exactly as ``ipykernel_launcher`` would start it. Each notebook still gets a process of its own,
forked from the same untouched zygote: what one notebook ran is never seen by the next.

It is started by :class:`nbrefine.headless.forked_kernels.Zygote` with the interpreter and interpreter
options of the kernel spec, its own folder off ``sys.path`` as ``ipykernel_launcher`` has it while
it imports (:data:`nbrefine.headless.forked_kernels.START`), and talks to it over
the ``AF_UNIX``/``SOCK_SEQPACKET`` socket ``FD`` (one JSON message per packet, descriptors
attached):

- zygote -> worker, once: ``{"ready": pid}``, or ``{"error": "..."}`` when it cannot preload;
- ``{"op": "spawn", "args": [...], "cwd": ..., "env": {...}}`` with the kernel's stdin, stdout
  and stderr attached -> ``{"pid": N}`` with a pidfd of the kernel attached (the worker polls and
  signals the kernel through it, with no pid reuse race), or ``{"error": "..."}``;
- ``{"op": "status", "pid": N}`` -> ``{"status": CODE}`` once the kernel has exited (a negative
  code: the signal that ended it, as :class:`subprocess.Popen` says), ``{"status": null}`` before;
- ``{"op": "attach"}`` with one socket of the same kind attached -> nothing on this socket; the
  zygote serves the attached one too, from now on, and sends ``{"ready": pid}`` on it. A batch's
  client starts one zygote and gives each of its workers a socket of its own this way (one zygote's
  imports for the batch, started before the workers are), each worker then asking for its own
  kernels as above.

The zygote ends when every socket it serves has closed at the other end (the client and its
workers exited or were killed); its kernels then get SIGKILL (their parent-death signal), so none
outlives the batch.

May import: ipykernel, ipykernel_launcher, IPython and what a kernel imports as it starts
(:data:`_KERNEL_START`), the IPython side's :mod:`.repairs` and :mod:`.kernel_api` (what it
preloads), :mod:`nbrefine.sandbox.hardening.native` (the parent-death signal) and the standard
library.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import select
import signal
import socket
import sys
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any

__all__ = ["main"]

#: How often the zygote reaps the kernels that have exited, when no request comes.
_REAP_EVERY_S = 1.0
_MAX_MESSAGE = 1 << 20  # a spawn request carries the kernel's environment


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    channel = socket.socket(fileno=int(args[0]))
    try:
        before = set(os.environ)
        _preload()
        # What the imports put in the environment (debugpy: PYDEVD_USE_FRAME_EVAL), which each
        # kernel's own environment replaces: set again in each, as its own imports would.
        set_by_imports = {name: value for name, value in os.environ.items() if name not in before}
        _number_threads_afresh()
        if threading.active_count() != 1:  # a fork copies one thread: others' locks stay held
            raise RuntimeError(f"{threading.active_count()} threads after the imports; forking is unsafe")
    except BaseException as err:
        _send(channel, {"error": f"the zygote cannot preload: {type(err).__name__}: {err}"})
        return 1
    with contextlib.suppress(OSError):  # the client closed its socket: it serves those attached
        _send(channel, {"ready": os.getpid()})
    return _serve(channel, set_by_imports)


#: What a kernel imports past ``ipykernel.kernelapp`` as it starts, and as a batch loads the
#: extension into it: its kernel class and debugger (with debugpy's ~130 modules), the shell's
#: magics, history and inspector, the event loop's glue, and nbrefine's magics with the batch's
#: request gate. Missing ones cost every kernel their import (tests/headless/test_forked_kernels.py
#: lists what a forked kernel still imports before its first cell).
_KERNEL_START = (
    "ipykernel_launcher",
    "ipykernel.ipkernel",
    "ipykernel.debugger",
    "psutil",
    "sqlite3",
    "tornado.platform.asyncio",
    "tornado.queues",
    "IPython.core.completerlib",
    "IPython.core.debugger",
    "IPython.core.logger",
    "IPython.core.oinspect",
    "IPython.extensions.storemagic",
    "nbrefine.ipython.magics",
    "nbrefine.batch.gate",
    "nbrefine.batch.message_batches.spool",
    "nbrefine.headless.session_json",  # a failing cell's session, as the batch reads it
    "nbrefine.engine.provenance",  # what an accepted fix records in its cell
    "pygments.formatters.terminal256",  # IPython's colours in a failing cell's traceback
    "pygments.styles",
)


def _preload() -> None:
    """What every kernel imports before its first cell, and what its first repair needs."""
    import importlib
    import pkgutil

    import ipykernel.kernelapp  # noqa: F401
    import IPython.core.magics

    magics = [f"IPython.core.magics.{m.name}" for m in pkgutil.iter_modules(IPython.core.magics.__path__)]
    for name in (*_KERNEL_START, *magics):
        with contextlib.suppress(ImportError):  # optional (psutil, debugpy): kernels go without
            importlib.import_module(name)

    from . import kernel_api  # noqa: F401
    from .repairs import warm_up

    warm_up()


def _number_threads_afresh() -> None:
    """Threads named by default count from 1 again, as in a process that made none yet: the
    imports made one (debugpy's), and a started kernel's parent poller is "Thread-1"."""
    if callable(getattr(threading, "_counter", None)):  # CPython's (3.10 to 3.13)
        threading._counter = itertools.count(1).__next__  # type: ignore[attr-defined]


@dataclass
class _Clients:
    """The sockets the zygote serves, and the kernels each asked for."""

    channels: list[socket.socket]
    set_by_imports: dict[str, str]
    exited: dict[int, int] = field(default_factory=dict)  # reaped kernels' exit codes
    owners: dict[int, socket.socket] = field(default_factory=dict)  # a running kernel's client

    def spawned(self, pid: int, channel: socket.socket) -> None:
        """``pid`` is now a kernel that ``channel``'s worker asked for. An exit recorded under that
        pid was an earlier kernel's (the system reuses pids): it no longer says this one ended."""
        self.exited.pop(pid, None)
        self.owners[pid] = channel

    def drop(self, channel: socket.socket) -> None:
        """``channel``'s other end closed (its worker exited or was killed): its kernels still
        running get SIGKILL, as they would get their parent-death signal from a zygote of the
        worker's own."""
        channel.close()
        self.channels.remove(channel)
        _reap(self.exited)
        for pid, owner in list(self.owners.items()):
            if owner is channel:
                del self.owners[pid]
                if pid not in self.exited:
                    with contextlib.suppress(ProcessLookupError):  # (not reaped: the pid is its own)
                        os.kill(pid, signal.SIGKILL)


def _serve(channel: socket.socket, set_by_imports: dict[str, str]) -> int:
    clients = _Clients([channel], set_by_imports)
    while clients.channels:
        readable, _, _ = select.select(clients.channels, [], [], _REAP_EVERY_S)
        _reap(clients.exited)
        for ready in readable:
            if not _answer(ready, clients):
                clients.drop(ready)
    return 0


def _answer(channel: socket.socket, clients: _Clients) -> bool:
    """Answer one request that came on ``channel``; False when the other end has closed."""
    try:
        data, fds, _, _ = socket.recv_fds(channel, _MAX_MESSAGE, 3)
    except OSError:
        return False
    if not data:
        return False
    try:
        _dispatch(channel, clients, json.loads(data), fds)
    except OSError:  # its client is gone since it asked (the reply could not be sent)
        return False
    finally:
        for fd in fds:
            os.close(fd)
    return True


def _dispatch(channel: socket.socket, clients: _Clients, request: dict[str, Any], fds: list[int]) -> None:
    if request.get("op") == "spawn":
        pid = _spawn(channel, clients, request, fds)
        if pid:
            clients.spawned(pid, channel)
    elif request.get("op") == "status":
        _send(channel, {"status": _status(int(request["pid"]), clients.exited)})
    elif request.get("op") == "attach" and len(fds) == 1:
        attached = socket.socket(fileno=fds.pop())
        try:
            _send(attached, {"ready": os.getpid()})
        except OSError:  # that worker is gone already
            attached.close()
        else:
            clients.channels.append(attached)
    else:
        _send(channel, {"error": f"unknown request {request.get('op')!r}"})


def _spawn(channel: socket.socket, clients: _Clients, request: dict[str, Any], fds: list[int]) -> int:
    """Fork the kernel ``request`` asks for; its pid (0: refused, and ``channel`` told why)."""
    if len(fds) != 3:
        _send(channel, {"error": "a spawn request needs the kernel's stdin, stdout and stderr"})
        return 0
    zygote = os.getpid()
    # What the zygote holds (all it imported) goes to the collector's permanent generation: each
    # kernel's collections, the full one at its exit too (IPython's reset: 34 ms of CPU), then
    # skip it, and no longer write into (so copy) the pages it shares with the zygote.
    gc.freeze()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the kernel (its tests see it from outside)
        try:
            _become_kernel(clients.channels, request, fds, zygote, clients.set_by_imports)
        except SystemExit:
            raise  # the kernel's own exit: the interpreter ends as a kernel's would, at exit hooks
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
        os._exit(1)
    pidfd = os.pidfd_open(pid)  # no race: only this loop reaps, and it is here
    try:
        _send(channel, {"pid": pid}, [pidfd])
    except OSError:  # nobody to run it for
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.close(pidfd)
    return pid


def _become_kernel(
    channels: list[socket.socket],
    request: dict[str, Any],
    fds: list[int],
    zygote: int,
    set_by_imports: dict[str, str],
) -> None:
    """In the forked child: the process ``python -m ipykernel_launcher ARGS`` would be."""
    from ..sandbox.hardening.native import die_with_parent

    die_with_parent(signal.SIGKILL)
    if os.getppid() != zygote:  # the zygote died before the line above
        os._exit(1)
    os.setsid()  # as jupyter_client starts a kernel: interrupts and kills reach its process group
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for channel in channels:  # (closed as objects: none may close a reused descriptor later)
        channel.close()
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for name, value in set_by_imports.items():
        os.environ.setdefault(name, value)
    from ipykernel import kernelapp

    # jupyter_client's launch names the kernel's parent in JPY_PARENT_PID, which ipykernel read
    # when the zygote imported it; the parent is the zygote. The kernel polls it and exits when
    # it changes.
    os.environ["JPY_PARENT_PID"] = str(zygote)
    sys.argv = [_launcher_path(), *request["args"]]
    kernelapp.launch_new_instance(argv=request["args"], parent_handle=zygote)
    sys.exit(0)


def _launcher_path() -> str:
    import ipykernel_launcher

    return str(ipykernel_launcher.__file__)


def _reap(exited: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        exited[pid] = os.waitstatus_to_exitcode(status)


def _status(pid: int, exited: dict[int, int]) -> int | None:
    _reap(exited)
    return exited.get(pid)


def _send(channel: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    socket.send_fds(channel, [json.dumps(message).encode()], fds or [])


if __name__ == "__main__":
    sys.exit(main())

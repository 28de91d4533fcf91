"""Kernels forked from a warm zygote: the batch worker's side (the zygote is :mod:`nbrefine.ipython.zygote`).

A batch worker runs one kernel per notebook. Started the usual way, each kernel spends about half
a second of CPU importing ipykernel, IPython and what a repair needs; forked from a zygote that
imported all that once, about a tenth. On a machine with fewer cores than work, that CPU is
throughput (``bench/bench_batch.py``).

jupyter_client still runs each kernel: it picks the ports, writes the connection file, builds the
environment, talks to the kernel and shuts it down. Only the launch differs:
:class:`ZygoteProvisioner` is jupyter_client's local provisioner with a ``launch_kernel`` that asks
the zygote for a fork instead of starting ``python -m ipykernel_launcher``, and a process object
(:class:`ForkedKernel`, what :class:`subprocess.Popen` is to the local provisioner) that polls,
waits for and signals the kernel through a pidfd. A kernel spec of another shape (not
``PYTHON [OPTIONS] -m ipykernel_launcher ARGS``), a kernel spec with a provisioner of its own, a
system without pidfds or a zygote that cannot preload or has died: the kernel is started as usual.

May import: :mod:`nbrefine._errors`, the standard library and jupyter_client.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass
from typing import IO, Any

from jupyter_client.provisioning.local_provisioner import LocalProvisioner

from .._errors import NbrefineError

__all__ = [
    "START",
    "ForkedKernel",
    "Zygote",
    "ZygoteError",
    "ZygoteLink",
    "ZygoteProvisioner",
    "Zygotes",
    "batch_zygote",
    "kernel_launch",
    "zygote_provisioner",
]

#: The zygote's program: as ``ipykernel_launcher``, its own folder is off ``sys.path`` while it
#: imports (a module of the notebook's folder must not shadow ipykernel in every kernel).
# os._exit: the zygote ends without tearing its ~2,500 modules down (0.1 s, on a batch's last
# step); it runs no code of anyone's, so nothing waits for an exit handler. (Its kernels leave
# by the SystemExit that ends them, as a started kernel does.)
START = "import os, sys; del sys.path[0]; from nbrefine.ipython.zygote import main; os._exit(main())"
_READY_TIMEOUT_S = 120.0  # the zygote's imports, on a loaded machine
_REPLY_TIMEOUT_S = 30.0  # a fork, once it has imported
_MAX_MESSAGE = 1 << 16
_POPEN_ARGUMENTS = {"env", "cwd", "stdin", "stdout", "stderr"}  # what a fork can honour


class ZygoteError(NbrefineError, RuntimeError):
    """The zygote cannot give a kernel (it failed to preload, died, or answered nonsense)."""


def kernel_launch(cmd: list[str]) -> tuple[list[str], list[str]] | None:
    """``(interpreter with its options, the kernel's arguments)`` of a kernel command of the shape
    ``PYTHON [-OPTION ...] -m ipykernel_launcher ARGS``; None for any other shape."""
    if "-m" not in cmd:
        return None
    at = cmd.index("-m")
    if at < 1 or cmd[at + 1 : at + 2] != ["ipykernel_launcher"]:
        return None
    if not all(option.startswith("-") for option in cmd[1:at]):  # "-X opt" in two words: unsure
        return None
    return cmd[:at], cmd[at + 2 :]


@dataclass(frozen=True)
class ZygoteLink:
    """A socket to a running zygote, for another process (:meth:`Zygote.link`): what it needs to
    use that zygote (:meth:`Zygote.linked`) if its kernels would be launched the same way."""

    channel: socket.socket
    key: tuple[Any, ...]  # the launch the zygote was started for (see _key)
    pid: int


class Zygote:
    """One zygote process, started with ``interpreter`` and ``env``; :meth:`spawn` forks a kernel.
    Other processes may share it (:meth:`link`, :meth:`linked`)."""

    def __init__(self, interpreter: list[str], env: dict[str, str]) -> None:
        channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = subprocess.Popen(
                [*interpreter, "-c", START, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches the worker, which stops it in order
            )
        except OSError as err:
            channel.close()
            raise ZygoteError(f"cannot start the zygote: {err}") from None
        finally:
            theirs.close()
        self._use(channel, _key(interpreter, env), process.pid, process)

    @classmethod
    def linked(cls, link: ZygoteLink) -> Zygote:
        """The zygote another process started and linked this one to: it exits once every
        process it serves has closed its socket; :meth:`close` here closes this one's."""
        zygote = cls.__new__(cls)
        zygote._use(link.channel, link.key, link.pid, None)
        return zygote

    def _use(
        self, channel: socket.socket, key: tuple[Any, ...], pid: int, process: subprocess.Popen[bytes] | None
    ) -> None:
        self.channel = channel
        self.key = key
        self.process = process  # None: another process started it (and waits for it)
        self._pid = pid
        self._lock = threading.Lock()  # one request and its reply at a time, from any thread
        self._ready = False

    @property
    def pid(self) -> int:
        return self._pid

    def link(self) -> ZygoteLink:
        """A socket to this zygote for another process (a batch worker) to fork its kernels with.
        The zygote answers on it once it has preloaded; the other process's close ends it."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self._lock:
                self._send({"op": "attach"}, [theirs.fileno()])
        except ZygoteError:
            mine.close()
            raise
        finally:
            theirs.close()
        return ZygoteLink(mine, self.key, self.pid)

    def spawn(self, args: list[str], cwd: str, env: dict[str, str], stdio: list[int]) -> tuple[int, int]:
        """Fork a kernel ``ipykernel_launcher ARGS`` in ``cwd`` with ``env`` and the descriptors
        ``stdio`` (stdin, stdout, stderr): its pid and a pidfd of it (the caller's to close)."""
        with self._lock:
            if not self._ready:
                self._receive(_READY_TIMEOUT_S, "ready")
                self._ready = True
            request = {"op": "spawn", "args": args, "cwd": cwd, "env": env}
            self._send(request, stdio)
            reply, fds = self._receive(_REPLY_TIMEOUT_S, "pid")
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise ZygoteError("the zygote sent no pidfd with its kernel")
        return int(reply["pid"]), fds[0]

    def exit_status(self, pid: int) -> int | None:
        """The exit code of the zygote's kernel ``pid`` (negative: the signal), None if it runs."""
        with self._lock:
            self._send({"op": "status", "pid": pid}, [])
            reply, _ = self._receive(_REPLY_TIMEOUT_S, "status")
        status = reply["status"]
        return int(status) if isinstance(status, int) else None

    def close(self) -> None:
        """Stop the zygote: its end of the socket sees the close and it exits (once the processes
        linked to it have closed theirs); its kernels, if any are left, get SIGKILL (their
        parent-death signal). Linked to it, only this process's socket is closed."""
        self.channel.close()
        if self.process is None:
            return
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _send(self, message: dict[str, Any], fds: list[int]) -> None:
        try:
            socket.send_fds(self.channel, [json.dumps(message).encode()], fds)
        except OSError as err:
            raise ZygoteError(f"the zygote is gone ({err.strerror or err})") from None

    def _receive(self, timeout: float, field: str) -> tuple[dict[str, Any], list[int]]:
        readable, _, _ = select.select([self.channel], [], [], timeout)
        if not readable:
            raise ZygoteError(f"the zygote did not answer within {timeout:g} s")
        try:
            data, fds, _, _ = socket.recv_fds(self.channel, _MAX_MESSAGE, 1)
        except OSError as err:
            raise ZygoteError(f"the zygote is gone ({err.strerror or err})") from None
        if not data:
            raise ZygoteError("the zygote is gone (it closed its socket)")
        reply = json.loads(data)
        if not isinstance(reply, dict) or field not in reply:
            for fd in fds:
                os.close(fd)
            said = reply.get("error") if isinstance(reply, dict) else None
            raise ZygoteError(str(said or f"the zygote answered without {field!r}"))
        return reply, fds


class ForkedKernel:
    """A kernel the zygote forked, as the local provisioner uses a :class:`subprocess.Popen`:
    ``pid``, ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill`` and the streams. It is not
    this process's child, so it is watched and signalled through a pidfd (the process itself, not
    a number another process may get), and its exit code comes from the zygote, which reaps it."""

    def __init__(self, pid: int, pidfd: int, zygote: Zygote, stdin: IO[bytes] | None) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdin, self.stdout, self.stderr = stdin, None, None
        self._pidfd = pidfd
        self._zygote = zygote

    def poll(self) -> int | None:
        return self.wait(timeout=0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        readable, _, _ = select.select([self._pidfd], [], [], timeout)
        if not readable:
            if timeout == 0:
                return None
            raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
        try:
            code = self._zygote.exit_status(self.pid)
        except ZygoteError:
            code = None
        # A zygote that is gone reaped nothing more: its kernels got their parent-death signal.
        self.returncode = -signal.SIGKILL if code is None else code
        os.close(self._pidfd)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # exited since, not reaped yet
                signal.pidfd_send_signal(self._pidfd, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygotes:
    """A worker's zygote, started at its first kernel and kept for the next ones (one at a time:
    a batch uses one kernel spec and one environment; another replaces it). With a ``link``
    (:meth:`Zygote.link`: the batch's client started one for all its workers), that one is used
    when the kernel is launched as it was started for, and closed unused otherwise. After a
    failure, its kernels are started as usual, and :attr:`failure` says why."""

    def __init__(self, link: ZygoteLink | None = None) -> None:
        self.zygote: Zygote | None = None
        self.failure = ""
        self._link = link

    def launch(self, cmd: list[str], options: dict[str, Any]) -> ForkedKernel | None:
        """The kernel of ``cmd`` (with the local provisioner's Popen ``options``) forked from the
        zygote; None when it is to be started as usual."""
        launch = kernel_launch(cmd)
        if launch is None or self.failure or not set(options) <= _POPEN_ARGUMENTS:
            return None
        interpreter, args = launch
        env = dict(options.get("env") or os.environ)
        try:
            zygote = self._zygote_for(interpreter, env)
            return _fork(zygote, args, options, env)
        except ZygoteError as err:
            self.failure = str(err)
            self.close()
            return None

    def close(self) -> None:
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None
        if self._link is not None:
            self._link.channel.close()
            self._link = None

    def _zygote_for(self, interpreter: list[str], env: dict[str, str]) -> Zygote:
        key = _key(interpreter, env)
        if self.zygote is not None and self.zygote.key != key:
            self.close()
        if self.zygote is None and self._link is not None:
            link, self._link = self._link, None
            if link.key == key:
                self.zygote = Zygote.linked(link)
            else:  # started for another launch (kernel spec or environment): not what it imported
                link.channel.close()
        if self.zygote is None:
            self.zygote = Zygote(interpreter, env)
        return self.zygote


def _fork(zygote: Zygote, args: list[str], options: dict[str, Any], env: dict[str, str]) -> ForkedKernel:
    opened: list[int] = []
    stdin_w: IO[bytes] | None = None
    try:
        if options.get("stdin") is None:  # as launch_kernel: a pipe whose other end stays here
            stdin, write_end = os.pipe()
            opened.append(stdin)
            stdin_w = os.fdopen(write_end, "wb")
        else:
            stdin = _descriptor(options["stdin"], opened)
        # as launch_kernel: output the caller does not redirect is this process's own
        stdout = _descriptor(options.get("stdout"), opened, inherit=1)
        stderr = _descriptor(options.get("stderr"), opened, inherit=2)
        cwd = str(options.get("cwd") or os.getcwd())
        pid, pidfd = zygote.spawn(args, cwd, env, [stdin, stdout, stderr])
    except BaseException:
        if stdin_w is not None:
            stdin_w.close()
        raise
    finally:
        for fd in opened:
            os.close(fd)
    return ForkedKernel(pid, pidfd, zygote, stdin_w)


def _descriptor(stream: Any, opened: list[int], inherit: int = -1) -> int:
    """The descriptor of a Popen stream argument: a file, a descriptor, DEVNULL, or None (this
    process's descriptor ``inherit``)."""
    if stream is None and inherit >= 0:
        return inherit
    if stream == subprocess.DEVNULL:
        fd = os.open(os.devnull, os.O_RDWR)
        opened.append(fd)
        return fd
    if isinstance(stream, int) and stream >= 0:
        return stream
    if hasattr(stream, "fileno"):
        return int(stream.fileno())
    raise ZygoteError(f"a kernel stream the zygote cannot pass: {stream!r}")


def _key(interpreter: list[str], env: dict[str, str]) -> tuple[Any, ...]:
    # What the zygote's imports saw. JPY_* are the kernel manager's per-kernel words.
    return tuple(interpreter), tuple(sorted((k, v) for k, v in env.items() if not k.startswith("JPY_")))


def batch_zygote(kernel_name: str) -> Zygote | None:
    """A zygote for the kernels a batch will launch for ``kernel_name`` from this process's
    environment (as jupyter_client would launch them, see :func:`_predicted_launch`), started
    now, for the batch's workers to share (:meth:`Zygote.link`); None where kernels are not
    forked, or the kernel spec is not one a zygote can start."""
    if not _forks_here():
        return None
    launch = _predicted_launch(kernel_name)
    if launch is None:
        return None
    try:
        return Zygote(*launch)
    except ZygoteError:
        return None


def _predicted_launch(kernel_name: str) -> tuple[list[str], dict[str, str]] | None:
    """``(interpreter, environment)`` of the kernel launch jupyter_client makes for
    ``kernel_name`` from this process's environment: the kernel spec's command with ``python``
    as this interpreter (KernelManager.format_kernel_cmd), this environment with the spec's
    entries substituted in and no PYTHONEXECUTABLE for a Python kernel (the provisioner's
    pre_launch). A prediction: the worker compares it with the real launch (:class:`Zygotes`),
    and what differs gets a zygote of its own."""
    from string import Template

    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(kernel_name)
    except (NoSuchKernel, OSError, ValueError):
        return None
    cmd = list(spec.argv)
    major, minor = sys.version_info[:2]
    if cmd and cmd[0] in {"python", f"python{major}", f"python{major}.{minor}"}:
        cmd[0] = sys.executable
    launch = kernel_launch(cmd)
    if launch is None or not _local_provisioner(spec):
        return None
    env = dict(os.environ)
    env.update({name: Template(value).safe_substitute(env) for name, value in (spec.env or {}).items()})
    if (spec.language or "").lower().startswith("python"):
        env.pop("PYTHONEXECUTABLE", None)
    return launch[0], env


class ZygoteProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner, whose kernel is forked from :attr:`zygotes` when it can
    be (see :meth:`Zygotes.launch`), and started as usual when not."""

    zygotes: Zygotes | None = None  # set by zygote_provisioner, before the launch

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> Any:
        forked = self.zygotes.launch(cmd, self._scrub_kwargs(kwargs)) if self.zygotes else None
        if forked is None:
            return await super().launch_kernel(cmd, **kwargs)
        self.process = forked  # type: ignore[assignment]  # Popen's part, played by a pidfd
        self.pid = self.pgid = forked.pid  # the fork made a session of its own
        self.cwd = kwargs.get("cwd") or os.getcwd()
        return self.connection_info


def zygote_provisioner(km: Any, zygotes: Zygotes) -> ZygoteProvisioner | None:
    """A provisioner for the kernel manager ``km`` (not started yet) that forks its kernel from
    ``zygotes``, or None (the kernel manager then makes its usual one): not on systems without
    pidfds, nor for a kernel spec that names a provisioner of its own."""
    spec = km.kernel_spec
    if not _forks_here() or not _local_provisioner(spec):
        return None
    km.kernel_id = km.kernel_id or str(uuid.uuid4())
    provisioner = ZygoteProvisioner(kernel_id=km.kernel_id, kernel_spec=spec, parent=km)
    provisioner.zygotes = zygotes
    return provisioner


def _forks_here() -> bool:
    """Whether kernels can be forked from a zygote here: a zygote's kernels are watched through
    pidfds (Linux)."""
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open")


def _local_provisioner(spec: Any) -> bool:
    """Whether jupyter_client launches ``spec``'s kernels with its local provisioner (the one a
    zygote stands in for), not one the kernel spec names."""
    named = (spec.metadata or {}).get("kernel_provisioner", {}).get("provisioner_name", "local-provisioner")
    return bool(named == "local-provisioner")

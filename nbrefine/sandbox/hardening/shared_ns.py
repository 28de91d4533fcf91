"""Layer 4, namespaces prepared once in the snapshot process, which every trial forked from it
starts in: an IPC namespace (no SysV segment, queue or semaphore set of the host, and none a
trial makes outlives the snapshot), a PID namespace with a ``/proc`` of its own (the kernel and
every other process of the host have no pid there: no ``kill``, ``pidfd_open`` or
``/proc/<kernel>/fd``), a ``/dev`` of its own (:data:`.trial_policy.DEVICES` only: no disk,
``/dev/kvm`` or ``/dev/userfaultfd``), and two user namespaces: the outer one owns those
namespaces and mounts, the snapshot and its trials run in the inner one. So a trial holds no
capability over the host, nor over the shared namespaces (the /dev and /proc mounts are locked
for it), even where it cannot make a user namespace of its own (``unshare(CLONE_NEWUSER)``
refuses a process that has started a thread).

Done once per snapshot, so trial start does not pay for it (the per-trial namespaces, user, mount
and network, are :mod:`.namespaces`). The PID namespace needs a first process, its pid 1, which
waits, reaping orphans, and ends with the snapshot: a fork of the snapshot, or, for a kernel
whose page tables would make that fork slow (:data:`_SPAWN_ABOVE_PTE_KB`), a small interpreter of
its own (``posix_spawn``: no copy of them, no environment). Where procfs takes a ``pidns`` option
(Linux 6.18) the snapshot mounts the namespace's ``/proc`` itself; elsewhere a forked pid 1 does
(a procfs belongs to its mounter's PID namespace). Trials are its siblings (pid 2, 3, ...), not
pid 1 themselves, so signals to themselves keep their usual meaning; ``os.getppid()`` is 0 in a
trial (its parent, the snapshot, is outside the namespace).

May import :mod:`.native`, :mod:`.trial_policy` and :mod:`.secrets`."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import sys
import warnings
from dataclasses import dataclass
from typing import Any

from .native import die_with_parent, load_libc
from .secrets import wipe_environment
from .trial_policy import DEVICES

__all__ = ["SharedNamespaces", "enter_shared_namespaces"]


_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWIPC, _CLONE_NEWPID = 0x00020000, 0x10000000, 0x08000000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
_MNT_DETACH = 2
_PROC_FLAGS = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
_SYS_FSOPEN, _SYS_FSCONFIG, _FSOPEN_CLOEXEC, _FSCONFIG_SET_STRING = 430, 431, 1, 1
_PIDNS_OPTION = b"pidns=/proc/self/ns/pid_for_children"
# Forking pid 1 copies the snapshot's page tables: about 3 ms at 1 GiB of live state, where an
# interpreter of its own starts in 1 ms but then takes some 10 ms of CPU from the first trials
# (2 cores). Past this much (4 GiB in 4 KiB pages), the fork is the slower.
_SPAWN_ABOVE_PTE_KB = 8192
# pid 1 where it need not mount anything: reap orphans until the snapshot's end of the pipe on
# stdin closes (or the snapshot's death signal comes first).
_REAPER = """
import ctypes, os, signal
os.closerange(3, 1 << 16)
ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)
def reap(*_):
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
signal.signal(signal.SIGCHLD, reap)
try:
    while os.read(0, 1):
        pass
except OSError:
    pass
"""
_DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}


@dataclass(frozen=True)
class SharedNamespaces:
    """What :func:`share_namespaces` put in place (each a layer name when true)."""

    ipc: bool = False  # "ipcns"
    pid: bool = False  # "pidns": a PID namespace and its own /proc
    dev: bool = False  # "private-dev"

    def layers(self) -> list[str]:
        return [
            name for name, on in (("ipcns", self.ipc), ("pidns", self.pid), ("private-dev", self.dev)) if on
        ]


# The write end of the pipe that keeps pid 1 of the PID namespace waiting: open for the snapshot's
# whole life, never closed (its end is the snapshot's exit).
_HOLDER_PIPE: list[int] = []


class EnteredNamespaces:
    """Namespaces entered and pid 1 started, its /proc not mounted yet: :meth:`finish` mounts the
    /dev and the /proc. In between, the snapshot does what still needs its own /proc entry (its
    open files, its mappings) while pid 1 gets going."""

    def __init__(self, libc: Any, pid_one: _PidOne | None) -> None:
        self._libc = libc
        self._pid_one = pid_one

    def finish(self) -> SharedNamespaces:
        # Nothing mounted here may propagate back to the host: where the mounts cannot be made
        # private, nothing is mounted (pid 1 is still needed: it keeps the namespace usable).
        private = self._libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) == 0
        dev = private and _private_dev(self._libc)
        proc_self = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)  # before /proc goes
        try:
            proc = self._pid_one is not None and self._pid_one.mount_proc(private)
            # The inner user namespace: from here on the snapshot, and every trial, holds nothing
            # over what was just set up (a trial's copy of these mounts is locked: no unmounting
            # /dev to see the host's), and no trial needs to make a user namespace of its own.
            ids = os.geteuid(), os.getegid()
            if self._libc.unshare(_CLONE_NEWUSER) == 0:
                _map_ids_to_themselves(ids, proc_self)
        finally:
            os.close(proc_self)
        return SharedNamespaces(ipc=True, pid=proc, dev=dev)


def enter_shared_namespaces() -> EnteredNamespaces | None:
    """Called once in the snapshot process, after everything that needs its capabilities over
    the host (the mappings' backing files): a user namespace (root too: it drops every host
    capability) owning new mount, IPC and PID namespaces, and pid 1. Where no user namespace can
    be made, root takes the others directly. None when nothing could be done (the snapshot is
    then exactly as before)."""
    libc = load_libc()
    flags = _CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWPID
    # To go back to for the children, should pid 1 not start (the next child would be pid 1,
    # and once it ended no process could be made in the namespace any more).
    own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    try:
        ids = os.geteuid(), os.getegid()
        if libc.unshare(_CLONE_NEWUSER | flags) == 0:
            _map_ids_to_themselves(ids)
        elif libc.unshare(flags) != 0:
            return None
        try:
            spawn = _page_tables_kb() > _SPAWN_ABOVE_PTE_KB and _procfs_takes_pidns(libc)
            return EnteredNamespaces(libc, _PidOne.start(spawn=spawn))
        except OSError:
            libc.setns(own_pid_ns, _CLONE_NEWPID)
            return EnteredNamespaces(libc, None)
    finally:
        os.close(own_pid_ns)


def _map_ids_to_themselves(ids: tuple[int, int], proc_self: int | None = None) -> bool:
    """Map this process's uid and gid (``ids``, as they were before the unshare: after it they
    read as the overflow id) to themselves in its new user namespace. ``proc_self``: a descriptor
    on its /proc entry, for when /proc is a PID namespace's that it is not in."""
    uid, gid = ids

    def write(name: str, text: str) -> None:
        fd = os.open(name if proc_self is not None else f"/proc/self/{name}", os.O_WRONLY, dir_fd=proc_self)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    try:
        write("setgroups", "deny")
        write("uid_map", f"{uid} {uid} 1")
        write("gid_map", f"{gid} {gid} 1")
    except OSError:
        return False
    return True


def _private_dev(libc: Any) -> bool:
    """A tmpfs over /dev holding the host's :data:`DEVICES` (bind mounts of the host's nodes: a
    user namespace may not make device nodes), /dev/shm the host's, and /dev/fd, stdin, stdout
    and stderr as the usual links; then read-only. On any failure the host's /dev is put back."""
    sources: dict[str, int] = {}
    try:
        for name in DEVICES:
            if name not in _DEV_LINKS:
                with contextlib.suppress(OSError):
                    sources[name] = os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC)
        options = b"size=64k,nr_inodes=64,mode=0755"
        if libc.mount(b"tmpfs", b"/dev", b"tmpfs", _MS_NOSUID | _MS_NOEXEC, options) != 0:
            return False
        try:
            for name, fd in sources.items():
                target = f"/dev/{name}".encode()
                if name == "shm":
                    os.mkdir(target, 0o1777)
                    bind = _MS_BIND | _MS_REC
                else:
                    os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o666))
                    bind = _MS_BIND
                if libc.mount(f"/proc/self/fd/{fd}".encode(), target, None, bind, None) != 0:
                    raise OSError(f"cannot bind /dev/{name}")
            for name, link in _DEV_LINKS.items():
                os.symlink(link, f"/dev/{name}")
            flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NOEXEC
            if libc.mount(None, b"/dev", None, flags, None) != 0:
                raise OSError("cannot make /dev read-only")
        except OSError:
            libc.umount2(b"/dev", _MNT_DETACH)
            return False
        return True
    finally:
        for fd in sources.values():
            os.close(fd)


def _page_tables_kb() -> int:
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmPTE:"):
                return int(line.split()[1])
    return 0


def _is_this_interpreter(executable: str) -> bool:
    """A pid 1 that fails to start leaves a PID namespace no process can be made in: spawn only
    the very interpreter running here (not an embedding program's ``sys.executable``)."""
    try:
        return bool(executable) and os.path.samefile(executable, "/proc/self/exe")
    except OSError:
        return False


def _procfs_takes_pidns(libc: Any) -> bool:
    """Whether this kernel's procfs has the ``pidns`` option (asked of a filesystem context that
    is never mounted, with this process's own namespace: the new one cannot be named before it
    has a process). Refused for lack of rights over that namespace still means it is there;
    an unknown option is EINVAL."""
    context = libc.syscall(_SYS_FSOPEN, b"proc", _FSOPEN_CLOEXEC)
    if context < 0:
        return False
    try:
        own = b"/proc/self/ns/pid"
        if libc.syscall(_SYS_FSCONFIG, context, _FSCONFIG_SET_STRING, b"pidns", own, 0) == 0:
            return True
        return ctypes.get_errno() in (errno.EPERM, errno.EACCES)
    finally:
        os.close(context)


class _PidOne:
    """The PID namespace's pid 1 (the first fork after unshare(CLONE_NEWPID) is), as its parent
    sees it: its pid, a pipe to tell it whether to mount /proc, one for its answer."""

    def __init__(self, pid: int, order_w: int | None, answer_r: int | None) -> None:
        self.pid, self.order_w, self.answer_r = pid, order_w, answer_r

    @classmethod
    def start(cls, *, spawn: bool) -> _PidOne:
        if spawn and _is_this_interpreter(sys.executable):
            alive_r, alive_w = os.pipe()
            try:
                # named after its snapshot and the kernel, for ps and for the tests' stray checks
                label = f"nbrefine-pid1 of snapshot {os.getpid()} of {os.getppid()}"
                argv = [sys.executable, "-I", "-S", "-c", _REAPER, label]
                actions = [(os.POSIX_SPAWN_DUP2, alive_r, 0)]
                # no environment (nothing of the kernel's), but what a shared libpython may need
                env = {k: os.environ[k] for k in ("LD_LIBRARY_PATH",) if k in os.environ}
                pid = os.posix_spawn(sys.executable, argv, env, file_actions=actions)
            except OSError:
                os.close(alive_w)  # no process was made: the fork below is pid 1
            else:
                _HOLDER_PIPE.append(alive_w)
                return cls(pid, None, None)
            finally:
                os.close(alive_r)
        order_r, order_w = os.pipe()
        answer_r, answer_w = os.pipe()
        alive_r, alive_w = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the snapshot is single-threaded
            pid = os.fork()
        if pid == 0:  # pragma: no cover - pid 1 of the trials' PID namespace
            try:
                for fd in (order_w, answer_r, alive_w):
                    os.close(fd)
                _pid_one(order_r, answer_w, alive_r)
            finally:
                os._exit(0)
        for fd in (order_r, answer_w, alive_r):
            os.close(fd)
        _HOLDER_PIPE.append(alive_w)
        return cls(pid, order_w, answer_r)

    def mount_proc(self, mount: bool) -> bool:
        """Mount the namespace's /proc over /proc (in the snapshot's mount namespace); True when
        done. Where procfs takes a ``pidns`` option (Linux 6.18), this process mounts it without
        waiting for pid 1 to run; elsewhere pid 1 mounts it (a procfs is its mounter's PID
        namespace's) and answers."""
        libc = load_libc()
        mounted = mount and libc.mount(b"proc", b"/proc", b"proc", _PROC_FLAGS, _PIDNS_OPTION) == 0
        if self.order_w is None or self.answer_r is None:
            return bool(mounted)  # a spawned pid 1: the option is there
        try:
            os.write(self.order_w, b"y" if mount and not mounted else b"n")
            return bool(mounted) or (mount and os.read(self.answer_r, 16) == b"proc")
        finally:
            os.close(self.order_w)
            os.close(self.answer_r)


def _pid_one(order_r: int, answer_w: int, alive_r: int) -> None:  # pragma: no cover - runs in pid 1
    libc = load_libc()
    die_with_parent(signal.SIGKILL)
    if os.read(order_r, 1) == b"y":  # once the snapshot no longer needs the host's /proc
        mounted = libc.mount(b"proc", b"/proc", b"proc", _PROC_FLAGS, None) == 0
        os.write(answer_w, b"proc" if mounted else b"none")
    # Hold nothing of the kernel's: no descriptor (its sockets, the snapshot's pipes: the kernel
    # must see the snapshot's pipe close when the snapshot goes), no environment block.
    os.closerange(0, alive_r)  # the order and answer pipes too
    os.closerange(alive_r + 1, os.sysconf("SC_OPEN_MAX"))
    with contextlib.suppress(OSError, ValueError):
        wipe_environment(None)

    def reap(_signum: int, _frame: object) -> None:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass

    signal.signal(signal.SIGCHLD, reap)  # orphans of a trial's subprocesses are reparented here
    with contextlib.suppress(OSError):
        while os.read(alive_r, 1):  # until the snapshot exits (or the death signal comes first)
            pass

"""Hardening of a trial child: layered, each layer feature-detected, none trusted alone.

Called in the trial process (a fork of the snapshot, or the spawn worker) after its
streams are private and before the candidate runs. The layers, in the order applied:

1. **fd hygiene**: inherited sockets and pipes (the kernel's zmq sockets, database
   connections, ipykernel's output pipes) are replaced by ``/dev/null`` in this process
   only; inherited files open for writing are reopened read-only. Nothing is shut down, so
   the kernel's own handles are untouched; a candidate just cannot write through them.
2. **rlimits**: CPU seconds, address-space growth, file size, open files, processes.
3. **netns**: a new, empty network namespace (``unshare``): not even loopback is reachable.
4. **seccomp**: a BPF filter refusing new processes and ``exec`` (threads stay allowed).
5. **landlock**: writes only beneath the trial's scratch folder; signals and abstract
   unix sockets scoped to the trial (it cannot kill the kernel).
6. **audit hook**: Python-level refusals with clear messages (connect, subprocess, exec,
   writes/deletes/renames outside scratch, kill) — the portable last line.

Linux-only layers report themselves unavailable elsewhere. No IPython import.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import resource
import signal
import stat
import struct
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["PolicyRefusal", "TrialPolicy", "harden"]


class PolicyRefusal(PermissionError):
    """A candidate tried something the trial sandbox does not allow.

    A plain ``PermissionError`` subclass (not one of nbrefine's own errors): it is raised
    inside model-written code, so it must look like what the OS would raise."""

    def __init__(self, action: str, hint: str) -> None:
        super().__init__(f"refused by the trial sandbox: {action} ({hint})")
        self.action = action


@dataclass(frozen=True)
class TrialPolicy:
    """What a trial may do. The defaults are strict; opt-ins are per cell."""

    memory_mb: int = 4096  # address-space growth allowed over the forked size
    cpu_s: float | None = None  # None: the trial's wall-clock timeout, plus one second
    file_size_mb: int = 64
    open_files: int = 1024
    max_processes: int = 64  # when subprocesses are allowed
    allow_network: bool = False
    allow_subprocess: bool = False
    allow_writes: bool = False  # writes outside the scratch folder


# --------------------------------------------------------------------------- 1. fds


def _scrub_inherited_fds(keep: Iterable[int]) -> bool:
    keep_set = set(keep) | {0, 1, 2}
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return False
    devnull = os.open(os.devnull, os.O_RDWR)
    keep_set.add(devnull)
    for fd in fds:
        if fd in keep_set:
            continue
        with contextlib.suppress(OSError):
            mode = os.fstat(fd).st_mode
            if stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode):
                os.dup2(devnull, fd)  # the kernel's socket/pipe stays open in the kernel
            elif stat.S_ISREG(mode) and os.get_blocking(fd) is not None and _opened_for_writing(fd):
                readonly = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
                os.dup2(readonly, fd)
                os.close(readonly)
    os.close(devnull)
    return True


def _opened_for_writing(fd: int) -> bool:
    import fcntl

    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_APPEND))


# --------------------------------------------------------------------------- 2. rlimits


def _address_space_now() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmSize")


def _set_limit(kind: int, soft: int, headroom: int = 0) -> None:
    """Lower the soft limit; the hard one to ``soft + headroom`` (so SIGXCPU comes before SIGKILL)."""
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
        new_hard = min(hard, soft + headroom)
    else:
        new_hard = soft + headroom
    resource.setrlimit(kind, (soft, new_hard))


def _apply_rlimits(policy: TrialPolicy, timeout_s: float) -> bool:
    cpu = policy.cpu_s if policy.cpu_s is not None else timeout_s + 1
    _set_limit(resource.RLIMIT_CPU, max(int(cpu + 0.999), 1), headroom=2)
    with contextlib.suppress(OSError, ValueError):
        _set_limit(resource.RLIMIT_AS, _address_space_now() + policy.memory_mb * 1024 * 1024)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large write fails with EFBIG instead
    _set_limit(resource.RLIMIT_FSIZE, policy.file_size_mb * 1024 * 1024)
    with contextlib.suppress(OSError, ValueError):
        _set_limit(resource.RLIMIT_NOFILE, policy.open_files)
    if policy.allow_subprocess:
        with contextlib.suppress(OSError, ValueError):
            _set_limit(resource.RLIMIT_NPROC, policy.max_processes)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crashing candidate leaves no core file
    return True


# --------------------------------------------------------------------------- 3. network


_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _unshare_network() -> bool:
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0 and libc.unshare(_CLONE_NEWNET) == 0:
        return True
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        return False
    # Map ourselves so that files we create are owned by us, not by the overflow id.
    with contextlib.suppress(OSError):
        with open("/proc/self/setgroups", "w") as setgroups:
            setgroups.write("deny")
        with open("/proc/self/uid_map", "w") as uid_map:
            uid_map.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as gid_map:
            gid_map.write(f"{gid} {gid} 1")
    return True


# --------------------------------------------------------------------------- 4. seccomp

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_THREAD = 0x00010000
# Per architecture: audit arch, and the syscalls to refuse: (fork, vfork, clone, clone3, execve, execveat).
_ARCHES = {
    "x86_64": (
        0xC000003E,
        {"fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59, "execveat": 322},
    ),
    "aarch64": (0xC00000B7, {"clone": 220, "clone3": 435, "execve": 221, "execveat": 281}),
}


def _bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def _seccomp_program(arch: int, calls: dict[str, int]) -> bytes:
    load_word, jump_eq, jump_set, ret = 0x20, 0x15, 0x45, 0x06
    deny, allow = _RET_ERRNO | _EPERM, _RET_ALLOW
    refuse = [calls[name] for name in ("fork", "vfork", "execve", "execveat") if name in calls]
    body = [_bpf(load_word, 0, 0, 0)]  # the syscall number
    for number in refuse:
        body += [_bpf(jump_eq, 0, 1, number), _bpf(ret, 0, 0, deny)]
    # clone3 hides its flags in memory: answer ENOSYS so that libc falls back to clone.
    body += [_bpf(jump_eq, 0, 1, calls["clone3"]), _bpf(ret, 0, 0, _RET_ERRNO | _ENOSYS)]
    # clone: threads (CLONE_THREAD) are fine, new processes are not. args[0] low word is at 16.
    body += [
        _bpf(jump_eq, 0, 4, calls["clone"]),
        _bpf(load_word, 0, 0, 16),
        _bpf(jump_set, 0, 1, _CLONE_THREAD),
        _bpf(ret, 0, 0, allow),
        _bpf(ret, 0, 0, deny),
    ]
    body.append(_bpf(ret, 0, 0, allow))
    head = [_bpf(load_word, 0, 0, 4), _bpf(jump_eq, 1, 0, arch), _bpf(ret, 0, 0, allow)]
    return b"".join(head + body)


def _install_seccomp() -> bool:
    spec = _ARCHES.get(platform.machine())
    if spec is None or not sys.platform.startswith("linux"):
        return False
    program = _seccomp_program(*spec)
    buffer = ctypes.create_string_buffer(program)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return bool(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0)


# --------------------------------------------------------------------------- 5. landlock

_SYS_LANDLOCK = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_LL_WRITE = (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11)
_LL_WRITE |= 1 << 12  # MAKE_SYM
_LL_REFER, _LL_TRUNCATE = 1 << 13, 1 << 14
_LL_SCOPE_ABSTRACT_UNIX, _LL_SCOPE_SIGNAL = 1 << 0, 1 << 1


def _landlock(scratch: str, *, confine_writes: bool) -> bool:
    numbers = _SYS_LANDLOCK.get(platform.machine())
    if numbers is None or not sys.platform.startswith("linux"):
        return False
    create, add_rule, restrict = numbers
    libc = _libc()
    abi = libc.syscall(create, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return False
    handled = _LL_WRITE if confine_writes else 0
    if confine_writes and abi >= 2:
        handled |= _LL_REFER
    if confine_writes and abi >= 3:
        handled |= _LL_TRUNCATE
    scoped = _LL_SCOPE_ABSTRACT_UNIX | _LL_SCOPE_SIGNAL if abi >= 6 else 0
    if not handled and not scoped:
        return False
    attr = struct.pack("QQQ", handled, 0, scoped) if scoped else struct.pack("Q", handled)
    ruleset = libc.syscall(create, ctypes.c_char_p(attr), len(attr), 0)
    if ruleset < 0:
        return False
    try:
        if handled:
            for path, access in ((scratch, handled), ("/dev/null", 1 << 1)):
                fd = os.open(path, os.O_PATH)
                rule = struct.pack("=Qi", access & handled, fd)
                libc.syscall(add_rule, ruleset, 1, ctypes.c_char_p(rule), 0)
                os.close(fd)
        libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        return bool(libc.syscall(restrict, ruleset, 0) == 0)
    finally:
        os.close(ruleset)


# --------------------------------------------------------------------------- 6. audit hook

_WRITE_MODES = set("wax+")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {
    "os.remove": 0,
    "os.rmdir": 0,
    "os.mkdir": 0,
    "os.rename": 0,
    "os.link": 1,
    "os.symlink": 1,
    "os.truncate": 0,
    "os.chmod": 0,
    "os.chown": 0,
    "os.utime": 0,
    "shutil.rmtree": 0,
    "shutil.move": 0,
    "shutil.copyfile": 1,
}
_PROCESS_EVENTS = (
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "pty.spawn",
)
_NETWORK_EVENTS = ("socket.connect", "socket.sendto", "socket.sendmsg", "socket.bind", "socket.getaddrinfo")


def _make_audit_hook(policy: TrialPolicy, scratch: str) -> Callable[[str, tuple[Any, ...]], None]:
    scratch_real = os.path.realpath(scratch)
    own_pid = os.getpid()

    def outside(path: object) -> bool:
        if isinstance(path, int):
            return False  # an fd: hygiene made inherited ones harmless
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str) and hasattr(path, "__fspath__"):
            path = os.fspath(path)
        if not isinstance(path, str):
            return False
        real = os.path.realpath(path)
        return not (real == scratch_real or real.startswith(scratch_real + os.sep) or real == os.devnull)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and not policy.allow_writes:
            path, mode, flags = (*args, None, None, None)[:3]
            writing = (isinstance(mode, str) and bool(_WRITE_MODES & set(mode))) or (
                isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
            )
            if writing and outside(path):
                raise PolicyRefusal(f"write to {path}", "only the trial's scratch folder is writable")
        elif event in _PATH_EVENTS and not policy.allow_writes:
            for path in args[: _PATH_EVENTS[event] + 1]:
                if outside(path):
                    raise PolicyRefusal(f"{event} on {path}", "only the trial's scratch folder is writable")
        elif event.startswith(_PROCESS_EVENTS) and not policy.allow_subprocess:
            raise PolicyRefusal(event, "subprocesses are off; %%refine --allow-subprocess turns them on")
        elif event in _NETWORK_EVENTS and not policy.allow_network:
            raise PolicyRefusal(event, "the network is off; %%refine --allow-network turns it on")
        elif event in ("os.kill", "os.killpg", "signal.pthread_kill"):
            target = args[0] if args else None
            if isinstance(target, int) and target not in (own_pid, 0) and event != "signal.pthread_kill":
                raise PolicyRefusal(f"{event} of process {target}", "trials may only signal themselves")

    return hook


# --------------------------------------------------------------------------- all together


def harden(policy: TrialPolicy, scratch: str, *, timeout_s: float, keep_fds: Iterable[int] = ()) -> list[str]:
    """Apply every layer that this system supports; return the names of those now active."""
    active: list[str] = []
    linux = sys.platform.startswith("linux")
    if linux and _scrub_inherited_fds(keep_fds):
        active.append("fd-hygiene")
    with contextlib.suppress(OSError, ValueError):
        if _apply_rlimits(policy, timeout_s):
            active.append("rlimits")
    if linux and not policy.allow_network:
        with contextlib.suppress(OSError, AttributeError):
            if _unshare_network():
                active.append("netns")
    if linux and not policy.allow_subprocess:
        with contextlib.suppress(OSError, AttributeError):
            if _install_seccomp():
                active.append("seccomp")
    if linux:
        with contextlib.suppress(OSError, AttributeError):
            if _landlock(scratch, confine_writes=not policy.allow_writes):
                active.append("landlock")
    sys.addaudithook(_make_audit_hook(policy, scratch))
    active.append("audit-hook")
    return active

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
            if stat.S_ISDIR(mode):
                continue  # read-only by nature; Landlock guards what is created in it
            if stat.S_ISREG(mode):
                if _opened_for_writing(fd):
                    readonly = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
                    os.dup2(readonly, fd)
                    os.close(readonly)
                continue
            # Sockets, pipes, devices and anonymous inodes (zmq's eventfds, epoll, timerfd...)
            # are the kernel's: this process gets /dev/null in their place; the kernel keeps its own.
            os.dup2(devnull, fd)
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
    """A new, empty network namespace, inside a new user namespace even for root: that also
    drops every capability the process had over the host (no reboot, no raising limits)."""
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        return bool(uid == 0 and libc.unshare(_CLONE_NEWNET) == 0)
    # Map ourselves so that files we create are owned by us, not by the overflow id.
    with contextlib.suppress(OSError):
        with open("/proc/self/setgroups", "w") as setgroups:
            setgroups.write("deny")
        with open("/proc/self/uid_map", "w") as uid_map:
            uid_map.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as gid_map:
            gid_map.write(f"{gid} {gid} 1")
    return True


# --------------------------------------------------------------------------- shared memory

_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_MAP_PRIVATE, _MAP_FIXED, _MAP_ANONYMOUS = 0x02, 0x10, 0x20
_MAX_PRIVATE_COPY = 256 << 20


def _privatize_shared_mappings() -> bool:
    """Writable shared mappings (``mmap``, ``np.memmap(mode="r+")``, shared memory) survive a
    fork and would let a trial write into the kernel's memory and files. Replace each with a
    private copy at the same address (too large ones become read-only)."""
    libc = _libc()
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    with open("/proc/self/maps") as maps:
        entries = [line.split() for line in maps]
    for fields in entries:
        perms = fields[1]
        if perms[3] != "s" or perms[1] != "w":
            continue
        start, end = (int(part, 16) for part in fields[0].split("-"))
        length = end - start
        prot = _PROT_READ | _PROT_WRITE | (_PROT_EXEC if perms[2] == "x" else 0)
        if length > _MAX_PRIVATE_COPY or perms[0] != "r":
            libc.mprotect(start, length, _PROT_READ if perms[0] == "r" else 0)
            continue
        content = ctypes.string_at(start, length)
        flags = _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_FIXED
        if libc.mmap(start, length, prot, flags, -1, 0) != start:
            libc.mprotect(start, length, _PROT_READ)
            continue
        ctypes.memmove(start, content, length)
    return True


# --------------------------------------------------------------------------- 4. seccomp

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_THREAD = 0x00010000

# Syscall numbers per architecture (x86_64; aarch64 uses the generic table).
_SYSCALLS = {
    "x86_64": {
        "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59, "execveat": 322,
        "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452,
        "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260,
        "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
        "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199,
        "utime": 132, "utimes": 235, "futimesat": 261, "utimensat": 280,
        "reboot": 169, "sethostname": 170, "setdomainname": 171, "settimeofday": 164,
        "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "mount": 165, "umount2": 166,
        "pivot_root": 155, "swapon": 167, "swapoff": 168, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "acct": 163, "quotactl": 179,
        "chroot": 161, "setns": 308, "unshare": 272, "ptrace": 101, "process_vm_readv": 310,
        "process_vm_writev": 311, "bpf": 321, "perf_event_open": 298, "keyctl": 250, "add_key": 248,
        "request_key": 249, "mknod": 133, "mknodat": 259, "pidfd_send_signal": 424, "pidfd_getfd": 438,
        "kcmp": 312, "open_by_handle_at": 304, "name_to_handle_at": 303, "userfaultfd": 323,
        "syslog": 103, "vhangup": 153, "iopl": 172, "ioperm": 173,
        "setpriority": 141, "sched_setaffinity": 203, "sched_setscheduler": 144, "sched_setparam": 142,
        "sched_setattr": 314, "prlimit64": 302, "ioprio_set": 251, "migrate_pages": 256,
        "move_pages": 279, "kill": 62, "tkill": 200, "tgkill": 234,
    },
    "aarch64": {
        "clone": 220, "clone3": 435, "execve": 221, "execveat": 281,
        "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "fchownat": 54, "fchown": 55,
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15,
        "fremovexattr": 16, "utimensat": 88,
        "reboot": 142, "sethostname": 161, "setdomainname": 162, "settimeofday": 170,
        "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171, "mount": 40, "umount2": 39,
        "pivot_root": 41, "swapon": 224, "swapoff": 225, "init_module": 105, "finit_module": 273,
        "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294, "acct": 89, "quotactl": 60,
        "chroot": 51, "setns": 268, "unshare": 97, "ptrace": 117, "process_vm_readv": 270,
        "process_vm_writev": 271, "bpf": 280, "perf_event_open": 241, "keyctl": 219, "add_key": 217,
        "request_key": 218, "mknodat": 33, "pidfd_send_signal": 424, "pidfd_getfd": 438, "kcmp": 272,
        "open_by_handle_at": 265, "name_to_handle_at": 264, "userfaultfd": 282, "syslog": 116,
        "vhangup": 58,
        "setpriority": 140, "sched_setaffinity": 122, "sched_setscheduler": 119, "sched_setparam": 118,
        "sched_setattr": 274, "prlimit64": 261, "ioprio_set": 30, "migrate_pages": 238,
        "move_pages": 239, "kill": 129, "tkill": 130, "tgkill": 131,
    },
}  # fmt: skip
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

# Never for a trial: the host's clock, mounts, modules, other processes' memory, and so on.
_DENY_ALWAYS = (
    "reboot", "sethostname", "setdomainname", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "mount", "umount2", "pivot_root", "swapon", "swapoff", "init_module", "finit_module",
    "delete_module", "kexec_load", "kexec_file_load", "acct", "quotactl", "chroot", "setns", "unshare",
    "ptrace", "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open", "keyctl", "add_key",
    "request_key", "mknod", "mknodat", "pidfd_send_signal", "pidfd_getfd", "kcmp", "open_by_handle_at",
    "name_to_handle_at", "userfaultfd", "syslog", "vhangup", "iopl", "ioperm",
    "chown", "fchown", "lchown", "fchownat",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
)  # fmt: skip
# File metadata: Landlock does not cover it, so it goes unless writes are allowed.
_DENY_UNLESS_WRITES = (
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
)
_DENY_UNLESS_PROCESSES = ("fork", "vfork", "execve", "execveat")
# Calls aimed at a process: allowed for this process (0 or its own pid) only. name -> pid argument.
_OWN_PROCESS_ONLY = {
    "setpriority": 1, "sched_setaffinity": 0, "sched_setscheduler": 0, "sched_setparam": 0,
    "sched_setattr": 0, "prlimit64": 0, "ioprio_set": 1, "migrate_pages": 0, "move_pages": 0,
    "kill": 0, "tkill": 0, "tgkill": 0,
}  # fmt: skip


def _bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


_LD_W_ABS, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06


def _seccomp_program(machine: str, policy: TrialPolicy, own_pid: int) -> bytes:
    table = _SYSCALLS[machine]
    deny, allow = _RET_ERRNO | _EPERM, _RET_ALLOW
    names = list(_DENY_ALWAYS)
    if not policy.allow_writes:
        names += _DENY_UNLESS_WRITES
    if not policy.allow_subprocess:
        names += _DENY_UNLESS_PROCESSES
    body = [_bpf(_LD_W_ABS, 0, 0, 0)]  # the syscall number
    for number in sorted({table[name] for name in names if name in table}):
        body += [_bpf(_JEQ, 0, 1, number), _bpf(_RET, 0, 0, deny)]
    if not policy.allow_subprocess:
        # clone3 hides its flags in memory: answer ENOSYS so that libc falls back to clone;
        # clone itself: threads (CLONE_THREAD) are fine, new processes are not.
        body += [_bpf(_JEQ, 0, 1, table["clone3"]), _bpf(_RET, 0, 0, _RET_ERRNO | _ENOSYS)]
        body += [
            _bpf(_JEQ, 0, 4, table["clone"]),
            _bpf(_LD_W_ABS, 0, 0, 16),  # low word of args[0]
            _bpf(_JSET, 1, 0, _CLONE_THREAD),
            _bpf(_RET, 0, 0, deny),
            _bpf(_RET, 0, 0, allow),
        ]
    for name, argument in _OWN_PROCESS_ONLY.items():
        body += [
            _bpf(_JEQ, 0, 5, table[name]),
            _bpf(_LD_W_ABS, 0, 0, 16 + 8 * argument),
            _bpf(_JEQ, 2, 0, 0),
            _bpf(_JEQ, 1, 0, own_pid),
            _bpf(_RET, 0, 0, deny),
            _bpf(_RET, 0, 0, allow),
        ]
    body.append(_bpf(_RET, 0, 0, allow))
    head = [_bpf(_LD_W_ABS, 0, 0, 4), _bpf(_JEQ, 1, 0, _AUDIT_ARCH[machine]), _bpf(_RET, 0, 0, allow)]
    return b"".join(head + body)


def _install_seccomp(policy: TrialPolicy) -> bool:
    machine = platform.machine()
    if machine not in _SYSCALLS or not sys.platform.startswith("linux"):
        return False
    program = _seccomp_program(machine, policy, os.getpid())
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
    "os.setxattr": 0,
    "os.removexattr": 0,
    "os.chflags": 0,
    "os.lchflags": 0,
    "os.mkfifo": 0,
    "os.mknod": 0,
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
    if linux:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if _privatize_shared_mappings():
                active.append("private-mappings")
    if linux:
        with contextlib.suppress(OSError, AttributeError, KeyError):
            if _install_seccomp(policy):
                active.append("seccomp")
    if linux:
        with contextlib.suppress(OSError, AttributeError):
            if _landlock(scratch, confine_writes=not policy.allow_writes):
                active.append("landlock")
    sys.addaudithook(_make_audit_hook(policy, scratch))
    active.append("audit-hook")
    return active

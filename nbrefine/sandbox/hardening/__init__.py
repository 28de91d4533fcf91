"""Hardening of a trial child: layered, each layer feature-detected, none trusted alone.

Called in the trial process (a fork of the snapshot, or the spawn worker) after its
streams are private and before the candidate runs. The layers, in the order applied:

1. **fd hygiene**: inherited sockets and pipes (the kernel's zmq sockets, database
   connections, ipykernel's output pipes) are replaced by ``/dev/null`` in this process
   only; inherited files open for writing are reopened read-only. Nothing is shut down, so
   the kernel's own handles are untouched; a candidate just cannot write through them.
2. **rlimits**: CPU seconds, address-space growth, file size, open files, processes.
3. **private mappings**: every shared mapping the trial inherited (``np.memmap``, ``mmap``,
   ``SharedMemory``, of any size and any protection) is replaced at the same address by a
   copy-on-write mapping of the same file, so no write can reach the original pages.
4. **netns** (and a user and mount namespace): a new, empty network namespace, not even
   loopback; the scratch folder becomes a size-limited tmpfs of the trial's own, and the
   working folder a private overlay whose writes land in that tmpfs.
5. **no secrets**: environment values the redactor calls secret are removed, and the
   process's initial environment block (``/proc/self/environ``) is wiped.
6. **seccomp**: a BPF filter: any other syscall ABI (``int 0x80``, x32) kills the trial; no
   new processes or ``exec`` (threads stay allowed); no unix sockets with a path or other
   non-IP sockets; no ``io_uring``; calls aimed at another process are refused.
7. **landlock**: writes only beneath the trial's scratch folder (and the working folder's
   view); credential files (home dotfiles, ``.env``, the kernel's connection file; deleted
   from the working folder's view) and other processes' ``/proc`` entries are unreadable;
   signals and abstract unix sockets scoped to the trial.
8. **audit hook**: Python-level refusals with clear messages (connect, subprocess, exec,
   writes/deletes/renames outside scratch, kill) — the portable last line.

Linux-only layers report themselves unavailable elsewhere. No IPython import.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import resource
import shutil
import signal
import stat
import struct
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["HOME_SECRETS", "PolicyRefusal", "Prepared", "TrialPolicy", "harden", "prepare", "secret_paths"]


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
    max_processes: int = 64  # processes and threads of the trial's user (RLIMIT_NPROC)
    scratch_mb: int = 512  # total size of everything written into the scratch folder
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


def _threads_now() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _apply_rlimits(policy: TrialPolicy, timeout_s: float) -> bool:
    cpu = policy.cpu_s if policy.cpu_s is not None else timeout_s + 1
    _set_limit(resource.RLIMIT_CPU, max(int(cpu + 0.999), 1), headroom=2)
    with contextlib.suppress(OSError, ValueError):
        _set_limit(resource.RLIMIT_AS, _address_space_now() + policy.memory_mb * 1024 * 1024)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large write fails with EFBIG instead
    _set_limit(resource.RLIMIT_FSIZE, policy.file_size_mb * 1024 * 1024)
    with contextlib.suppress(OSError, ValueError):
        _set_limit(resource.RLIMIT_NOFILE, policy.open_files)
    # Every trial, not only with --allow-subprocess (threads count too). The kernel does not
    # apply it to root; there, seccomp (no processes unless allowed) is what holds.
    with contextlib.suppress(OSError, ValueError):
        _set_limit(resource.RLIMIT_NPROC, policy.max_processes + _threads_now())
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crashing candidate leaves no core file
    return True


# --------------------------------------------------------------------------- 3. network


_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _enter_namespaces(*, network: bool) -> tuple[bool, bool]:
    """A new user namespace (even for root: that drops every capability the process had over
    the host: no reboot, no raising limits) with a new mount namespace and, unless the
    network is allowed, a new empty network namespace. Returns (network cut, mounts private)."""
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    flags = _CLONE_NEWUSER | _CLONE_NEWNS | (0 if network else _CLONE_NEWNET)
    if libc.unshare(flags) != 0:
        if uid != 0:
            return False, False
        # No user namespaces here: root can still take the others directly.
        ok = libc.unshare(flags & ~_CLONE_NEWUSER) == 0
        return ok and not network, ok
    # Map ourselves so that files we create are owned by us, not by the overflow id.
    with contextlib.suppress(OSError):
        with open("/proc/self/setgroups", "w") as setgroups:
            setgroups.write("deny")
        with open("/proc/self/uid_map", "w") as uid_map:
            uid_map.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as gid_map:
            gid_map.write(f"{gid} {gid} 1")
    return not network, True


def _mount_scratch(scratch: str, size_mb: int) -> bool:
    """Make the scratch folder a tmpfs of at most ``size_mb`` in this process's own mount
    namespace: the per-file rlimit alone let one trial fill the disk with many files."""
    libc = _libc()
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return False
    options = f"size={max(size_mb, 1)}m,mode=0700".encode()
    return bool(libc.mount(b"tmpfs", os.fsencode(scratch), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) == 0)


# --------------------------------------------------------------------------- shared memory

_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_MAP_PRIVATE, _MAP_FIXED, _MAP_ANONYMOUS = 0x02, 0x10, 0x20
_MREMAP_MAYMOVE, _MREMAP_FIXED = 1, 2


class _Mapping:
    """One line of /proc/self/maps."""

    def __init__(self, line: str) -> None:
        fields = line.split(maxsplit=5)
        self.start, self.end = (int(part, 16) for part in fields[0].split("-"))
        self.perms = fields[1]
        self.offset = int(fields[2], 16)
        self.path = fields[5].rstrip("\n") if len(fields) > 5 else ""
        self.backing_fd: int | None = None  # opened ahead by prepare()

    @property
    def shared(self) -> bool:
        return self.perms[3] == "s"

    @property
    def length(self) -> int:
        return self.end - self.start

    @property
    def prot(self) -> int:
        return (
            (_PROT_READ if self.perms[0] == "r" else 0)
            | (_PROT_WRITE if self.perms[1] == "w" else 0)
            | (_PROT_EXEC if self.perms[2] == "x" else 0)
        )


def _mmap_fn(libc: Any) -> Any:
    libc.mmap.restype = ctypes.c_void_p
    size, void_p, c_int = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int
    libc.mmap.argtypes = [void_p, size, c_int, c_int, c_int, ctypes.c_long]
    libc.mremap.restype = void_p
    libc.mremap.argtypes = [void_p, size, size, c_int, void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def _open_backing_file(mapping: _Mapping) -> int | None:
    """A read-only fd on the file behind a shared mapping: its path, or (for deleted files,
    memfds, shared memory and anonymous shared memory) the kernel's map_files link."""
    candidates = []
    if mapping.path.startswith("/") and not mapping.path.endswith(" (deleted)"):
        candidates.append(mapping.path)
    candidates.append(f"/proc/self/map_files/{mapping.start:x}-{mapping.end:x}")
    for path in candidates:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        if os.fstat(fd).st_size >= mapping.offset + mapping.length or path.startswith("/proc/"):
            return fd
        os.close(fd)
    return None


def _remap_private(libc: Any, mapping: _Mapping) -> bool:
    """Replace a shared mapping by a copy-on-write one of the same pages, at the same address.

    A private mapping of the same file shows the same content (shared mappings ARE the page
    cache) and costs no copy; writes, even after ``mprotect``, go to the trial's own pages."""
    fd = os.dup(mapping.backing_fd) if mapping.backing_fd is not None else _open_backing_file(mapping)
    if fd is not None:
        try:
            flags = _MAP_PRIVATE | _MAP_FIXED
            placed = libc.mmap(mapping.start, mapping.length, mapping.prot, flags, fd, mapping.offset)
            if placed == mapping.start:
                return True
        finally:
            os.close(fd)
    # No file to map privately: copy the content into fresh private memory and move it over.
    flags = _MAP_PRIVATE | _MAP_ANONYMOUS
    copy = libc.mmap(None, mapping.length, _PROT_READ | _PROT_WRITE, flags, -1, 0)
    if copy in (None, ctypes.c_void_p(-1).value):
        return False
    if mapping.perms[0] == "r":
        ctypes.memmove(copy, mapping.start, mapping.length)
    libc.mprotect(ctypes.c_void_p(copy), mapping.length, mapping.prot)
    moved = libc.mremap(copy, mapping.length, mapping.length, _MREMAP_MAYMOVE | _MREMAP_FIXED, mapping.start)
    return bool(moved == mapping.start)


def _shared_mappings() -> list[_Mapping]:
    with open("/proc/self/maps") as maps:
        return [mapping for mapping in map(_Mapping, maps) if mapping.shared]


def _privatize_shared_mappings(mappings: list[_Mapping] | None = None) -> bool:
    """Shared mappings (``mmap``, ``np.memmap``, ``SharedMemory``) survive a fork and would let a
    trial write into the kernel's memory and files, if only after ``mprotect``-ing them
    writable again. Replace every one, whatever its size and protection, by a private one;
    one that cannot be replaced is unmapped (touching it then crashes the trial, visibly).

    ``mappings`` (from :func:`prepare`, with backing files already open) saves reading
    ``/proc/self/maps``, which takes milliseconds in a large process."""
    libc = _mmap_fn(_libc())
    for mapping in _shared_mappings() if mappings is None else mappings:
        if not _remap_private(libc, mapping):
            libc.munmap(mapping.start, mapping.length)
    return True


def _overlay_working_folder(scratch: str) -> str | None:
    """Let the trial write into its working folder without touching it: an overlay whose upper
    layer lives in the scratch tmpfs, mounted over the folder in this mount namespace only.
    ``plt.savefig("fig/x.png")`` or ``df.to_csv("out.csv")`` then work, and the real folder
    stays as it was. Returns the folder, or None when it could not be done."""
    folder = os.getcwd()
    if folder == "/" or any(char in folder for char in ",:\\"):
        return None  # the overlay option syntax cannot name such a folder
    upper, work = os.path.join(scratch, ".cwd-upper"), os.path.join(scratch, ".cwd-work")
    os.mkdir(upper, 0o700)
    os.mkdir(work, 0o700)
    options = f"lowerdir={folder},upperdir={upper},workdir={work}".encode()
    if _libc().mount(b"overlay", os.fsencode(folder), b"overlay", _MS_NOSUID | _MS_NODEV, options) != 0:
        return None
    os.chdir(folder)  # the old working directory is the folder under the overlay
    return folder


def _remove_from_view(folder: str, hidden: list[str]) -> bool:
    """Credential files beneath the working folder (``.env``, or all of ``~/.ssh`` when the
    notebook runs in the home folder) are deleted from the trial's private view: the overlay
    records a whiteout, the real files stay. True when none is left in the view."""
    gone = True
    for path in hidden:
        if not path.startswith(folder.rstrip("/") + "/"):
            continue
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            gone = gone and not os.path.lexists(path)
    return gone


# --------------------------------------------------------------------------- secrets


def _wipe_environment(is_secret: Callable[[str, str], bool] | None) -> bool:
    """Nothing to steal: secret environment values leave ``os.environ`` (and the C environment),
    and the initial environment block that ``/proc/self/environ`` shows is zeroed."""
    if is_secret is not None:
        for name, value in list(os.environ.items()):
            if is_secret(name, value):
                del os.environ[name]  # also unsetenv()
    try:
        with open("/proc/self/stat") as stat_file:
            fields = stat_file.read().rsplit(")", 1)[1].split()
        # fields[0] is field 3 (state) of proc(5); env_start and env_end are fields 50 and 51.
        env_start, env_end = int(fields[47]), int(fields[48])
    except (OSError, IndexError, ValueError):
        return False
    if 0 < env_start < env_end:
        ctypes.memset(env_start, 0, env_end - env_start)
    return True


# --------------------------------------------------------------------------- 4. seccomp

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_X32_SYSCALL_BIT = 0x40000000
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
        "socket": 41, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "setsid": 112, "setpgid": 109, "process_madvise": 440, "process_mrelease": 448,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "mount_setattr": 442,
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
        "socket": 198, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "setsid": 157, "setpgid": 154, "process_madvise": 440, "process_mrelease": 448,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "mount_setattr": 442,
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
    "process_madvise", "process_mrelease", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr",
)  # fmt: skip
# Calls that make the kernel do syscalls on the trial's behalf, outside this filter's view:
# ENOSYS, so that libraries fall back to plain system calls.
_DENY_NOT_IMPLEMENTED = ("io_uring_setup", "io_uring_enter", "io_uring_register")
# With subprocesses allowed, they stay in the trial's process group, where they are killed.
_DENY_WITH_PROCESSES = ("setsid", "setpgid")
_AF_INET, _AF_INET6 = 2, 10
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
    "prlimit64": 0, "migrate_pages": 0, "move_pages": 0, "kill": 0, "tkill": 0, "tgkill": 0,
    "setpriority": 1, "sched_setaffinity": 0, "ioprio_set": 1,
}  # fmt: skip
# setpriority(PRIO_PROCESS=0, …), ioprio_set(IOPRIO_WHO_PROCESS=1, …): with the other kinds, a
# "who" of 0 means every process of the user, the kernel included.
_WHICH_PROCESS = {"setpriority": 0, "ioprio_set": 1}
# Scheduling policy calls: a filter sees process ids, not which thread ids are the trial's own,
# and libzmq sets its own I/O threads' policy by thread id (pthread_setschedparam). Aimed at
# anything but 0 or the trial's pid they succeed without doing anything: harmless for a trial,
# and such libraries keep working.
_SCHEDULING = {"sched_setscheduler": 0, "sched_setparam": 0, "sched_setattr": 0}


def _bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data


def _arg_low(index: int) -> int:
    return 16 + 8 * index  # low word of args[index] (little endian)


def _one_of(number: int, values: Iterable[int], *, then: int, otherwise: int) -> list[bytes]:
    """If the syscall is ``number``: return ``then`` when the loaded argument is in ``values``,
    else ``otherwise``. Expects the argument to be loaded by the caller's first instruction."""
    values = list(values)
    body = [_bpf(_JEQ, len(values) - index, 0, value) for index, value in enumerate(values)]
    return [*body, _bpf(_RET, 0, 0, otherwise), _bpf(_RET, 0, 0, then)]


def _if_syscall(number: int, block: list[bytes]) -> list[bytes]:
    """Run ``block`` (which always returns) for syscall ``number``; then reload the number."""
    return [_bpf(_JEQ, 0, len(block), number), *block]


def _seccomp_program(machine: str, policy: TrialPolicy, own_pid: int) -> bytes:
    table = _SYSCALLS[machine]
    deny, allow, kill = _RET_ERRNO | _EPERM, _RET_ALLOW, _RET_KILL_PROCESS
    pretend = _RET_ERRNO | 0  # "success", without doing anything
    load_nr = _bpf(_LD_W_ABS, 0, 0, _NR)
    # Another ABI (int 0x80 on x86_64, AArch32 on arm64) has other numbers: never let it in.
    program = [_bpf(_LD_W_ABS, 0, 0, _ARCH), _bpf(_JEQ, 1, 0, _AUDIT_ARCH[machine]), _bpf(_RET, 0, 0, kill)]
    program.append(load_nr)
    if machine == "x86_64":  # the x32 ABI: the same entry point, numbers with bit 30 set
        program += [_bpf(_JGE, 0, 1, _X32_SYSCALL_BIT), _bpf(_RET, 0, 0, kill)]
    names = list(_DENY_ALWAYS)
    if not policy.allow_writes:
        names += _DENY_UNLESS_WRITES
    names += _DENY_WITH_PROCESSES if policy.allow_subprocess else _DENY_UNLESS_PROCESSES
    for number in sorted({table[name] for name in names if name in table}):
        program += [_bpf(_JEQ, 0, 1, number), _bpf(_RET, 0, 0, deny)]
    for name in _DENY_NOT_IMPLEMENTED:
        program += [_bpf(_JEQ, 0, 1, table[name]), _bpf(_RET, 0, 0, _RET_ERRNO | _ENOSYS)]
    if not policy.allow_network:
        # Only IP sockets, which the empty network namespace leaves nowhere to go; no unix
        # sockets with a path (the kernel's ipc channels, docker.sock, D-Bus), netlink, vsock...
        # socketpair stays: a connected pair reaches nothing (asyncio needs it).
        block = [_bpf(_LD_W_ABS, 0, 0, _arg_low(0))]
        block += _one_of(table["socket"], (_AF_INET, _AF_INET6), then=allow, otherwise=deny)
        program += _if_syscall(table["socket"], block)
    if not policy.allow_subprocess:
        # clone3 hides its flags in memory: answer ENOSYS so that libc falls back to clone;
        # clone itself: threads (CLONE_THREAD) are fine, new processes are not.
        program += [_bpf(_JEQ, 0, 1, table["clone3"]), _bpf(_RET, 0, 0, _RET_ERRNO | _ENOSYS)]
        block = [_bpf(_LD_W_ABS, 0, 0, _arg_low(0)), _bpf(_JSET, 1, 0, _CLONE_THREAD)]
        block += [_bpf(_RET, 0, 0, deny), _bpf(_RET, 0, 0, allow)]
        program += _if_syscall(table["clone"], block)
    for name, argument in _OWN_PROCESS_ONLY.items():
        block = []
        if name in _WHICH_PROCESS:  # (which, who): "who" is a process id only for this "which"
            block += [_bpf(_LD_W_ABS, 0, 0, _arg_low(0)), _bpf(_JEQ, 1, 0, _WHICH_PROCESS[name])]
            block += [_bpf(_RET, 0, 0, deny)]
        block += [_bpf(_LD_W_ABS, 0, 0, _arg_low(argument))]
        # tgkill(tgid, tid, sig): any thread of our own thread group
        own = (own_pid,) if name == "tgkill" else (0, own_pid)
        block += _one_of(table[name], own, then=allow, otherwise=deny)
        program += _if_syscall(table[name], block)
    for name, argument in _SCHEDULING.items():
        block = [_bpf(_LD_W_ABS, 0, 0, _arg_low(argument))]
        block += _one_of(table[name], (0, own_pid), then=allow, otherwise=pretend)
        program += _if_syscall(table[name], block)
    program.append(_bpf(_RET, 0, 0, allow))
    return b"".join(program)


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
_LL_EXECUTE, _LL_READ_FILE, _LL_READ_DIR = 1 << 0, 1 << 2, 1 << 3
_LL_WRITE = (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11)
_LL_WRITE |= 1 << 12  # MAKE_SYM
_LL_REFER, _LL_TRUNCATE = 1 << 13, 1 << 14
_LL_FILE_ONLY = _LL_EXECUTE | (1 << 1) | _LL_READ_FILE | _LL_TRUNCATE  # rights a rule on a file may carry
_LL_SCOPE_ABSTRACT_UNIX, _LL_SCOPE_SIGNAL = 1 << 0, 1 << 1
_MAX_READ_RULES = 20_000

# Where credentials live, relative to a home folder: unreadable in a trial.
HOME_SECRETS = (
    ".netrc", ".ssh", ".aws", ".azure", ".kube", ".docker/config.json", ".gnupg", ".pgpass", ".my.cnf",
    ".git-credentials", ".npmrc", ".pypirc", ".boto", ".s3cfg", ".config/gcloud", ".config/gh",
    ".local/share/jupyter/runtime", ".ipython/profile_default/security", ".anthropic", ".openai",
)  # fmt: skip


def secret_paths(extra: Iterable[str] = ()) -> list[str]:
    """Files a trial must not read: home credential files, ``.env`` files in the working folder
    and its parents, and ``extra`` (the adapter adds the kernel's connection file)."""
    homes = {os.path.expanduser("~")}
    with contextlib.suppress(KeyError, ImportError):
        import pwd

        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
    paths = [os.path.join(home, rel) for home in homes if home and home != "/" for rel in HOME_SECRETS]
    folder = os.getcwd()
    while True:
        with contextlib.suppress(OSError):
            paths += [
                os.path.join(folder, name)
                for name in os.listdir(folder)
                if name == ".env" or name.startswith(".env.") or name.endswith(".env")
            ]
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    paths += list(extra)
    return sorted({os.path.realpath(path) for path in paths if os.path.lexists(path)})


def _read_rules(hidden: list[str]) -> list[tuple[str, int]]:
    """Landlock only grants: to hide a few paths, grant reading on everything else, splitting
    each folder on the way to a hidden path into its entries. Listing folders stays allowed
    everywhere; in /proc no process's entry is (the trial adds its own: see :func:`_landlock`)."""
    rules: list[tuple[str, int]] = [("/", _LL_READ_DIR)]

    def grant(path: str) -> None:
        rules.append((path, _LL_READ_FILE))

    def walk(folder: str) -> None:
        inside = [h for h in hidden if h.startswith(folder.rstrip("/") + "/")]
        try:
            names = os.listdir(folder)
        except OSError:
            return
        for name in names:
            path = os.path.join(folder, name)
            if path in hidden or (folder == "/proc" and name.isdigit()):
                continue
            if any(h.startswith(path + "/") for h in inside) or path == "/proc":
                walk(path)
            else:
                grant(path)
            if len(rules) > _MAX_READ_RULES:
                raise OSError("too many entries on the way to a hidden path")

    walk("/")
    return rules


def _open_rule(path: str) -> int | None:
    try:
        # Never through a symlink: one to a folder holding a hidden path (pytest's "…current"
        # links, a ~/link to ~/.ssh) would grant all of it.
        return os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None


def _landlock(
    scratch: str,
    *,
    confine_writes: bool,
    hidden: list[str],
    writable: Iterable[str] = (),
    read_rules: list[tuple[int, int]] | None = None,
) -> bool:
    """``read_rules``: (O_PATH fd, access) pairs from :func:`prepare`; else computed here."""
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
    opened: list[tuple[int, int]] = []  # fds this call opens, and closes
    try:
        if read_rules is None:
            with contextlib.suppress(OSError):
                opened += _opened(_read_rules(hidden))
            read_rules = list(opened)
        if read_rules:
            handled |= _LL_READ_FILE | _LL_READ_DIR
        scoped = _LL_SCOPE_ABSTRACT_UNIX | _LL_SCOPE_SIGNAL if abi >= 6 else 0
        if not handled and not scoped:
            return False
        own = _opened([(scratch, handled), ("/dev/null", (1 << 1) | _LL_READ_FILE)])
        if read_rules:  # this process's own /proc entry, and no other process's
            own += _opened([(f"/proc/{os.getpid()}", _LL_READ_FILE)])
        own += _opened([(path, handled) for path in writable])
        opened += own
        attr = struct.pack("QQQ", handled, 0, scoped) if scoped else struct.pack("Q", handled)
        ruleset = libc.syscall(create, ctypes.c_char_p(attr), len(attr), 0)
        if ruleset < 0:
            return False
        try:
            for fd, access in [*read_rules, *own]:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    access &= _LL_FILE_ONLY
                rule = struct.pack("=Qi", access & handled, fd)
                libc.syscall(add_rule, ruleset, 1, ctypes.c_char_p(rule), 0)
            libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            return bool(libc.syscall(restrict, ruleset, 0) == 0)
        finally:
            os.close(ruleset)
    finally:
        for fd, _ in opened:
            os.close(fd)


def _opened(rules: Iterable[tuple[str, int]]) -> list[tuple[int, int]]:
    pairs = []
    for path, access in rules:
        fd = _open_rule(path)
        if fd is not None:
            pairs.append((fd, access))
    return pairs


# --------------------------------------------------------------------------- preparation


@dataclass
class Prepared:
    """What every trial forked from one process needs and can be found once, ahead, in that
    process (the snapshot): the hidden paths, Landlock's read rules as open O_PATH fds, and the
    shared mappings with their backing files open. Saves ~10 ms of trial start."""

    hidden: list[str]
    read_rules: list[tuple[int, int]]
    mappings: list[_Mapping]

    def fds(self) -> set[int]:
        """The fds a trial must keep through fd hygiene."""
        found = {fd for fd, _ in self.read_rules}
        return found | {m.backing_fd for m in self.mappings if m.backing_fd is not None}


def prepare(hidden_paths: Iterable[str] = ()) -> Prepared | None:
    """Called in the snapshot process (never in a trial). None where there is nothing to prepare."""
    if not sys.platform.startswith("linux"):
        return None
    hidden = secret_paths(hidden_paths)
    read_rules: list[tuple[int, int]] = []
    with contextlib.suppress(OSError):
        read_rules = _opened(_read_rules(hidden))
    mappings: list[_Mapping] = []
    with contextlib.suppress(OSError, ValueError):
        mappings = _shared_mappings()
        for mapping in mappings:
            mapping.backing_fd = _open_backing_file(mapping)
    return Prepared(hidden, read_rules, mappings)


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


_WRITABLE_HINT = "only the trial's scratch folder and a private view of the working folder are writable"


def _make_audit_hook(
    policy: TrialPolicy, scratch: str, writable: Iterable[str] = ()
) -> Callable[[str, tuple[Any, ...]], None]:
    roots = [os.path.realpath(path) for path in (scratch, *writable)]
    own_pid = os.getpid()

    def beneath(real: str) -> bool:
        return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)

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
        return not (beneath(real) or real == os.devnull)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and not policy.allow_writes:
            path, mode, flags = (*args, None, None, None)[:3]
            writing = (isinstance(mode, str) and bool(_WRITE_MODES & set(mode))) or (
                isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
            )
            if writing and outside(path):
                raise PolicyRefusal(f"write to {path}", _WRITABLE_HINT)
        elif event in _PATH_EVENTS and not policy.allow_writes:
            for path in args[: _PATH_EVENTS[event] + 1]:
                if outside(path):
                    raise PolicyRefusal(f"{event} on {path}", _WRITABLE_HINT)
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


def harden(
    policy: TrialPolicy,
    scratch: str,
    *,
    timeout_s: float,
    keep_fds: Iterable[int] = (),
    hidden_paths: Iterable[str] = (),
    is_secret_env: Callable[[str, str], bool] | None = None,
    prepared: Prepared | None = None,
    contain_only: bool = False,
) -> list[str]:
    """Apply every layer that this system supports; return the names of those now active.

    ``hidden_paths`` are made unreadable besides :func:`secret_paths`; ``is_secret_env(name,
    value)`` says which environment variables to remove. ``contain_only``: for the user's own
    code (assert operands evaluated again): side effects are contained exactly as in a trial,
    but nothing is hidden from reading, which saves the ~10 ms of finding what to hide."""
    active: list[str] = []
    linux = sys.platform.startswith("linux")
    if contain_only:
        hidden, prepared = [], Prepared([], [], _shared_mappings() if linux else [])
    elif prepared is not None:
        hidden = prepared.hidden
        keep_fds = {*keep_fds, *prepared.fds()}
    else:
        hidden = secret_paths(hidden_paths) if linux else []  # before the mount namespace hides scratch
    if linux and _scrub_inherited_fds(keep_fds):
        active.append("fd-hygiene")
    with contextlib.suppress(OSError, ValueError):
        if _apply_rlimits(policy, timeout_s):
            active.append("rlimits")
    if linux:  # before the user namespace: map_files needs the capabilities it drops
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if _privatize_shared_mappings(prepared.mappings if prepared is not None else None):
                active.append("private-mappings")
    writable: list[str] = []
    if linux:
        with contextlib.suppress(OSError, AttributeError):
            network_cut, mounts = _enter_namespaces(network=policy.allow_network)
            if network_cut:
                active.append("netns")
            if mounts and _mount_scratch(scratch, policy.scratch_mb):
                active.append("scratch-quota")
                folder = None if policy.allow_writes or contain_only else _overlay_working_folder(scratch)
                # Writable means readable too, so only when no credential file is left in the view.
                if folder is not None and _remove_from_view(folder, hidden):
                    writable.append(folder)
                    active.append("cwd-overlay")
    with contextlib.suppress(OSError, ValueError):
        if not contain_only and _wipe_environment(is_secret_env):
            active.append("no-secrets")
    if linux:
        with contextlib.suppress(OSError, AttributeError, KeyError):
            if _install_seccomp(policy):
                active.append("seccomp")
    if linux:
        with contextlib.suppress(OSError, AttributeError):
            read_rules = prepared.read_rules if prepared is not None else None
            if _landlock(
                scratch,
                confine_writes=not policy.allow_writes,
                hidden=hidden,
                writable=writable,
                read_rules=read_rules,
            ):
                active.append("landlock")
    sys.addaudithook(_make_audit_hook(policy, scratch, writable))
    active.append("audit-hook")
    return active

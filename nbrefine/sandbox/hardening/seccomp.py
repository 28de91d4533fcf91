"""Layer 6, seccomp: a BPF filter on system calls (no other ABI, no new processes or ``exec``,
only IP sockets and stream socketpairs, no ``io_uring``, no SysV or POSIX message-queue IPC, no
pidfds, no inotify or fanotify, nothing aimed at another process). May import :mod:`.trial_policy` and
:mod:`.native`."""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from .native import PR_SET_NO_NEW_PRIVS, load_libc
from .trial_policy import TrialPolicy

__all__ = ["SeccompProgram", "install_seccomp", "prepare_seccomp"]


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
        "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65, "semctl": 66,
        "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "mq_open": 240,
        "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244,
        "mq_getsetattr": 245, "pidfd_open": 434, "inotify_init": 253, "inotify_init1": 294,
        "inotify_add_watch": 254, "fanotify_init": 300, "fanotify_mark": 301, "socketpair": 53,
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
        "shmget": 194, "shmat": 196, "shmctl": 195, "shmdt": 197, "semget": 190, "semop": 193,
        "semctl": 191, "semtimedop": 192, "msgget": 186, "msgsnd": 189, "msgrcv": 188, "msgctl": 187,
        "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182, "mq_timedreceive": 183, "mq_notify": 184,
        "mq_getsetattr": 185, "pidfd_open": 434, "inotify_init1": 26, "inotify_add_watch": 27,
        "fanotify_init": 262, "fanotify_mark": 263, "socketpair": 199,
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
    # SysV IPC and POSIX message queues: objects that outlive the process that made them (a trial
    # left 4 x 32 MiB segments behind), reached by key or name from any process of the host.
    "shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop", "msgget",
    "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
    "mq_notify", "mq_getsetattr",
    # Watching files: what other processes do in the home folder, whatever Landlock hides.
    "inotify_add_watch", "fanotify_mark",
)  # fmt: skip
# ENOSYS, so that libraries fall back as on a kernel without them: io_uring (the kernel does
# syscalls on the trial's behalf, outside this filter's view), pidfds (pidfd_open of the kernel's
# pid: asyncio and subprocess fall back to waitpid), inotify and fanotify (watchers fall back to
# polling).
_DENY_NOT_IMPLEMENTED = (
    "io_uring_setup", "io_uring_enter", "io_uring_register", "pidfd_open", "inotify_init",
    "inotify_init1", "fanotify_init",
)  # fmt: skip
# With subprocesses allowed, they stay in the trial's process group, where they are killed.
_DENY_WITH_PROCESSES = ("setsid", "setpgid")
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10
_SOCK_STREAM, _SOCK_TYPE_MASK = 1, 0xF
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


_LD_W_ABS, _JEQ, _JGE, _JSET, _RET, _AND = 0x20, 0x15, 0x35, 0x45, 0x06, 0x54
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
        if name in table:
            program += [_bpf(_JEQ, 0, 1, table[name]), _bpf(_RET, 0, 0, _RET_ERRNO | _ENOSYS)]
    if not policy.allow_network:
        # Only IP sockets, which the empty network namespace leaves nowhere to go; no unix
        # sockets with a path (the kernel's ipc channels, docker.sock, D-Bus), netlink, vsock...
        block = [_bpf(_LD_W_ABS, 0, 0, _arg_low(0))]
        block += _one_of(table["socket"], (_AF_INET, _AF_INET6), then=allow, otherwise=deny)
        program += _if_syscall(table["socket"], block)
        # Stream socketpairs stay (asyncio's self-pipe): a connected pair reaches nothing. A
        # datagram one is unconnected on one side: sendto or connect it to /dev/log, systemd's
        # notify socket, any datagram service with a path. So: AF_UNIX, SOCK_STREAM (with any of
        # SOCK_NONBLOCK and SOCK_CLOEXEC), nothing else.
        block = [_bpf(_LD_W_ABS, 0, 0, _arg_low(0)), _bpf(_JEQ, 1, 0, _AF_UNIX), _bpf(_RET, 0, 0, deny)]
        block += [_bpf(_LD_W_ABS, 0, 0, _arg_low(1)), _bpf(_AND, 0, 0, _SOCK_TYPE_MASK)]
        block += [_bpf(_JEQ, 1, 0, _SOCK_STREAM), _bpf(_RET, 0, 0, deny), _bpf(_RET, 0, 0, allow)]
        program += _if_syscall(table["socketpair"], block)
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


# A pid no process has (pid_max is at most 2**22): where the trial's own pid goes in a program
# built ahead, in the snapshot, by :func:`prepare_seccomp`.
_ANY_PID = 0x7FFFFFF0


def _switches(policy: TrialPolicy) -> tuple[bool, bool, bool]:
    """All of a policy that the program depends on."""
    return policy.allow_writes, policy.allow_subprocess, policy.allow_network


@dataclass(frozen=True)
class SeccompProgram:
    """A filter built once for a policy's switches, with the offsets of the instructions that
    name the trial's own pid (building it takes ~0.6 ms of every trial's start)."""

    machine: str
    switches: tuple[bool, bool, bool]
    program: bytes
    pid_offsets: tuple[int, ...]

    def for_pid(self, pid: int) -> bytes:
        program = bytearray(self.program)
        for offset in self.pid_offsets:
            program[offset : offset + 4] = struct.pack("I", pid)
        return bytes(program)


def prepare_seccomp(policy: TrialPolicy) -> SeccompProgram | None:
    """Called in the snapshot process: the program of ``policy`` for any trial's pid."""
    machine = platform.machine()
    if machine not in _SYSCALLS or not sys.platform.startswith("linux"):
        return None
    program = _seccomp_program(machine, policy, _ANY_PID)
    instructions = [program[at : at + 8] for at in range(0, len(program), 8)]
    offsets = tuple(
        8 * n + 4 for n, ins in enumerate(instructions) if struct.unpack("HBBI", ins)[3] == _ANY_PID
    )
    return SeccompProgram(machine, _switches(policy), program, offsets)


def install_seccomp(policy: TrialPolicy, prepared: SeccompProgram | None = None) -> bool:
    machine = platform.machine()
    if machine not in _SYSCALLS or not sys.platform.startswith("linux"):
        return False
    if prepared is not None and (prepared.machine, prepared.switches) == (machine, _switches(policy)):
        program = prepared.for_pid(os.getpid())
    else:
        program = _seccomp_program(machine, policy, os.getpid())
    buffer = ctypes.create_string_buffer(program)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    libc = load_libc()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return bool(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0)

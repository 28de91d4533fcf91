"""Layer 7, landlock: writes only beneath the trial's scratch folder (and the working folder's
private view); hidden paths, other processes' ``/proc`` entries and every device node but the
few a program needs (:data:`.trial_policy.DEVICES`) unreadable; no ioctl on a device outside ``/dev``;
signals and abstract unix sockets scoped to the trial. May import :mod:`.native` and
:mod:`.trial_policy`."""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import stat
import struct
import sys
from collections.abc import Iterable

from .native import PR_SET_NO_NEW_PRIVS, load_libc
from .trial_policy import DEVICES

__all__ = ["apply_landlock", "open_rules", "read_rules_hiding"]


_SYS_LANDLOCK = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_LL_EXECUTE, _LL_READ_FILE, _LL_READ_DIR = 1 << 0, 1 << 2, 1 << 3
_LL_WRITE = (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11)
_LL_WRITE |= 1 << 12  # MAKE_SYM
_LL_REFER, _LL_TRUNCATE, _LL_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
# rights a rule on a file may carry
_LL_FILE_ONLY = _LL_EXECUTE | (1 << 1) | _LL_READ_FILE | _LL_TRUNCATE | _LL_IOCTL_DEV
_LL_SCOPE_ABSTRACT_UNIX, _LL_SCOPE_SIGNAL = 1 << 0, 1 << 1
_MAX_READ_RULES = 20_000


def read_rules_hiding(hidden: list[str]) -> list[tuple[str, int]]:
    """Landlock only grants: to hide a few paths, grant reading on everything else, splitting
    each folder on the way to a hidden path into its entries. Listing folders stays allowed
    everywhere; in /proc no process's entry is (the trial adds its own: see :func:`apply_landlock`);
    in /dev only :data:`.trial_policy.DEVICES` are (no /dev/kvm, /dev/userfaultfd, raw disks, whose
    blocks hold the hidden files too)."""
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
            if (
                path in hidden
                or (folder == "/proc" and name.isdigit())
                or (folder == "/dev" and name not in DEVICES)
            ):
                continue
            # /dev is granted whole where it holds nothing else (the snapshot's /dev of its own)
            split = path == "/proc" or (path == "/dev" and not set(names_of(path)) <= set(DEVICES))
            if split or any(h.startswith(path + "/") for h in inside):
                walk(path)
            else:
                grant(path)
            if len(rules) > _MAX_READ_RULES:
                raise OSError("too many entries on the way to a hidden path")

    walk("/")
    return rules


def names_of(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _open_rule(path: str) -> int | None:
    try:
        # Never through a symlink: one to a folder holding a hidden path (pytest's "…current"
        # links, a ~/link to ~/.ssh) would grant all of it.
        return os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None


def apply_landlock(
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
    libc = load_libc()
    abi = libc.syscall(create, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return False
    handled = _LL_WRITE if confine_writes else 0
    if confine_writes and abi >= 2:
        handled |= _LL_REFER
    if confine_writes and abi >= 3:
        handled |= _LL_TRUNCATE
    if abi >= 5:  # ioctls on devices: only those under /dev (a device node elsewhere has none)
        handled |= _LL_IOCTL_DEV
    opened: list[tuple[int, int]] = []  # fds this call opens, and closes
    try:
        if read_rules is None:
            with contextlib.suppress(OSError):
                opened += open_rules(read_rules_hiding(hidden))
            read_rules = list(opened)
        if read_rules:
            handled |= _LL_READ_FILE | _LL_READ_DIR
        scoped = _LL_SCOPE_ABSTRACT_UNIX | _LL_SCOPE_SIGNAL if abi >= 6 else 0
        if not handled and not scoped:
            return False
        own = open_rules(
            [(scratch, handled), ("/dev/null", (1 << 1) | _LL_READ_FILE), ("/dev", _LL_IOCTL_DEV)]
        )
        if read_rules:  # this process's own /proc entry, and no other process's
            own += open_rules([(f"/proc/{_own_pid_in_proc()}", _LL_READ_FILE)])
        own += open_rules([(path, handled) for path in writable])
        opened += own
        attr = struct.pack("QQQ", handled, 0, scoped) if scoped else struct.pack("Q", handled)
        ruleset = libc.syscall(create, ctypes.c_char_p(attr), len(attr), 0)
        if ruleset < 0:
            return False
        try:
            for fd, access in [*read_rules, *own]:  # access already fits the file's type: open_rules
                rule = struct.pack("=Qi", access & handled, fd)
                libc.syscall(add_rule, ruleset, 1, ctypes.c_char_p(rule), 0)
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            return bool(libc.syscall(restrict, ruleset, 0) == 0)
        finally:
            os.close(ruleset)
    finally:
        for fd, _ in opened:
            os.close(fd)


def _own_pid_in_proc() -> str:
    """This process's entry in the /proc it sees: its pid in the namespace that /proc belongs to
    (in a trial's PID namespace, /proc is that namespace's own; where it could not be mounted, the
    host's /proc numbers the trial by its host pid)."""
    try:
        return os.readlink("/proc/self")
    except OSError:
        return str(os.getpid())


def open_rules(rules: Iterable[tuple[str, int]]) -> list[tuple[int, int]]:
    """(O_PATH fd, access) pairs, the access cut to the rights a rule on a file may carry where
    the path is not a folder (found here, once: in the snapshot for the read rules, not in every trial)."""
    pairs = []
    for path, access in rules:
        fd = _open_rule(path)
        if fd is None:
            continue
        with contextlib.suppress(OSError):
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                access &= _LL_FILE_ONLY
        pairs.append((fd, access))
    return pairs

"""Layer 1, fd hygiene: inherited sockets, pipes and devices become ``/dev/null`` in the trial;
inherited files and folders get an open file description of the trial's own, at the same offset
(read-only when they were open for writing); descriptors on hidden paths (the IPython history
database, a credential file the kernel holds open) become ``/dev/null``. The kernel's own handles
are untouched. Standard library only.

Why a new open file description: ``fork`` shares them, and with them the offset, the status
flags and ``flock`` locks. A benign candidate's ``f.seek(0); f.read()`` moved the kernel's offset
(its ``list(f)`` then gave 934 of 5,000 rows), an ``fcntl(F_SETFL, O_APPEND)`` changed the
kernel's flags, and an ``flock`` outlived the trial, held by the kernel's descriptor.

May import: the standard library."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterable

__all__ = ["scrub_inherited_fds"]


# Status flags a new open file description keeps; O_APPEND goes with write access (reopened
# read-only), O_CREAT/O_TRUNC/O_EXCL only act at open time.
_KEPT_FLAGS = os.O_NONBLOCK | os.O_SYNC | getattr(os, "O_DIRECT", 0) | getattr(os, "O_NOATIME", 0)
_O_PATH = getattr(os, "O_PATH", 0)


def scrub_inherited_fds(keep: Iterable[int], hidden: Iterable[str] = ()) -> bool:
    keep_set = set(keep) | {0, 1, 2}
    hidden_roots = [path.rstrip("/") for path in hidden]
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return False
    devnull = os.open(os.devnull, os.O_RDWR)
    keep_set.add(devnull)
    for fd in fds:
        if fd in keep_set:
            continue
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
        if (stat.S_ISREG(mode) or stat.S_ISDIR(mode)) and _reopen(fd, stat.S_ISDIR(mode), hidden_roots):
            continue
        # Sockets, pipes, devices and anonymous inodes (zmq's eventfds, epoll, timerfd...) are the
        # kernel's, and so is a file that could not be reopened or that is hidden: this process
        # gets /dev/null in their place; the kernel keeps its own.
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd, inheritable=_inheritable(fd))
    os.close(devnull)
    return True


def _inheritable(fd: int) -> bool:
    try:
        return os.get_inheritable(fd)
    except OSError:
        return False


def _reopen(fd: int, folder: bool, hidden_roots: list[str]) -> bool:
    """Give ``fd`` a new open file description of the same file at the same offset; False when
    it must become /dev/null instead (a hidden path, or the reopen failed)."""
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        if _O_PATH and flags & _O_PATH:
            return True  # no offset, no reading: nothing to share
        target = os.readlink(f"/proc/self/fd/{fd}")
        if any(target == root or target.startswith(root + "/") for root in hidden_roots):
            return False
        offset = os.lseek(fd, 0, os.SEEK_CUR)
        new_flags = os.O_RDONLY | (flags & _KEPT_FLAGS) | (os.O_DIRECTORY if folder else 0)
        inheritable = _inheritable(fd)
        try:
            fresh = os.open(f"/proc/self/fd/{fd}", new_flags)
        except OSError:
            fresh = os.open(f"/proc/self/fd/{fd}", new_flags & ~(_KEPT_FLAGS & ~os.O_NONBLOCK))
        try:
            try:
                os.lseek(fresh, offset, os.SEEK_SET)
            except OSError:
                if not folder:
                    raise
                # A folder's offset is a file system's cookie; where it does not carry over, the
                # trial lists the folder from its start (the kernel's listing is untouched either way).
            os.dup2(fresh, fd, inheritable=inheritable)
        finally:
            os.close(fresh)
    except OSError:
        return False
    return True

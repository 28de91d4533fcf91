"""Layer 1, fd hygiene: inherited sockets and pipes become ``/dev/null`` in the trial, inherited
files open for writing are reopened read-only; the kernel's own handles are untouched.
Standard library only.

May import: the standard library."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable

__all__ = ["scrub_inherited_fds"]


def scrub_inherited_fds(keep: Iterable[int]) -> bool:
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

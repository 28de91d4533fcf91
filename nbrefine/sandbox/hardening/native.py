"""The C library through ctypes, for the system calls Python has no wrapper for (unshare, mount,
mmap at a fixed address, prctl, seccomp, landlock). Standard library only.

May import: the standard library (ctypes)."""

from __future__ import annotations

import ctypes
from typing import Any

__all__ = ["PR_SET_NO_NEW_PRIVS", "die_with_parent", "load_libc"]


PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1


def load_libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent(signum: int) -> None:
    """Have this process sent ``signum`` when its parent (the thread that forked it) ends: a
    helper process must not outlive the process that started it, even one killed by SIGKILL."""
    load_libc().prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)

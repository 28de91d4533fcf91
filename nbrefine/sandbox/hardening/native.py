"""The C library through ctypes, for the system calls Python has no wrapper for (unshare, mount,
mmap at a fixed address, prctl, seccomp, landlock). Standard library only.

May import: the standard library (ctypes)."""

from __future__ import annotations

import ctypes
from typing import Any

__all__ = ["PR_SET_NO_NEW_PRIVS", "load_libc"]


PR_SET_NO_NEW_PRIVS = 38


def load_libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)

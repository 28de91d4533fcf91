"""The live run keeps the trial's capabilities: while an accepted fix runs in the user's kernel,
what its trial refused is refused there too.

A candidate can tell a trial from the live kernel (``/proc/self/status`` says ``Seccomp: 2`` in a
trial) and do harm only outside it. The trial's seccomp, Landlock and namespaces cannot be put on
the kernel itself, but its portable last line can: :func:`confined` arms, for the duration of one
run, the same audit hook the trial installs (:func:`nbrefine.sandbox.hardening.audit.make_audit_hook`):
no processes, no network, no writes outside the working folder (the system's temporary folder and
``~/.cache`` stay writable: libraries keep caches there), unless the policy allows them — the user's
``--allow-*`` options, or the original cell doing the same kind of thing. A refusal stops the run
with one line that names the action (:class:`LiveRefusal`).

Audit hooks cannot be removed, so one dispatcher is installed the first time and does nothing while
no run is armed (one attribute read per audited event). The kernel's own threads, alive before the
run was armed, are never confined (their sockets and files are the kernel's); threads the fix starts
are.

What this layer cannot stop (the README says so too): code that makes system calls without Python
(``ctypes``, a C extension), code that finds this module's state and disarms it (both are named by
the capability diff and the gate before Accept, which then needs a second choice), work handed to a
thread or process that existed before the run, and writes through files that were already open.

May import: the standard library, :mod:`nbrefine._errors` and :mod:`nbrefine.sandbox.hardening`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .._errors import PolicyRefusal
from .hardening.audit import make_audit_hook
from .hardening.trial_policy import TrialPolicy

__all__ = ["LiveRefusal", "arm", "confined", "disarm", "is_armed"]

Hook = Callable[[str, tuple[Any, ...]], None]


class LiveRefusal(PolicyRefusal):
    """The accepted fix tried, in the live kernel, what its trial could not do."""

    def __init__(self, action: str) -> None:
        PermissionError.__init__(
            self,
            f"nbrefine stopped the accepted fix: it tried {action}, which its trial was not allowed to do "
            "(%%refine --allow-network, --allow-subprocess or --allow-writes allows it)",
        )
        self.action = action


@dataclass
class _Live:
    hook: Hook | None = None
    kernel_threads: frozenset[int] = field(default_factory=frozenset)
    allow_dotfiles: bool = False
    installed: bool = False


_LIVE = _Live()


_WRITE_MODES = set("wax+")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = (
    "os.remove",
    "os.rename",
    "os.replace",
    "os.truncate",
    "os.chmod",
    "os.symlink",
    "shutil.rmtree",
)


def _home_dotfile(path: object) -> bool:
    """A dotfile or dot-folder of the user's home (``~/.bashrc``, ``~/.ssh/...``), wherever home is;
    ``~/.cache`` is not one (libraries keep caches there)."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return False
    home = os.path.realpath(os.path.expanduser("~"))
    real = os.path.realpath(path)
    if not real.startswith(home.rstrip(os.sep) + os.sep):
        return False
    first = real[len(home) :].lstrip(os.sep).split(os.sep, 1)[0]
    return first.startswith(".") and first != ".cache"


def _writes_a_dotfile(event: str, args: tuple[Any, ...]) -> str:
    """The dotfile a write event touches ("" : none)."""
    if event == "open":
        path, mode, flags = (*args, None, None, None)[:3]
        writing = (isinstance(mode, str) and bool(_WRITE_MODES & set(mode))) or (
            isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
        )
        return str(path) if writing and _home_dotfile(path) else ""
    if event in _PATH_EVENTS:
        return next((str(p) for p in args[:2] if _home_dotfile(p)), "")
    return ""


def _dispatch(event: str, args: tuple[Any, ...]) -> None:
    hook = _LIVE.hook
    if hook is None or threading.get_ident() in _LIVE.kernel_threads:
        return
    dotfile = _writes_a_dotfile(event, args) if not _LIVE.allow_dotfiles else ""
    if dotfile:
        raise LiveRefusal(f"write to {dotfile}, a file of your home folder's settings")
    try:
        hook(event, args)
    except LiveRefusal:
        raise
    except PolicyRefusal as refused:
        raise LiveRefusal(refused.action) from None


def _writable() -> list[str]:
    return [tempfile.gettempdir(), os.path.join(os.path.expanduser("~"), ".cache")]


def arm(policy: TrialPolicy, workdir: str | None = None) -> None:
    """Confine what runs from now on (in this thread and the threads it starts) to ``policy``."""
    if not _LIVE.installed:
        sys.addaudithook(_dispatch)
        _LIVE.installed = True
    me = threading.get_ident()
    _LIVE.kernel_threads = frozenset(t.ident for t in threading.enumerate() if t.ident and t.ident != me)
    _LIVE.allow_dotfiles = policy.allow_writes  # --allow-writes, or a cell that wrote there itself
    _LIVE.hook = make_audit_hook(policy, workdir or os.getcwd(), _writable())


def disarm() -> None:
    _LIVE.hook = None


def is_armed() -> bool:
    return _LIVE.hook is not None


@contextlib.contextmanager
def confined(policy: TrialPolicy, workdir: str | None = None) -> Iterator[None]:
    """Within the block, the live run has the trial's capabilities (see the module's docstring)."""
    arm(policy, workdir)
    try:
        yield
    finally:
        disarm()

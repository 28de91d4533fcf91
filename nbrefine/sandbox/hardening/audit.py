"""Layer 8, the audit hook: Python-level refusals with clear messages (connect, subprocess, exec,
writes outside scratch, kill), the portable last line. May import :mod:`.trial_policy`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from .trial_policy import PolicyRefusal, TrialPolicy

__all__ = ["make_audit_hook"]


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
_SIGNAL_HINT = "trials may only signal themselves"
_GROUP_HINT = (
    " (os.kill(os.getpid(), ...)): 0 is the whole process group, and in a trial also what"
    " os.getppid() answers (its parent is outside its PID namespace)"
)


def make_audit_hook(
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
            if event == "os.kill" and isinstance(target, int) and target <= 0:
                # 0 is the whole process group (the kernel's, in a confined live run), and what
                # os.getppid() answers in a trial (its parent is outside the trial's PID namespace):
                # "kill my parent" must neither reach the group nor kill the trial itself.
                raise PolicyRefusal(f"{event} of process {target}", _SIGNAL_HINT + _GROUP_HINT)
            if isinstance(target, int) and target not in (own_pid, 0) and event != "signal.pthread_kill":
                raise PolicyRefusal(f"{event} of process {target}", _SIGNAL_HINT)

    return hook

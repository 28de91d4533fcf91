"""Between the kernel and its trial processes: framed pickles over pipes, the restricted
unpickler for what an untrusted process sends back, and the process helpers both sandboxes
use (kill a process group, say how a process ended).

May import the standard library, :mod:`.trial` and the grounding types an outcome holds.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import select
import signal
import struct
import time
from typing import Any

from ..capture import Failure, FrameInfo
from ..context import ValueSummary
from .trial import TrialOutcome

__all__ = ["HEADER", "exit_detail", "kill_group", "read_exact", "read_msg", "write_msg"]

HEADER = struct.Struct("!Q")


def write_msg(fd: int, obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_exact(fd: int, size: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            raise TimeoutError("no answer before the deadline")
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


# What a message from a trial (or from the snapshot process) may contain. Model-written code
# runs in the trial and can write anything into its result pipe: unpickling it unrestricted
# would run that code here, outside every sandbox layer. Hence an allowlist, and a size cap.
# Named from the classes themselves, so that moving a class moves its entry too.
_ALLOWED_GLOBALS = frozenset(
    (klass.__module__, klass.__qualname__) for klass in (TrialOutcome, Failure, FrameInfo, ValueSummary)
)
# No callables from builtins: the containers and numbers an outcome holds have opcodes of their
# own, while ``builtins.bytes(2**31)`` in a 40-byte pickle allocated 2 GiB where it was read.
_MAX_UNTRUSTED_MESSAGE = 32 << 20


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"refused to unpickle {module}.{name} from a sandboxed process")
        return super().find_class(module, name)


def read_msg(fd: int, deadline: float | None, *, trusted: bool = False) -> Any:
    """One framed message. Only messages from the kernel itself are ``trusted``."""
    (size,) = HEADER.unpack(read_exact(fd, HEADER.size, deadline))
    if not trusted and size > _MAX_UNTRUSTED_MESSAGE:
        raise pickle.UnpicklingError(f"a sandboxed process sent a {size}-byte message; refused")
    data = read_exact(fd, size, deadline)
    if trusted:
        return pickle.loads(data)
    return _RestrictedUnpickler(io.BytesIO(data)).load()


def exit_detail(status: int) -> tuple[str, str]:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        if number == signal.SIGXCPU:
            return "cpu_limit", "the trial's CPU time limit was reached"
        return "crashed", f"killed by signal {name}"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return "exited", f"the process exited with code {code} before reporting"


def kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)

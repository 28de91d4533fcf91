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

from ..grounding import Failure, FrameInfo, ValueSummary
from .trial import TrialOutcome, TrialStatus

__all__ = [
    "EXIT_GRACE_S",
    "HEADER",
    "REASON_CHARS",
    "exit_detail",
    "kill_group",
    "read_exact",
    "read_msg",
    "reason",
    "write_msg",
]

HEADER = struct.Struct("!Q")
#: How long a trial process may take to exit once its answer is in (or never will be).
EXIT_GRACE_S = 2.0
REASON_CHARS = 200  # characters of a reason sent back or shown


def write_msg(fd: int, obj: object) -> None:
    """One framed message: its length, then its pickle."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_exact(fd: int, size: int, deadline: float | None = None) -> bytearray:
    """``size`` bytes from ``fd``, read straight into one buffer: a shipped value of a GiB is not
    copied a second time. ``TimeoutError`` after ``deadline`` (``None``: wait as long as it takes),
    ``EOFError`` when the other side closes first."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    done = 0
    while done < size:
        if deadline is not None:
            ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))
            if not ready:
                raise TimeoutError("no answer before the deadline")
        count = os.readv(fd, [view[done:]])
        if not count:
            raise EOFError("the other side closed the pipe")
        done += count
    view.release()
    return buffer


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


def exit_detail(returncode: int) -> tuple[TrialStatus, str]:
    """Why a trial process ended without reporting, from its return code as :mod:`subprocess`
    gives it (``-N``: killed by signal N; a wait status converts with ``os.waitstatus_to_exitcode``)."""
    if returncode < 0:
        number = -returncode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        if number == getattr(signal, "SIGXCPU", None):
            return "cpu_limit", "the trial's CPU time limit was reached"
        return "crashed", f"killed by signal {name}"
    return "exited", f"the process exited with code {returncode} before reporting"


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (the trial and whatever it started), or the
    process alone when it leads no group; one that is already gone is not an error."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def reason(err: BaseException) -> str:
    """One line for an error that stopped a shipment or a start: its type and first line."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")[:REASON_CHARS]

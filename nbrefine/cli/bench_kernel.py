"""The part of ``nbrefine bench`` that runs inside the kernel (imported there by name, through
:func:`nbrefine.headless.kernel.kernel_call`): arm and disarm the timer that stops a hanging buggy
program, and point the scripted provider at a case's replies. It binds no user names.

May import: the standard library only (it is imported into the user's kernel).
"""

from __future__ import annotations

import os
import signal
from typing import Any

__all__ = ["HANG_MESSAGE", "disarm", "prepare"]

HANG_MESSAGE = "the program did not finish within {s:g} s (stopped by nbrefine bench)"


def _is_cell_file(filename: str) -> bool:
    return "ipykernel_" in filename or filename.startswith(("<ipython-input-", "<cell"))


def prepare(hang_s: float, scripted_path: str = "") -> None:
    """Arm a one-shot timer that stops a hanging buggy program with TimeoutError, and point the
    scripted provider at this case's remaining replies. The timer only fires into the cell body
    (run by %%refine inside the outer cell): never into nbrefine's capture or loop."""
    if scripted_path:
        os.environ["NBREFINE_SCRIPTED_REPLIES"] = scripted_path

    def on_alarm(signum: int, frame: Any) -> None:
        depth = 0
        while frame is not None:
            depth += _is_cell_file(frame.f_code.co_filename)
            frame = frame.f_back
        if depth >= 2:  # the outer %%refine cell and the body it runs
            raise TimeoutError(HANG_MESSAGE.format(s=hang_s))

    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, hang_s)


def disarm() -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)

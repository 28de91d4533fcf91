"""What a trial may do (:class:`TrialPolicy`) and what a candidate sees when it tries more
(:class:`PolicyRefusal`). Standard library only.

May import: :mod:`nbrefine._errors` and the standard library."""

from __future__ import annotations

from dataclasses import dataclass

from ..._errors import PolicyRefusal

__all__ = ["DEVICES", "PolicyRefusal", "TrialPolicy"]

#: What a trial finds in /dev (a tmpfs of the snapshot's own, or, where that could not be mounted,
#: all that Landlock leaves readable of the host's): no disk, /dev/kvm, /dev/userfaultfd or tty0.
DEVICES = ("null", "zero", "full", "random", "urandom", "tty", "fd", "stdin", "stdout", "stderr", "shm")


@dataclass(frozen=True)
class TrialPolicy:
    """What a trial may do. The defaults are strict; opt-ins are per cell."""

    memory_mb: int = 4096  # address-space growth allowed over the forked size
    cpu_s: float | None = None  # None: the trial's wall-clock timeout, plus one second
    file_size_mb: int = 64
    open_files: int = 1024
    max_processes: int = 64  # processes and threads of the trial's user (RLIMIT_NPROC)
    scratch_mb: int = 512  # total size of everything written into the scratch folder
    allow_network: bool = False
    allow_subprocess: bool = False
    allow_writes: bool = False  # writes outside the scratch folder

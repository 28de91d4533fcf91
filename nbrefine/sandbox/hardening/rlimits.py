"""Layer 2, rlimits: CPU seconds, address-space growth, file size, open files, processes, no
core files. May import :mod:`.trial_policy`."""

from __future__ import annotations

import contextlib
import os
import resource
import signal

from .trial_policy import TrialPolicy

__all__ = ["apply_rlimits", "limit_cpu"]


def _address_space_now() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmSize")


def _set_limit(kind: int, soft: int, headroom: int = 0) -> None:
    """Lower the soft limit; the hard one to ``soft + headroom`` (so SIGXCPU comes before SIGKILL)."""
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
        new_hard = min(hard, soft + headroom)
    else:
        new_hard = soft + headroom
    resource.setrlimit(kind, (soft, new_hard))


def _threads_now() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def apply_rlimits(policy: TrialPolicy, timeout_s: float | None) -> bool:
    """``timeout_s`` None: all but the CPU seconds, which :func:`limit_cpu` sets later."""
    if timeout_s is not None:
        limit_cpu(policy, timeout_s)
    with contextlib.suppress(OSError, ValueError):
        _set_limit(resource.RLIMIT_AS, _address_space_now() + policy.memory_mb * 1024 * 1024)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large write fails with EFBIG instead
    _set_limit(resource.RLIMIT_FSIZE, policy.file_size_mb * 1024 * 1024)
    with contextlib.suppress(OSError, ValueError):
        _set_limit(resource.RLIMIT_NOFILE, policy.open_files)
    # Every trial, not only with --allow-subprocess (threads count too). The kernel does not
    # apply it to root; there, seccomp (no processes unless allowed) is what holds.
    with contextlib.suppress(OSError, ValueError):
        _set_limit(resource.RLIMIT_NPROC, policy.max_processes + _threads_now())
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crashing candidate leaves no core file
    return True


def limit_cpu(policy: TrialPolicy, timeout_s: float) -> None:
    cpu = policy.cpu_s if policy.cpu_s is not None else timeout_s + 1
    _set_limit(resource.RLIMIT_CPU, max(int(cpu + 0.999), 1), headroom=2)

"""What this machine's kernel lets a process do, probed apart from nbrefine's own code.

A sandbox test that needs a layer asks :func:`expect_layers`: where the machine offers the
layer, the trial must report it active (a regression fails); only where the machine cannot
(no user namespaces, no Landlock, another architecture) is the test skipped.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform

import pytest

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER, _CLONE_NEWPID = 0x00020000, 0x08000000, 0x10000000, 0x20000000
_PR_GET_SECCOMP = 21
_SYS_LANDLOCK_CREATE_RULESET = 444  # the same number on x86_64 and aarch64
_LANDLOCK_CREATE_RULESET_VERSION = 1


def _in_child(probe: str) -> bool:
    """Run ``probe`` (a function of this module, by name) in a forked child: its exit status."""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if globals()[probe]() else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _namespaces() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    flags = _CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWPID
    return libc.unshare(_CLONE_NEWUSER | flags) == 0 or libc.unshare(flags) == 0


def _overlay() -> bool:
    """An overlay over a folder, its upper layer in a tmpfs, as a trial's working folder gets."""
    import tempfile

    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS) == 0:
        for name, line in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(line)
    elif libc.unshare(_CLONE_NEWNS) != 0:
        return False
    lower, scratch = tempfile.mkdtemp(), tempfile.mkdtemp()
    if libc.mount(b"tmpfs", scratch.encode(), b"tmpfs", 0, b"size=1m") != 0:
        return False
    upper, work = os.path.join(scratch, "upper"), os.path.join(scratch, "work")
    os.mkdir(upper)
    os.mkdir(work)
    options = f"lowerdir={lower},upperdir={upper},workdir={work}".encode()
    return libc.mount(b"overlay", lower.encode(), b"overlay", 0, options) == 0


@functools.cache
def offers(layer: str) -> bool:
    """Whether this machine lets an unprivileged-looking process build ``layer`` at all."""
    if platform.system() != "Linux":
        return False
    if layer in ("userns", "ipcns", "pidns", "private-dev"):
        return _in_child("_namespaces")
    if layer == "cwd-overlay":
        return _in_child("_overlay")
    if layer == "seccomp":
        libc = ctypes.CDLL(None, use_errno=True)
        return platform.machine() in ("x86_64", "aarch64") and libc.prctl(_PR_GET_SECCOMP, 0, 0, 0, 0) >= 0
    if layer == "landlock":
        libc = ctypes.CDLL(None, use_errno=True)
        version = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
        return platform.machine() in ("x86_64", "aarch64") and version >= 1
    raise ValueError(f"no probe for the layer {layer!r}")


def expect_layers(active: tuple[str, ...] | list[str], *layers: str) -> None:
    """Each of ``layers`` is in ``active`` where this machine offers it; skip the test where not."""
    missing = [layer for layer in layers if not offers(layer)]
    if missing:
        pytest.skip(f"this machine offers no {', '.join(missing)}")
    absent = [layer for layer in layers if layer not in active]
    assert not absent, f"the machine offers {absent} but the trial ran without: {list(active)}"

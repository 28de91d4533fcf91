"""Layer 4, namespaces: a user and mount namespace and (unless the network is allowed) an empty
network namespace, per trial; the scratch folder becomes a size-limited tmpfs, the working folder a
private overlay with credential files deleted from its view. A trial that does not start in the
snapshot's IPC namespace (:mod:`.shared_ns`) gets one of its own here, in the same user namespace.
May import :mod:`.native`."""

from __future__ import annotations

import contextlib
import os
import shutil

from .native import load_libc

__all__ = [
    "enter_namespaces",
    "enter_user_namespace",
    "in_user_namespace",
    "mount_scratch",
    "overlay_working_folder",
    "remove_from_view",
]


_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000


def enter_namespaces(*, network: bool, ipc: bool = False) -> tuple[bool, bool]:
    """A new user namespace (even for root: that drops every capability the process had over
    the host: no reboot, no raising limits) with a new mount namespace, unless the network is
    allowed a new empty network namespace, and with ``ipc`` a new IPC namespace (no SysV object
    or POSIX message queue of the host). Returns (network cut, mounts private); the IPC namespace
    comes with the mounts."""
    libc = load_libc()
    uid, gid = os.geteuid(), os.getegid()
    flags = _CLONE_NEWUSER | _CLONE_NEWNS | (0 if network else _CLONE_NEWNET) | (_CLONE_NEWIPC if ipc else 0)
    if libc.unshare(flags) != 0:
        # No user namespace of its own (none here, or this process has started a thread): with
        # the capabilities for it (root, or a trial in the snapshot's user namespace), the others
        # are still made directly.
        ok = libc.unshare(flags & ~_CLONE_NEWUSER) == 0
        return ok and not network, ok
    _map_ids(uid, gid)
    return not network, True


def enter_user_namespace() -> bool:
    """A user namespace alone, entered early by a process that may start threads before its
    hardening (the spawn worker: unpickling numpy starts OpenBLAS's), since a process with a
    second thread can enter none. :func:`enter_namespaces` then makes the others in it."""
    uid, gid = os.geteuid(), os.getegid()
    if load_libc().unshare(_CLONE_NEWUSER) != 0:
        return False
    _map_ids(uid, gid)
    return True


def _map_ids(uid: int, gid: int) -> None:
    """Map ourselves in a new user namespace, so that files we create are owned by us, not by
    the overflow id."""
    with contextlib.suppress(OSError):
        with open("/proc/self/setgroups", "w") as setgroups:
            setgroups.write("deny")
        with open("/proc/self/uid_map", "w") as uid_map:
            uid_map.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as gid_map:
            gid_map.write(f"{gid} {gid} 1")


def in_user_namespace() -> bool:
    """Whether this process runs in a user namespace other than the host's (which maps every id):
    then it holds no capability over the host, even as root."""
    try:
        with open("/proc/self/uid_map") as uid_map:
            return uid_map.read().split() != ["0", "0", "4294967295"]
    except OSError:
        return False


def mount_scratch(scratch: str, size_mb: int) -> bool:
    """Make the scratch folder a tmpfs of at most ``size_mb`` in this process's own mount
    namespace: the per-file rlimit alone let one trial fill the disk with many files."""
    libc = load_libc()
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return False
    options = f"size={max(size_mb, 1)}m,mode=0700".encode()
    return bool(libc.mount(b"tmpfs", os.fsencode(scratch), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) == 0)


def overlay_working_folder(scratch: str) -> str | None:
    """Let the trial write into its working folder without touching it: an overlay whose upper
    layer lives in the scratch tmpfs, mounted over the folder in this mount namespace only.
    ``plt.savefig("fig/x.png")`` or ``df.to_csv("out.csv")`` then work, and the real folder
    stays as it was. Returns the folder, or None when it could not be done."""
    folder = os.getcwd()
    if folder == "/" or any(char in folder for char in ",:\\"):
        return None  # the overlay option syntax cannot name such a folder
    upper, work = os.path.join(scratch, ".cwd-upper"), os.path.join(scratch, ".cwd-work")
    os.mkdir(upper, 0o700)
    os.mkdir(work, 0o700)
    options = f"lowerdir={folder},upperdir={upper},workdir={work}".encode()
    if load_libc().mount(b"overlay", os.fsencode(folder), b"overlay", _MS_NOSUID | _MS_NODEV, options) != 0:
        return None
    os.chdir(folder)  # the old working directory is the folder under the overlay
    return folder


def remove_from_view(folder: str, hidden: list[str]) -> bool:
    """Credential files beneath the working folder (``.env``, or all of ``~/.ssh`` when the
    notebook runs in the home folder) are deleted from the trial's private view: the overlay
    records a whiteout, the real files stay. True when none is left in the view."""
    gone = True
    for path in hidden:
        if not path.startswith(folder.rstrip("/") + "/"):
            continue
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            gone = gone and not os.path.lexists(path)
    return gone

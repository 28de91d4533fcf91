"""Layer 4, namespaces: a user and mount namespace and (unless the network is allowed) an empty
network namespace; the scratch folder becomes a size-limited tmpfs, the working folder a private
overlay with credential files deleted from its view. May import :mod:`.native`."""

from __future__ import annotations

import contextlib
import os
import shutil

from .native import load_libc

__all__ = ["enter_namespaces", "mount_scratch", "overlay_working_folder", "remove_from_view"]


_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000


def enter_namespaces(*, network: bool) -> tuple[bool, bool]:
    """A new user namespace (even for root: that drops every capability the process had over
    the host: no reboot, no raising limits) with a new mount namespace and, unless the
    network is allowed, a new empty network namespace. Returns (network cut, mounts private)."""
    libc = load_libc()
    uid, gid = os.geteuid(), os.getegid()
    flags = _CLONE_NEWUSER | _CLONE_NEWNS | (0 if network else _CLONE_NEWNET)
    if libc.unshare(flags) != 0:
        if uid != 0:
            return False, False
        # No user namespaces here: root can still take the others directly.
        ok = libc.unshare(flags & ~_CLONE_NEWUSER) == 0
        return ok and not network, ok
    # Map ourselves so that files we create are owned by us, not by the overflow id.
    with contextlib.suppress(OSError):
        with open("/proc/self/setgroups", "w") as setgroups:
            setgroups.write("deny")
        with open("/proc/self/uid_map", "w") as uid_map:
            uid_map.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as gid_map:
            gid_map.write(f"{gid} {gid} 1")
    return not network, True


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

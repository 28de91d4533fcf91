"""Hardening of a trial child: layered, each layer feature-detected, none trusted alone.

Called in the trial process (a fork of the snapshot, or the spawn worker) after its
streams are private and before the candidate runs. The layers, in the order applied:

1. **fd hygiene**: inherited sockets and pipes (the kernel's zmq sockets, database
   connections, ipykernel's output pipes) are replaced by ``/dev/null`` in this process
   only; inherited files open for writing are reopened read-only. Nothing is shut down, so
   the kernel's own handles are untouched; a candidate just cannot write through them.
2. **rlimits**: CPU seconds, address-space growth, file size, open files, processes.
3. **private mappings**: every shared mapping the trial inherited (``np.memmap``, ``mmap``,
   ``SharedMemory``, of any size and any protection) is replaced at the same address by a
   copy-on-write mapping of the same file, so no write can reach the original pages.
4. **netns** (and a user and mount namespace): a new, empty network namespace, not even
   loopback; the scratch folder becomes a size-limited tmpfs of the trial's own, and the
   working folder a private overlay whose writes land in that tmpfs.
5. **no secrets**: environment values the redactor calls secret are removed, and the
   process's initial environment block (``/proc/self/environ``) is wiped.
6. **seccomp**: a BPF filter: any other syscall ABI (``int 0x80``, x32) kills the trial; no
   new processes or ``exec`` (threads stay allowed); no unix sockets with a path or other
   non-IP sockets; no ``io_uring``; calls aimed at another process are refused.
7. **landlock**: writes only beneath the trial's scratch folder (and the working folder's
   view); credential files (home dotfiles, ``.env``, the kernel's connection file; deleted
   from the working folder's view) and other processes' ``/proc`` entries are unreadable;
   signals and abstract unix sockets scoped to the trial.
8. **audit hook**: Python-level refusals with clear messages (connect, subprocess, exec,
   writes/deletes/renames outside scratch, kill) — the portable last line.

Each layer is a module of this package (:mod:`.fds`, :mod:`.rlimits`, :mod:`.mappings`,
:mod:`.namespaces`, :mod:`.secrets`, :mod:`.seccomp`, :mod:`.landlock`, :mod:`.audit`; the
policy in :mod:`.policy`); :func:`harden` applies them in that order and :func:`prepare` finds
ahead, in the snapshot process, what every trial would otherwise look up again.

Linux-only layers report themselves unavailable elsewhere. Imports the standard library only
(no IPython, nothing else of nbrefine).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .audit import make_audit_hook
from .fds import scrub_inherited_fds
from .landlock import apply_landlock, open_rules, read_rules_hiding
from .mappings import SharedMapping, open_backing_file, privatize_shared_mappings, shared_mappings
from .namespaces import enter_namespaces, mount_scratch, overlay_working_folder, remove_from_view
from .policy import PolicyRefusal, TrialPolicy
from .rlimits import apply_rlimits
from .seccomp import install_seccomp
from .secrets import HOME_SECRETS, secret_paths, wipe_environment

__all__ = ["HOME_SECRETS", "PolicyRefusal", "Prepared", "TrialPolicy", "harden", "prepare", "secret_paths"]


@dataclass
class Prepared:
    """What every trial forked from one process needs and can be found once, ahead, in that
    process (the snapshot): the hidden paths, Landlock's read rules as open O_PATH fds, and the
    shared mappings with their backing files open. Saves ~10 ms of trial start."""

    hidden: list[str]
    read_rules: list[tuple[int, int]]
    mappings: list[SharedMapping]

    def fds(self) -> set[int]:
        """The fds a trial must keep through fd hygiene."""
        found = {fd for fd, _ in self.read_rules}
        return found | {m.backing_fd for m in self.mappings if m.backing_fd is not None}


def prepare(hidden_paths: Iterable[str] = ()) -> Prepared | None:
    """Called in the snapshot process (never in a trial). None where there is nothing to prepare."""
    if not sys.platform.startswith("linux"):
        return None
    hidden = secret_paths(hidden_paths)
    read_rules: list[tuple[int, int]] = []
    with contextlib.suppress(OSError):
        read_rules = open_rules(read_rules_hiding(hidden))
    mappings: list[SharedMapping] = []
    with contextlib.suppress(OSError, ValueError):
        mappings = shared_mappings()
        for mapping in mappings:
            mapping.backing_fd = open_backing_file(mapping)
    return Prepared(hidden, read_rules, mappings)


def harden(
    policy: TrialPolicy,
    scratch: str,
    *,
    timeout_s: float,
    keep_fds: Iterable[int] = (),
    hidden_paths: Iterable[str] = (),
    is_secret_env: Callable[[str, str], bool] | None = None,
    prepared: Prepared | None = None,
    contain_only: bool = False,
) -> list[str]:
    """Apply every layer that this system supports; return the names of those now active.

    ``hidden_paths`` are made unreadable besides :func:`secret_paths`; ``is_secret_env(name,
    value)`` says which environment variables to remove. ``contain_only``: for the user's own
    code (assert operands evaluated again): side effects are contained exactly as in a trial,
    but nothing is hidden from reading, which saves the ~10 ms of finding what to hide."""
    active: list[str] = []
    linux = sys.platform.startswith("linux")
    if contain_only:
        hidden, prepared = [], Prepared([], [], shared_mappings() if linux else [])
    elif prepared is not None:
        hidden = prepared.hidden
        keep_fds = {*keep_fds, *prepared.fds()}
    else:
        hidden = secret_paths(hidden_paths) if linux else []  # before the mount namespace hides scratch
    if linux and scrub_inherited_fds(keep_fds):
        active.append("fd-hygiene")
    with contextlib.suppress(OSError, ValueError):
        if apply_rlimits(policy, timeout_s):
            active.append("rlimits")
    if linux:  # before the user namespace: map_files needs the capabilities it drops
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if privatize_shared_mappings(prepared.mappings if prepared is not None else None):
                active.append("private-mappings")
    writable: list[str] = []
    if linux:
        with contextlib.suppress(OSError, AttributeError):
            network_cut, mounts = enter_namespaces(network=policy.allow_network)
            if network_cut:
                active.append("netns")
            if mounts and mount_scratch(scratch, policy.scratch_mb):
                active.append("scratch-quota")
                folder = None if policy.allow_writes or contain_only else overlay_working_folder(scratch)
                # Writable means readable too, so only when no credential file is left in the view.
                if folder is not None and remove_from_view(folder, hidden):
                    writable.append(folder)
                    active.append("cwd-overlay")
    with contextlib.suppress(OSError, ValueError):
        if not contain_only and wipe_environment(is_secret_env):
            active.append("no-secrets")
    if linux:
        with contextlib.suppress(OSError, AttributeError, KeyError):
            if install_seccomp(policy):
                active.append("seccomp")
    if linux:
        with contextlib.suppress(OSError, AttributeError):
            read_rules = prepared.read_rules if prepared is not None else None
            if apply_landlock(
                scratch,
                confine_writes=not policy.allow_writes,
                hidden=hidden,
                writable=writable,
                read_rules=read_rules,
            ):
                active.append("landlock")
    sys.addaudithook(make_audit_hook(policy, scratch, writable))
    active.append("audit-hook")
    return active

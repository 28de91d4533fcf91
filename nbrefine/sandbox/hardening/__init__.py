"""Hardening of a trial child: layered, each layer feature-detected, none trusted alone.

Called in the trial process (a fork of the snapshot, or the spawn worker) after its
streams are private and before the candidate runs. The layers, in the order applied:

1. **fd hygiene**: inherited sockets and pipes (the kernel's zmq sockets, database
   connections, ipykernel's output pipes) are replaced by ``/dev/null`` in this process
   only; inherited files and folders are reopened (a new open file description at the same
   offset, read-only), so the kernel's offsets, status flags and ``flock`` locks never move;
   descriptors on hidden paths (the IPython history database) become ``/dev/null``. Nothing is
   shut down, so the kernel's own handles are untouched; a candidate just cannot write through them.
2. **rlimits**: CPU seconds, address-space growth, file size, open files, processes.
3. **private mappings**: every shared mapping the trial inherited (``np.memmap``, ``mmap``,
   ``SharedMemory``, of any size and any protection) is replaced at the same address by a
   copy-on-write mapping of the same file, so no write can reach the original pages.
4. **netns** (and a user and mount namespace): a new, empty network namespace, not even
   loopback; the scratch folder becomes a size-limited tmpfs of the trial's own, and the
   working folder a private overlay whose writes land in that tmpfs. Prepared once in the
   snapshot process (:mod:`.shared_ns`), so trials start in them: an IPC namespace (``ipcns``),
   a PID namespace with its own ``/proc`` (``pidns``), a ``/dev`` of its own (``private-dev``),
   and a user namespace (``userns``, also reported for a trial's own), so that no trial holds a
   capability over the host even where it cannot make a user namespace (it started a thread).
5. **no secrets**: environment values the redactor calls secret are removed, and the
   process's initial environment block (``/proc/self/environ``) is wiped.
6. **seccomp**: a BPF filter: any other syscall ABI (``int 0x80``, x32) kills the trial; no
   new processes or ``exec`` (threads stay allowed); no unix sockets with a path or other
   non-IP sockets, no socketpair but a stream one; no ``io_uring``; no SysV IPC or POSIX message
   queues; no pidfds, inotify or fanotify; calls aimed at another process are refused.
7. **landlock**: writes only beneath the trial's scratch folder (and the working folder's
   view); credential files (home dotfiles, ``.env``, the kernel's connection file, the IPython
   history database; deleted from the working folder's view), other processes' ``/proc`` entries
   and device nodes but :data:`.trial_policy.DEVICES` are unreadable; no ioctl on a device outside
   ``/dev``; signals and abstract unix sockets scoped to the trial.
8. **audit hook**: Python-level refusals with clear messages (connect, subprocess, exec,
   writes/deletes/renames outside scratch, kill) — the portable last line.

Each layer is a module of this package (:mod:`.fds`, :mod:`.rlimits`, :mod:`.mappings`,
:mod:`.namespaces` and :mod:`.shared_ns`, :mod:`.secrets`, :mod:`.seccomp`, :mod:`.landlock`,
:mod:`.audit`; the policy in :mod:`.trial_policy`); :func:`harden` applies them in that order and
:func:`prepare` finds ahead, in the snapshot process, what every trial would otherwise look up
again, and enters the namespaces trials share.

Linux-only layers report themselves unavailable elsewhere. Imports the standard library only
(no IPython, nothing else of nbrefine).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .audit import make_audit_hook
from .fds import scrub_inherited_fds
from .landlock import apply_landlock, open_rules, read_rules_hiding
from .mappings import SharedMapping, open_backing_file, privatize_shared_mappings, shared_mappings
from .namespaces import (
    enter_namespaces,
    enter_user_namespace,
    in_user_namespace,
    mount_scratch,
    overlay_working_folder,
    remove_from_view,
)
from .rlimits import apply_rlimits, limit_cpu
from .seccomp import SeccompProgram, install_seccomp, prepare_seccomp
from .secrets import HOME_SECRETS, secret_paths, wipe_environment
from .shared_ns import SharedNamespaces, enter_shared_namespaces
from .trial_policy import PolicyRefusal, TrialPolicy

__all__ = [
    "HOME_SECRETS",
    "PolicyRefusal",
    "Prepared",
    "TrialPolicy",
    "enter_user_namespace",
    "harden",
    "limit_cpu_seconds",
    "prepare",
    "secret_paths",
]


@dataclass
class Prepared:
    """What every trial forked from one process needs and can be found once, ahead, in that
    process (the snapshot): the hidden paths, Landlock's read rules as open O_PATH fds, and the
    shared mappings with their backing files open (saves ~10 ms of trial start); and the
    namespaces that process entered for its trials; and which of its environment variables hold
    secrets (asking the redactor of each takes ~2 ms of a trial's start)."""

    hidden: list[str]
    read_rules: list[tuple[int, int]]
    mappings: list[SharedMapping]
    namespaces: SharedNamespaces | None = None
    seccomp: SeccompProgram | None = None  # the default policy's filter, for any trial's pid
    judged_env: dict[tuple[str, str], bool] = field(default_factory=dict)  # (name, value): secret

    def is_secret_env(self, ask: Callable[[str, str], bool]) -> Callable[[str, str], bool]:
        """``ask``, answered from what was judged here for a variable the trial still holds as it
        was (a trial inherits this process's environment), asked for any other."""
        judged = self.judged_env

        def is_secret(name: str, value: str) -> bool:
            known = judged.get((name, value))
            return ask(name, value) if known is None else known

        return is_secret

    def fds(self) -> set[int]:
        """The fds a trial must keep through fd hygiene."""
        found = {fd for fd, _ in self.read_rules}
        return found | {m.backing_fd for m in self.mappings if m.backing_fd is not None}


def prepare(
    hidden_paths: Iterable[str] = (), is_secret_env: Callable[[str, str], bool] | None = None
) -> Prepared | None:
    """Called in the snapshot process (never in a trial). None where there is nothing to prepare.
    ``is_secret_env``: what :func:`harden` will be given, to judge this environment with now.

    Order matters: what reads this process's own /proc entry (its open files for the hidden
    history database, its mappings) or needs its capabilities comes before the namespaces (the
    PID namespace's /proc has no entry for this process); the read rules come after the new /dev
    and /proc, whose entries they grant."""
    if not sys.platform.startswith("linux"):
        return None
    hidden = secret_paths(hidden_paths)
    mappings: list[SharedMapping] = []
    with contextlib.suppress(OSError, ValueError):
        mappings = shared_mappings()
        for mapping in mappings:
            mapping.backing_fd = open_backing_file(mapping)  # map_files: before the user namespace
    namespaces = None
    with contextlib.suppress(OSError, AttributeError):
        entered = enter_shared_namespaces()
        namespaces = entered.finish() if entered is not None else None
    read_rules: list[tuple[int, int]] = []
    with contextlib.suppress(OSError):
        read_rules = open_rules(read_rules_hiding(hidden))
    judged = (
        {(name, value): is_secret_env(name, value) for name, value in os.environ.items()}
        if is_secret_env
        else {}
    )
    return Prepared(hidden, read_rules, mappings, namespaces, prepare_seccomp(TrialPolicy()), judged)


def limit_cpu_seconds(policy: TrialPolicy, timeout_s: float, active: list[str]) -> list[str]:
    """The one rlimit :func:`harden` leaves out when given no timeout: the CPU seconds. ``active``
    as it is, or without "rlimits" when they could not be set (as :func:`harden` would report).

    A spare trial (the snapshot process keeps one, hardened ahead of its candidate) sets them when
    its candidate comes, for two reasons: they depend on the candidate's timeout, and they then
    count what a trial forked on demand counts (its hardening, not the wait). A lower limit needs
    no capability, and seccomp allows ``prlimit64`` on the process itself."""
    try:
        limit_cpu(policy, timeout_s)
    except (OSError, ValueError):
        return [layer for layer in active if layer != "rlimits"]
    return active


def harden(
    policy: TrialPolicy,
    scratch: str,
    *,
    timeout_s: float | None,
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
    but nothing is hidden from reading, which saves the ~10 ms of finding what to hide.
    ``timeout_s`` None: the CPU seconds wait for :func:`limit_cpu_seconds` (a spare trial's)."""
    active: list[str] = []
    linux = sys.platform.startswith("linux")
    if contain_only:
        hidden, prepared = [], Prepared([], [], shared_mappings() if linux else [])
    elif prepared is not None:
        hidden = prepared.hidden
        keep_fds = {*keep_fds, *prepared.fds()}
        is_secret_env = prepared.is_secret_env(is_secret_env) if is_secret_env is not None else None
    else:
        hidden = secret_paths(hidden_paths) if linux else []  # before the mount namespace hides scratch
    if linux and scrub_inherited_fds(keep_fds, hidden):
        active.append("fd-hygiene")
    with contextlib.suppress(OSError, ValueError):
        if apply_rlimits(policy, timeout_s):
            active.append("rlimits")
    if linux:  # before the user namespace: map_files needs the capabilities it drops
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if privatize_shared_mappings(prepared.mappings if prepared is not None else None):
                active.append("private-mappings")
    writable: list[str] = []
    shared = prepared.namespaces if prepared is not None else None
    if shared is not None:
        active += shared.layers()
    if linux:
        with contextlib.suppress(OSError, AttributeError):
            # Started outside the snapshot (spawn, a live fork): an IPC namespace of its own here.
            own_ipc = shared is None or not shared.ipc
            network_cut, mounts = enter_namespaces(network=policy.allow_network, ipc=own_ipc)
            if mounts and own_ipc:
                active.append("ipcns")
            if in_user_namespace():  # its own, or the snapshot's: no capability over the host
                active.append("userns")
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
            if install_seccomp(policy, prepared.seccomp if prepared is not None else None):
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

"""Layer 5, no secrets: which files a trial must not read (home credential files, ``.env`` files,
the kernel's connection file, the IPython history database) and the wiping of secret environment
values. Standard library only.

May import: the standard library (ctypes, glob, os, pwd)."""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import stat
from collections.abc import Callable, Iterable

__all__ = ["HOME_SECRETS", "history_databases", "secret_paths", "wipe_environment"]


# Where credentials live, relative to a home folder: unreadable in a trial.
HOME_SECRETS = (
    ".netrc", ".ssh", ".aws", ".azure", ".kube", ".docker/config.json", ".gnupg", ".pgpass", ".my.cnf",
    ".git-credentials", ".npmrc", ".pypirc", ".boto", ".s3cfg", ".config/gcloud", ".config/gh",
    ".local/share/jupyter/runtime", ".ipython/profile_default/security", ".anthropic", ".openai",
)  # fmt: skip


def secret_paths(extra: Iterable[str] = ()) -> list[str]:
    """Files a trial must not read: home credential files, ``.env`` files in the working folder
    and its parents, the IPython history databases (:func:`history_databases`), and ``extra``
    (the adapter adds the kernel's connection file)."""
    homes = {os.path.expanduser("~")}
    with contextlib.suppress(KeyError, ImportError):
        import pwd

        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
    paths = [os.path.join(home, rel) for home in homes if home and home != "/" for rel in HOME_SECRETS]
    folder = os.getcwd()
    while True:
        with contextlib.suppress(OSError):
            paths += [
                os.path.join(folder, name)
                for name in os.listdir(folder)
                if name == ".env" or name.startswith(".env.") or name.endswith(".env")
            ]
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    paths += list(extra)
    paths += history_databases(homes)
    return sorted({os.path.realpath(path) for path in paths if os.path.lexists(path)})


_SQLITE_HEADER = b"SQLite format 3\x00"
# IPython's schema (sqlite keeps each CREATE TABLE's text in page 1): all three tables, by name.
_HISTORY_TABLES = (b"CREATE TABLE sessions", b"CREATE TABLE history", b"CREATE TABLE output_history")
_SIDECARS = ("", "-journal", "-wal", "-shm")


def history_databases(homes: Iterable[str] = ()) -> list[str]:
    """The IPython history databases: every session's input, a token typed in an earlier kernel
    among them. Where IPython keeps them (``$IPYTHONDIR`` or ``~/.ipython``, every profile), and
    wherever ``HistoryManager.hist_file`` points: the database this process holds open is
    recognised by its schema. With their journal, WAL and shared-memory files."""
    folders = {os.environ.get("IPYTHONDIR", "")} | {os.path.join(home, ".ipython") for home in homes}
    found = [
        path
        for folder in folders
        if folder
        for path in glob.glob(os.path.join(folder, "profile_*", "history.sqlite"))
    ]
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError, ValueError):
                target = os.readlink(f"/proc/self/fd/{name}")
                if target.startswith("/") and target not in found and _is_history_database(int(name)):
                    found.append(target)
    return [path + suffix for path in found for suffix in _SIDECARS if os.path.lexists(path + suffix)]


def _is_history_database(fd: int) -> bool:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        return False
    header = os.pread(fd, 100, 0)
    if not header.startswith(_SQLITE_HEADER):
        return False
    page_size = int.from_bytes(header[16:18], "big")
    first_page = os.pread(fd, 65536 if page_size == 1 else max(page_size, 512), 0)
    return all(table in first_page for table in _HISTORY_TABLES)


def wipe_environment(is_secret: Callable[[str, str], bool] | None) -> bool:
    """Nothing to steal: secret environment values leave ``os.environ`` (and the C environment),
    and the initial environment block that ``/proc/self/environ`` shows is zeroed."""
    if is_secret is not None:
        for name, value in list(os.environ.items()):
            if is_secret(name, value):
                del os.environ[name]  # also unsetenv()
    try:
        with open("/proc/self/stat") as stat_file:
            fields = stat_file.read().rsplit(")", 1)[1].split()
        # fields[0] is field 3 (state) of proc(5); env_start and env_end are fields 50 and 51.
        env_start, env_end = int(fields[47]), int(fields[48])
    except (OSError, IndexError, ValueError):
        return False
    if 0 < env_start < env_end:
        ctypes.memset(env_start, 0, env_end - env_start)
    return True

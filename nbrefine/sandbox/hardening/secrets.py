"""Layer 5, no secrets: which files a trial must not read (home credential files, ``.env`` files,
the kernel's connection file) and the wiping of secret environment values. Standard library
only.

May import: the standard library (ctypes, os, pwd)."""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Callable, Iterable

__all__ = ["HOME_SECRETS", "secret_paths", "wipe_environment"]


# Where credentials live, relative to a home folder: unreadable in a trial.
HOME_SECRETS = (
    ".netrc", ".ssh", ".aws", ".azure", ".kube", ".docker/config.json", ".gnupg", ".pgpass", ".my.cnf",
    ".git-credentials", ".npmrc", ".pypirc", ".boto", ".s3cfg", ".config/gcloud", ".config/gh",
    ".local/share/jupyter/runtime", ".ipython/profile_default/security", ".anthropic", ".openai",
)  # fmt: skip


def secret_paths(extra: Iterable[str] = ()) -> list[str]:
    """Files a trial must not read: home credential files, ``.env`` files in the working folder
    and its parents, and ``extra`` (the adapter adds the kernel's connection file)."""
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
    return sorted({os.path.realpath(path) for path in paths if os.path.lexists(path)})


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

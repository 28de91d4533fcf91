"""The process of one spawn trial: ``python -m nbrefine.sandbox._spawn_worker`` (see :mod:`.spawn`).

Reads the trial from stdin (framed like :mod:`.wire` messages: a pickled dict of
metadata, then one frame per shipped value), loads the values into a fresh ``__main__``
namespace, tells the kernel it is ready (with the values it could not load), then runs the
trial exactly as a fork trial does: :func:`.execute.trial_child` makes the streams
private, hardens this process and writes the outcome to the result pipe. Always leaves with
``os._exit``. Small import footprint: no IPython, no cloudpickle unless a value needs it.

May import the standard library and the sibling modules of this package.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import linecache
import marshal
import os
import pickle
import sys
import traceback
import types
from dataclasses import replace
from typing import Any

from .execute import trial_child
from .hardening import enter_user_namespace
from .trial import TrialSpec
from .wire import HEADER, read_exact, reason, write_msg

__all__ = ["load_code", "main", "shared_globals"]

_NAMESPACE: dict[str, Any] = {}
_STDIN = 0  # the trial arrives here (the fd is replaced by /dev/null when the trial starts)


def shared_globals() -> dict[str, Any]:
    """The trial's namespace: shipped functions of the notebook get it as their globals."""
    return _NAMESPACE


def load_code(data: bytes) -> types.CodeType:
    """Code of a shipped function, with its file name (so notebook lines show in tracebacks)."""
    code = marshal.loads(data)
    assert isinstance(code, types.CodeType)
    return code


def _read_frame(fd: int) -> bytearray:
    (size,) = HEADER.unpack(read_exact(fd, HEADER.size))
    return read_exact(fd, size)


def _with_cpu_allowance(spec: TrialSpec) -> TrialSpec:
    """Add the CPU time this process has used so far (start-up, unpickling) to the trial's limit.

    The limit is on the process's total CPU time; a fork starts from zero, this process does not."""
    try:
        import resource
    except ImportError:
        return spec
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = spec.policy.cpu_s if spec.policy.cpu_s is not None else spec.timeout_s + 1
    return replace(spec, policy=replace(spec.policy, cpu_s=cpu + usage.ru_utime + usage.ru_stime))


def _load(stdin: int, meta: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A fresh ``__main__`` namespace with the shipped values; and those that failed to load."""
    global _NAMESPACE
    main_module = types.ModuleType("__main__")
    namespace: dict[str, Any] = main_module.__dict__
    namespace["__builtins__"] = builtins
    sys.modules["__main__"] = main_module
    _NAMESPACE = namespace
    failed: dict[str, str] = {}
    for name, kind, _size in meta["values"]:
        data = _read_frame(stdin)
        try:
            value = importlib.import_module(data.decode()) if kind == "module" else pickle.loads(data)
        except Exception as err:
            failed[name] = f"{reason(err)} (when loading it in the spawn sandbox)"
            continue
        namespace[name] = value
    return namespace, failed


def main() -> None:
    result_fd = -1
    try:
        meta = pickle.loads(_read_frame(_STDIN))
        result_fd = int(meta["result_fd"])
        if meta["options"].harden and sys.platform.startswith("linux"):
            enter_user_namespace()  # before the values load: they may start threads
        sys.path.extend(entry for entry in meta["sys_path"] if entry not in sys.path)
        linecache.cache.update(meta["sources"])
        namespace, failed = _load(_STDIN, meta)
        spec = _with_cpu_allowance(meta["spec"])
        write_msg(result_fd, ("ready", failed))
    except BaseException as err:
        with contextlib.suppress(Exception):  # stderr is a file the kernel reads on a failed start
            traceback.print_exc()
            sys.stderr.flush()
        if result_fd >= 0:
            with contextlib.suppress(Exception):
                write_msg(result_fd, ("error", reason(err)))
        os._exit(70)
    code = 0
    try:
        trial_child(
            result_fd, spec, namespace, meta["redactor"], meta["options"], meta["scratch"], meta["token"]
        )
    except BaseException:
        code = 70
    finally:
        os._exit(code)


if __name__ == "__main__":
    # Run the copy of this module that pickles refer to (nbrefine.sandbox._spawn_worker), not __main__.
    from nbrefine.sandbox._spawn_worker import main as _main

    _main()

"""Trial runs in a fresh interpreter: the fallback where forking the kernel is unsafe.

A fork of the kernel is the best sandbox (every object, copy-on-write, in milliseconds),
but it is not always possible: there may be no ``fork()`` (Windows), fork may be unsafe
(macOS system frameworks, a CUDA context in the kernel), or the user turned it off. Then
:class:`SpawnRunner` starts ``python -m nbrefine.sandbox._spawn_worker`` for every candidate and
sends it cloudpickled copies of the names the candidate (and its checks) use. The worker
hardens itself with :func:`nbrefine.sandbox.hardening.harden` and runs the candidate with the same
code as a fork trial, so the limits and the typed :class:`~nbrefine.sandbox.TrialOutcome`
are the same.

Differences from a fork, all reported rather than hidden:

* Only the names the candidate uses are copied, each one separately: values that several
  names share are copies in the worker (``b is a`` no longer holds).
* Some values cannot be copied at all (generators, locks, database connections, sockets,
  open files): :attr:`SpawnRunner.unshippable` lists them with the reason, and every
  outcome of a trial that needed one says so in ``detail``.
* Functions and classes defined in the notebook are copied by value; their global names
  resolve in the worker's namespace, as they would in the kernel.

POSIX only (pipes, process groups, ``select``). May import the standard library (cloudpickle
when something is shipped), the sibling modules of this package and the grounding modules
(redaction, the scope analysis, IPython's own names); never IPython itself.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import io
import linecache
import marshal
import os
import pickle
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..grounding import Failure, Redactor, free_names, is_ipython_name, is_ipython_value
from . import _spawn_worker
from .trial import SandboxOptions, TrialOutcome, TrialSpec, TrialStatus
from .wire import EXIT_GRACE_S, HEADER, REASON_CHARS, exit_detail, kill_group, read_msg, reason

__all__ = ["SpawnRunner", "fork_unsafe_reason", "names_to_ship"]

#: Time allowed for the interpreter to start and load the shipped values, on top of the
#: trial's own timeout; :meth:`SpawnRunner.run` adds a multiple of the time pickling took.
STARTUP_ALLOWANCE_S = 20.0
#: Values larger than this (estimated before pickling, measured after) are not shipped.
MAX_VALUE_BYTES = 1 << 30
_LINECACHE_LIMIT = 4_000_000  # characters of in-memory sources (notebook cells) sent along


# --------------------------------------------------------------------------- is fork fine here?


def fork_unsafe_reason() -> str | None:
    """``None`` when fork trials are fine here, else a one-line reason to spawn instead.

    Only modules that are already imported are looked at; nothing is imported here."""
    if not hasattr(os, "fork"):
        return "this platform has no fork()"
    if not sys.platform.startswith("linux"):
        return f"fork trials are only used on Linux (this is {sys.platform})"
    if threading.current_thread() is not threading.main_thread():
        return "not on the main thread"
    return _gpu_context_reason()


def _gpu_context_reason() -> str | None:
    """A reason when a GPU (CUDA) context exists in this process: a fork cannot use it."""
    modules = sys.modules
    torch = modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):
            if torch.cuda.is_initialized():
                return "a CUDA context is initialised (torch)"
    if "cupy" in modules:
        return "cupy is imported (a CUDA context cannot be used in a fork)"
    eager = modules.get("tensorflow.python.eager.context")
    if eager is not None:
        with contextlib.suppress(Exception):
            ctx = eager.context_safe()
            if ctx is not None and getattr(ctx, "_initialized", False):
                devices = getattr(ctx, "_context_devices", None) or ()
                if any(":GPU:" in str(device) for device in devices):
                    return "a CUDA context is initialised (tensorflow)"
    bridge = modules.get("jax._src.xla_bridge")
    if bridge is not None:
        with contextlib.suppress(Exception):
            backends = getattr(bridge, "_backends", None) or {}
            if any(name in ("cuda", "gpu", "rocm") for name in backends):
                return "a GPU backend is initialised (jax)"
    return None


# --------------------------------------------------------------------------- which names to send


def names_to_ship(code: str, namespace: Mapping[str, Any]) -> list[str]:
    """The names ``code`` reads that exist in ``namespace``, in order of first use.

    Looks inside functions, lambdas, classes and comprehensions of the code (names that are
    local there are left out, and so are names that an earlier top-level assignment, import
    or definition of the code has bound); builtins and IPython's own names (``_``, ``_i3``, ``In``,
    ``Out``, ``get_ipython``, ``exit``, ``quit``) are never shipped. Names read through strings
    are found where that is cheap to see: ``df.query("a > @limit")``, ``eval("x + 1")``,
    ``globals()["x"]``. Code that does not parse gives ``[]`` (the trial reports the error).
    The analysis is :func:`nbrefine.grounding.scope.free_names` (``strict``: a superset, for
    copying state)."""
    used = free_names(code, strict=True, strings=True)
    return [name for name in used if name in namespace and _shippable(name, namespace[name], namespace)]


def _shippable(name: str, value: object, namespace: Mapping[str, Any]) -> bool:
    if name == "open":  # IPython's own wraps the builtin (the worker has that); a user's is theirs
        return value is not builtins.open and not is_ipython_value(name, value, namespace)
    if is_ipython_name(name):
        return False
    return getattr(builtins, name, _MISSING) is not value


_MISSING = object()


# --------------------------------------------------------------------------- pickling


class _WorkerGlobals(dict[str, Any]):
    """Stands for the kernel namespace as the globals of shipped functions.

    cloudpickle gives functions defined by value a fresh globals dict when they are
    unpickled; this one unpickles as the worker's namespace instead, so that a shipped
    function sees the same globals as the candidate (as it would in the kernel)."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _spawn_worker.shared_globals, ()


def _estimated_size(value: object) -> int | None:
    """The data size of arrays and frames, cheaply, before pickling them."""
    with contextlib.suppress(Exception):
        nbytes = getattr(value, "nbytes", None)
        if isinstance(nbytes, int):
            return nbytes
        usage = getattr(value, "memory_usage", None)
        if callable(usage) and type(value).__module__.startswith("pandas"):
            total = usage(index=True, deep=False)
            return int(total if isinstance(total, int) else total.sum())
    return None


def _human(size: int) -> str:
    return f"{size / (1 << 30):.1f} GiB" if size >= 1 << 30 else f"{size / (1 << 20):.1f} MiB"


@dataclass
class _Shipment:
    values: list[tuple[str, str, bytes]] = field(default_factory=list)  # (name, "module"|"pickle", data)
    failed: dict[str, str] = field(default_factory=dict)
    sources: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # linecache entries


@functools.cache
def _pickler_class() -> Any:
    """cloudpickle's pickler, keeping the file names of code and noting them.

    cloudpickle (3.1+) renames the file of shipped code to ``"<dynamic-code>"``: tracebacks in
    the trial would lose the lines (and the values) of functions defined in notebook cells.
    Code is sent marshalled instead, and :attr:`filenames` collects its files so that the
    sources of cells can be sent along."""
    import cloudpickle  # only the spawn sandbox needs it

    class Pickler(cloudpickle.Pickler):  # type: ignore[misc]
        def __init__(self, file: io.BytesIO, namespace: Mapping[str, Any]) -> None:
            super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
            self.filenames: set[str] = set()
            if isinstance(namespace, dict):
                # Functions of the notebook get the worker's namespace as their globals.
                self.globals_ref[id(namespace)] = _WorkerGlobals()

        def reducer_override(self, obj: object) -> Any:
            if isinstance(obj, types.CodeType):
                self.filenames.add(obj.co_filename)
                return _spawn_worker.load_code, (marshal.dumps(obj),)
            return super().reducer_override(obj)

    return Pickler


def _ship(names: Iterable[str], namespace: Mapping[str, Any]) -> _Shipment:
    shipment = _Shipment()
    filenames: set[str] = set()
    for name in names:
        value = namespace[name]
        if isinstance(value, types.ModuleType) and sys.modules.get(value.__name__) is value:
            shipment.values.append((name, "module", value.__name__.encode()))
            continue
        estimate = _estimated_size(value)
        # Pickles carry some overhead: refuse near the limit before paying for a full pickle.
        if estimate is not None and estimate > MAX_VALUE_BYTES * 0.95:
            shipment.failed[name] = f"too large to copy ({_human(estimate)}; limit {_human(MAX_VALUE_BYTES)})"
            continue
        buffer = io.BytesIO()
        pickler = _pickler_class()(buffer, namespace)
        try:
            pickler.dump(value)
        except Exception as err:
            shipment.failed[name] = reason(err)
            continue
        data = buffer.getvalue()
        if len(data) > MAX_VALUE_BYTES:
            shipment.failed[name] = (
                f"too large to copy ({_human(len(data))}; limit {_human(MAX_VALUE_BYTES)})"
            )
            continue
        shipment.values.append((name, "pickle", data))
        filenames.update(pickler.filenames)
    shipment.sources = _in_memory_sources(filenames)
    return shipment


def _in_memory_sources(filenames: Iterable[str]) -> dict[str, tuple[Any, ...]]:
    """linecache entries of code that exists only in memory (notebook cells), for tracebacks."""
    sources: dict[str, tuple[Any, ...]] = {}
    budget = _LINECACHE_LIMIT
    for filename in filenames:
        entry: Any = linecache.cache.get(filename) or getattr(linecache, "_ipython_cache", {}).get(filename)
        if not isinstance(entry, tuple) or len(entry) != 4 or entry[1] is not None:
            continue  # a real file (the worker reads it itself) or a lazy entry
        size = int(entry[0])
        if size > budget:
            continue
        budget -= size
        sources[filename] = tuple(entry)
    return sources


# --------------------------------------------------------------------------- the runner


@dataclass
class _WorkerResult:
    status: TrialStatus  # how the trial ended when there is no outcome: ``detail`` says more
    detail: str = ""
    outcome: TrialOutcome | None = None  # the trial's own report
    failed: dict[str, str] = field(default_factory=dict)  # values the worker could not load
    ready_at: float | None = None  # when the worker had loaded everything and began the trial


class _Stop(Exception):
    """Ends a trial early with a status and a detail."""

    def __init__(self, status: TrialStatus, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class SpawnRunner:
    """Runs each trial in a fresh interpreter that gets copies of the names it uses.

    ``namespace`` is read at every :meth:`run` (the live state, as with
    :class:`~nbrefine.sandbox.LiveForkRunner`); nothing in it is changed. ``python`` is the
    interpreter to start (it must be able to import ``nbrefine`` and the libraries of the
    shipped values). :attr:`unshippable` maps names that could not be copied to the reason,
    over all runs; :attr:`last_pid` is the process (and process group) of the latest trial."""

    def __init__(
        self,
        namespace: Mapping[str, Any],
        redactor: Redactor,
        options: SandboxOptions | None = None,
        python: str = sys.executable,
    ) -> None:
        self.namespace = namespace
        self.redactor = redactor
        # child_setup is a callable of the kernel: it means nothing in another interpreter.
        self.options = replace(options or SandboxOptions(), child_setup=SandboxOptions().child_setup)
        self.python = python
        self.unshippable: dict[str, str] = {}
        self.last_pid: int | None = None

    def run(self, spec: TrialSpec) -> TrialOutcome:
        """Run one candidate in a new interpreter; never raises for what the code does.

        A ``KeyboardInterrupt`` while waiting kills the trial's process group and propagates."""
        requested = time.monotonic()
        wanted = list(
            dict.fromkeys(
                n for code in (spec.code, *spec.checks) for n in names_to_ship(code, self.namespace)
            )
        )
        shipment = _ship(wanted, self.namespace)
        ship_s = time.monotonic() - requested
        scratch = tempfile.mkdtemp(prefix="nbrefine-trial-")
        try:
            result = self._run_worker(spec, shipment, scratch, STARTUP_ALLOWANCE_S + 3 * ship_s)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        not_shipped = {**shipment.failed, **result.failed}
        for name in wanted:
            if name in not_shipped:
                self.unshippable[name] = not_shipped[name]
            else:
                self.unshippable.pop(name, None)
        if result.outcome is not None:
            latency = max(result.outcome.started_at - requested, 0.0)
            outcome = replace(result.outcome, start_latency_s=latency)
        else:  # no outcome from the trial: the start latency is up to the worker being ready
            latency = max(result.ready_at - requested, 0.0) if result.ready_at is not None else 0.0
            outcome = TrialOutcome(
                result.status, detail=result.detail, checks_total=len(spec.checks), start_latency_s=latency
            )
        return _note_unshipped(outcome, not_shipped)

    def _run_worker(
        self, spec: TrialSpec, shipment: _Shipment, scratch: str, startup_s: float
    ) -> _WorkerResult:
        """Start the worker, send it the trial, wait for the outcome."""
        # What the interpreter says before the trial takes over its streams (an import error,
        # warnings while unpickling) goes to a file in scratch: it explains a failed start.
        errors_path = os.path.join(scratch, ".spawn-stderr")
        read_fd, write_fd = os.pipe()
        try:
            with open(errors_path, "wb") as errors:
                process = subprocess.Popen(
                    [self.python, "-m", "nbrefine.sandbox._spawn_worker"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=errors,
                    cwd=os.getcwd(),
                    close_fds=True,
                    pass_fds=(write_fd,),
                    start_new_session=True,
                )
        except OSError as err:
            os.close(read_fd)
            return _WorkerResult("sandbox_error", f"could not start {self.python}: {reason(err)}")
        finally:
            os.close(write_fd)
        self.last_pid = process.pid
        result = _WorkerResult("sandbox_error")
        try:
            startup_deadline = time.monotonic() + startup_s
            token = os.urandom(16)
            self._send(process, spec, shipment, scratch, write_fd, startup_deadline, token)
            shipment.values.clear()  # the pickles are the worker's now
            result.failed = self._await_ready(process, read_fd, startup_deadline, startup_s, errors_path)
            result.ready_at = time.monotonic()
            try:
                report = read_msg(read_fd, result.ready_at + spec.timeout_s)
                if not (isinstance(report, tuple) and len(report) == 2 and report[0] == token):
                    raise _Stop("refused", "the trial's report did not come from the trial's own reporter")
                outcome = report[1]
            except TimeoutError:
                raise _Stop("timeout", f"still running after {spec.timeout_s:g} s; stopped") from None
            except (EOFError, OSError, pickle.UnpicklingError, ValueError) as err:
                raise _Stop(*exit_detail(_wait(process))) from err
            if not isinstance(outcome, TrialOutcome):
                raise _Stop("sandbox_error", "the spawn sandbox sent an unexpected message")
            result.outcome = outcome
        except _Stop as stop:
            result.status, result.detail = stop.status, stop.detail
        finally:
            # The answer is in (or never will be): whatever the worker left running goes now.
            try:
                kill_group(process.pid)
                _wait(process)
            finally:
                os.close(read_fd)
        return result

    def _send(
        self,
        process: subprocess.Popen[bytes],
        spec: TrialSpec,
        shipment: _Shipment,
        scratch: str,
        result_fd: int,
        deadline: float,
        token: bytes,
    ) -> None:
        meta = {
            "token": token,
            "spec": spec,
            "redactor": self.redactor,
            "options": self.options,
            "scratch": scratch,
            "result_fd": result_fd,
            "sys_path": list(sys.path),
            "sources": shipment.sources,
            "values": [(name, kind, len(data)) for name, kind, data in shipment.values],
        }
        try:
            head = pickle.dumps(meta, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            import cloudpickle

            try:
                head = cloudpickle.dumps(meta, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as err:
                raise _Stop("sandbox_error", f"the trial could not be sent: {reason(err)}") from err
        assert process.stdin is not None
        fd = process.stdin.fileno()
        os.set_blocking(fd, False)
        try:
            for piece in (HEADER.pack(len(head)), head):
                _write_all(fd, piece, deadline)
            for _, _, data in shipment.values:
                _write_all(fd, HEADER.pack(len(data)), deadline)
                _write_all(fd, data, deadline)
        except BrokenPipeError:
            pass  # the worker died early: reading its answer says why
        except TimeoutError:
            raise _Stop(
                "sandbox_error", "the spawn sandbox did not take the shipped values in time"
            ) from None
        finally:
            with contextlib.suppress(OSError):
                process.stdin.close()

    @staticmethod
    def _await_ready(
        process: subprocess.Popen[bytes], read_fd: int, deadline: float, startup_s: float, errors_path: str
    ) -> dict[str, str]:
        """Wait for the worker to have loaded everything; return the values it could not load."""
        try:
            message = read_msg(read_fd, deadline)
        except TimeoutError:
            raise _Stop(
                "sandbox_error", f"the spawn sandbox did not start within {startup_s:.0f} s"
            ) from None
        except (EOFError, OSError, pickle.UnpicklingError, ValueError) as err:
            _, detail = exit_detail(_wait(process))
            said = _last_error_line(errors_path)
            detail += f" ({said})" if said else ""
            raise _Stop("sandbox_error", f"the spawn sandbox failed to start: {detail}") from err
        if isinstance(message, tuple) and message and message[0] == "error":
            raise _Stop("sandbox_error", f"the spawn sandbox failed to start: {message[1]}")
        if not (isinstance(message, tuple) and len(message) == 2 and message[0] == "ready"):
            raise _Stop("sandbox_error", "the spawn sandbox sent an unexpected message")
        failed = message[1]
        assert isinstance(failed, dict)
        return {str(name): str(reason) for name, reason in failed.items()}


def _last_error_line(path: str) -> str:
    """The last non-blank line the worker wrote to stderr (e.g. the exception that stopped it)."""
    try:
        with open(path, "rb") as errors:
            errors.seek(max(os.fstat(errors.fileno()).st_size - 4096, 0))
            tail = errors.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:REASON_CHARS] if lines else ""


def _write_all(fd: int, data: bytes, deadline: float) -> None:
    view = memoryview(data)
    while view:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        _, ready, _ = select.select([], [fd], [], remaining)
        if not ready:
            continue
        try:
            written = os.write(fd, view[: 1 << 20])
        except BlockingIOError:
            continue
        view = view[written:]


def _wait(process: subprocess.Popen[bytes]) -> int:
    """The worker's return code; killed (with its group) if it takes longer than a grace period."""
    try:
        return process.wait(EXIT_GRACE_S)
    except subprocess.TimeoutExpired:
        kill_group(process.pid)
        return process.wait()
    except KeyboardInterrupt:
        kill_group(process.pid)
        raise


def _note_unshipped(outcome: TrialOutcome, not_shipped: Mapping[str, str]) -> TrialOutcome:
    """Say in the outcome which names the trial did not get (and on a NameError for one, there)."""
    if not not_shipped:
        return outcome
    listed = "; ".join(f"{name} ({reason})" for name, reason in not_shipped.items())
    note = f"not shipped to the spawn sandbox: {listed}"
    if not outcome.detail:
        detail = note
    elif outcome.status == "sandbox_error":
        detail = f"{outcome.detail}; {note}"
    else:
        detail = f"{note}; {outcome.detail}"
    failure = outcome.failure
    if failure is not None and failure.error_type == "NameError":
        missing = [name for name in not_shipped if f"'{name}'" in failure.message]
        if missing:
            failure = _with_note(
                failure,
                f"Note: {', '.join(missing)} exists in the kernel but could not be copied to the spawn "
                f"sandbox ({'; '.join(not_shipped[name] for name in missing)}).",
            )
    return replace(outcome, detail=detail, failure=failure)


def _with_note(failure: Failure, note: str) -> Failure:
    return replace(failure, notes=(*failure.notes, note))

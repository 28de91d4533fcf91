"""Trial runs of candidate code in forks of the kernel, never in the kernel itself.

When ``%%refine`` starts, :meth:`Snapshot.take` forks a *snapshot process* that holds the
kernel's state as it was before the cell ran and then waits. Each candidate is run in a
fresh fork of that process (copy-on-write: cheap even with GiBs of data), so every
candidate sees exactly what the user's cell saw and nothing it does reaches the kernel.

Rules from ``ARCHITECTURE.md`` that this module keeps: fork only from the main thread;
flush the streams before forking; in a child, replace ``sys.stdout``/``sys.stderr`` and
file descriptors 1 and 2 at once (the inherited ones belong to ipykernel and would
re-send output to the notebook); never touch zmq, comms or ``OutStream`` there; send
results back pickled over a pipe; leave with ``os._exit``; kill whole process groups.

Each trial is then hardened by :func:`nbrefine.limits.harden` (rlimits, no network, no
processes, writes only in a per-trial scratch folder removed afterwards, an audit hook), as
its :class:`~nbrefine.limits.TrialPolicy` says.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import faulthandler
import functools
import gc
import importlib.abc
import inspect
import io
import linecache
import os
import pickle
import select
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from .._errors import SandboxError
from ..capture import Failure, FrameInfo, capture_failure
from ..context import Redactor, ValueSummary, summarize_value
from .hardening import PolicyRefusal, Prepared, TrialPolicy, harden, prepare

__all__ = [
    "SandboxOptions",
    "Snapshot",
    "TrialOutcome",
    "TrialSpec",
    "call_in_fork",
    "fork_supported",
    "run_checks",
]

R = TypeVar("R")

_HEADER = struct.Struct("!Q")
_OUTPUT_CAP = 1_000_000  # characters of stdout/stderr kept per trial
_FLOOD_LIMIT = 50_000_000  # characters of output after which the trial is stopped
_EXIT_GRACE_S = 2.0


@dataclass(frozen=True)
class TrialSpec:
    """One candidate to try: plain Python (IPython syntax already transformed)."""

    code: str
    checks: tuple[str, ...] = ()
    timeout_s: float = 10.0
    label: str = "candidate"
    policy: TrialPolicy = field(default_factory=TrialPolicy)


@dataclass(frozen=True)
class TrialOutcome:
    """What happened when a candidate ran. ``status`` is one of ``passed``, ``failed`` (an
    exception or a failed assert/check), ``timeout`` (wall clock), ``cpu_limit``,
    ``memory_limit``, ``output_limit``, ``refused`` (the sandbox policy refused an action:
    ``detail`` says which), ``crashed`` (killed by a signal, e.g. a segfault), ``exited``
    (``sys.exit``/``os._exit``), ``interrupted`` (KeyboardInterrupt), ``sandbox_error``
    (the sandbox itself broke)."""

    status: str
    failure: Failure | None = None
    check_failures: tuple[Failure, ...] = ()
    checks_total: int = 0
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    start_latency_s: float = 0.0
    statements_done: int = 0
    statements_total: int = 0
    detail: str = ""
    started_at: float = 0.0
    layers: tuple[str, ...] = ()  # sandbox hardening layers that were active
    #: why a ``passed`` cannot be trusted as verified ("" when nothing was seen), e.g. a check
    #: whose operands are of a class the candidate itself defined
    suspect: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "passed"

    @property
    def first_failure(self) -> Failure | None:
        return self.failure or (self.check_failures[0] if self.check_failures else None)

    @property
    def error_type(self) -> str | None:
        if self.ok:
            return None
        failure = self.first_failure
        return failure.error_type if failure else f"Trial{self.status.title().replace('_', '')}"

    @property
    def error_message(self) -> str:
        failure = self.first_failure
        return failure.message if failure else self.detail

    def progress(self) -> tuple[int, int, int]:
        """Orders outcomes: a finished body beats a partial one, fewer failed checks beat more."""
        finished = self.failure is None and self.status in ("passed", "failed")
        return (int(finished), self.statements_done, -len(self.check_failures))

    def one_line(self) -> str:
        if self.ok:
            return f"passed in {self.duration_s:.2f} s"
        failure = self.first_failure
        if failure is not None:
            extra = (
                f" (+{len(self.check_failures) - 1} more failed checks)"
                if len(self.check_failures) > 1
                else ""
            )
            return failure.one_line() + extra
        return f"{self.status}: {self.detail}"

    def render(self) -> str:
        """Feedback text for the next prompt."""
        parts = [f"Outcome: {self.status}" + (f" ({self.detail})" if self.detail else "")]
        if self.failure is not None:
            parts.append(self.failure.render())
        if self.check_failures:
            parts.append(f"{len(self.check_failures)} of {self.checks_total} checks failed:")
            parts.extend(failure.render() for failure in self.check_failures)
        for name, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            if text.strip():
                parts.append(f"{name}:\n{text}")
        return "\n".join(parts)


def _no_setup() -> None:
    return None


@dataclass(frozen=True)
class SandboxOptions:
    """How trial children are prepared.

    ``child_setup`` runs once in the snapshot process right after the fork (adapters use it
    to cut the child off from the kernel's display machinery). ``harden`` applies the
    layers of :mod:`nbrefine.limits` in every trial (off only for measurements)."""

    child_setup: Callable[[], None] = _no_setup
    harden: bool = True
    #: files trials must not read besides the usual credential files (the adapter adds the
    #: kernel's connection file)
    hidden_paths: tuple[str, ...] = ()
    output_cap: int = _OUTPUT_CAP
    flood_limit: int = _FLOOD_LIMIT


def fork_supported() -> str | None:
    """``None`` when forking is possible here, else the reason it is not."""
    if not hasattr(os, "fork"):
        return "this platform has no fork()"
    if threading.current_thread() is not threading.main_thread():
        return "not on the main thread"
    return None


# --------------------------------------------------------------------------- pipes


def _write_msg(fd: int, obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            raise TimeoutError("no answer before the deadline")
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


# What a message from a trial (or from the snapshot process) may contain. Model-written code
# runs in the trial and can write anything into its result pipe: unpickling it unrestricted
# would run that code here, outside every sandbox layer. Hence an allowlist, and a size cap.
# Named from the classes themselves, so that moving a class moves its entry too.
_ALLOWED_GLOBALS = frozenset(
    (klass.__module__, klass.__qualname__) for klass in (TrialOutcome, Failure, FrameInfo, ValueSummary)
)
# No callables from builtins: the containers and numbers an outcome holds have opcodes of their
# own, while ``builtins.bytes(2**31)`` in a 40-byte pickle allocated 2 GiB where it was read.
_MAX_UNTRUSTED_MESSAGE = 32 << 20


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"refused to unpickle {module}.{name} from a sandboxed process")
        return super().find_class(module, name)


def _read_msg(fd: int, deadline: float | None, *, trusted: bool = False) -> Any:
    """One framed message. Only messages from the kernel itself are ``trusted``."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    if not trusted and size > _MAX_UNTRUSTED_MESSAGE:
        raise pickle.UnpicklingError(f"a sandboxed process sent a {size}-byte message; refused")
    data = _read_exact(fd, size, deadline)
    if trusted:
        return pickle.loads(data)
    return _RestrictedUnpickler(io.BytesIO(data)).load()


# --------------------------------------------------------------------------- child side


def _enter_child(own_group: bool = True) -> None:
    """First thing in every forked child: own process group, private streams."""
    if own_group:
        with contextlib.suppress(OSError):  # already a group (or session) leader
            os.setpgid(0, 0)
    faulthandler.disable()  # a crashing candidate must not dump onto the kernel's stderr
    sys.stdout = io.StringIO()
    sys.stderr = io.StringIO()
    sys.stdin = io.StringIO("")
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _fork(child: Callable[[int], None]) -> tuple[int, int]:
    """Fork; the child runs ``child(write_fd)`` and always leaves with ``os._exit``."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or odd stream must not stop the fork
            stream.flush()
    _reap_finished()
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns that forking a threaded process may deadlock; the child
        # follows the rules above (no locks of other threads are touched).
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, reported through the pipe
        code = 0
        try:
            os.close(read_fd)
            child(write_fd)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def _exit_detail(status: int) -> tuple[str, str]:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        if number == signal.SIGXCPU:
            return "cpu_limit", "the trial's CPU time limit was reached"
        return "crashed", f"killed by signal {name}"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return "exited", f"the process exited with code {code} before reporting"


def _reap(pid: int, grace_s: float) -> int | None:
    """Wait up to ``grace_s`` for ``pid``; then kill its group and reap it."""
    deadline = time.monotonic() + grace_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= deadline:
            _kill_group(pid)
            return os.waitpid(pid, 0)[1]
        time.sleep(0.002)


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def _collect(pid: int, read_fd: int, timeout_s: float, token: bytes | None = None) -> tuple[str, Any]:
    """Read one result from a child; ("ok", value) or (status, detail).

    With a ``token``, the child's message must be ``(token, value)``: a report forged by the
    candidate (written blindly into every pipe it holds) is refused."""
    try:
        value = _read_msg(read_fd, time.monotonic() + timeout_s)
        if token is not None:
            if not (isinstance(value, tuple) and len(value) == 2 and value[0] == token):
                raise pickle.UnpicklingError("it did not come from the trial's own reporter")
            value = value[1]
    except TimeoutError:
        _kill_group(pid)
        _reap(pid, _EXIT_GRACE_S)
        return "timeout", f"still running after {timeout_s:g} s; stopped"
    except pickle.UnpicklingError as err:
        _kill_group(pid)
        _reap(pid, _EXIT_GRACE_S)
        return "refused", f"the trial's report was not an outcome ({err})"
    except (EOFError, struct.error):
        status, detail = _exit_detail(_reap(pid, _EXIT_GRACE_S) or 0)
        return status, detail
    except KeyboardInterrupt:
        _kill_group(pid)
        _reap(pid, _EXIT_GRACE_S)
        raise
    finally:
        os.close(read_fd)
    # The answer is in; whatever the child left running (threads, processes) goes now. Reaping
    # is deferred: waiting for a large forked process to exit costs milliseconds.
    _kill_group(pid)
    _reap_later(pid)
    return "ok", value


_UNREAPED: list[int] = []


def _reap_later(pid: int) -> None:
    _UNREAPED.append(pid)
    _reap_finished()


def _reap_finished() -> None:
    """Collect children that have exited since (no zombies are left behind)."""
    for pid in list(_UNREAPED):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _UNREAPED.remove(pid)


def call_in_fork(fn: Callable[[], R], timeout_s: float = 2.0, *, hardened: bool = True) -> R:
    """Run ``fn`` in a throwaway fork of this process and return its (picklable) result.

    Used to evaluate expressions that may have side effects (an assert operand that calls
    ``charge(100)``) without touching live state: the fork is hardened like a trial, so those
    side effects stay inside it too."""
    reason = fork_supported()
    if reason:
        raise SandboxError(f"cannot fork: {reason}")

    def child(write_fd: int, scratch: str) -> None:
        _enter_child()
        if hardened:
            harden(TrialPolicy(), scratch, timeout_s=timeout_s, keep_fds={write_fd}, contain_only=True)
        try:
            result: tuple[bool, object] = (True, fn())
        except Exception as err:
            result = (False, f"{type(err).__name__}: {err}")
        _write_msg(write_fd, result)

    collected = _run_in_scratch(lambda scratch: _fork(functools.partial(child, scratch=scratch)), timeout_s)
    if collected.status != "ok":
        raise SandboxError(f"evaluation {collected.status}: {collected.value}")
    ok, payload = collected.value
    if not ok:
        raise SandboxError(str(payload))
    return payload  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- running code


class _CappedText(io.TextIOBase):
    """A text stream that keeps the first ``cap`` characters and counts the rest.

    Past ``flood_limit`` characters it calls ``on_flood`` (which ends the trial)."""

    def __init__(self, cap: int, flood_limit: int = _FLOOD_LIMIT, on_flood: Callable[[], None] | None = None):
        self.cap = cap
        self.flood_limit = flood_limit
        self.on_flood = on_flood
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = self.cap - self.size
        if room > 0:
            self.parts.append(text[:room])
            self.size += min(len(text), room)
        self.dropped += max(len(text) - max(room, 0), 0)
        if self.dropped > self.flood_limit and self.on_flood is not None:
            self.on_flood()
        return len(text)

    def getvalue(self) -> str:
        text = "".join(self.parts)
        return text + (f"\n[... {self.dropped} more characters of output dropped]" if self.dropped else "")


def _register_source(filename: str, code: str) -> None:
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)


def _exec_statement(node: ast.stmt, filename: str, namespace: dict[str, Any], is_last: bool) -> object:
    """Run one top-level statement; return the value of a last bare expression."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    if is_last and isinstance(node, ast.Expr):
        code = compile(ast.Expression(node.value), filename, "eval", flags=flags, dont_inherit=True)
        value = eval(code, namespace)
    else:
        module = ast.Module(body=[node], type_ignores=[])
        code = compile(module, filename, "exec", flags=flags, dont_inherit=True)
        value = eval(code, namespace)
        if not inspect.iscoroutine(value):
            return None
    if inspect.iscoroutine(value):
        value = asyncio.new_event_loop().run_until_complete(value)
    return value


def _direct(fn: Callable[[], R]) -> R:
    return fn()


def run_checks(
    checks: Sequence[str],
    namespace: dict[str, Any],
    redactor: Redactor,
    *,
    run_unsafe: Callable[[Callable[[], list[str]]], list[str]] | None = None,
) -> list[Failure]:
    """Run every extra check (statements such as ``assert f(2) == 4``); return all failures."""
    failures = []
    for number, check in enumerate(checks, start=1):
        label = f"check {number}"
        filename = f"<{label}>"
        _register_source(filename, check)
        try:
            exec(compile(check, filename, "exec", dont_inherit=True), namespace)
        except Exception as err:
            failures.append(
                capture_failure(
                    err,
                    code=check,
                    code_filename=filename,
                    user_globals=namespace,
                    label=label,
                    redactor=redactor,
                    run_unsafe=run_unsafe,
                )
            )
    return failures


def _classify(err: BaseException) -> tuple[str, str]:
    """A typed status for an exception, looking through wrapping (``raise X from refusal``)."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, PolicyRefusal):
            return "refused", current.action
        if isinstance(current, MemoryError):
            return "memory_limit", "the trial's memory limit was reached"
        current = current.__cause__ or current.__context__
    return "failed", ""


def execute_trial(spec: TrialSpec, namespace: dict[str, Any], redactor: Redactor) -> TrialOutcome:
    """Run ``spec`` in *this* process. Only ever called inside a trial child."""
    started = time.monotonic()
    filename = f"<{spec.label}>"
    _register_source(filename, spec.code)
    done, total = 0, 0
    saved_builtins = dict(vars(builtins))

    def restore_builtins() -> None:
        # The candidate may have rebound or deleted builtins that capturing and reporting use.
        vars(builtins).update(saved_builtins)

    def finish(status: str, **fields: Any) -> TrialOutcome:
        restore_builtins()
        return TrialOutcome(
            status,
            checks_total=len(spec.checks),
            started_at=started,
            statements_done=done,
            statements_total=total,
            duration_s=time.monotonic() - started,
            **fields,
        )

    try:
        tree = ast.parse(spec.code, filename)
    except SyntaxError as err:
        return finish(
            "failed", failure=capture_failure(err, code=spec.code, label=spec.label, redactor=redactor)
        )
    total = len(tree.body)
    try:
        for index, node in enumerate(tree.body):
            value = _exec_statement(node, filename, namespace, index == total - 1)
            done += 1
            if value is not None:
                print(f"Out: {summarize_value(value, max_chars=500)}")
    except Exception as err:
        restore_builtins()
        failure = capture_failure(
            err,
            code=spec.code,
            code_filename=filename,
            user_globals=namespace,
            label=spec.label,
            redactor=redactor,
            run_unsafe=_direct,
        )
        status, detail = _classify(err)
        return finish(status, failure=replace(failure, statements_done=done), detail=detail)
    except SystemExit as err:
        return finish("exited", detail=f"sys.exit({err.code!r}) was called")
    except KeyboardInterrupt:
        return finish("interrupted", detail="KeyboardInterrupt")
    restore_builtins()
    check_failures = tuple(run_checks(spec.checks, namespace, redactor, run_unsafe=_direct))
    if check_failures:
        return finish("failed", check_failures=check_failures)
    return finish("passed", suspect=_suspect_asserts(tree, spec.checks, namespace, filename))


def _defined_in(value: object, filename: str) -> str | None:
    """The name of ``value``'s class when the candidate (code compiled from ``filename``)
    defined it or any method of it (``float`` subclass whose ``__eq__`` is always True)."""
    for klass in type(value).__mro__:
        for attribute in list(vars(klass).values()):
            function = getattr(attribute, "__func__", attribute)
            code = getattr(function, "__code__", None)
            if code is not None and getattr(code, "co_filename", None) == filename:
                return type(value).__name__
    return None


def _assert_operands(statements: Sequence[ast.stmt]) -> list[tuple[ast.Assert, list[ast.expr]]]:
    """Asserts outside functions and classes, with the expressions they compare."""
    found: list[tuple[ast.Assert, list[ast.expr]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            return
        if isinstance(node, ast.Assert):
            test = node.test
            operands = [test]
            if isinstance(test, ast.Compare):
                operands += [test.left, *test.comparators]
            elif isinstance(test, ast.UnaryOp):
                operands.append(test.operand)
            found.append((node, operands))
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in statements:
        visit(statement)
    return found


def _suspect_asserts(
    tree: ast.Module, checks: Sequence[str], namespace: dict[str, Any], filename: str
) -> str:
    """Why a pass cannot count as verified: a check whose operands are of a class the candidate
    defined (they can compare equal to anything). Operands are evaluated again in this trial
    process (after the pass), so their side effects stay here."""
    statements: list[ast.stmt] = list(tree.body)
    for check in checks:
        with contextlib.suppress(SyntaxError):
            statements += ast.parse(check).body
    for node, operands in _assert_operands(statements):
        for operand in operands:
            if isinstance(operand, ast.Constant):
                continue
            try:
                expression = compile(ast.Expression(operand), filename, "eval", dont_inherit=True)
                value = eval(expression, namespace)
            except Exception:
                continue
            name = _defined_in(value, filename)
            if name is not None:
                shown = ast.unparse(node)[:120]
                return f"`{shown}` compares an object of class {name}, which the candidate defined"
    return ""


def _no_input(*_args: object, **_kwargs: object) -> str:
    raise RuntimeError("input() is not available in a trial run")


class _NoNbrefineInTrials(importlib.abc.MetaPathFinder):
    """Candidate code may not import nbrefine (to patch the checks it is judged by)."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname == "nbrefine" or fullname.startswith("nbrefine."):
            raise ImportError(f"{fullname} cannot be imported in a trial run")
        return None


def _hide_nbrefine() -> dict[str, Any]:
    """Take nbrefine's modules out of ``sys.modules`` (this process keeps its own references)
    and refuse new imports of them; returns what was taken, for :func:`_unhide_nbrefine`."""
    hidden = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "nbrefine"}
    for name in hidden:
        del sys.modules[name]
    sys.meta_path.insert(0, _NoNbrefineInTrials())
    return hidden


def _unhide_nbrefine(hidden: dict[str, Any]) -> None:
    # Pickling the report looks its classes up by module name.
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _NoNbrefineInTrials)]
    sys.modules.update(hidden)


def _trial_child(
    write_fd: int,
    spec: TrialSpec,
    namespace: dict[str, Any],
    redactor: Redactor,
    options: SandboxOptions,
    scratch: str,
    token: bytes,
    prepared: Prepared | None = None,
) -> None:
    _enter_child()
    capture = open(os.path.join(scratch, ".trial-output"), "w+b")  # noqa: SIM115 - lives until os._exit
    os.dup2(capture.fileno(), 1)
    os.dup2(capture.fileno(), 2)

    saved_builtins = dict(vars(builtins))
    hidden: dict[str, Any] = {}

    def report(outcome: TrialOutcome) -> None:
        vars(builtins).update(saved_builtins)  # see execute_trial: the candidate may have changed them
        _unhide_nbrefine(hidden)
        capture.seek(0)
        raw = capture.read(options.output_cap).decode("utf-8", "replace")
        full = replace(outcome, stdout=stdout.getvalue() + raw, stderr=stderr.getvalue())
        _write_msg(write_fd, (token, full))

    def flood() -> None:
        detail = f"more than {options.flood_limit:,} characters of output; stopped"
        report(TrialOutcome("output_limit", detail=detail, checks_total=len(spec.checks), layers=layers))
        os._exit(0)

    layers: tuple[str, ...] = ()
    stdout = _CappedText(options.output_cap, options.flood_limit, flood)
    stderr = _CappedText(options.output_cap, options.flood_limit, flood)
    sys.stdout, sys.stderr = stdout, stderr
    builtins.input = _no_input
    sys.dont_write_bytecode = True
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = scratch
    if options.harden:
        layers = tuple(
            harden(
                spec.policy,
                scratch,
                timeout_s=spec.timeout_s,
                keep_fds={write_fd, capture.fileno()},
                hidden_paths=options.hidden_paths,
                is_secret_env=redactor.is_secret_env,
                prepared=prepared,
            )
        )
        hidden = _hide_nbrefine()
    report(replace(execute_trial(spec, namespace, redactor), layers=layers))


@dataclass(frozen=True)
class _Collected:
    status: str  # "ok" or a TrialOutcome status
    value: Any  # the child's report, or a detail
    started_at: float
    duration_s: float

    def outcome(self, checks_total: int) -> TrialOutcome:
        """The report as an outcome; when there was none, what happened (and how long it took)."""
        if self.status == "ok":
            assert isinstance(self.value, TrialOutcome)
            return self.value
        return TrialOutcome(
            self.status,
            detail=str(self.value),
            checks_total=checks_total,
            started_at=self.started_at,
            duration_s=self.duration_s,
        )


def _run_in_scratch(
    fork_trial: Callable[[str], tuple[int, int]], timeout_s: float, token: bytes | None = None
) -> _Collected:
    """Create the trial's scratch folder, fork the trial into it, collect, remove the folder."""
    scratch = tempfile.mkdtemp(prefix="nbrefine-trial-")
    started = time.monotonic()
    try:
        pid, read_fd = fork_trial(scratch)
        status, value = _collect(pid, read_fd, timeout_s, token)
        return _Collected(status, value, started, time.monotonic() - started)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# --------------------------------------------------------------------------- the snapshot process


def _snapshot_main(
    cmd_fd: int, res_fd: int, namespace: dict[str, Any], redactor: Redactor, options: SandboxOptions
) -> None:
    """The snapshot process: wait for trial specs, run each in a fresh fork of itself."""
    _enter_child()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # interrupts are the kernel's to handle
    options.child_setup()
    # What every trial's hardening needs and can be found once (~10 ms of each trial's start).
    prepared = prepare(options.hidden_paths) if options.harden else None
    gc.freeze()  # keep the collector from touching (and so copying) every inherited page
    while True:
        try:
            spec = _read_msg(cmd_fd, None, trusted=True)  # from the kernel
        except (EOFError, OSError):
            return

        token = os.urandom(16)

        def fork_trial(scratch: str, spec: TrialSpec = spec, token: bytes = token) -> tuple[int, int]:
            trial = functools.partial(
                _trial_child,
                spec=spec,
                namespace=namespace,
                redactor=redactor,
                options=options,
                scratch=scratch,
                token=token,
                prepared=prepared,
            )
            pid, read_fd = _fork(trial)
            _write_msg(res_fd, ("started", pid))
            return pid, read_fd

        collected = _run_in_scratch(fork_trial, spec.timeout_s, token)
        _write_msg(res_fd, ("done", collected.outcome(len(spec.checks))))


class Snapshot:
    """A frozen copy of the kernel's state, in a process of its own, to run trials from."""

    def __init__(self, pid: int, cmd_fd: int, res_fd: int, taken_s: float) -> None:
        self.pid = pid
        self._cmd_fd = cmd_fd
        self._res_fd = res_fd
        self.taken_s = taken_s
        self._trial_pid: int | None = None

    @classmethod
    def take(
        cls, namespace: dict[str, Any], redactor: Redactor, options: SandboxOptions | None = None
    ) -> Snapshot:
        """Fork the snapshot process now. Raises :class:`SandboxError` where fork is not possible."""
        reason = fork_supported()
        if reason:
            raise SandboxError(f"cannot take a snapshot: {reason}")
        options = options or SandboxOptions()
        started = time.monotonic()
        cmd_r, cmd_w = os.pipe()

        def child(res_w: int) -> None:
            os.close(cmd_w)
            _snapshot_main(cmd_r, res_w, namespace, redactor, options)

        pid, res_r = _fork(child)
        os.close(cmd_r)
        return cls(pid, cmd_w, res_r, time.monotonic() - started)

    @property
    def alive(self) -> bool:
        return self._cmd_fd >= 0

    def run(self, spec: TrialSpec) -> TrialOutcome:
        """Run one candidate in a fresh fork of the snapshot; never raises for what the code does.

        A ``KeyboardInterrupt`` while waiting kills the trial and propagates."""
        if not self.alive:
            return TrialOutcome("sandbox_error", detail="the snapshot process is closed")
        requested = time.monotonic()
        try:
            _write_msg(self._cmd_fd, spec)
            _, self._trial_pid = _read_msg(self._res_fd, requested + 30)
            _, outcome = _read_msg(self._res_fd, time.monotonic() + spec.timeout_s + 30)
        except KeyboardInterrupt:
            self.close()
            raise
        except (EOFError, TimeoutError, OSError, pickle.UnpicklingError) as err:
            self.close()
            return TrialOutcome("sandbox_error", detail=f"the snapshot process stopped answering ({err})")
        finally:
            self._trial_pid = None
        assert isinstance(outcome, TrialOutcome)
        latency = max(outcome.started_at - requested, 0.0) if outcome.started_at else 0.0
        return replace(outcome, start_latency_s=latency)

    def cancel(self) -> None:
        """Kill the trial under way, if any (safe to call from another thread)."""
        pid = self._trial_pid
        if pid:
            _kill_group(pid)

    def close(self) -> None:
        """Stop the snapshot process and any trial it runs."""
        if not self.alive:
            return
        if self._trial_pid:
            _kill_group(self._trial_pid)
        for fd in (self._cmd_fd, self._res_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._cmd_fd = self._res_fd = -1
        _reap(self.pid, 0.5)
        _reap_finished()

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


class LiveForkRunner:
    """Runs each trial in a fork of the *current* process state (no snapshot was taken).

    Used when a snapshot could not be taken before the cell ran: trials then see the state
    the failed run left behind, which the prompt says."""

    def __init__(self, namespace: dict[str, Any], redactor: Redactor, options: SandboxOptions | None = None):
        self.namespace = namespace
        self.redactor = redactor
        self.options = options or SandboxOptions()

    def run(self, spec: TrialSpec) -> TrialOutcome:
        reason = fork_supported()
        if reason:
            return TrialOutcome("sandbox_error", detail=f"cannot fork: {reason}")
        requested = time.monotonic()
        token = os.urandom(16)

        def fork_trial(scratch: str) -> tuple[int, int]:
            def child(write_fd: int) -> None:
                _enter_child()
                self.options.child_setup()
                _trial_child(write_fd, spec, self.namespace, self.redactor, self.options, scratch, token)

            return _fork(child)

        outcome = _run_in_scratch(fork_trial, spec.timeout_s, token).outcome(len(spec.checks))
        return replace(outcome, start_latency_s=max(outcome.started_at - requested, 0.0))

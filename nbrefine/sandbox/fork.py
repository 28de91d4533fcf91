"""Trial runs of candidate code in forks of the kernel, never in the kernel itself.

When ``%%refine`` starts, :meth:`Snapshot.take` forks a *snapshot process* that holds the
kernel's state as it was before the cell ran and then waits. Each candidate is run in a
fresh fork of that process (copy-on-write: cheap even with GiBs of data), so every
candidate sees exactly what the user's cell saw and nothing it does reaches the kernel.
The snapshot keeps one such fork ready, already hardened for the default policy (a *spare*,
:class:`_Spare`): a candidate of that policy starts in it without waiting for the fork and the
hardening, and the next spare is made while it runs; a candidate of any other policy gets a fork
made for it.

Rules this module keeps: fork only from the main thread;
flush the streams before forking; in a child, replace ``sys.stdout``/``sys.stderr`` and
file descriptors 1 and 2 at once (the inherited ones belong to ipykernel and would
re-send output to the notebook); never touch zmq, comms or ``OutStream`` there; send
results back pickled over a pipe; leave with ``os._exit``; kill whole process groups.

Each trial is then hardened by :func:`nbrefine.sandbox.hardening.harden` (rlimits, no network,
no processes, writes only in a per-trial scratch folder removed afterwards, an audit hook), as
its :class:`~nbrefine.sandbox.hardening.TrialPolicy` says. What runs inside the trial is
:mod:`.execute`.

May import the standard library, :mod:`nbrefine._errors`, the sibling modules of this package
and the grounding modules (redaction).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import os
import pickle
import queue
import select
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from .._errors import SandboxError
from ..grounding import Redactor
from .execute import enter_child, spare_child, spare_order, trial_child
from .hardening import Prepared, TrialPolicy, harden, prepare
from .trial import SandboxOptions, TrialOutcome, TrialSpec, TrialStatus
from .wire import EXIT_GRACE_S, exit_detail, kill_group, read_msg, write_msg

__all__ = ["LiveForkRunner", "Snapshot", "call_in_fork", "fork_supported"]

R = TypeVar("R")
_Status = Literal["ok"] | TrialStatus  # "ok": the child reported


def fork_supported() -> str | None:
    """``None`` when forking is possible here, else the reason it is not."""
    if not hasattr(os, "fork"):
        return "this platform has no fork()"
    if threading.current_thread() is not threading.main_thread():
        return "not on the main thread"
    return None


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


def _reap(pid: int, grace_s: float) -> int:
    """Wait up to ``grace_s`` for ``pid``; then kill its group and reap it."""
    deadline = time.monotonic() + grace_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= deadline:
            kill_group(pid)
            return os.waitpid(pid, 0)[1]
        time.sleep(0.002)


def _collect(
    pid: int, read_fd: int, timeout_s: float, token: bytes | None = None, since: float | None = None
) -> tuple[_Status, Any]:
    """Read one result from a child; ("ok", value) or (status, detail). The wall clock counts from
    ``since`` (default: now).

    With a ``token``, the child's message must be ``(token, value)``: a report forged by the
    candidate (written blindly into every pipe it holds) is refused."""
    try:
        value = read_msg(read_fd, (time.monotonic() if since is None else since) + timeout_s)
        if token is not None:
            if not (isinstance(value, tuple) and len(value) == 2 and value[0] == token):
                raise pickle.UnpicklingError("it did not come from the trial's own reporter")
            value = value[1]
    except TimeoutError:
        kill_group(pid)
        _reap(pid, EXIT_GRACE_S)
        return "timeout", f"still running after {timeout_s:g} s; stopped"
    except pickle.UnpicklingError as err:
        kill_group(pid)
        _reap(pid, EXIT_GRACE_S)
        return "refused", f"the trial's report was not an outcome ({err})"
    except (EOFError, struct.error):
        status, detail = exit_detail(os.waitstatus_to_exitcode(_reap(pid, EXIT_GRACE_S)))
        return status, detail
    except KeyboardInterrupt:
        kill_group(pid)
        _reap(pid, EXIT_GRACE_S)
        raise
    finally:
        os.close(read_fd)
    # The answer is in; whatever the child left running (threads, processes) goes now. Reaping
    # is deferred: waiting for a large forked process to exit costs milliseconds.
    kill_group(pid)
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
        enter_child()
        if hardened:
            harden(TrialPolicy(), scratch, timeout_s=timeout_s, keep_fds={write_fd}, contain_only=True)
        try:
            result: tuple[bool, object] = (True, fn())
        except Exception as err:
            result = (False, f"{type(err).__name__}: {err}")
        write_msg(write_fd, result)

    collected = _run_in_scratch(lambda scratch: _fork(functools.partial(child, scratch=scratch)), timeout_s)
    if collected.status != "ok":
        raise SandboxError(f"evaluation {collected.status}: {collected.value}")
    ok, payload = collected.value
    if not ok:
        raise SandboxError(str(payload))
    return payload  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _Collected:
    status: _Status
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
    scratch = _new_scratch()
    started = time.monotonic()
    try:
        pid, read_fd = fork_trial(scratch)
        return _collected(pid, read_fd, timeout_s, token, started)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _new_scratch() -> str:
    return tempfile.mkdtemp(prefix="nbrefine-trial-")


def _collected(pid: int, read_fd: int, timeout_s: float, token: bytes | None, started: float) -> _Collected:
    status, value = _collect(pid, read_fd, timeout_s, token, since=started)
    return _Collected(status, value, started, time.monotonic() - started)


# --------------------------------------------------------------------------- the snapshot process


def _snapshot_main(
    cmd_fd: int, res_fd: int, namespace: dict[str, Any], redactor: Redactor, options: SandboxOptions
) -> None:
    """The snapshot process: wait for trial specs, run each in a spare or a fresh fork of itself."""
    enter_child()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # interrupts are the kernel's to handle
    options.child_setup()
    gc.freeze()  # keep the collector from touching (and so copying) every inherited page
    trials: _Trials | None = None  # made now (ready_ahead), once armed or at the first trial

    def armed() -> _Trials:
        nonlocal trials
        if trials is None:
            # What every trial's hardening needs and can be found once (~10 ms of each trial's
            # start), and the first spare.
            prepared = prepare(options.hidden_paths, redactor.is_secret_env) if options.harden else None
            trials = _Trials(res_fd, namespace, redactor, options, prepared)
        return trials

    if options.ready_ahead:
        armed()
    try:
        while True:
            if trials is not None and trials.wants_spare and not _readable(cmd_fd, _IDLE_BEFORE_SPARE_S):
                trials.refill()  # once the kernel has nothing more to ask right after a trial
            try:
                spec = read_msg(cmd_fd, None, trusted=True)  # from the kernel
            except (EOFError, OSError):
                return
            if spec == ("arm",):
                armed()
                continue
            if isinstance(spec, tuple) and spec[:1] == ("values",):
                held = trials.held() if trials is not None else ()
                write_msg(res_fd, ("values", spec[3], _pickled_values(namespace, spec[1], spec[2], held)))
                continue
            if isinstance(spec, tuple) and spec[:1] == ("inspect",):
                write_msg(res_fd, ("inspect", spec[3], _inspected(namespace, spec[1], spec[2])))
                continue
            outcome = armed().run(spec).outcome(len(spec.checks))
            write_msg(res_fd, ("done", outcome))
            if not outcome.ok:
                armed().refill()  # its next attempt comes as soon as the model answers
    finally:
        if trials is not None:
            trials.close()


#: How long a candidate may take before the next spare is forked while it runs (a quicker one is
#: answered first), and how long the kernel may stay silent after a trial before it is forked.
_QUICK_CANDIDATE_S = 0.010
_IDLE_BEFORE_SPARE_S = 0.002


def _readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` has something to read (or is closed) within ``timeout_s``."""
    try:
        return bool(select.select([fd], [], [], timeout_s)[0])
    except (OSError, ValueError):
        return True  # let the read itself report it


@dataclass
class _Spare:
    """A trial child forked and hardened ahead (:func:`.execute.spare_child`), waiting on
    ``spec_fd`` for its candidate: the fork and the hardening (~10 ms at 1 GiB) are then off the
    critical path. Each spare serves one trial: its own scratch folder, report pipe and token."""

    pid: int
    read_fd: int  # its report
    spec_fd: int  # where its spec goes
    scratch: str
    token: bytes
    policy: TrialPolicy  # the one it was hardened for: it takes specs of that policy only
    reaped: bool = False

    def hand(self, spec: TrialSpec) -> bool:
        """Give it ``spec`` (of its policy); False when it is gone (its hardening broke)."""
        if not self.alive():
            return False
        try:
            write_msg(self.spec_fd, spare_order(spec))  # (a pipe's 64 KiB: no wait for the spare)
        except OSError:
            return False
        os.close(self.spec_fd)  # one spec per spare; its end of the pipe is its alone now
        self.spec_fd = -1
        return True

    def alive(self) -> bool:
        """False once it has ended (a hardening that broke); it is reaped then."""
        if not self.reaped:
            with contextlib.suppress(ChildProcessError):
                self.reaped = os.waitpid(self.pid, os.WNOHANG)[0] != 0
        return not self.reaped

    def discard(self, wait: bool = True) -> None:
        """Kill it (its group: nothing of it is left), reap it (now, or ``wait`` False: when the
        next child is forked), remove its scratch folder."""
        if self.alive():  # a pid already reaped may name another process by now
            kill_group(self.pid)
            if wait:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(self.pid, 0)
            else:
                _reap_later(self.pid)
        for fd in (self.read_fd, self.spec_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.scratch, ignore_errors=True)


class _Trials:
    """How the snapshot process runs trials: in its spare when the spec's policy is the one the
    spare was hardened for, else in a fresh fork as before. The first spare is hardened for the
    default policy, each next one for the policy of the trial just asked for: the trials of one
    cell share theirs (``%%refine``'s options, or the configured memory limit)."""

    def __init__(
        self,
        res_fd: int,
        namespace: dict[str, Any],
        redactor: Redactor,
        options: SandboxOptions,
        prepared: Prepared | None,
    ) -> None:
        self.res_fd, self.namespace, self.redactor = res_fd, namespace, redactor
        self.options, self.prepared = options, prepared
        # Only where trials are hardened (a trial without it has nothing to prepare), and where
        # prepare() ran: a spare is hardened with what every trial forked on demand gets.
        self.spares = options.harden and prepared is not None
        self._next_policy: TrialPolicy | None = None  # a spare to make (refill) for this policy
        self._left: list[str] = []  # scratch folders of finished trials, removed by refill
        self.spare = self._fork_spare(TrialPolicy())

    @property
    def wants_spare(self) -> bool:
        """A trial used the spare up and none is made yet (see :meth:`refill`)."""
        return self._next_policy is not None

    def refill(self) -> None:
        """Make the next spare, hardened for the policy of the last trial, and remove what the
        last trial left. Done while a candidate that takes a while runs; for a quick one, once its
        outcome is sent: at once after a failure (the next attempt follows), after a pass once the
        kernel asks nothing more for a moment (the fingerprints and values Accept reads come
        first). So a quick candidate's outcome never waits for the fork of the next spare."""
        for scratch in self._left:
            shutil.rmtree(scratch, ignore_errors=True)
        self._left.clear()
        policy, self._next_policy = self._next_policy, None
        if policy is not None and self.spare is None:
            self.spare = self._fork_spare(policy)

    def run(self, spec: TrialSpec) -> _Collected:
        self._next_policy = None  # (a refill still pending: this trial takes the spare's place)
        spare, self.spare = self.spare, None
        if spare is not None and spec.policy == spare.policy:
            if spare.hand(spec):
                return self._run_in_spare(spare, spec)
            spare.discard()  # gone, or out of step
            spare = None
        try:
            return self._run_forked(spec)
        finally:
            if spare is not None:  # hardened for another policy: once this trial is done
                spare.discard(wait=False)
            self._next_policy = spec.policy

    def _run_in_spare(self, spare: _Spare, spec: TrialSpec) -> _Collected:
        # The wall clock counts from the hand-over, not from when the spare was made.
        handed = time.monotonic()
        write_msg(self.res_fd, ("started", spare.pid, "spare"))
        self._next_policy = spec.policy
        # A candidate still running after a moment: the next spare is made now, while it runs, so
        # that it is ready for the next one (it forks the snapshot, which no trial changes: it is
        # what a fork on demand would be). A quick one is answered first (see refill).
        if not _readable(spare.read_fd, _QUICK_CANDIDATE_S):
            self.refill()
        try:
            return _collected(spare.pid, spare.read_fd, spec.timeout_s, spare.token, handed)
        finally:
            self._left.append(spare.scratch)  # (its own, once it is done: removed by refill)

    def _run_forked(self, spec: TrialSpec) -> _Collected:
        token = os.urandom(16)

        def fork_trial(scratch: str) -> tuple[int, int]:
            trial = functools.partial(
                trial_child,
                spec=spec,
                namespace=self.namespace,
                redactor=self.redactor,
                options=self.options,
                scratch=scratch,
                token=token,
                prepared=self.prepared,
            )
            pid, read_fd = _fork(trial)
            write_msg(self.res_fd, ("started", pid, "fork"))
            return pid, read_fd

        return _run_in_scratch(fork_trial, spec.timeout_s, token)

    def _fork_spare(self, policy: TrialPolicy) -> _Spare | None:
        """A new spare for ``policy``, or None (none wanted, or none could be made now: too many
        processes or open files, a full disk; trials are then forked on demand)."""
        if not self.spares:
            return None
        namespace, redactor, options, prepared = self.namespace, self.redactor, self.options, self.prepared
        token = os.urandom(16)  # a token of its own, for its one trial
        scratch, fds = "", []
        try:
            scratch = _new_scratch()
            spec_r, spec_w = os.pipe()
            fds += [spec_r, spec_w]

            def child(write_fd: int) -> None:
                os.close(spec_w)  # so that it sees the pipe close when the snapshot goes
                spare_child(write_fd, spec_r, policy, namespace, redactor, options, scratch, token, prepared)

            pid, read_fd = _fork(child)
        except OSError:
            for fd in fds:
                os.close(fd)
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
            return None
        os.close(spec_r)
        return _Spare(pid, read_fd, spec_w, scratch, token, policy)

    def held(self) -> tuple[int, ...]:
        """The snapshot's ends of its spare's pipes (for a fork that is no trial to close)."""
        return (self.spare.spec_fd, self.spare.read_fd) if self.spare is not None else ()

    def close(self) -> None:
        """The snapshot ends: its spare goes with it (never left behind, waiting)."""
        self._next_policy = None
        self.refill()  # (the scratch folders only)
        if self.spare is not None:
            self.spare.discard()
            self.spare = None


def _inspected(namespace: dict[str, Any], fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """``fn(namespace, *args)`` in the snapshot process itself (see :meth:`Snapshot.inspect`); None
    when it raised."""
    try:
        return fn(namespace, *args)
    except Exception:
        return None


class _Full(Exception):
    pass


class _CappedBuffer(io.BytesIO):
    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap

    def write(self, data: Any) -> int:
        if self.tell() + memoryview(data).nbytes > self.cap:
            raise _Full  # stop pickling now, not after a 1 GiB copy
        return super().write(data)


def _pickled_within(value: Any, cap: int) -> bytes:
    """``value`` pickled, or :class:`_Full` once it passes ``cap`` bytes (an array whose size
    alone passes it is not pickled at all)."""
    numeric = type(value).__module__.partition(".")[0] in ("numpy", "pandas")
    size = getattr(value, "nbytes", None) if numeric else None
    if isinstance(size, int) and size > cap:
        raise _Full
    buffer = _CappedBuffer(cap)
    pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


def _pickled_values(
    namespace: dict[str, Any], names: tuple[str, ...], cap: int, close: tuple[int, ...] = ()
) -> dict[str, bytes]:
    """The pickles of ``names`` as the snapshot holds them (at most ``cap`` bytes in all), made in a
    fork of the snapshot: a value's own ``__reduce__`` may do anything, and the snapshot must stay
    as it was (nor reach its spare: ``close`` are the fds of the snapshot's it closes first).
    Names that cannot be pickled, or do not fit, are left out."""

    def child(write_fd: int) -> None:
        for fd in close:
            os.close(fd)
        out: dict[str, bytes] = {}
        used = 0
        for name in names:
            if name not in namespace:
                continue
            try:
                data = _pickled_within(namespace[name], cap - used)
            except Exception:
                continue
            out[name] = data
            used += len(data)
        write_msg(write_fd, out)

    pid, read_fd = _fork(child)
    try:
        value = read_msg(read_fd, time.monotonic() + 60, trusted=True)  # our code, the user's own objects
    except (EOFError, TimeoutError, OSError, pickle.UnpicklingError, struct.error):
        value = {}
    finally:
        os.close(read_fd)
        kill_group(pid)
        _reap_later(pid)
    return value if isinstance(value, dict) else {}


class Snapshot:
    """A frozen copy of the kernel's state, in a process of its own, to run trials from."""

    def __init__(self, pid: int, cmd_fd: int, res_fd: int, taken_s: float, *, armed: bool = False) -> None:
        self.pid = pid
        self._cmd_fd = cmd_fd
        self._res_fd = res_fd
        self.taken_s = taken_s
        self._trial_pid: int | None = None
        #: how the snapshot started the last trial: in its "spare" (forked and hardened ahead, for
        #: the default policy) or in a "fork" made for it
        self.last_start = ""
        #: snapshot processes taken at the same moment (``take(..., at_once=N)``): trials run in
        #: parallel, one per process; ``_free`` holds the processes no trial uses
        self._twins: list[Snapshot] = []
        self._free: queue.SimpleQueue[Snapshot] | None = None
        self._armed = armed  # its trials got ready (made ahead, or asked for by arm)

    @classmethod
    def take(
        cls,
        namespace: dict[str, Any],
        redactor: Redactor,
        options: SandboxOptions | None = None,
        *,
        at_once: int = 1,
    ) -> Snapshot:
        """Fork the snapshot process now. Raises :class:`SandboxError` where fork is not possible.

        ``at_once`` > 1 (best-of-N): that many snapshot processes, forked one after the other
        before anything runs (so of the same state), each with its spare, so that as many trials
        run at the same time (:meth:`run` is then safe to call from several threads)."""
        first = cls._take_one(namespace, redactor, options)
        if at_once > 1:
            with contextlib.suppress(SandboxError, OSError):  # fewer twins: fewer trials at once
                for _ in range(at_once - 1):
                    first._twins.append(cls._take_one(namespace, redactor, options))
            first._free = queue.SimpleQueue()
            for process in [first, *first._twins]:
                first._free.put(process)
            first.taken_s += sum(twin.taken_s for twin in first._twins)
        return first

    @property
    def at_once(self) -> int:
        """How many trials this snapshot runs at the same time."""
        return 1 + len(self._twins)

    @classmethod
    def _take_one(
        cls, namespace: dict[str, Any], redactor: Redactor, options: SandboxOptions | None
    ) -> Snapshot:
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
        return cls(pid, cmd_w, res_r, time.monotonic() - started, armed=options.ready_ahead)

    @property
    def alive(self) -> bool:
        return self._cmd_fd >= 0

    def arm(self) -> None:
        """Have the snapshot process (and its twins) get ready for trials now, if it is not
        (``SandboxOptions.ready_ahead``): find what every trial's hardening needs, fork and harden
        a spare trial (~12 ms of CPU). Called when the cell has failed, so that this runs while
        the failure is captured and the model answers, and a cell that passes never pays for it.
        The first trial arms a snapshot that was not."""
        for process in [self, *self._twins]:
            if process.alive and not process._armed:
                process._armed = True
                with contextlib.suppress(OSError):  # (a snapshot gone: its first trial says so)
                    write_msg(process._cmd_fd, ("arm",))

    def run(self, spec: TrialSpec) -> TrialOutcome:
        """Run one candidate in a fresh fork of the snapshot; never raises for what the code does.

        A ``KeyboardInterrupt`` while waiting kills the trial and propagates. With twins, in
        whichever snapshot process is free (waiting for one when none is)."""
        if self._free is None:
            return self._run_here(spec)
        process = self._free.get()
        try:
            return process._run_here(spec)
        finally:
            self._free.put(process)

    def _run_here(self, spec: TrialSpec) -> TrialOutcome:
        if not self.alive:
            return TrialOutcome("sandbox_error", detail="the snapshot process is closed")
        requested = time.monotonic()
        self._armed = True  # (the snapshot process arms itself for its first trial)
        try:
            write_msg(self._cmd_fd, spec)
            _, self._trial_pid, self.last_start = read_msg(self._res_fd, requested + 30)
            _, outcome = read_msg(self._res_fd, time.monotonic() + spec.timeout_s + 30)
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

    def values(self, names: list[str], cap_bytes: int = 256 << 20) -> dict[str, Any]:
        """The values ``names`` had when the snapshot was taken (what a failed run changed in
        place, for Accept to put back); a name that cannot be pickled or does not fit in
        ``cap_bytes`` is left out. Only the snapshot process writes its result pipe (trials run in
        forks whose inherited descriptors are closed), so its pickles are the user's own objects."""
        if not self.alive or not names:
            return {}
        token = os.urandom(16)
        try:
            write_msg(self._cmd_fd, ("values", tuple(names), cap_bytes, token))
            kind, echoed, blobs = read_msg(self._res_fd, time.monotonic() + 90, trusted=True)
        except (EOFError, TimeoutError, OSError, pickle.UnpicklingError, ValueError):
            self.close()
            return {}
        if kind != "values" or echoed != token or not isinstance(blobs, dict):
            self.close()  # out of step with the snapshot process: it cannot be trusted any more
            return {}
        out: dict[str, Any] = {}
        for name, blob in blobs.items():
            with contextlib.suppress(Exception):
                out[name] = pickle.loads(blob)
        return out

    def inspect(self, fn: Callable[..., R], *args: Any) -> R | None:
        """``fn(namespace, *args)`` run in the snapshot process itself, on the state every trial
        starts from, with no fork; its (picklable) result, or None when it raised or the snapshot
        is gone. Only for code of nbrefine's that changes nothing and runs none of the user's
        (:func:`nbrefine.engine.verify.known_fingerprints`): every later trial forks this state."""
        if not self.alive:
            return None
        token = os.urandom(16)
        try:
            write_msg(self._cmd_fd, ("inspect", fn, args, token))
            kind, echoed, result = read_msg(self._res_fd, time.monotonic() + 60, trusted=True)
        except (EOFError, TimeoutError, OSError, pickle.UnpicklingError, ValueError):
            self.close()
            return None
        if kind != "inspect" or echoed != token:
            self.close()  # out of step with the snapshot process: it cannot be trusted any more
            return None
        return result  # type: ignore[no-any-return]

    def cancel(self) -> None:
        """Kill the trials under way, if any (safe to call from another thread)."""
        for process in [self, *self._twins]:
            pid = process._trial_pid
            if pid:
                kill_group(pid)

    def close(self, wait: bool = True) -> None:
        """Stop the snapshot process (and its twins) and any trial it runs. ``wait`` False: return
        at once and reap it from a thread (it ends on its own, its spare with it, in milliseconds
        at 1 GiB; its group is killed if it has not ended in 0.5 s)."""
        for twin in self._twins:
            twin.close(wait)
        if not self.alive:
            return
        if self._trial_pid:
            kill_group(self._trial_pid)
        for fd in (self._cmd_fd, self._res_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._cmd_fd = self._res_fd = -1
        if not self._armed:
            # Never armed (its cell passed): it made no spare and no scratch folder, so it has
            # nothing to tidy up. Killed now, reaped by the next fork: no wait on the cell's path.
            kill_group(self.pid)
            _reap_later(self.pid)
        elif wait:
            _reap(self.pid, 0.5)
        else:
            threading.Thread(target=_reap, args=(self.pid, 0.5), name="nbrefine-reap", daemon=True).start()
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
                enter_child()
                self.options.child_setup()
                trial_child(write_fd, spec, self.namespace, self.redactor, self.options, scratch, token)

            return _fork(child)

        outcome = _run_in_scratch(fork_trial, spec.timeout_s, token).outcome(len(spec.checks))
        return replace(outcome, start_latency_s=max(outcome.started_at - requested, 0.0))

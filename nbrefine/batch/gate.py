"""One model-request limit and one token/money budget shared by every job of a batch.

The requests are made inside the kernels (one per notebook, each its own process), so the limit
cannot be a counter in the client: it is a :class:`RequestGate` that every kernel opens from a
*spec* string. :class:`FileGate` (``file:FOLDER``) serves the jobs of one machine with ``flock``
locks, which the kernel releases when it dies, whatever kills it. A cluster implements the same
protocol with its own shared objects (a distributed semaphore and variables) and registers its
scheme with :func:`register_scheme`.

:func:`install` runs in a kernel: every model provider of the registry is wrapped in a
:class:`GatedProvider`, which waits for a free request slot, stops when the shared budget is
spent, and on a 429 (or 529) pauses *every* job for the time the API asked before retrying.

May import: :mod:`nbrefine._errors`, :mod:`nbrefine.providers`, (lazily) :mod:`nbrefine.engine` and this
package's :mod:`.message_batches.spool` and :mod:`._through_gate`, and the standard library."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import importlib
import json
import os
import random
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..providers.base import Provider, ProviderReply, ProviderRequest, TextCallback
from ._through_gate import through_gate

__all__ = [
    "FileGate",
    "GateLimits",
    "GatedProvider",
    "RequestGate",
    "install",
    "open_gate",
    "register_scheme",
]

_POLL_S = 0.05  # how often a waiting request looks for a free slot
_MAX_PAUSE_S = 120.0  # the longest shared pause a retry-after header can ask for
_UNGATED = frozenset({"offline"})  # local and free: nothing to limit


@dataclass(frozen=True)
class GateLimits:
    """What the batch allows: concurrent requests, and the budget over all jobs (None: none)."""

    max_requests: int = 4
    budget_tokens: int | None = None
    budget_usd: float | None = None


@dataclass
class GateLedger:
    """What the gate has seen (shared by all jobs; the batch report shows it)."""

    requests: int = 0
    tokens: int = 0
    usd: float = 0.0
    unpriced: int = 0  # replies of a model without a known price: not in ``usd``
    rate_limited: int = 0  # 429 / 529 answers, each of which paused every job
    paused_s: float = 0.0  # the pauses asked for, added up
    waited_s: float = 0.0  # time requests spent waiting for a slot or a pause
    in_flight: int = 0
    max_in_flight: int = 0
    pause_until: float = 0.0  # time.time() before which no job sends a request

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class RequestGate(Protocol):
    """The shared limit and budget, as a job's provider sees them."""

    @property
    def limits(self) -> GateLimits: ...

    @property
    def spec(self) -> str:
        """The string every job's kernel opens this gate from (:func:`open_gate`)."""
        ...

    def slot(self) -> contextlib.AbstractContextManager[float]:
        """Wait for the shared pause to end and for a free request slot; hold it in the block.
        Yields the seconds waited."""
        ...

    def over_budget(self) -> str | None:
        """A one-line reason when the shared budget is spent, else None."""
        ...

    def charge(self, tokens: int, usd: float | None) -> None:
        """Add one reply's cost (``usd`` None: the model's price is unknown)."""
        ...

    def back_off(self, seconds: float) -> None:
        """Rate limited: no job sends a request for ``seconds``."""
        ...

    def state(self) -> GateLedger: ...


# --------------------------------------------------------------------------- one machine


class _SharedAccount(ABC):
    """The budget side of a gate, written once over the two things a gate keeps: ``state()`` (the
    shared counts) and ``_update(change)`` (apply ``change`` to them atomically)."""

    @property
    @abstractmethod
    def limits(self) -> GateLimits: ...

    @abstractmethod
    def state(self) -> GateLedger: ...

    @abstractmethod
    def _update(self, change: Callable[[GateLedger], None]) -> None: ...

    def over_budget(self) -> str | None:
        return budget_reason(self.limits, self.state())

    def charge(self, tokens: int, usd: float | None) -> None:
        def add(state: GateLedger) -> None:
            state.tokens += tokens
            if usd is None:
                state.unpriced += 1
            else:
                state.usd += usd

        self._update(add)

    def back_off(self, seconds: float) -> None:
        def pause(state: GateLedger) -> None:
            state.rate_limited += 1
            state.paused_s += seconds
            state.pause_until = max(state.pause_until, time.time() + seconds)

        self._update(pause)


class FileGate(_SharedAccount):
    """:class:`RequestGate` for the processes of one machine: a folder with ``config.json``, the
    shared ``state.json`` (read and written under ``state.lock``) and one lock file per slot."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        config = json.loads((self.folder / "config.json").read_text(encoding="utf-8"))
        self._limits = GateLimits(**config)

    @property
    def limits(self) -> GateLimits:
        return self._limits

    @classmethod
    def create(cls, folder: str | Path, limits: GateLimits, spent: GateLedger | None = None) -> FileGate:
        """Set up a gate in ``folder`` (``spent``: what an earlier run of a resumed batch used)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(dataclasses.asdict(limits)), encoding="utf-8")
        state = GateLedger(tokens=spent.tokens, usd=spent.usd) if spent else GateLedger()
        (folder / "state.json").write_text(json.dumps(state.to_json()), encoding="utf-8")
        return cls(folder)

    @property
    def spec(self) -> str:
        return f"file:{self.folder}"

    @contextlib.contextmanager
    def slot(self) -> Iterator[float]:
        started = time.monotonic()
        fd = self._take_slot()
        waited = time.monotonic() - started
        try:
            self._update(lambda s: _entered(s, waited))
            yield waited
        finally:
            with contextlib.suppress(OSError):
                self._update(_left)
            os.close(fd)  # closing drops the flock

    def _take_slot(self) -> int:
        while True:
            pause = self.state().pause_until - time.time()
            if pause > 0:
                time.sleep(min(pause, 0.5))
                continue
            for number in range(self.limits.max_requests):
                fd = os.open(self.folder / f"slot-{number}.lock", os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                return fd
            time.sleep(_POLL_S)

    def state(self) -> GateLedger:
        with self._locked():
            return self._read()

    # ---------------------------------------------------------------- the shared file

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.folder / "state.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read(self) -> GateLedger:
        return GateLedger(**json.loads((self.folder / "state.json").read_text(encoding="utf-8")))

    def _update(self, change: Callable[[GateLedger], None]) -> None:
        with self._locked():
            state = self._read()
            change(state)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".state.")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(state.to_json(), fh)
            os.replace(tmp, self.folder / "state.json")


def _entered(state: GateLedger, waited: float) -> None:
    state.requests += 1
    state.waited_s += waited
    state.in_flight += 1
    state.max_in_flight = max(state.max_in_flight, state.in_flight)


def _left(state: GateLedger) -> None:
    state.in_flight = max(0, state.in_flight - 1)


def budget_reason(limits: GateLimits, state: GateLedger) -> str | None:
    """Why no more requests may be sent (the shared budget is spent), or None."""
    if limits.budget_tokens is not None and state.tokens >= limits.budget_tokens:
        return (
            f"Stopped: the batch budget of {limits.budget_tokens:,} tokens is spent "
            f"({state.tokens:,} used by all jobs)."
        )
    if limits.budget_usd is not None and state.usd >= limits.budget_usd:
        return (
            f"Stopped: the batch budget of ${limits.budget_usd:.2f} is spent "
            f"(${state.usd:.4f} used by all jobs)."
        )
    return None


# --------------------------------------------------------------------------- specs

_SCHEMES: dict[str, Callable[[str], RequestGate]] = {"file": FileGate}
# Schemes whose module is imported only when a spec names them (a kernel of a Dask batch opens
# its gate from the spec alone: nothing registered it in that process).
_LAZY = {"dask": (".dask_gate", "open_dask_gate")}


def register_scheme(scheme: str, opener: Callable[[str], RequestGate]) -> None:
    """Make ``open_gate("SCHEME:rest")`` call ``opener("rest")`` (e.g. a cluster's shared gate)."""
    _SCHEMES[scheme] = opener


def open_gate(spec: str) -> RequestGate:
    scheme, sep, rest = spec.partition(":")
    if scheme in _LAZY and scheme not in _SCHEMES:
        module, name = _LAZY[scheme]
        register_scheme(scheme, getattr(importlib.import_module(module, __package__), name))
    opener = _SCHEMES.get(scheme)
    if not sep or opener is None:
        known = ", ".join(sorted({*_SCHEMES, *_LAZY}))
        raise ValueError(f"not a request gate spec: {spec!r} (known: {known})")
    return opener(rest)


# --------------------------------------------------------------------------- in the kernel


class GatedProvider:
    """A model provider behind the shared gate. The provider under it is built without retries
    of its own, so a 429 is seen at once and pauses every job, not just this one."""

    def __init__(self, inner: Provider, gate: RequestGate, retries: int) -> None:
        self.inner, self.gate, self.retries = inner, gate, max(0, retries)
        self.name = inner.name
        self.model = inner.model

    def complete(self, request: ProviderRequest, on_text: TextCallback | None = None) -> ProviderReply:
        reply = through_gate(
            self.gate,
            self.retries,
            lambda: self.inner.complete(request, on_text),
            _cost,
            pause=_pause_for,
        )
        self.model = self.inner.model
        return reply


def _pause_for(err: BaseException, attempt: int) -> float:
    """The pause the API asked for (its retry-after header), else an exponential back-off."""
    response = getattr(err.__cause__, "response", None)
    header = getattr(response, "headers", {}).get("retry-after") if response is not None else None
    with contextlib.suppress(TypeError, ValueError):
        if header is not None and float(header) > 0:
            return min(float(header), _MAX_PAUSE_S)
    return min(2.0**attempt, 30.0) * (1 + random.random() / 4)  # jitter: jobs do not retry in step


def _cost(reply: ProviderReply) -> tuple[int, float | None]:
    from ..engine import usage_of

    usage = usage_of(reply)
    return usage.tokens, usage.cost_usd


def install(spec: str) -> None:
    """Put every model provider of this process's registry behind the gate of ``spec`` (run in a
    batch job's kernel by ``nbrefine fix``; the offline tier is local and free: not gated).

    A spec that goes on with ``" spool:FOLDER:JOB"`` (``--batch``) makes the Anthropic provider a
    :class:`~.message_batches.spool.SpooledProvider`: its requests go into that job's spool, for a batch."""
    from .. import providers as registry
    from .message_batches.spool import SEPARATOR

    gate_spec, _, spool = spec.partition(SEPARATOR)
    gate = open_gate(gate_spec)

    def gated(name: str, factory: Callable[[Any], Provider]) -> Callable[[Any], Provider] | None:
        if name in _UNGATED or getattr(factory, "_nbrefine_gated", False):
            return None
        return _gated_factory(factory, gate, spool if name == "anthropic" else "")

    registry.wrap_provider_factories(gated)


def _gated_factory(
    factory: Callable[[Any], Provider], gate: RequestGate, spool: str = ""
) -> Callable[[Any], Provider]:
    def make(settings: Any) -> Provider:
        if spool:
            from .message_batches.spool import SpooledProvider

            return SpooledProvider(settings.model, gate, spool, settings.max_retries)
        inner = factory(dataclasses.replace(settings, max_retries=0))
        return GatedProvider(inner, gate, settings.max_retries)

    make._nbrefine_gated = True  # type: ignore[attr-defined]
    return make

"""The batch's request gate on a Dask cluster: the limit and the budget hold across workers.

:class:`~.gate.FileGate` needs one machine (lock files). On a cluster the jobs' kernels run on
many, so the shared objects live on the scheduler instead:

* a :class:`distributed.Semaphore` with ``max_requests`` leases is the request limit; a kernel
  that dies stops refreshing its lease, and the scheduler frees it after its lease timeout
  (``distributed.scheduler.locks.lease-timeout``, 30 s by default);
* a :class:`distributed.Variable` holds the shared :class:`~.gate.GateLedger` (tokens, money,
  the 429 pause), read and written under a :class:`distributed.Lock`; another holds the limits.

The spec is ``dask:NAME@SCHEDULER_ADDRESS``. A kernel opens it with its own small client, made on
its first model request (the offline tier never makes one), so a batch that asks no model
never connects from its kernels at all.

May import: this package's :mod:`.gate`, the standard library and (through the client it is given)
``distributed``."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from .gate import GateLedger, GateLimits, _entered, _left, _SharedAccount

__all__ = ["SCHEME", "DaskGate", "open_dask_gate"]

SCHEME = "dask"
_CONNECT_TIMEOUT = "30s"


class DaskGate(_SharedAccount):
    """:class:`~.gate.RequestGate` whose slots, budget and pause live on a Dask scheduler."""

    def __init__(self, name: str, address: str, client: Any = None) -> None:
        self.name, self.address = name, address
        self._client = client  # None in a kernel: made on first use, closed with the process
        self._limits: GateLimits | None = None
        self._semaphore: Any = None
        self._lock: Any = None

    @classmethod
    def create(cls, client: Any, limits: GateLimits, spent: GateLedger | None = None) -> DaskGate:
        """Set the gate up on ``client``'s scheduler (``spent``: an earlier run's use, --resume)."""
        gate = cls(f"nbrefine-gate-{uuid.uuid4().hex[:12]}", str(client.scheduler.address), client)
        state = GateLedger(tokens=spent.tokens, usd=spent.usd) if spent else GateLedger()
        _dd().Variable(f"{gate.name}-config", client=client).set(json.dumps(dataclasses.asdict(limits)))
        _dd().Variable(f"{gate.name}-state", client=client).set(json.dumps(state.to_json()))
        gate._objects()  # registers the semaphore with this run's limit before any kernel asks
        return gate

    @property
    def spec(self) -> str:
        return f"{SCHEME}:{self.name}@{self.address}"

    @property
    def limits(self) -> GateLimits:
        if self._limits is None:
            config = _dd().Variable(f"{self.name}-config", client=self.client).get(timeout=_CONNECT_TIMEOUT)
            self._limits = GateLimits(**json.loads(config))
        return self._limits

    @property
    def client(self) -> Any:
        if self._client is None:
            # Not the default client: the notebook running in this kernel may make its own.
            self._client = _dd().Client(self.address, timeout=_CONNECT_TIMEOUT, set_as_default=False)
        return self._client

    def _objects(self) -> tuple[Any, Any]:
        if self._semaphore is None:
            rpc, loop = self.client.scheduler, self.client.loop
            self._semaphore = _dd().Semaphore(
                self.limits.max_requests, f"{self.name}-slots", scheduler_rpc=rpc, loop=loop
            )
            self._semaphore.register()
            self._lock = _dd().Lock(f"{self.name}-state-lock", scheduler_rpc=rpc, loop=loop)
        return self._semaphore, self._lock

    # ---------------------------------------------------------------- RequestGate

    @contextlib.contextmanager
    def slot(self) -> Iterator[float]:
        semaphore, _ = self._objects()
        started = time.monotonic()
        while True:
            pause = self.state().pause_until - time.time()
            if pause <= 0:
                semaphore.acquire()
                break
            time.sleep(min(pause, 0.5))
        waited = time.monotonic() - started
        try:
            self._update(lambda s: _entered(s, waited))
            yield waited
        finally:
            with contextlib.suppress(Exception):  # the scheduler may be gone at the very end
                self._update(_left)
            with contextlib.suppress(Exception):
                semaphore.release()

    def state(self) -> GateLedger:
        text = _dd().Variable(f"{self.name}-state", client=self.client).get(timeout=_CONNECT_TIMEOUT)
        return GateLedger(**json.loads(text))

    def close(self) -> None:
        """Remove the gate's objects from the scheduler (the client that made it, at the end)."""
        for suffix in ("config", "state"):
            with contextlib.suppress(Exception):
                _dd().Variable(f"{self.name}-{suffix}", client=self.client).delete()
        for shared in (self._semaphore, self._lock):
            with contextlib.suppress(Exception):
                shared.close() if shared is not None else None

    # ---------------------------------------------------------------- the shared state

    def _update(self, change: Callable[[GateLedger], None]) -> None:
        _, lock = self._objects()
        variable = _dd().Variable(f"{self.name}-state", client=self.client)
        with lock:
            state = GateLedger(**json.loads(variable.get(timeout=_CONNECT_TIMEOUT)))
            change(state)
            variable.set(json.dumps(state.to_json()))


def _dd() -> Any:
    """``distributed``, imported when first needed (it is untyped: Any to mypy)."""
    return importlib.import_module("distributed")


def open_dask_gate(rest: str) -> DaskGate:
    """The opener of ``dask:NAME@ADDRESS`` specs (see :func:`~.gate.open_gate`)."""
    name, sep, address = rest.partition("@")
    if not sep or not name or not address:
        raise ValueError(f"not a Dask gate spec: dask:{rest!r} (expected dask:NAME@SCHEDULER_ADDRESS)")
    return DaskGate(name, address)

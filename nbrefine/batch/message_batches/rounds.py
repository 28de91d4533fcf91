"""``--batch``, in the client: the model requests of every notebook, a round at a time, as
Anthropic Message Batches (half the price of the Messages API).

Each job's kernel spools its request and waits (:mod:`.spool`). A thread of the client gathers
them, and sends the pending ones as one batch as soon as every running notebook is waiting on a
request (or after :data:`ROUND_WAIT_S`, so that one notebook busy with a long cell does not hold
up the others). It polls each batch politely, from :data:`FIRST_POLL_S` growing by
:data:`POLL_GROWTH` to at most :data:`MAX_POLL_S` between calls, shows where it stands, and when
a batch ends hands each result back to the kernel that asked: its trials, its feedback and its
next attempt then go on as usual, and its next request joins the next round.

Every batch is written to the run record as it is sent (its id and, for each request, a digest
of its parameters). ``--resume`` reads them back: a request whose parameters match one of an
earlier run's batches takes that batch's result (waiting for it if it is still processing)
instead of being sent and paid for again.

May import: this package's :mod:`.spool` and the standard library."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .spool import read_json, write_json

__all__ = ["FIRST_POLL_S", "MAX_POLL_S", "POLL_GROWTH", "ROUND_WAIT_S", "BatchRounds"]

ROUND_WAIT_S = 30.0  # the longest a request waits for the other running notebooks to ask too
FIRST_POLL_S = 1.0
POLL_GROWTH = 1.5
MAX_POLL_S = 60.0
_TICK_S = 0.1


class _Record(Protocol):
    def add_batch(self, entry: dict[str, Any]) -> None: ...


class _Display(Protocol):
    def note(self, text: str) -> None: ...

    def status(self, text: str) -> None: ...


@dataclass
class _Request:
    custom_id: str
    job: int
    params: dict[str, Any]
    digest: str
    since: float


@dataclass
class _Batch:
    id: str
    round: int  # 1, 2, ...; 0: a batch of an earlier run, whose results --resume takes
    waiting: dict[str, list[str]]  # its requests' custom ids → the spooled requests they answer
    size: int
    submitted: float
    interval: float = FIRST_POLL_S
    next_poll: float = 0.0
    status: str = "in_progress"  # "ended", or "lost" (an earlier batch the API no longer has)
    counts: dict[str, int] = field(default_factory=dict)
    ended: float | None = None
    kept: dict[str, Any] | None = None  # an earlier batch's results, for later matches


class BatchRounds:
    """The client's side of ``--batch`` (see the module docstring); a thread while it runs."""

    def __init__(
        self,
        spool: Path,
        *,
        client: Callable[[], Any],
        record: _Record,
        display: _Display,
        earlier: list[dict[str, Any]] | None = None,
    ) -> None:
        self.spool = spool
        self._make_client, self._client = client, None
        self.record, self.display = record, display
        (spool / "requests").mkdir(parents=True, exist_ok=True)
        (spool / "results").mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._running: set[int] = set()
        self._pending: list[_Request] = []
        self._inflight: dict[str, int] = {}  # spooled request → its job, while its batch runs
        self._held: dict[str, _Request] = {}  # requests waiting on an earlier run's batch
        self._batches: list[_Batch] = []
        self._rounds = 0
        self._earlier = {
            digest: (str(entry["batch_id"]), custom_id)
            for entry in earlier or []
            for custom_id, digest in (entry.get("requests") or {}).items()
        }
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="nbrefine-batch-rounds", daemon=True)

    # ---------------------------------------------------------------- the runner's side

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop polling (batches still processing go on at Anthropic: --resume takes them up);
        a request still waiting gets an error, so no kernel waits for ever."""
        self._stop.set()
        self._thread.join(10)
        waiting = [r.custom_id for r in self._pending] + list(self._inflight)
        for custom_id in waiting:
            self._answer(custom_id, "", None, "the batch run stopped before this request's batch ended")

    def job_started(self, index: int) -> None:
        with self._lock:
            self._running.add(index)

    def job_ended(self, index: int) -> None:
        with self._lock:
            self._running.discard(index)

    def summary(self) -> list[dict[str, Any]]:
        """Every batch this run sent or took results from, for the report."""
        return [
            {
                "id": b.id,
                "round": b.round,
                "earlier_run": b.round == 0,
                "requests": b.size,
                "status": b.status,
                "counts": b.counts,
                "submitted_at": b.submitted,
                "ended_at": b.ended,
                "wait_s": None if b.ended is None else round(b.ended - b.submitted, 3),
            }
            for b in self._batches
        ]

    # ---------------------------------------------------------------- the thread

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def _loop(self) -> None:
        failing = False
        while not self._stop.wait(_TICK_S):
            try:
                self._tick(time.time())
                failing = False
            except Exception as err:  # the API or the network: say so once, and keep trying
                if not failing:
                    self.display.note(f"nbrefine: --batch: {_one_line(err)} (trying again)")
                failing = True
                self._stop.wait(5.0)

    def _tick(self, now: float) -> None:
        for request in self._collect(now):
            self._route(request)
        if self._round_due(now):
            self._submit(now)
        for batch in list(self._batches):
            if batch.status == "in_progress" and now >= batch.next_poll:
                self._poll(batch, now)

    def _collect(self, now: float) -> Iterator[_Request]:
        for path in sorted((self.spool / "requests").glob("*.json")):
            data = read_json(path)
            with contextlib.suppress(OSError):
                path.unlink()
            if data is None:
                continue
            params = data.get("params") or {}
            digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:32]
            yield _Request(path.stem, int(data.get("job", -1)), params, digest, now)

    def _route(self, request: _Request) -> None:
        """Into the next round, unless an earlier run's batch holds the same request."""
        hit = self._earlier.get(request.digest)
        batch = self._earlier_batch(hit[0]) if hit else None
        if hit and batch is not None and batch.status != "lost":
            custom_id = hit[1]
            if batch.kept is None:
                batch.waiting.setdefault(custom_id, []).append(request.custom_id)
                self._inflight[request.custom_id] = request.job
                self._held[request.custom_id] = request
                return
            if custom_id in batch.kept:
                self._answer(request.custom_id, batch.id, batch.kept[custom_id])
                return
        self._pending.append(request)

    def _earlier_batch(self, batch_id: str) -> _Batch | None:
        for batch in self._batches:
            if batch.id == batch_id:
                return batch
        batch = _Batch(batch_id, 0, {}, 0, time.time())
        self._batches.append(batch)
        return batch

    def _round_due(self, now: float) -> bool:
        if not self._pending:
            return False
        with self._lock:
            running = set(self._running)
        waiting = {r.job for r in self._pending} | set(self._inflight.values())
        return running <= waiting or now - self._pending[0].since >= ROUND_WAIT_S

    def _submit(self, now: float) -> None:
        requests, self._pending = self._pending, []
        try:
            info = self.client.messages.batches.create(
                requests=[{"custom_id": r.custom_id, "params": r.params} for r in requests]
            )
        except Exception as err:
            why = f"could not send the batch: {_one_line(err)}"
            self.display.note(f"nbrefine: --batch: {why}")
            for r in requests:
                self._answer(r.custom_id, "", None, why)
            return
        self._rounds += 1
        waiting = {r.custom_id: [r.custom_id] for r in requests}
        batch = _Batch(info.id, self._rounds, waiting, len(requests), now, next_poll=now + FIRST_POLL_S)
        self._batches.append(batch)
        self._inflight.update({r.custom_id: r.job for r in requests})
        digests = {r.custom_id: r.digest for r in requests}
        self.record.add_batch(
            {"batch_id": info.id, "round": batch.round, "submitted": now, "requests": digests}
        )
        notebooks = len({r.job for r in requests})
        self.display.note(
            f"batch {batch.round} ({info.id}): {len(requests)} requests from {notebooks} notebooks sent"
        )

    def _poll(self, batch: _Batch, now: float) -> None:
        try:
            info = self.client.messages.batches.retrieve(batch.id)
        except Exception as err:
            if getattr(err, "status_code", None) == 404 and batch.round == 0:
                self._lost(batch)
                return
            raise
        finally:
            batch.interval = min(batch.interval * POLL_GROWTH, MAX_POLL_S)
            batch.next_poll = now + batch.interval
        batch.counts = info.request_counts.model_dump()
        if info.processing_status != "ended":
            self._show(now)
            return
        results = {
            item.custom_id: item.result.model_dump(mode="json")
            for item in self.client.messages.batches.results(batch.id)
        }
        self._end(batch, results, now)

    def _end(self, batch: _Batch, results: dict[str, Any], now: float) -> None:
        for custom_id, targets in batch.waiting.items():
            for target in targets:
                self._answer(target, batch.id, results.get(custom_id), "the batch ended without its result")
        batch.waiting, batch.status, batch.ended = {}, "ended", now
        if batch.round == 0:
            batch.kept, batch.size = results, len(results)
        counts = ", ".join(f"{n} {kind}" for kind, n in batch.counts.items() if n)
        label = f"batch {batch.round}" if batch.round else "an earlier run's batch"
        self.display.note(f"{label} ({batch.id}) ended after {now - batch.submitted:.0f} s: {counts}")
        self._show(now)

    def _lost(self, batch: _Batch) -> None:
        """An earlier run's batch the API no longer has: its requests go into the next round."""
        batch.status = "lost"
        for targets in batch.waiting.values():
            for target in targets:
                self._inflight.pop(target, None)
                request = self._held.pop(target, None)
                if request is not None:
                    self._pending.append(request)
        batch.waiting = {}

    def _show(self, now: float) -> None:
        running = [b for b in self._batches if b.status == "in_progress"]
        if not running:
            self.display.status("")
            return
        waiting = sum(len(t) for b in running for t in b.waiting.values())
        oldest = max(now - b.submitted for b in running)
        self.display.status(f"{len(running)} batch(es) processing, {waiting} requests, {oldest:.0f} s")

    def _answer(self, custom_id: str, batch_id: str, result: Any, why: str = "") -> None:
        self._inflight.pop(custom_id, None)
        self._held.pop(custom_id, None)
        answer = (
            {"batch_id": batch_id, "result": result} if result else {"batch_id": batch_id, "message": why}
        )
        write_json(self.spool / "results" / f"{custom_id}.json", answer)


def _one_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0][:200]}" if text else type(err).__name__

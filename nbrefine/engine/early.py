"""Streamed candidates: a candidate's trial starts as soon as its code block is complete.

While a reply streams (in a thread of its own), :class:`_Watch` parses the text so far each time a
fence line completes, as if the reply ended there, with the loop's own parser (so labels and the
rules for several blocks hold); a candidate it yields is trial-run at once on the loop's thread
while the rest of the reply streams on (and reaches the progress display as before). When the
reply is in, the loop parses it whole as it always did and keeps an early trial's outcome only for
exactly that candidate (same code, same cell edits): a different candidate, no code or a decline
discards it (a trial still running is killed). The result is the one the loop gives without early
trials; only the waiting is shorter.

Trials stay on the loop's thread, the stream moves to another: a runner that forks the kernel
itself must fork from the thread that drives it, and Ctrl-C still reaches the trial. Best-of-N
candidates are tried in the order their replies arrive, while the others still stream; on a
snapshot with twins (``Snapshot.take(..., at_once=N)``: one snapshot process per candidate, up
to the cores) their trials run in parallel, each on a thread of the loop's and in its own
snapshot process (nothing there forks the kernel).

May import: the standard library, :mod:`nbrefine.providers.base`, :mod:`nbrefine.sandbox` and the
engine's prompt and reply.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..providers.base import DECLINED, ProviderReply, ProviderRequest, TextCallback
from ..sandbox import TrialOutcome
from .prompt import ParsedReply
from .reply import _OPENING

__all__ = ["CandidateKey", "EarlyTrials", "StreamedReply", "candidate_key"]

#: What makes two candidates the same trial: the code and, for a repair that spans cells, the edits.
CandidateKey = tuple[str, tuple[tuple[str, str], ...]]

_KILL_POLL_S = 0.02  # a trial killed before its process started is killed again this often


def candidate_key(parsed: ParsedReply) -> CandidateKey | None:
    """The trial ``parsed`` asks for (None: it has no code)."""
    return None if parsed.code is None else (parsed.code, parsed.edits)


def _guessed(text: str, parse: Callable[[str], ParsedReply]) -> CandidateKey | None:
    """The candidate ``text`` gives, for a guess only: a parser that fails on it (none should)
    gives none, and the loop's own reading of the whole reply raises as it always did."""
    try:
        return candidate_key(parse(text))
    except Exception:
        return None


def _final_key(reply: ProviderReply, parse: Callable[[str], ParsedReply]) -> CandidateKey | None:
    """The candidate the whole reply gives, as the loop reads it (None: a decline or no code)."""
    return None if reply.stop_reason == DECLINED else _guessed(reply.text, parse)


@dataclass(frozen=True)
class EarlyOutcome:
    outcome: TrialOutcome
    started: float  # time.monotonic() when its trial started


class EarlyTrials:
    """The early trials of one attempt, by candidate. They run on the loop's thread, or for
    best-of-N on a runner that runs several at once, on threads of the loop's (one per trial);
    the stream's thread may kill the one under way (:meth:`stop_unless`)."""

    def __init__(self, run: Callable[[str], TrialOutcome], cancel: Callable[[], None] | None) -> None:
        self._run, self._cancel = run, cancel
        self._lock = threading.Lock()  # guards _running, _killed and _done across threads
        self._running: set[CandidateKey] = set()
        self._killed: set[CandidateKey] = set()
        self._done: dict[CandidateKey, EarlyOutcome] = {}

    def run(self, key: CandidateKey) -> None:
        """Trial ``key``'s code now (once), and keep its outcome for :meth:`take`."""
        with self._lock:
            if key in self._done or key in self._running:
                return
            self._running.add(key)
        started = time.monotonic()
        try:
            outcome = self._run(key[0])
        finally:
            with self._lock:
                self._running.discard(key)
                killed = key in self._killed
        if not killed:  # a killed trial says nothing about its candidate
            with self._lock:
                self._done[key] = EarlyOutcome(outcome, started)

    def take(self, key: CandidateKey | None) -> EarlyOutcome | None:
        with self._lock:
            return self._done.get(key) if key is not None else None

    def stop_unless(self, key: CandidateKey | None) -> None:
        """Kill the trial under way unless it is of ``key`` (from the stream's thread, once the
        reply is in). Only while that trial runs: the runner's ``cancel`` kills whatever it runs."""
        if self._cancel is None:
            return
        while True:
            with self._lock:
                if not self._running or self._running == {key}:
                    return
                self._killed.update(self._running)
                self._cancel()
            time.sleep(_KILL_POLL_S)  # it may not have its process yet: kill again until it ends

    def cancel_all(self) -> None:
        """Kill every trial under way (an interrupt while best-of-N trials run in parallel)."""
        with self._lock:
            self._killed.update(self._running)
        if self._cancel is not None:
            self._cancel()


@dataclass(frozen=True)
class _Done:
    reply: ProviderReply | None
    error: BaseException | None
    ended: float  # time.monotonic() when the reply was in


class _Watch:
    """The ``on_text`` of a streaming reply (on the stream's thread): passes each piece on and
    hands over each new candidate the text so far gives when a fence line completes."""

    def __init__(
        self,
        on_text: TextCallback,
        parse: Callable[[str], ParsedReply],
        fresh: Callable[[str], bool],
        found: Callable[[CandidateKey], None],
    ) -> None:
        self.on_text, self.parse, self.fresh, self.found = on_text, parse, fresh, found
        self.abandoned = False  # the loop stopped waiting (interrupted): end the stream
        self._pieces: list[str] = []
        self._size = 0  # characters received
        self._line = ""  # the line under way
        self._last: CandidateKey | None = None

    def __call__(self, piece: str) -> None:
        if self.abandoned:
            raise KeyboardInterrupt  # propagates through the provider, which ends the stream
        self.on_text(piece)
        self._pieces.append(piece)
        start = self._size - len(self._line)  # where the line under way began
        self._size += len(piece)
        *lines, self._line = (self._line + piece).split("\n")
        fence_end = None
        for line in lines:
            start += len(line) + 1
            if _OPENING.match(line):
                fence_end = start
        if fence_end is not None:
            self._look("".join(self._pieces)[:fence_end])

    def _look(self, text: str) -> None:
        key = _guessed(text, self.parse)
        if key is None or key == self._last or not self.fresh(key[0]):
            return  # nothing new to try; a repeat of earlier code is a cycle, never tried
        self._last = key
        self.found(key)


class StreamedReply:
    """One reply streamed in a thread while its candidates are trial-run on this one."""

    def __init__(
        self,
        complete: Callable[[ProviderRequest, TextCallback | None], ProviderReply],
        parse: Callable[[str], ParsedReply],
        trials: EarlyTrials,
    ) -> None:
        self.complete, self.parse, self.trials = complete, parse, trials
        self._events: queue.Queue[CandidateKey | _Done] = queue.Queue()

    def ask(
        self, request: ProviderRequest, on_text: TextCallback, fresh: Callable[[str], bool]
    ) -> tuple[ProviderReply, float]:
        """The reply to ``request`` and when it was in; raises what the provider (or ``on_text``)
        raised."""
        watch = _Watch(on_text, self.parse, fresh, self._events.put)
        thread = threading.Thread(
            target=self._stream, args=(request, watch), name="nbrefine-stream", daemon=True
        )
        thread.start()
        try:
            while True:
                event = self._next()
                if isinstance(event, _Done):
                    if event.error is not None:
                        raise event.error
                    assert event.reply is not None
                    return event.reply, event.ended
                self.trials.run(event)
        finally:
            watch.abandoned = True  # a stream left behind (Ctrl-C here) stops at its next piece

    def _stream(self, request: ProviderRequest, watch: _Watch) -> None:
        try:
            reply = self.complete(request, watch)
        except BaseException as err:  # handed to the loop's thread, which raises it
            self._events.put(_Done(None, err, time.monotonic()))
            return
        ended = time.monotonic()
        key = _final_key(reply, self.parse)  # before the loop reads the reply: one reading at a time
        self._events.put(_Done(reply, None, ended))
        self.trials.stop_unless(key)

    def _next(self) -> CandidateKey | _Done:
        """The reply if it is in, else the latest candidate (those it superseded are not worth a trial)."""
        event = self._events.get()
        while not isinstance(event, _Done):
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                break
        return event

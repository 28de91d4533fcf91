"""Bounds for a value summary: a time limit (a one-shot timer and a cooperative deadline), guards
that turn a failure of one section into a note, bounded iteration and joining, and the redacted head
of a long text. The engine room of :mod:`nbrefine.grounding.summaries`.

May import: the standard library and :mod:`nbrefine.grounding` leaf modules (text, markers, objects).
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
import types
from collections.abc import (
    Callable,
    Iterable,
    Iterator,
)
from typing import Any, Protocol

from .._objects import _Libs, _type_name
from ..markers import _CREDENTIAL_MARKER, REDACTED
from ..text import clip


class Redacting(Protocol):
    """What a summary needs of the redactor it is made with (a
    :class:`~nbrefine.grounding.redaction.Redactor`; a protocol, so summaries need not import it)."""

    _longest_value: int

    def _redact(self, text: str) -> str: ...

    def is_secret_name(self, name: str) -> bool: ...

    def remember(self, value: object, label: str = ...) -> None: ...

    def guard_cut(self, head: str) -> str: ...


class _Timeout(BaseException):
    """The summary ran out of time.

    A ``BaseException`` so that a ``try: ... except Exception:`` inside the user's own
    ``__repr__`` cannot swallow it.
    """


class _Alarm:
    """A one-shot ``ITIMER_REAL`` that raises :class:`_Timeout`, used only when safe.

    Safe means: main thread, ``setitimer`` available, no real-time timer armed by anyone
    else, and the current SIGALRM handler is one we can restore.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.installed = False
        self._active = False
        self._old: Any = None

    def _handler(self, signum: int, frame: types.FrameType | None) -> None:
        if self._active:
            self._active = False
            raise _Timeout

    def start(self) -> None:
        if not (self.seconds > 0 and math.isfinite(self.seconds)):
            return
        if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0):
                return  # someone else's timer (pytest-timeout, a user's alarm): leave it alone
            old = signal.getsignal(signal.SIGALRM)
        except (OSError, ValueError):
            return
        if old is None:  # installed from C: we could not put it back
            return
        self._old = old
        try:
            signal.signal(signal.SIGALRM, self._handler)
        except (OSError, ValueError):
            return
        self.installed = True
        self._active = True
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def stop(self) -> None:
        try:
            self._active = False
        finally:
            if self.installed:
                self.installed = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, self._old)


class _Ctx:
    """State of one summary: deadline, recursion guard, redaction hooks."""

    def __init__(self, time_limit_s: float, redactor: Redacting | None) -> None:
        self.limit = time_limit_s
        self.deadline = time.monotonic() + time_limit_s if time_limit_s > 0 else math.inf
        self.timed_out = False
        self.redactor = redactor
        self.active: set[int] = set()  # ids of containers being rendered (recursion guard)
        self.header = ""  # the cheap first part of the summary, kept if time runs out
        self.libs = _Libs()

    def check(self) -> None:
        if self.timed_out or time.monotonic() > self.deadline:
            self.timed_out = True
            raise _Timeout

    def timeout_note(self) -> str:
        return f"<timed out after {self.limit:g}s>"

    def redact(self, text: str) -> str:
        return self.redactor._redact(text) if self.redactor is not None else text

    def is_secret_key(self, key: object) -> bool:
        return self.redactor is not None and type(key) is str and self.redactor.is_secret_name(key)

    def secret_marker(self, value: object = None) -> str:
        """The marker for a value under a credential name; the value is remembered as secret."""
        if self.redactor is not None and value is not None:
            with contextlib.suppress(Exception):  # a hostile container: it is not rendered anyway
                self.redactor.remember(value)
        return _CREDENTIAL_MARKER


class _Guard:
    """``with _Guard(ctx, out, "columns"):`` — turn a failure or timeout of one section into a note."""

    def __init__(self, ctx: _Ctx, out: list[str], what: str) -> None:
        self.ctx = ctx
        self.out = out
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: object) -> bool:
        if et is None or ev is None:
            return False
        if isinstance(ev, _Timeout):
            self.ctx.timed_out = True
            self.out.append(self.ctx.timeout_note())
            return True
        if isinstance(ev, Exception):
            self.out.append(f"<{self.what} failed: {_exc_text(self.ctx, ev)}>")
            return True
        return False


def _clip(text: str, max_chars: int) -> str:
    """``text`` cut to at most ``max_chars`` characters, with a visible ``…[+N chars]`` marker
    (never inside a redaction marker)."""
    return clip(text, max_chars, "…[+{dropped} chars]", unbroken=(REDACTED, ">"))


def _cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with a bare ``…`` (for table rows), never inside a marker."""
    return clip(text, width, unbroken=(REDACTED, ">"))


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip()) if "\n" in text else text


def _exc_text(ctx: _Ctx, exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:
        message = "<unprintable message>"
    message = _clip(_one_line(ctx.redact(message[:400])), 120)
    return f"{_type_name(exc)}: {message}" if message else _type_name(exc)


def _take(ctx: _Ctx, make_iter: Callable[[], Iterator[Any]], limit: int) -> tuple[list[Any], str | None]:
    """At most ``limit`` items from a fresh iterator, and a note if iteration failed or timed out."""
    out: list[Any] = []
    try:
        ctx.check()
        iterator = make_iter()
        for _ in range(limit):
            ctx.check()
            try:
                out.append(next(iterator))
            except StopIteration:
                break
    except _Timeout:
        ctx.timed_out = True
        return out, ctx.timeout_note()
    except Exception as exc:
        return out, f"<iteration failed: {_exc_text(ctx, exc)}>"
    return out, None


def _safe_len(ctx: _Ctx, value: object) -> int | None:
    try:
        ctx.check()
        n = len(value)  # type: ignore[arg-type]
    except _Timeout:
        ctx.timed_out = True
        return None
    except Exception:
        return None
    return n if isinstance(n, int) else None


def _join_bounded(parts: Iterable[str], budget: int) -> tuple[str, int, bool]:
    """Join rendered items with ', ' until ``budget`` characters.

    Returns the text, how many items it holds, and whether every item fit. Items are
    pulled lazily, so nothing past the budget is rendered.
    """
    out: list[str] = []
    used = 0
    for part in parts:
        if out and used + len(part) + 2 > budget:
            return ", ".join(out), len(out), False
        out.append(part)
        used += len(part) + 2
    return ", ".join(out), len(out), True


def _lookahead(ctx: _Ctx, lookahead: int) -> int:
    if ctx.redactor is None:
        return 0
    return max(lookahead, ctx.redactor._longest_value + 1)


def _redacted_head(ctx: _Ctx, text: str, head: int, lookahead: int) -> tuple[str, int]:
    """The first ``head`` characters of ``text`` after redaction, and how many are left out.

    Redaction runs on a window reaching ``lookahead`` characters past the cut, so a secret
    straddling the cut is replaced whole rather than shown in part. The count is exact
    when the window covers the whole text and in characters of the original otherwise.
    """
    if ctx.redactor is None:
        return text[:head], max(0, len(text) - head)
    window = text[: head + _lookahead(ctx, lookahead)]
    redacted = ctx.redact(window)
    if len(window) == len(text):
        omitted = max(0, len(redacted) - head)
        return (ctx.redactor.guard_cut(redacted[:head]) if omitted else redacted), omitted
    return ctx.redactor.guard_cut(redacted[:head]), max(1, len(text) - head)

"""Compact, bounded, secret-free summaries of kernel values for a repair prompt.

A repair prompt is grounded in what the kernel actually holds: the shape of the
DataFrame, the keys of the dict, the type of the thing that failed. This module turns
live objects into short text without ever rendering a huge object whole, without being
derailed by objects whose ``__repr__`` raises or hangs, and without letting secrets
(environment values, credentials in variables, keys pasted into code) leave the kernel.

Nothing here imports IPython, numpy or pandas: numpy and pandas objects are recognised
through ``sys.modules`` only when the user has already imported them.

Time limits: :func:`summarize_value` arms a one-shot ``ITIMER_REAL``/``SIGALRM`` timer
when it runs in the main thread and no other real-time timer is armed (it never
touches someone else's timer), so even a ``__repr__`` that sleeps is cut off. Otherwise
it relies on bounded rendering plus a cooperative deadline checked between items.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import functools
import inspect
import io
import itertools
import math
import os
import re
import signal
import sys
import threading
import time
import tokenize
import types
import warnings
from collections import Counter, deque
from collections.abc import (
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    Sequence,
    ValuesView,
)
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

__all__ = [
    "REDACTED",
    "Redactor",
    "ValueSummary",
    "render_summaries",
    "summarize_names",
    "summarize_value",
]

#: Every redaction marker starts with this, e.g. ``<redacted:env ANTHROPIC_API_KEY>``,
#: ``<redacted:credential name>``, ``<redacted:secret-like value>``, ``<redacted:known secret>``;
#: so ``REDACTED in text`` tells whether anything was redacted.
REDACTED = "<redacted"

_LABEL_CREDENTIAL = "credential name"
_LABEL_SHAPE = "secret-like value"
_LABEL_KNOWN = "known secret"


def _marker(label: str) -> str:
    return f"{REDACTED}:{label}>"


def _marker_labels(text: str) -> list[str]:
    return [m.group(1)[len(REDACTED) + 1 : -1] or "redacted" for m in _MARKER_RE.finditer(text)]


_CREDENTIAL_MARKER = _marker(_LABEL_CREDENTIAL)
_MARKER_RE = re.compile(r"(<redacted(?::[^<>\n]{0,120})?>)")

# Rendering limits.
_TOP_ITEMS = 8  # items shown of a top-level list/tuple/set
_NESTED_ITEMS = 4  # items shown of a container inside a container
_MAX_DEPTH = 2  # containers nested deeper than this are shown as [...]
_DICT_SMALL = 6  # dicts up to this size are shown whole
_DICT_KEYS = 10  # keys sampled from a big dict (the most items ever iterated)
_DICT_PREVIEWS = 3  # item previews of a big dict
_NESTED_STR = 40  # characters of a string inside a container
_NESTED_REPR = 60  # characters of any other repr inside a container
_DF_COLUMNS = 20  # columns listed with their dtypes
_DF_PREVIEW_COLS = 8  # columns in the head(3) preview
_DF_ROWS = 3
_SERIES_VALUES = 5
_ARRAY_FLAT_VALUES = 6
_REDACT_LOOKAHEAD = 4096  # characters past a cut that are redacted before cutting (top level)
_NESTED_LOOKAHEAD = 512


# --------------------------------------------------------------------------------------
# Public data
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ValueSummary:
    """The summary of one named value, ready for a prompt."""

    name: str
    type_name: str
    text: str  # the summary (already redacted if needed)
    redacted: bool = False


# --------------------------------------------------------------------------------------
# Time limits
# --------------------------------------------------------------------------------------


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

    def __init__(self, time_limit_s: float, redactor: Redactor | None) -> None:
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


# --------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------


def _clip(text: str, max_chars: int) -> str:
    """``text`` cut to at most ``max_chars`` characters, with a visible ``…[+N chars]`` marker."""
    if len(text) <= max_chars:
        return text
    if max_chars <= 0:
        return ""
    keep = max_chars - len(f"…[+{len(text)} chars]")
    if keep < 1:
        return text[:max_chars]
    # Do not cut a redaction marker in half.
    start = text.rfind(REDACTED, 0, keep)
    if start != -1 and text.find(">", start) >= keep:
        keep = start
    return f"{text[:keep]}…[+{len(text) - keep} chars]"


def _cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with a bare ``…`` (for table rows), never inside a marker."""
    if len(text) <= width:
        return text
    keep = max(0, width - 1)
    start = text.rfind(REDACTED, 0, keep)
    if start != -1 and text.find(">", start) >= keep:
        keep = start
    return text[:keep] + "…"


def _type_name(value: object) -> str:
    try:
        name = type(value).__name__
    except Exception:
        return "object"
    return name if isinstance(name, str) else "object"


def _qualname(obj: object) -> str:
    try:
        name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    except Exception:
        name = None
    return name if isinstance(name, str) else "?"


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip()) if "\n" in text else text


def _exc_text(ctx: _Ctx, exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:
        message = "<unprintable message>"
    message = _clip(_one_line(ctx.redact(message[:400])), 120)
    return f"{_type_name(exc)}: {message}" if message else _type_name(exc)


def _type_attr(module: object, name: str) -> type | None:
    if module is None:
        return None
    try:
        attr = getattr(module, name, None)
    except Exception:
        return None
    return attr if isinstance(attr, type) else None


class _Libs:
    """numpy / pandas types, only if the user already imported those libraries."""

    def __init__(self) -> None:
        np = sys.modules.get("numpy")
        pd = sys.modules.get("pandas")
        self.np: Any = np
        self.ndarray = _type_attr(np, "ndarray")
        self.np_generic = _type_attr(np, "generic")
        self.DataFrame = _type_attr(pd, "DataFrame")
        self.Series = _type_attr(pd, "Series")
        self.Index = _type_attr(pd, "Index")
        self.RangeIndex = _type_attr(pd, "RangeIndex")
        self.MultiIndex = _type_attr(pd, "MultiIndex")


def _is(t: type, cls: type | None) -> bool:
    return cls is not None and issubclass(t, cls)


def _namedtuple_fields(t: type) -> tuple[str, ...] | None:
    if not issubclass(t, tuple):
        return None
    fields = t.__dict__.get("_fields") or getattr(t, "_fields", None)
    if isinstance(fields, tuple) and all(isinstance(f, str) for f in fields):
        return fields
    return None


def _dataclass_fields(t: type) -> list[str] | None:
    if not dataclasses.is_dataclass(t):
        return None
    params = getattr(t, "__dataclass_params__", None)
    if params is None or not getattr(params, "repr", False):
        return None
    try:
        return [f.name for f in dataclasses.fields(t) if f.repr]
    except TypeError:
        return None


_CONTAINER_BRACKETS: tuple[tuple[type, str, str], ...] = (
    (list, "[", "]"),
    (tuple, "(", ")"),
    (deque, "[", "]"),
    (set, "{", "}"),
    (frozenset, "{", "}"),
    (KeysView, "[", "]"),
    (ValuesView, "[", "]"),
    (ItemsView, "[", "]"),
    (AbstractSet, "{", "}"),
    (Sequence, "[", "]"),
)


def _brackets(t: type) -> tuple[str, str] | None:
    """Brackets for iterable containers that are safe to sample (not str/bytes/range/iterators)."""
    if issubclass(t, (str, bytes, bytearray, memoryview, range)):
        return None
    for cls, opening, closing in _CONTAINER_BRACKETS:
        if issubclass(t, cls):
            return opening, closing
    return None


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


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------


def _str_like(ctx: _Ctx, value: str | bytes | bytearray, budget: int, lookahead: int) -> str:
    """``'head'…[+N chars]`` with the head redacted and sized so the repr fits ``budget``.

    Only a window of ``budget`` plus a look-ahead is ever copied or redacted, so a 1 GB
    string costs no more than a short one, and a secret straddling the cut is replaced
    whole instead of being shown in part.
    """
    n = len(value)
    size = max(1, budget) + _lookahead(ctx, lookahead) + 1
    if isinstance(value, str):
        window = str.__getitem__(value, slice(0, size))
    else:
        # Bytes are redacted as latin-1 text (one character per byte), then shown as bytes.
        window = bytes(value[:size]).decode("latin-1")
    covers = len(window) == n
    redacted = ctx.redact(window)
    head_len = max(1, budget)
    while True:
        head = redacted[:head_len]
        omitted = len(redacted) - len(head) if covers else n - len(head)
        if omitted > 0 and ctx.redactor is not None:
            head = ctx.redactor.guard_cut(head)  # a secret spread wider than the look-ahead
        shown = repr(head) if isinstance(value, str) else repr(head.encode("latin-1", "replace"))
        if omitted <= 0:
            return shown
        marker = f"…[+{omitted} chars]"
        if len(shown) + len(marker) <= budget or head_len <= 1:
            return shown + marker
        head_len = max(1, head_len - (len(shown) + len(marker) - budget))


def _int_text(value: int) -> str:
    bits = value.bit_length()
    if bits > 256:
        digits = int(bits * math.log10(2)) + 1
        if digits > 4000:
            return f"<~{digits} digits>"
        text = int.__repr__(value)
        return f"{text[:20]}…{text[-6:]} ({len(text)} digits)"
    return int.__repr__(value)


def _safe_repr(ctx: _Ctx, value: object, budget: int, lookahead: int) -> str:
    if ctx.timed_out:
        return "…"
    try:
        ctx.check()
        text = repr(value)
    except _Timeout:
        ctx.timed_out = True
        return f"<repr {ctx.timeout_note()[1:]}"
    except Exception as exc:
        return f"<repr failed: {_exc_text(ctx, exc)}>"
    if not isinstance(text, str):
        return "<repr failed: not a string>"
    head, omitted = _redacted_head(ctx, text, budget, lookahead)
    return head[: max(1, budget - 1)] + "…" if omitted else head


def _signature(ctx: _Ctx, fn: object) -> str:
    """``(x, y=1)`` with defaults rendered boundedly; ``(…)`` when there is no signature."""
    try:
        ctx.check()
        sig = inspect.signature(fn)  # type: ignore[arg-type]
        params = []
        for param in sig.parameters.values():
            if param.default is not inspect.Parameter.empty:
                param = param.replace(default=_Raw(_nested(ctx, param.default, _MAX_DEPTH)))
            params.append(param)
        text = str(sig.replace(parameters=params))
    except _Timeout:
        ctx.timed_out = True
        return "(…)"
    except Exception:
        return "(…)"
    return ctx.redact(text)


class _Raw:
    """An object whose repr is the given text (for pre-rendered signature defaults)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _callable_text(ctx: _Ctx, value: object, t: type, nested: bool) -> str | None:
    """Descriptions of modules, functions, classes, generators; None for anything else."""
    if issubclass(t, types.ModuleType):
        assert isinstance(value, types.ModuleType)
        name = value.__dict__.get("__name__")
        name = name if isinstance(name, str) else "?"
        return f"<module {name}>" if nested else f"module {name}"
    if issubclass(t, type):
        assert isinstance(value, type)
        name = _qualname(value)
        module = value.__dict__.get("__module__")
        if isinstance(module, str) and module not in ("builtins", "__main__"):
            name = f"{module}.{name}"
        return f"<class {name}>" if nested else f"class {name}{_signature(ctx, value)}"
    kinds: tuple[tuple[type | tuple[type, ...], str], ...] = (
        (types.FunctionType, "function"),
        ((types.BuiltinFunctionType, types.BuiltinMethodType), "builtin"),
        (types.MethodType, "method"),
    )
    for cls, kind in kinds:
        if issubclass(t, cls):
            name = _qualname(value)
            return f"<{kind} {name}>" if nested else f"{kind} {name}{_signature(ctx, value)}"
    states: tuple[tuple[type, str, Callable[[Any], str] | None], ...] = (
        (types.GeneratorType, "generator", inspect.getgeneratorstate),
        (types.CoroutineType, "coroutine", inspect.getcoroutinestate),
        (types.AsyncGeneratorType, "async_generator", None),
    )
    for cls, kind, get_state in states:
        if issubclass(t, cls):
            name = _qualname(value)
            if nested:
                return f"<{kind} {name}>"
            state = ""
            if get_state is not None:
                try:
                    state = f" ({get_state(value).removeprefix('GEN_').removeprefix('CORO_').lower()})"
                except Exception:
                    state = ""
            return f"{kind} {name}{state} (not consumed)"
    return None


def _nested(ctx: _Ctx, value: object, depth: int) -> str:
    """A compact one-line rendering of an item inside a container (reprlib-like).

    Whatever goes wrong rendering one item (including running out of time) stays a note
    inside that item, so the items before it are kept.
    """
    if ctx.timed_out:
        return "…"
    try:
        return _nested_unguarded(ctx, value, depth)
    except _Timeout:
        ctx.timed_out = True
        return ctx.timeout_note()
    except Exception as exc:
        return f"<{_type_name(value)}: {_exc_text(ctx, exc)}>"


def _nested_unguarded(ctx: _Ctx, value: object, depth: int) -> str:
    t = type(value)
    if value is None or t is bool or t is float or t is complex:
        return repr(value)
    if t is int:
        return _int_text(value)  # type: ignore[arg-type]
    if issubclass(t, (str, bytes, bytearray)):
        return _one_line(_str_like(ctx, value, _NESTED_STR, _NESTED_LOOKAHEAD))  # type: ignore[arg-type]
    described = _described_lib_object(ctx, ctx.libs, value, t)
    if described is not None:
        return described
    described = _callable_text(ctx, value, t, nested=True)
    if described is not None:
        return described
    if id(value) in ctx.active:
        return "[...]" if issubclass(t, list) else "{...}" if issubclass(t, (dict, Mapping)) else "(...)"
    fields = _namedtuple_fields(t) or _dataclass_fields(t)
    if fields is not None:
        if depth >= _MAX_DEPTH:
            return f"{_qualname(t)}(...)"
        return _record(ctx, value, t, fields, depth + 1, _NESTED_ITEMS, 4 * _NESTED_REPR)
    if issubclass(t, Mapping):
        if depth >= _MAX_DEPTH:
            return "{...}"
        return _mapping_body(ctx, value, depth + 1, _NESTED_ITEMS, 4 * _NESTED_REPR)  # type: ignore[arg-type]
    brackets = _brackets(t)
    if brackets is not None:
        opening, closing = brackets
        if depth >= _MAX_DEPTH:
            return f"{opening}...{closing}"
        return _sequence_body(ctx, value, opening, closing, depth + 1, _NESTED_ITEMS, 4 * _NESTED_REPR)
    if _default_repr(t):
        return f"<{_qualname(t)} object>"
    return _one_line(_safe_repr(ctx, value, _NESTED_REPR, _NESTED_LOOKAHEAD))


def _default_repr(t: type) -> bool:
    try:
        return bool(getattr(t, "__repr__", None) is object.__repr__)
    except Exception:
        return False


def _sequence_body(
    ctx: _Ctx, value: object, opening: str, closing: str, depth: int, limit: int, budget: int
) -> str:
    """``[a, b, c, ...]`` of at most ``limit`` items, rendered one level deeper."""
    n = _safe_len(ctx, value)
    items, problem = _take(ctx, lambda: iter(value), limit)  # type: ignore[call-overload]
    ctx.active.add(id(value))
    try:
        rendered = (_nested(ctx, item, depth) for item in items)
        body, _, complete = _join_bounded(rendered, budget)
    finally:
        ctx.active.discard(id(value))
    extra = []
    if problem is not None:
        extra.append(problem)
    elif not complete or (n is not None and n > len(items)) or (n is None and len(items) == limit):
        extra.append("...")
    if extra:
        body = ", ".join([body, *extra]) if body else ", ".join(extra)
    if opening == "(" and n == 1 and not extra:
        body += ","
    return f"{opening}{body}{closing}"


def _mapping_body(ctx: _Ctx, value: Mapping[Any, Any], depth: int, limit: int, budget: int) -> str:
    """``{k: v, ...}`` of at most ``limit`` items; values under secret-named keys are redacted."""
    n = _safe_len(ctx, value)
    pairs, problem = _take(ctx, lambda: iter(value.items()), limit)
    ctx.active.add(id(value))
    try:
        rendered = (_pair(ctx, pair, depth) for pair in pairs)
        body, _, complete = _join_bounded(rendered, budget)
    finally:
        ctx.active.discard(id(value))
    if problem is not None:
        body = f"{body}, {problem}" if body else problem
    elif not complete or (n is not None and n > len(pairs)):
        body = f"{body}, ..." if body else "..."
    return "{" + body + "}"


def _pair(ctx: _Ctx, pair: object, depth: int) -> str:
    if not (isinstance(pair, tuple) and len(pair) == 2):
        return _nested(ctx, pair, depth)
    key, val = pair
    shown = ctx.secret_marker(val) if ctx.is_secret_key(key) else _nested(ctx, val, depth)
    return f"{_nested(ctx, key, depth)}: {shown}"


def _record(
    ctx: _Ctx, value: object, t: type, fields: Sequence[str], depth: int, limit: int, budget: int
) -> str:
    """``Name(a=1, b=2)`` for namedtuples and dataclasses, fields read without running reprs."""
    parts: list[str] = []
    for name in fields[:limit]:
        if ctx.timed_out:
            break
        if ctx.is_secret_key(name):
            parts.append(f"{name}={ctx.secret_marker()}")
            continue
        try:
            ctx.check()
            field_value = getattr(value, name)
        except _Timeout:
            ctx.timed_out = True
            parts.append(ctx.timeout_note())
            break
        except Exception as exc:
            parts.append(f"{name}=<failed: {_exc_text(ctx, exc)}>")
            continue
        parts.append(f"{name}={_nested(ctx, field_value, depth)}")
    body, _, complete = _join_bounded(parts, budget)
    if not complete or len(fields) > limit:
        body += ", ..."
    return f"{_qualname(t)}({body})"


# ---- numpy / pandas ------------------------------------------------------------------


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def _array_preview(ctx: _Ctx, arr: Any) -> str:
    """A tiny preview through numpy's own summarising formatter: only edge items are formatted."""
    np = ctx.libs.np
    ctx.check()
    if arr.size == 0:
        return "[]"
    if arr.ndim <= 3:
        text = np.array2string(
            arr,
            max_line_width=200,
            precision=6,
            threshold=20,
            edgeitems=3 if arr.ndim == 1 else 2,
            separator=", ",
        )
        return _one_line(ctx.redact(str(text)))
    # More dimensions: even 2 edge items per axis multiply up, so show the first few values.
    first = np.asarray(arr.flat[:_ARRAY_FLAT_VALUES])
    text = _one_line(ctx.redact(str(np.array2string(first, precision=6, separator=", "))))
    if arr.size > _ARRAY_FLAT_VALUES and text.endswith("]"):
        text = text[:-1] + ", ...]"
    return f"first values: {text}"


def _ndarray_text(ctx: _Ctx, arr: Any) -> str:
    out: list[str] = []
    ok = False
    with _Guard(ctx, out, "shape"):
        ctx.check()
        head = f"{_type_name(arr)} shape={tuple(arr.shape)} dtype={arr.dtype}"
        nbytes = int(arr.nbytes)
        if nbytes >= 1 << 20:
            head += f" ({_human_bytes(nbytes)})"
        ctx.header = head
        out.append(head)
        ok = True
    if ok:
        with _Guard(ctx, out, "preview"):
            out.append(_array_preview(ctx, arr))
    return " ".join(out)


def _dataframe_text(ctx: _Ctx, df: Any, budget: int) -> str:
    lines: list[str] = []
    nrows = ncols = 0
    ok = False
    with _Guard(ctx, lines, "shape"):
        ctx.check()
        nrows, ncols = (int(n) for n in df.shape)
        ctx.header = f"{_type_name(df)} {nrows} rows × {ncols} columns"
        lines.append(ctx.header)
        ok = True
    if not ok:
        return " ".join([_type_name(df), *lines])
    small: Any = None
    with _Guard(ctx, lines, "columns"):
        ctx.check()
        small = df.iloc[:_DF_ROWS, :_DF_COLUMNS]
        cols = (
            f"{_one_line(_clip(ctx.redact(str(name)), 40))}: {dtype}" for name, dtype in small.dtypes.items()
        )
        text, shown, _ = _join_bounded(cols, max(60, budget // 3))
        if ncols > shown:
            text += f", … (+{ncols - shown} more)"
        lines.append(f"columns: {text or '(none)'}")
    if not ctx.timed_out and _type_name(df.index) != "RangeIndex":
        with _Guard(ctx, lines, "index"):
            lines.append(f"index: {_index_text(ctx, df.index)}")
    if small is not None and nrows and not ctx.timed_out:
        with _Guard(ctx, lines, "preview"):
            ctx.check()
            preview = small.iloc[:, :_DF_PREVIEW_COLS]
            secret_cols = [i for i, c in enumerate(preview.columns) if ctx.is_secret_key(c)]
            if secret_cols:
                preview = preview.copy()  # a 3-row copy; the user's frame is never touched
                for i in secret_cols:
                    preview.isetitem(i, [ctx.secret_marker()] * len(preview))
            table = ctx.redact(
                str(
                    preview.to_string(
                        max_colwidth=max(24, len(_CREDENTIAL_MARKER) + 4), show_dimensions=False
                    )
                )
            )
            rows = table.splitlines()
            used = sum(len(line) + 1 for line in lines)
            width = max(24, (budget - used) // max(1, len(rows)) - 1)
            lines.extend(_cut(row.rstrip(), width) for row in rows)
    return "\n".join(lines)


def _index_text(ctx: _Ctx, index: Any) -> str:
    ctx.check()
    libs = ctx.libs
    tname = _type_name(index)
    if _is(type(index), libs.RangeIndex):
        return f"{tname}(start={index.start}, stop={index.stop}, step={index.step})"
    n = len(index)
    head = f"{tname} len {n} dtype {index.dtype}"
    if _is(type(index), libs.MultiIndex):
        head += f", {index.nlevels} levels, names {_nested(ctx, list(index.names), 1)}"
    values, problem = _take(ctx, lambda: iter(index[:_SERIES_VALUES].tolist()), _SERIES_VALUES)
    body, shown, complete = _join_bounded((_nested(ctx, v, 1) for v in values), 4 * _NESTED_REPR)
    more = f", {problem}" if problem else ", ..." if not complete or n > shown else ""
    return f"{head}; first: [{body}{more}]"


def _series_text(ctx: _Ctx, series: Any, budget: int) -> str:
    out: list[str] = []
    ok = False
    n = 0
    with _Guard(ctx, out, "shape"):
        ctx.check()
        name = series.name
        n = len(series)
        label = "" if name is None else f" {_nested(ctx, name, 1)}"
        ctx.header = f"{_type_name(series)}{label} len {n} dtype {series.dtype}"
        out.append(ctx.header)
        ok = True
    if not ok:
        return " ".join([_type_name(series), *out])
    with _Guard(ctx, out, "values"):
        ctx.check()
        if ctx.is_secret_key(name):
            out.append(f"values: {ctx.secret_marker()}")
        else:
            head = series.iloc[:_SERIES_VALUES]
            values = head.tolist()
            if _is(type(series.index), ctx.libs.RangeIndex):
                rendered = [_nested(ctx, v, 1) for v in values]
            else:
                labels = head.index.tolist()
                rendered = [
                    f"{_nested(ctx, k, 1)}: {_nested(ctx, v, 1)}"
                    for k, v in zip(labels, values, strict=False)
                ]
            body, shown, complete = _join_bounded(rendered, max(40, budget - len(ctx.header) - 12))
            more = ", ..." if not complete or n > shown else ""
            out.append(f"first: [{body}{more}]")
    return " ".join(out)


def _described_lib_object(ctx: _Ctx, libs: _Libs, value: Any, t: type) -> str | None:
    """Compact descriptions of numpy/pandas objects inside containers, or None."""
    if libs.np is None and libs.DataFrame is None:
        return None
    try:
        if _is(t, libs.ndarray):
            if value.size <= 8 and value.ndim <= 1:
                return f"{_type_name(value)}({_array_preview(ctx, value)}, dtype={value.dtype})"
            return f"{_type_name(value)}(shape={tuple(value.shape)}, dtype={value.dtype})"
        if _is(t, libs.np_generic):
            return f"{_type_name(value)}({_clip(ctx.redact(str(value)), _NESTED_REPR)})"
        if _is(t, libs.DataFrame):
            rows, cols = value.shape
            return f"<{_type_name(value)} {rows} rows × {cols} columns>"
        if _is(t, libs.Series):
            name = _nested(ctx, value.name, 1)
            return f"<{_type_name(value)} {name} len {len(value)} dtype {value.dtype}>"
        if _is(t, libs.Index):
            return f"<{_index_text(ctx, value)}>"
    except _Timeout:
        ctx.timed_out = True
        return f"<{_type_name(value)} {ctx.timeout_note()[1:]}"
    except Exception as exc:
        return f"<{_type_name(value)}: {_exc_text(ctx, exc)}>"
    return None


# ---- top level -----------------------------------------------------------------------


def _top(ctx: _Ctx, value: object, budget: int) -> str:
    t = type(value)
    tname = _type_name(value)
    ctx.header = tname
    if value is None:
        return "None"
    if t is bool:
        return f"bool {value}"
    if issubclass(t, (str, bytes, bytearray)):
        head = f"{tname} (len {len(value)})"  # type: ignore[arg-type]
        ctx.header = head
        return f"{head} {_str_like(ctx, value, budget - len(head) - 1, _REDACT_LOOKAHEAD)}"  # type: ignore[arg-type]
    libs = ctx.libs
    if _is(t, libs.ndarray):
        return _ndarray_text(ctx, value)
    if _is(t, libs.np_generic):
        out = [tname]
        with _Guard(ctx, out, "value"):
            ctx.check()
            out.append(_clip(ctx.redact(str(value)), budget))
        return " ".join(out)
    if _is(t, libs.DataFrame):
        return _dataframe_text(ctx, value, budget)
    if _is(t, libs.Series):
        return _series_text(ctx, value, budget)
    if _is(t, libs.Index):
        out = []
        with _Guard(ctx, out, "index"):
            out.append(_index_text(ctx, value))
        return " ".join(out)
    if t is int:
        return f"int {_int_text(value)}"  # type: ignore[arg-type]
    if t is float or t is complex:
        return f"{tname} {value!r}"
    described = _callable_text(ctx, value, t, nested=False)
    if described is not None:
        return described
    fields = _namedtuple_fields(t)
    if fields is not None:
        return f"namedtuple {_record(ctx, value, t, fields, 1, _TOP_ITEMS, budget)}"
    dc_fields = _dataclass_fields(t)
    if dc_fields is not None:
        return f"dataclass {_record(ctx, value, t, dc_fields, 1, _TOP_ITEMS, budget)}"
    if issubclass(t, Mapping):
        return _mapping_top(ctx, value, tname, budget)  # type: ignore[arg-type]
    brackets = _brackets(t)
    if brackets is not None:
        n = _safe_len(ctx, value)
        head = f"{tname} (len {n if n is not None else '?'}"
        if issubclass(t, deque):
            maxlen = value.maxlen  # type: ignore[attr-defined]
            if maxlen is not None:
                head += f", maxlen {maxlen}"
        head += ")"
        ctx.header = head
        return f"{head} {_sequence_body(ctx, value, *brackets, 1, _TOP_ITEMS, budget - len(head))}"
    return _object_top(ctx, value, t, tname, budget)


def _mapping_top(ctx: _Ctx, value: Mapping[Any, Any], tname: str, budget: int) -> str:
    n = _safe_len(ctx, value)
    head = f"{tname} (len {n if n is not None else '?'})"
    ctx.header = head
    if n is not None and n <= _DICT_SMALL:
        return f"{head} {_mapping_body(ctx, value, 1, _DICT_SMALL, budget - len(head))}"
    keys, problem = _take(ctx, lambda: iter(value.keys()), _DICT_KEYS)
    ctx.active.add(id(value))
    try:
        sample, shown, complete = _join_bounded((_nested(ctx, k, 1) for k in keys), max(60, budget // 2))
        if problem is not None:
            sample = f"{sample}, {problem}" if sample else problem
        elif not complete or n is None or n > shown:
            sample = f"{sample}, ..." if sample else "..."
        text = f"{head} keys sample: [{sample}]"
        if problem is None and not ctx.timed_out:
            previews = _mapping_body(ctx, value, 1, _DICT_PREVIEWS, max(40, budget - len(text) - 10))
            text += f"; items: {previews}"
    finally:
        ctx.active.discard(id(value))
    return text


def _object_top(ctx: _Ctx, value: object, t: type, tname: str, budget: int) -> str:
    if _default_repr(t):
        # `<Foo object at 0x…>` says nothing: show the instance attributes instead.
        try:
            attrs = object.__getattribute__(value, "__dict__")
        except Exception:
            attrs = None
        if isinstance(attrs, dict) and attrs:
            items, _ = _take(ctx, lambda: iter(attrs.items()), _TOP_ITEMS)
            rendered = (
                f"{k}={ctx.secret_marker(v) if ctx.is_secret_key(k) else _nested(ctx, v, 1)}"
                for k, v in items
            )
            body, shown, complete = _join_bounded(rendered, budget)
            more = ", ..." if not complete or len(attrs) > shown else ""
            return f"{tname} object; attributes: {body}{more}"
        return f"{tname} object"
    return f"{tname} {_safe_repr(ctx, value, budget, _REDACT_LOOKAHEAD)}"


def _summarize(value: object, max_chars: int, time_limit_s: float, redactor: Redactor | None) -> str:
    max_chars = max(1, max_chars)
    ctx = _Ctx(time_limit_s, redactor)
    alarm = _Alarm(time_limit_s)
    text: str | None = None
    try:
        try:
            alarm.start()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # e.g. numpy's FutureWarnings while formatting
                text = _top(ctx, value, max_chars)
        finally:
            alarm.stop()
    except _Timeout:
        ctx.timed_out = True
    except Exception as exc:  # a bug here, or an object hostile in a way not foreseen
        text = f"{ctx.header or _type_name(value)} <summary failed: {_exc_text(ctx, exc)}>"
    if text is None:
        text = f"{ctx.header or _type_name(value)} {ctx.timeout_note()}"
    elif ctx.timed_out and "timed out" not in text:
        text = f"{text} {ctx.timeout_note()}"
    note = ctx.timeout_note()
    if ctx.timed_out and len(text) > max_chars and note in text and max_chars >= len(note) + 20:
        # Keep the note visible even when the summary has to be cut.
        return _clip(text.replace(note, "").rstrip(), max_chars - len(note) - 1) + " " + note
    return _clip(text, max_chars)


def summarize_value(value: object, *, max_chars: int = 300, time_limit_s: float = 0.2) -> str:
    """A compact, typed, one-or-few-line summary of ``value`` for a prompt.

    Never longer than ``max_chars`` (cut with a visible ``…[+N chars]`` marker); never
    renders a huge object whole (at most ~10 items of a container are iterated, numpy
    and pandas objects are previewed through their own summarising formatters);
    survives objects whose ``__repr__``/``__len__``/attributes raise (shown as e.g.
    ``<repr failed: ValueError: ...>``) and, when a timer can be used, ones that hang
    (``<repr timed out after 0.2s>``). Generators and iterators are never consumed.
    No redaction is done here: see :meth:`Redactor.summarize`.
    """
    return _summarize(value, max_chars, time_limit_s, None)


# --------------------------------------------------------------------------------------
# Secrets in code, found from its structure
# --------------------------------------------------------------------------------------
#
# Text patterns see ``password = "…"``; they cannot see ``connect("db", 5432, "bob", "…")``
# (the callee's fourth parameter is ``password``), ``Creds("u", "…")`` (a dataclass whose
# second field is ``password``), ``user, password = "bob", "…"`` or a DataFrame built with a
# ``password`` column. Parsing the code can. The callee's parameters come from a function,
# class, dataclass or namedtuple defined in the same code, or from the namespace (read with
# ``inspect.getattr_static``, so no property or ``__getattr__`` of the user's runs).

_MAX_ITEMS = 256  # literals taken from one container value
_PAIR_NAME_CHARS = 16  # the first item of a pair shorter than this is taken as a user name


@dataclass(frozen=True)
class SecretLiteral:
    """A string literal holding a secret: ``code[start:end]`` is the whole literal expression."""

    start: int
    end: int
    value: str
    remember: bool  # redact it wherever it appears (False: the user name of a (user, password) pair)


def secret_literals(
    code: str, is_secret_name: Callable[[str], bool], namespace: Mapping[str, Any] | None = None
) -> list[SecretLiteral] | None:
    """The secret literals of ``code`` in source order, or ``None`` when it does not parse."""
    tree = _parse_python(code)
    if tree is None:
        return None
    finder = _Finder(is_secret_name, namespace or {}, _local_signatures(tree))
    try:
        finder.visit(tree)
    except RecursionError:
        return None
    offsets = _Offsets(code)
    out: dict[tuple[int, int], SecretLiteral] = {}
    for node, remember in finder.found:
        span = offsets.span(node)
        if span is None:
            continue
        raw = node.value
        value = (
            raw if isinstance(raw, str) else raw.decode("utf-8", "replace") if isinstance(raw, bytes) else ""
        )
        previous = out.get(span)
        out[span] = SecretLiteral(span[0], span[1], value, remember or bool(previous and previous.remember))
    return [out[key] for key in sorted(out)]


def _parse_python(code: str) -> ast.Module | None:
    """``code`` parsed; IPython lines (``%magic``, ``!cmd``, ``x = !cmd``) are blanked out first
    if needed, keeping every offset, so the rest of a notebook cell is still read as Python."""
    for attempt in (code, _IPYTHON_LINE_RE.sub(lambda m: " " * len(m.group(0)), code)):
        try:
            return ast.parse(attempt)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return None


_IPYTHON_LINE_RE = re.compile(r"(?m)^[ \t]*(?:[%!].*|[\w., \t]+?=[ \t]*[%!].*)$")


# --------------------------------------------------------------------------- positions


class _Offsets:
    """ast positions (line, UTF-8 byte column) to character offsets in the code."""

    def __init__(self, code: str) -> None:
        self.lines: list[str] = []
        self.starts: list[int] = []
        pos = 0
        for match in re.finditer(r"[^\r\n]*(?:\r\n|\r|\n|$)", code):
            if match.start() == len(code) and self.lines and not match.group():
                break
            self.starts.append(pos)
            self.lines.append(match.group())
            pos = match.end()

    def offset(self, lineno: int, col: int) -> int | None:
        if not 0 < lineno <= len(self.lines):
            return None
        line = self.lines[lineno - 1]
        chars = len(line.encode("utf-8")[:col].decode("utf-8", "replace"))
        return self.starts[lineno - 1] + chars

    def span(self, node: ast.expr) -> tuple[int, int] | None:
        if node.end_lineno is None or node.end_col_offset is None:
            return None
        start = self.offset(node.lineno, node.col_offset)
        end = self.offset(node.end_lineno, node.end_col_offset)
        return None if start is None or end is None or end <= start else (start, end)


# --------------------------------------------------------------------------- the callee's parameters


def _local_signatures(tree: ast.Module) -> dict[str, list[str]]:
    """Positional parameter names of the functions, classes and namedtuples the code defines."""
    out: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.setdefault(node.name, [a.arg for a in [*node.args.posonlyargs, *node.args.args]])
        elif isinstance(node, ast.ClassDef):
            params = _class_params(node)
            if params is not None:
                out[node.name] = params
        elif (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            fields = _namedtuple_call_fields(node.value)
            if fields is not None:
                out[node.targets[0].id] = fields
    return out


def _class_params(node: ast.ClassDef) -> list[str] | None:
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            return [a.arg for a in [*item.args.posonlyargs, *item.args.args]][1:]
    fields = [
        item.target.id
        for item in node.body
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.simple
    ]
    return fields or None  # a dataclass, NamedTuple, attrs or pydantic model: fields in order


def _namedtuple_call_fields(value: ast.expr) -> list[str] | None:
    """``namedtuple("Login", "user token")`` / ``NamedTuple("Login", [("user", str), ...])``."""
    if not (isinstance(value, ast.Call) and len(value.args) >= 2):
        return None
    func = value.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name not in ("namedtuple", "NamedTuple"):
        return None
    spec = value.args[1]
    if isinstance(spec, ast.Constant) and isinstance(spec.value, str):
        return spec.value.replace(",", " ").split()
    if isinstance(spec, (ast.List, ast.Tuple)):
        names = []
        for item in spec.elts:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                names.append(item.value)
            elif isinstance(item, ast.Tuple) and item.elts and isinstance(item.elts[0], ast.Constant):
                names.append(str(item.elts[0].value))
        return names
    return None


def _runtime_params(obj: object, bound: bool) -> list[str] | None:
    """Positional parameter names of a live callable, without running the user's code."""
    try:
        if inspect.isclass(obj):
            if dataclasses.is_dataclass(obj):
                return [f.name for f in dataclasses.fields(obj) if f.init]
            fields = obj.__dict__.get("_fields")
            if isinstance(fields, tuple) and all(isinstance(f, str) for f in fields):
                return list(fields)
        signature = inspect.signature(obj)  # type: ignore[arg-type]
    except Exception:  # builtins without a signature, odd callables: nothing to say
        return None
    names = []
    for param in signature.parameters.values():
        if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            break
        names.append(param.name)
    return names[1:] if bound else names


def _resolve(func: ast.expr, namespace: Mapping[str, Any]) -> tuple[object, bool] | None:
    """The live object a call's ``func`` names (``f``, ``mod.f``, ``obj.method``), and whether bound."""
    chain: list[str] = []
    while isinstance(func, ast.Attribute):
        chain.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or len(chain) > 4:
        return None
    try:
        if func.id not in namespace:
            return None
        obj: object = namespace[func.id]
        bound = False
        for attr in reversed(chain):
            if inspect.ismodule(obj) or inspect.isclass(obj):
                obj = inspect.getattr_static(obj, attr)
                bound = False
            else:  # an instance: the method is looked up on its class
                obj = inspect.getattr_static(type(obj), attr)
                bound = inspect.isfunction(obj)
            if isinstance(obj, (staticmethod, classmethod)):
                bound = isinstance(obj, classmethod)
                obj = obj.__func__
    except Exception:
        return None
    return obj, bound


# --------------------------------------------------------------------------- the walk


def _name_of(target: ast.expr) -> str | None:
    """The name a value is stored under: ``x``, ``obj.x``, ``d["x"]``."""
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Subscript):
        key = target.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None


def _strings(node: ast.expr | None, budget: list[int]) -> Iterator[ast.Constant]:
    """The string literals a value expression is made of (containers and ``+`` followed; calls not:
    ``getpass("Password: ")`` holds no secret)."""
    if node is None or budget[0] <= 0:
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        budget[0] -= 1
        yield node
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for item in node.elts:
            yield from _strings(item, budget)
    elif isinstance(node, ast.Dict):
        for item in node.values:
            yield from _strings(item, budget)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield from _strings(node.left, budget)
        yield from _strings(node.right, budget)


class _Finder(ast.NodeVisitor):
    def __init__(
        self,
        is_secret_name: Callable[[str], bool],
        namespace: Mapping[str, Any],
        local: dict[str, list[str]],
    ) -> None:
        self.is_secret = is_secret_name
        self.namespace = namespace
        self.local = local
        self.found: list[tuple[ast.Constant, bool]] = []

    # ---- recording

    def _take(self, value: ast.expr | None) -> None:
        literals = list(_strings(value, [_MAX_ITEMS]))
        pair = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == 2 and len(literals) == 2
        for i, node in enumerate(literals):
            # ("user", "password"): the first is a user name unless it looks like a key itself.
            text = node.value if isinstance(node.value, str) else ""
            self.found.append((node, not (pair and i == 0 and len(text) < _PAIR_NAME_CHARS)))

    def _bind(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for sub_target, sub_value in zip(target.elts, value.elts, strict=True):
                    self._bind(sub_target, sub_value)
            return
        name = _name_of(target)
        if name is not None and self._secret_holder(name, value):
            self._take(value)

    def _secret_holder(self, name: str, value: ast.expr | None) -> bool:
        if self.is_secret(name):
            return True
        # smtp_login = ("mailer", "pw"): a login holding a pair or list is a credential.
        return isinstance(value, (ast.Tuple, ast.List)) and is_login_name(name)

    # ---- statements

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._bind(target, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._bind(node.target, node.value)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._bind(node.target, node.value)
        self.generic_visit(node)

    # ---- expressions

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        if any(_name_of(op) is not None and self.is_secret(_name_of(op) or "") for op in operands):
            for op in operands:
                if isinstance(op, ast.Constant):
                    self._take(op)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values, strict=True):
            if (
                isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and self._secret_holder(key.value, value)
            ):
                self._take(value)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        for keyword in node.keywords:
            if keyword.arg is not None and self._secret_holder(keyword.arg, keyword.value):
                self._take(keyword.value)
        params = self._params(node.func)
        if params:
            for arg, param in zip(node.args, params, strict=False):
                if isinstance(arg, ast.Starred):
                    break
                if self.is_secret(param):
                    self._take(arg)
        self._frame_columns(node)
        self.generic_visit(node)

    def _params(self, func: ast.expr) -> list[str] | None:
        if isinstance(func, ast.Name) and func.id in self.local:
            return self.local[func.id]
        resolved = _resolve(func, self.namespace)
        if resolved is None:
            return None
        return _runtime_params(*resolved)

    def _frame_columns(self, node: ast.Call) -> None:
        """``DataFrame([[..., "pw"], ...], columns=[..., "password"])``: the cells of secret columns."""
        columns = next((k.value for k in node.keywords if k.arg == "columns"), None)
        if not isinstance(columns, (ast.List, ast.Tuple)):
            return
        secret = {
            i
            for i, col in enumerate(columns.elts)
            if isinstance(col, ast.Constant) and isinstance(col.value, str) and self.is_secret(col.value)
        }
        data = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "data"), None)
        if not secret or not isinstance(data, (ast.List, ast.Tuple)):
            return
        for row in data.elts[:_MAX_ITEMS]:
            if isinstance(row, (ast.List, ast.Tuple)):
                for i in secret:
                    if i < len(row.elts):
                        self._take(row.elts[i])


_LOGIN_WORDS = frozenset({"login", "logins", "logon", "signin"})


@functools.lru_cache(maxsize=8192)
def is_login_name(name: str) -> bool:
    """``smtp_login``, ``dbLogins``: a name whose tuple or list value is a (user, password) pair."""
    low = name.lower()
    if "log" not in low and "sign" not in low:
        return False
    return any(part in _LOGIN_WORDS for part in re.split(r"[^a-z]+", _snake(name)) if part)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


# --------------------------------------------------------------------------------------
# Redaction
# --------------------------------------------------------------------------------------


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that make a name a credential name on their own (compared with word parts).
_SECRET_WORDS = _wordset(
    """
    token secret secrets password passwords passwd pwd passphrase passkey credential credentials creds
    auth oauth bearer cookie cookies authorization apikey apikeys accesskey secretkey privatekey privkey
    sessionkey authtoken accesstoken refreshtoken clientsecret sessionid
    """
)
# A word part ending like this is a credential word too ("githubtoken", "dbpassword").
_SECRET_SUFFIXES = ("password", "passwd", "secret", "token", "apikey", "accesskey", "secretkey", "privatekey")
# "key"/"keys"/"tokens"/"id" are credentials only right after one of these words
# ("api_key", "privateKey", "access_tokens", "session_id"; not "key", "sort_key", "tokens").
_KEY_QUALIFIERS = _wordset(
    """
    api private priv access secret session auth client signing encryption master license ssh gpg pgp
    service account app consumer subscription admin bot webhook openai anthropic aws gcp azure stripe
    github slack hf deploy x
    """
)
_QUALIFIED = {
    "key": _KEY_QUALIFIERS,
    "keys": _KEY_QUALIFIERS,
    "tokens": _wordset("access refresh auth api bearer session oauth github id"),
    "id": frozenset({"session"}),
}
# Words that mark a name as *about* a credential rather than holding one ("max_token", "token_ids",
# "password_length", "auth_url", "secret_name").
_NEUTRAL_WORDS = _wordset(
    """
    n num number max min count counts len length limit limits size ids idx index indices type types
    usage budget url uri endpoint file path dir env var name names field fields prompt policy expiry
    expires expiration ttl timeout required enabled method mode scope scopes hint format pattern regex
    label placeholder column col kind position pos offset offsets mask masks embedding embeddings
    """
)
_WORD_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

_PUBLIC_ENV_NAMES = frozenset(
    {
        *("PATH", "HOME", "PWD", "OLDPWD", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE"),
        *("TZ", "TMPDIR", "TEMP", "TMP", "HOSTNAME", "DISPLAY", "EDITOR", "VISUAL", "PAGER", "SHLVL", "_"),
        *("VIRTUAL_ENV", "MPLBACKEND", "COLORTERM", "CLICOLOR", "FORCE_COLOR", "NO_COLOR", "LS_COLORS"),
        *("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE"),
        *("OPENBLAS_L2_SIZE", "NBREFINE_PROVIDER", "NBREFINE_MODEL", "ANTHROPIC_BASE_URL"),
        *("MAIL", "HISTFILE", "MANPATH", "INFOPATH"),
    }
)
_PUBLIC_ENV_PREFIXES = ("LC_", "XDG_", "PYTHON", "CONDA_", "JUPYTER_", "JPY_", "PIP_", "PYENV", "IPYTHON")
_TRIVIAL_ENV_VALUES = frozenset({"true", "false", "1", "0", "yes", "no", "on", "off", "none", "null"})

# Shapes of real credentials. Hex strings (git SHAs, checksums) and UUIDs are deliberately not
# matched: they are everywhere in ordinary output and are rarely credentials on their own.
_B = r"(?<![A-Za-z0-9_\-])"  # token start boundary
_E = r"(?![A-Za-z0-9_\-])"  # token end boundary
# (substrings without which the shape cannot occur, the shape)
_SHAPES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (hints, re.compile(pattern))
    for hints, pattern in (
        (
            ("PRIVATE KEY",),
            r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY( BLOCK)?-----"
            r"(?:(?:(?!-----)[\s\S]){0,20000}-----END[A-Z0-9 ]{0,40} PRIVATE KEY( BLOCK)?-----"
            r"|(?:[A-Za-z0-9+/=\s]|\\[nr])*)",
        ),
        (("sk-",), _B + r"sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{20,}"),
        (("k_live_", "k_test_"), _B + r"[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"),
        (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), _B + r"gh[pousr]_[A-Za-z0-9]{30,}"),
        (("github_pat_",), _B + r"github_pat_[A-Za-z0-9_]{22,}"),
        (("xox",), _B + r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
        (("AKIA", "ASIA"), r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
        (("AIza",), _B + r"AIza[0-9A-Za-z_\-]{35}"),
        (("hf_",), _B + r"hf_[A-Za-z0-9]{30,}"),
        (("eyJ",), _B + r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}" + _E),
    )
)
_BEARER_RE = re.compile(r"(?i:\bbearer)\s+(?P<tok>[A-Za-z0-9\-._~+/]{16,}=*)")
# The password runs to the LAST `@` before the query, fragment or end of the URL
# (`mysql://root:x@y@db`, `postgresql://svc:a/b@db`); the user name may be empty (`redis://:pw@cache`).
_URL_PASSWORD_RE = re.compile(
    r"(?P<pre>\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^/\s:@'\"<>]{0,100}:)"
    r"(?P<pw>[^\s'\"<>?#]{1,200})@(?=[A-Za-z0-9\[_\-])"
)
# A port and a path that holds an `@` (`http://host:8080/@scope/pkg`), or a placeholder, is not a password.
_URL_NOT_PASSWORD_RE = re.compile(r"[0-9]{1,5}/.*|\$?\{[^{}]*\}|%\(?\w*\)?s")
# AWS secret access keys: 40 base64 characters. Alone they cannot be told from other tokens, so
# only near an access key id or an aws_secret_access_key-like name, and never all-hex (git SHAs).
_AWS_SECRET_RE = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_HINT_RE = re.compile(r"(?i:AKIA|ASIA|aws_secret|secret_?access_?key|aws)")
_AWS_HINTS = ("akia", "asia", "aws", "secretaccesskey", "secret_access_key")
_AWS_NEAR = 300  # characters between the key and its hint
_CANDIDATE_RE = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/=_\-]{32,}(?![A-Za-z0-9+/=_\-])")
_HEX_RE = re.compile(r"[0-9a-fA-F\-_]+")
_SHAPE_MARKER = _marker(_LABEL_SHAPE)
# Substrings without which a rule cannot match (checked before running the rule's regex).
_HEADER_HINTS = ("authorization", "cookie", "api-key")
_NAME_STEMS = (
    "key", "token", "secret", "pass", "pwd", "auth", "cred", "cookie", "bearer", "session", "priv",
    "login", "logon", "signin",
)  # fmt: skip
# The shell's working directory variables: paths, not passwords, whatever "pwd" means elsewhere.
_NOT_CREDENTIAL_NAMES = frozenset({"PWD", "OLDPWD"})

# Remembered secrets (see Redactor.remember). Thresholds, in characters:
# - under _MIN_REMEMBERED a value is redacted only where it was found (the literal, the field):
#   "pw" or "1234" matched everywhere would blank ordinary text;
# - under _WHOLE_WORD_BELOW it is matched only as a whole token ("hunter2", not inside "hunter22");
# - with at least _MIN_NORMALISED letters and digits it is also matched in normalised form: letters
#   and digits only, case-folded, so `" ".join(s)`, 6-character chunks on separate lines, a list of
#   chunks or `s.upper()` are caught. Below that, a spread-out match would hit ordinary text (8
#   letters and digits in a row make a random value one in 36**8 ≈ 2.8e12; a 6-character secret
#   spread over a traceback would match words and numbers far too often).
_MIN_REMEMBERED = 4
_WHOLE_WORD_BELOW = 8
_MIN_NORMALISED = 8
_MAX_REMEMBERED = 4096  # longer strings (a whole file under a secret name) are not remembered
_PREFIX_MIN = 4  # a cut that leaves this many leading letters and digits of a secret shows none
# A random-looking secret (an API key, a generated token: see _random_looking) is also caught in
# part: any run of _FRAGMENT of its letters and digits, found through anchors of _ANCHOR.
_FRAGMENT = 12
_ANCHOR = 8
_ALNUM_RE = re.compile(r"[^\W_]")
_NON_ALNUM_RE = re.compile(r"[\W_]+")
_SPREAD_KEEP_RE = re.compile(r"(['\"`\n])")  # kept around a spread-out secret: lines and quotes
_NAMESPACE_NAMES = 20000  # names of a namespace looked at
_CONTAINER_ITEMS = 64  # items of a container looked into for secrets
_FRAME_ROWS = 256  # values of a DataFrame's credential-named column remembered
_LEARN_ITEMS = 3000  # items looked at inside the values of a namespace (a few ms at most)
# Values with nothing inside to look at (a namespace is mostly these).
_PLAIN_TYPES = frozenset(
    {int, float, bool, complex, str, bytes, type(None), types.ModuleType, types.FunctionType, type}
)


_STRING_TOKEN_RE = re.compile(r"(?P<pre>[A-Za-z]{0,2})(?P<q>'{3}|\"{3}|'|\")(?P<body>.*)(?P=q)", re.S)


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _blank_literals(code: str, found: Sequence[SecretLiteral]) -> str:
    """Each secret literal's body (every string token in its span) replaced by the marker."""
    out: list[str] = []
    pos = 0
    for literal in found:
        if literal.start < pos:
            continue
        out.append(code[pos : literal.start])
        out.append(_LITERAL_BODY_RE.sub(_blank_body, code[literal.start : literal.end]))
        pos = literal.end
    out.append(code[pos:])
    return "".join(out)


_LITERAL_BODY_RE = re.compile(
    r"(?P<pre>[A-Za-z]{0,2})(?P<q>'{3}|\"{3}|'|\")(?P<body>(?:\\.|(?!(?P=q)).)*?)(?P=q)", re.S
)


def _blank_body(m: re.Match[str]) -> str:
    if not m.group("body") or _MARKER_RE.fullmatch(m.group("body")):
        return m.group(0)
    return f"{m.group('pre')}{m.group('q')}{_CREDENTIAL_MARKER}{m.group('q')}"


def _unescaped(body: str) -> str:
    """A literal's body as the string it stands for (as written when that cannot be read)."""
    if "\\" not in body:
        return body
    try:
        value = ast.literal_eval(f'"""{body}"""') if '"""' not in body else body
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return body
    return value if isinstance(value, str) else body


_LIT = (
    r"(?P<pre>[rRbBuUfF]{0,2})"
    r"(?:(?P<q3>'''|\"\"\")(?P<b3>[\s\S]{0,5000}?)(?P=q3)|(?P<q1>['\"])(?P<b1>(?:\\.|(?!(?P=q1))[^\\\n]){0,5000})(?P=q1))"
)
# `name = "lit"`, `name: str = "lit"`, `f(name="lit")`, `name == "lit"`, `obj.name = "lit"`
# Spaces and tabs only, never a newline: in the history block `In [2], defines db_password, host:`
# sits above `    db_password = "…"`, and `host: db_password = "…"` must not read as one statement.
_ASSIGN_RE = re.compile(
    r"(?<![\w])(?P<name>[A-Za-z_][A-Za-z0-9_]{0,80})[ \t]*(?::[ \t]*[\w.\[\], |]{1,60}?[ \t]*)?"
    r"(?::=|[!=]=|=)[ \t]*" + _LIT
)
# `"name": "lit"` (dict literals, JSON), `["name"] = "lit"` (subscript assignment)
_KEYED_RE = re.compile(
    r"(?P<kq>['\"])(?P<name>[A-Za-z_][\w\-. ]{0,80})(?P=kq)[ \t]*(?::|\][ \t]*=)[ \t]*" + _LIT
)
# `name = ("user", "lit")` — e.g. requests' auth tuples: every literal of the tuple
_TUPLE_RE = re.compile(
    r"(?<![\w])(?P<name>[A-Za-z_][A-Za-z0-9_]{0,80})[ \t]*=[ \t]*[(\[]\s*"
    r"(?P<items>(?:[rRbBuU]{0,2}(?:'[^'\\\n]{0,500}'|\"[^\"\\\n]{0,500}\")\s*,\s*){1,3}"
    r"[rRbBuU]{0,2}(?:'[^'\\\n]{0,500}'|\"[^\"\\\n]{0,500}\"))\s*,?\s*[)\]]"
)
_NAME_PATH_RE = re.compile(r"[A-Za-z_][\w.]*(?:\[(?:'[^'\n]*'|\"[^\"\n]*\"|\d+)\])*")
_TUPLE_TARGETS_RE = re.compile(r"[ \t]*(?:[\w.]+[ \t]*,[ \t]*)+")
_TUPLE_ITEM_RE = re.compile(r"(?P<pre>[rRbBuU]{0,2})(?P<q>['\"])(?P<b>[^'\"\\\n]*)(?P=q)")
# `%env NAME=value`, `%set_env NAME value`, `export NAME=value`
_SHELL_RE = re.compile(
    r"(?P<pre>(?:%env|%set_env|\bexport)\s+(?P<name>[A-Za-z_][A-Za-z0-9_]{0,80})(?:\s*=\s*|\s+))"
    r"(?P<val>['\"]?[^\s'\"]+['\"]?)"
)
# HTTP header lines: `Authorization: Basic dXNlcjpwYXNz`
_HEADER_RE = re.compile(
    r"(?m)^(?P<pre>[ \t]*(?:Authorization|Cookie|(?i:proxy-authorization|set-cookie|x-api-key|api-key))"
    r"[ \t]*:[ \t]*)(?P<val>\S[^\n]*)$"
)


def _entropy(text: str) -> float:
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _random_token(tok: str) -> bool:
    """A long token that looks machine-generated rather than like a word, path or identifier."""
    if len(tok) < 32 or _HEX_RE.fullmatch(tok):
        return False
    letters = sum(ch.isalpha() for ch in tok)
    digits = sum(ch.isdigit() for ch in tok)
    if not letters or not digits or letters < len(tok) // 4:
        return False
    separators = len(tok) - letters - digits
    if separators > max(2, len(tok) // 10):
        return False  # paths, snake_case identifiers, dates
    digit_runs = len(re.findall(r"[0-9]+", tok))
    return digit_runs >= 3 and _entropy(tok) >= 3.7


def _normalise(text: str) -> str:
    """Letters and digits only, lower-cased (unless lowering changes the length)."""
    low = text.lower()
    return _NON_ALNUM_RE.sub("", low if len(low) == len(text) else text)


def _random_looking(norm: str) -> bool:
    """A normalised secret that is machine-made rather than words or a path: long, letters and
    digits mixed. Only such values are matched in part (a path's pieces are ordinary text)."""
    if len(norm) < 16:
        return False
    digits = sum(ch.isdigit() for ch in norm)
    return 2 <= digits <= len(norm) - 4 and len(set(norm)) >= 8


def _whole_word(text: str, start: int, end: int) -> bool:
    return (start == 0 or not text[start - 1].isalnum()) and (end == len(text) or not text[end].isalnum())


@functools.lru_cache(maxsize=8192)
def _secret_name(name: str) -> bool:
    if name in _NOT_CREDENTIAL_NAMES:
        return False
    words = [w.lower() for w in _WORD_RE.findall(name)]
    if not words or any(w in _NEUTRAL_WORDS for w in words):
        return False
    for i, word in enumerate(words):
        if word in _SECRET_WORDS:
            return True
        if any(word.endswith(s) and len(word) > len(s) for s in _SECRET_SUFFIXES):
            return True
        qualifiers = _QUALIFIED.get(word)
        if qualifiers is not None and i > 0 and words[i - 1] in qualifiers:
            return True
    return False


def _strings_in(value: object, depth: int = 2) -> Iterator[str]:
    """The strings a value held under a credential name is made of (bounded, no user code run
    except ``__dict__`` reads of plain objects)."""
    if isinstance(value, str):
        if len(value) <= _MAX_REMEMBERED:
            yield value
    elif isinstance(value, (bytes, bytearray)):
        if len(value) <= _MAX_REMEMBERED:
            yield bytes(value).decode("utf-8", "replace")
    elif type(value) is int:
        if abs(value) >= 10**5:  # a PIN-like number; small ints are everywhere
            yield str(value)
    elif depth <= 0:
        return
    elif isinstance(value, dict):
        for item in itertools.islice(value.values(), _CONTAINER_ITEMS):
            yield from _strings_in(item, depth - 1)
    elif isinstance(value, (list, tuple, set, frozenset, deque)):
        for item in itertools.islice(value, _CONTAINER_ITEMS):
            yield from _strings_in(item, depth - 1)
    elif _default_repr(type(value)):
        try:
            attrs = object.__getattribute__(value, "__dict__")
        except Exception:
            return
        if isinstance(attrs, dict):
            for item in itertools.islice(attrs.values(), _CONTAINER_ITEMS):
                yield from _strings_in(item, depth - 1)


def _pair_user(value: object) -> bool:
    """``("mailer", "pw")``: a (user name, password) pair whose first item is a plain user name."""
    return (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, str) for v in value)
        and len(value[0]) < 16
        and not _random_token(value[0])
    )


def _splice(text: str, spans: list[tuple[int, int, str]]) -> str:
    """``text`` with each span (merged where they overlap) replaced by its marker.

    Quotes and line breaks inside a span are kept, and so is every piece without a letter or
    digit, so a secret spread over a list of quoted chunks stays a list of quoted markers and
    code stays code: ``['Xk7pQ9', '-zW3mN']`` becomes ``['<redacted…>', '<redacted…>']``."""
    spans.sort()
    merged: list[list[Any]] = []
    for start, end, label in spans:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, label])
    out: list[str] = []
    pos = 0
    for start, end, label in merged:
        out.append(text[pos:start])
        for part in _SPREAD_KEEP_RE.split(text[start:end]):
            out.append(_marker(label) if _ALNUM_RE.search(part) else part)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _literal_forms(value: str) -> list[str]:
    """The value as it appears raw and inside a Python repr (escaped)."""
    forms = [value]
    escaped = repr(value)[1:-1]
    if escaped != value:
        forms.append(escaped)
    return forms


class Redactor:
    """Finds secrets so they never leave the kernel in a prompt.

    Secrets are (1) values of environment variables and any ``extra_secret_values``,
    found anywhere in text; (2) strings shaped like real credentials (API keys, tokens,
    JWTs, PEM private keys, ``Bearer …``, passwords in URLs, AWS secret keys near AWS
    context, long random tokens); (3) literals given to credentials in code, read from its
    structure by :meth:`redact_code` or from text by patterns; (4) values of the
    namespace's credentials (:meth:`learn_namespace`). The rule: once a value is known to
    be secret it is remembered (:meth:`remember`) and redacted wherever it appears, also
    spread out (separators removed, case folded) and, for random-looking values, in part.
    Each is replaced by a marker starting with :data:`REDACTED`; :attr:`hits` counts what
    was replaced, by kind, never by value. One redactor serves one refine session.
    """

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        *,
        min_env_value_len: int = 6,
        extra_secret_values: Iterable[str] = (),
    ) -> None:
        env = dict(os.environ if environ is None else environ)
        self._hits: Counter[str] = Counter()
        self._labels: dict[str, str] = {}  # exact forms -> label
        self._norm: dict[str, str] = {}  # normalised forms (letters and digits) -> label
        self._anchors: list[tuple[str, int, str, str]] = []  # (anchor, where in form, form, label)
        self._longest_value = 0
        self._version = 0  # bumped whenever a new secret is remembered
        self._namespace: Mapping[str, object] | None = None  # for the callees of code (not pickled)
        self._learned: int | None = None  # id of the namespace last learned from
        self._looked_into: set[int] = set()  # ids of namespace values already looked into
        self._lines: dict[str, str] = {}  # lines of code that held a secret -> as redacted
        # The markers this redactor makes: only these are passed over when redacting again.
        self._own = {_marker(label) for label in (_LABEL_CREDENTIAL, _LABEL_SHAPE, _LABEL_KNOWN)}
        # Secret-looking names first so a value shared by several variables is labelled by the
        # most telling one.
        for name in sorted(env, key=lambda k: (not self.is_secret_name(k), k)):
            value = env[name]
            if not isinstance(value, str) or not self._env_value_is_secret(name, value, min_env_value_len):
                continue
            self._add(value, f"env {name}")
        for value in extra_secret_values:
            if isinstance(value, str) and value.strip():
                self._add(value, _LABEL_KNOWN)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_namespace"] = None  # never pickle the user's namespace along (spawn trials)
        return state

    def _add(self, value: str, label: str) -> None:
        self._own.add(_marker(label))
        known = len(self._labels) + len(self._norm)
        for form in _literal_forms(value):
            self._labels.setdefault(form, label)
            self._longest_value = max(self._longest_value, len(form))
        norm = _normalise(value)
        if len(norm) >= _MIN_NORMALISED and norm not in self._norm:
            self._norm[norm] = label
            if _random_looking(norm):
                # Anchors every few characters: any run of _FRAGMENT letters and digits of the
                # value contains one whole (see _fragment_hits).
                step = _FRAGMENT - _ANCHOR + 1
                for at in range(0, len(norm) - _ANCHOR + 1, step):
                    self._anchors.append((norm[at : at + _ANCHOR], at, norm, label))
                if (len(norm) - _ANCHOR) % step:
                    self._anchors.append((norm[-_ANCHOR:], len(norm) - _ANCHOR, norm, label))
        if len(self._labels) + len(self._norm) != known:
            self._version += 1

    # ---- remembered secrets -----------------------------------------------------------

    def remember(self, value: object, label: str = _LABEL_KNOWN) -> None:
        """Redact ``value`` wherever it appears from now on (in every form, see :meth:`redact_text`).

        ``value`` is a string or anything holding strings (a tuple, a dict's values, a plain
        object's attributes). Called for everything found to be secret: values of credential
        names, literals in code, passwords in URLs, credential-shaped tokens. A (user name,
        password) pair remembers only the password; values shorter than 4 characters, blank,
        trivial (``none``, ``true``) or all digits under 6 are redacted only where found.
        """
        items = [value[1]] if _pair_user(value) else _strings_in(value)  # type: ignore[index]
        for item in items:
            text = item.strip() if isinstance(item, str) else ""
            if len(text) < _MIN_REMEMBERED or REDACTED in text or text.lower() in _TRIVIAL_ENV_VALUES:
                continue
            if text.isdigit() and len(text) < 6:
                continue
            self._add(text, label)

    def learn_namespace(self, namespace: Mapping[str, object]) -> None:
        """Remember the secrets ``namespace`` holds, and use it to resolve callees in code.

        Remembered: the values of credential-named variables (and of ``*_login`` tuples),
        and, one or two levels into other values, what sits under credential-named dict
        keys, dataclass/namedtuple fields, plain object attributes and DataFrame columns.
        Bounded: every credential-named variable is taken, then other values are looked into
        for at most 3,000 items in all (64 of a container, 256 values of a column).
        """
        self._namespace = namespace
        if self._learned == id(namespace):
            return
        self._learned = id(namespace)
        try:
            items = [
                (name, value)
                for name, value in itertools.islice(namespace.items(), _NAMESPACE_NAMES)
                if isinstance(name, str) and not name.startswith("_")
            ]
        except Exception:
            return
        deeper = []
        for name, value in items:  # the cheap, decisive part first: credential names
            t = type(value)
            if _secret_name(name) or ((t is tuple or t is list) and is_login_name(name)):
                with contextlib.suppress(Exception):  # a hostile object: what it hides stays
                    self.remember(value)
            elif t not in _PLAIN_TYPES and id(value) not in self._looked_into:
                deeper.append(value)
        budget = [_LEARN_ITEMS]
        libs = _Libs()
        for value in deeper:
            if budget[0] <= 0:
                break
            # The kernel's namespace and its copy from before the cell ran share most values.
            self._looked_into.add(id(value))
            with contextlib.suppress(Exception):
                self._learn_inside(value, libs, 2, budget)

    def _learn(self, name: str, value: object, libs: _Libs, depth: int, budget: list[int]) -> None:
        budget[0] -= 1
        t = type(value)
        if name and (_secret_name(name) or ((t is tuple or t is list) and is_login_name(name))):
            self.remember(value)
        elif depth > 0 and t not in _PLAIN_TYPES and budget[0] > 0:
            self._learn_inside(value, libs, depth, budget)

    def _learn_inside(self, value: object, libs: _Libs, depth: int, budget: list[int]) -> None:
        """What sits under credential names inside ``value`` (dict keys, fields, attributes, columns)."""
        t = type(value)
        if t is dict:
            for key, item in itertools.islice(value.items(), _CONTAINER_ITEMS):  # type: ignore[attr-defined]
                if isinstance(key, str):
                    self._learn(key, item, libs, depth - 1, budget)
        elif _is(t, libs.DataFrame):
            self._learn_frame(value)
        elif t is list or t is tuple:
            # Records (dicts, objects) are looked into; a list that starts with a number or a
            # string is taken to hold only those.
            if value and type(value[0]) not in _PLAIN_TYPES:  # type: ignore[index]
                for item in itertools.islice(value, 16):  # type: ignore[call-overload]
                    budget[0] -= 1
                    self._learn("", item, libs, depth - 1, budget)
        else:
            fields = _namedtuple_fields(t) or _dataclass_fields(t)
            if fields is not None:
                for field_name in fields:
                    if _secret_name(field_name):
                        self.remember(getattr(value, field_name, None))
            elif _default_repr(t):
                attrs = object.__getattribute__(value, "__dict__")
                if isinstance(attrs, dict):
                    for key, item in itertools.islice(attrs.items(), _CONTAINER_ITEMS):
                        if isinstance(key, str) and _secret_name(key):
                            self.remember(item)

    def _learn_frame(self, frame: Any) -> None:
        for column in list(frame.columns[:_CONTAINER_ITEMS]):
            if isinstance(column, str) and _secret_name(column):
                for item in frame[column].head(_FRAME_ROWS).tolist():
                    self.remember(item)

    def is_secret_env(self, name: str, value: str) -> bool:
        """Whether an environment variable holds a secret (what trials must not see): any value
        under a credential-like name, however short, and every value the redactor would hide."""
        return bool(value) and (self.is_secret_name(name) or self._env_value_is_secret(name, value, 6))

    def _env_value_is_secret(self, name: str, value: str, min_len: int) -> bool:
        if len(value) < max(1, min_len):
            return False
        if value.isdigit() and len(value) < 10:
            return False
        if value.strip().lower() in _TRIVIAL_ENV_VALUES:
            return False
        if self.is_secret_name(name) or self.looks_like_secret_value(value):
            return True
        # Well-known settings, plain words (LOG_LEVEL=WARNING) and paths (HOME, PWD, PATH) are
        # not secrets: blanking them would only garble tracebacks and messages.
        if name in _PUBLIC_ENV_NAMES or name.startswith(_PUBLIC_ENV_PREFIXES):
            return False
        if re.fullmatch(r"[A-Za-z]{1,12}", value):
            return False
        return not (value.startswith(("/", "~", "./")) or re.fullmatch(r"[A-Za-z]:\\.*", value))

    # ---- names ------------------------------------------------------------------------

    def is_secret_name(self, name: str) -> bool:
        """Whether a variable/key/attribute name says it holds a credential.

        Matched on word parts (snake_case, camelCase, kebab-case), case-insensitively:
        ``API_KEY``, ``db_password``, ``githubToken``, ``AWS_SECRET_ACCESS_KEY``,
        ``auth_header``, ``X-Api-Key`` are; ``monkey``, ``keyboard``, ``tokenizer``,
        ``max_tokens``, ``n_tokens``, ``token_ids``, ``sort_key``, a bare ``key`` and the shell's
        ``PWD``/``OLDPWD`` (a working directory) are not.
        """
        return _secret_name(name) if isinstance(name, str) else False

    # ---- values -----------------------------------------------------------------------

    def looks_like_secret_value(self, text: str) -> bool:
        """Whether ``text`` contains something shaped like a real credential."""
        if any(not _URL_NOT_PASSWORD_RE.fullmatch(m.group("pw")) for m in _URL_PASSWORD_RE.finditer(text)):
            return True
        if any(any(h in text for h in hints) and shape.search(text) for hints, shape in _SHAPES):
            return True
        if any(self._bearer_token(m.group("tok")) for m in _BEARER_RE.finditer(text)):
            return True
        return any(_random_token(m.group(0)) for m in _CANDIDATE_RE.finditer(text))

    @staticmethod
    def _bearer_token(token: str) -> bool:
        return any(ch.isdigit() for ch in token) or (token.lower() != token and token.upper() != token)

    @property
    def hits(self) -> dict[str, int]:
        """How often each kind of secret was redacted, e.g. ``{"env MY_TOKEN": 2}`` (never values)."""
        return dict(self._hits)

    def _count_markers(self, text: str, before: str = "") -> None:
        """Count the markers in ``text`` that were not already in ``before``.

        Hits are counted from what actually leaves: a secret seen only in a look-ahead
        window, or replaced twice by overlapping rules, counts once or not at all.
        """
        if REDACTED not in text:
            return
        found = Counter(_marker_labels(text))
        if before and REDACTED in before:
            found.subtract(_marker_labels(before))
        for label, n in found.items():
            if n > 0:
                self._hits[label] += n

    @staticmethod
    def _mark(label: str) -> str:
        return _marker(label)

    def _outside_markers(self, fn: Callable[[str], str], text: str) -> str:
        """``fn`` applied to the parts of ``text`` that are not this redactor's markers.

        Only markers it makes count: a candidate printing ``<redacted:{secret}>`` does not
        get its secret treated as a marker and passed over."""
        if REDACTED not in text:
            return fn(text)
        out: list[str] = []
        plain: list[str] = []
        for i, part in enumerate(_MARKER_RE.split(text)):
            if i % 2 and part in self._own:
                out.append(fn("".join(plain)))
                out.append(part)
                plain = []
            else:
                plain.append(part)
        out.append(fn("".join(plain)))
        return "".join(out)

    def _replace_values(self, text: str) -> str:
        """Every known secret value replaced, leftmost first and longest first where they overlap.

        ``str.find`` per value is far faster than one big regex alternation.
        """
        spans: list[tuple[int, int, str]] = []
        for value, label in self._labels.items():
            start = text.find(value)
            while start != -1:
                if len(value) >= _WHOLE_WORD_BELOW or _whole_word(text, start, start + len(value)):
                    spans.append((start, -len(value), label))
                start = text.find(value, start + 1)
        if not spans:
            return text
        spans.sort()
        out: list[str] = []
        pos = 0
        for start, neg_len, label in spans:
            if start < pos:
                continue
            out.append(text[pos:start])
            out.append(_marker(label))
            pos = start - neg_len
        out.append(text[pos:])
        return "".join(out)

    def redact_text(self, text: str) -> str:
        """``text`` with every secret replaced by a ``<redacted:…>`` marker.

        Order: environment/remembered values (longest first), then the same values in
        normalised form (letters and digits only, case-folded; values with at least 8 of
        them), credential shapes, then literals given to credential names. Whatever a rule
        finds is remembered, and its other occurrences are redacted in the same pass. Text
        inside existing markers is never touched, so redacting twice changes nothing and
        counts nothing twice.
        """
        out = self._redact(text)
        self._count_markers(out, text)
        return out

    def _redact(self, text: str) -> str:
        if not text:
            return text
        version = self._version
        text = self._redact_rules(self._redact_values(text))
        if self._version != version:  # a rule found a new secret: redact its other occurrences too
            text = self._redact_values(text)
        return text

    def _redact_values(self, text: str) -> str:
        for line, redacted in self._lines.items():
            if line in text:
                text = text.replace(line, redacted)
        if self._labels:
            text = self._outside_markers(self._replace_values, text)
        if self._norm:
            text = self._replace_normalised(text)
        return text

    def _normalised_view(self, text: str) -> str:
        """``text`` lower-cased (if that keeps its length) with markers blanked: same offsets."""
        low = text.lower()
        if len(low) != len(text):
            low = text
        if REDACTED in text:
            pieces: list[str] = []
            pos = 0
            for m in _MARKER_RE.finditer(text):
                if m.group(0) in self._own:
                    pieces += [low[pos : m.start()], " " * (m.end() - m.start())]
                    pos = m.end()
            pieces.append(low[pos:])
            low = "".join(pieces)
        return low

    def _replace_normalised(self, text: str) -> str:
        """Remembered values found with separators, whitespace, quotes or case changed.

        One normalised copy of the text and ``str.find`` per value: linear in the text. The
        offsets back into the text are computed only when something was found.
        """
        view = self._normalised_view(text)
        norm = _NON_ALNUM_RE.sub("", view)
        if len(norm) < _MIN_NORMALISED:
            return text
        hits: list[tuple[int, int, str]] = []
        for form, label in self._norm.items():
            at = norm.find(form)
            while at != -1:
                hits.append((at, at + len(form), label))
                at = norm.find(form, at + 1)
        if self._anchors and len(norm) >= _FRAGMENT:
            hits.extend(self._fragment_hits(norm))
        if not hits:
            return text
        where = [m.start() for m in _ALNUM_RE.finditer(view)]
        return _splice(text, [(where[a], where[b - 1] + 1, label) for a, b, label in hits])

    def _fragment_hits(self, norm: str) -> list[tuple[int, int, str]]:
        """Runs of at least _FRAGMENT letters and digits of a random-looking secret (a candidate
        printing half an API key), found from anchors and extended both ways."""
        hits: list[tuple[int, int, str]] = []
        for anchor, offset, form, label in self._anchors:
            at = norm.find(anchor)
            while at != -1:
                start, pos = at, offset
                while start > 0 and pos > 0 and norm[start - 1] == form[pos - 1]:
                    start, pos = start - 1, pos - 1
                end, pos = at + _ANCHOR, offset + _ANCHOR
                while end < len(norm) and pos < len(form) and norm[end] == form[pos]:
                    end, pos = end + 1, pos + 1
                if end - start >= _FRAGMENT:
                    hits.append((start, end, label))
                at = norm.find(anchor, end)
        return hits

    def guard_cut(self, head: str) -> str:
        """``head``, the start of a text that was cut, without a trailing beginning of a secret.

        A secret straddling a cut is not found whole in either part; this drops the part
        before the cut when its last letters and digits (4 or more) begin a remembered value.
        """
        if not self._norm or not head:
            return head
        tail_start = max(0, len(head) - 4 * max((len(f) for f in self._norm), default=0) - 64)
        view = self._normalised_view(head[tail_start:])
        where = [m.start() for m in _ALNUM_RE.finditer(view)]
        norm = "".join(view[i] for i in where)
        best: tuple[int, str] | None = None
        for form, label in self._norm.items():
            first = max(0, len(norm) - len(form) + 1)
            at = norm.find(form[0], first)
            while at != -1 and len(norm) - at >= _PREFIX_MIN:
                if form.startswith(norm[at:]):
                    if best is None or at < best[0]:
                        best = (at, label)
                    break
                at = norm.find(form[0], at + 1)
        if best is None:
            return head
        return head[: tail_start + where[best[0]]] + _marker(best[1])

    def _redact_rules(self, text: str) -> str:
        # Each rule runs only if a cheap substring test says it could match.
        low = text.lower()
        if "AKIA" in text or "ASIA" in text or any(hint in low for hint in _AWS_HINTS):
            text = self._aws(text)
        for hints, shape in _SHAPES:
            if any(hint in text for hint in hints):
                text = self._outside_markers(functools.partial(shape.sub, self._shape_repl), text)
        if "://" in text:
            text = self._outside_markers(lambda t: _URL_PASSWORD_RE.sub(self._url_repl, t), text)
        if "bearer" in low:
            text = self._outside_markers(lambda t: _BEARER_RE.sub(self._bearer_repl, t), text)
        text = self._outside_markers(lambda t: _CANDIDATE_RE.sub(self._candidate_repl, t), text)
        if any(hint in low for hint in _HEADER_HINTS):
            text = _HEADER_RE.sub(self._header_repl, text)
        if "%env" in low or "%set_env" in low or "export" in low:
            text = _SHELL_RE.sub(self._shell_repl, text)
        if any(stem in low for stem in _NAME_STEMS):
            text = _TUPLE_RE.sub(self._tuple_repl, text)
            text = _ASSIGN_RE.sub(self._literal_repl, text)
            text = _KEYED_RE.sub(self._literal_repl, text)
        return text

    def _shape_repl(self, m: re.Match[str]) -> str:
        self.remember(m.group(0))
        return _SHAPE_MARKER

    def _candidate_repl(self, m: re.Match[str]) -> str:
        if not _random_token(m.group(0)):
            return m.group(0)
        self.remember(m.group(0))
        return _SHAPE_MARKER

    def _url_repl(self, m: re.Match[str]) -> str:
        pw = m.group("pw")
        if _URL_NOT_PASSWORD_RE.fullmatch(pw):
            return m.group(0)
        self.remember(pw)
        return m.group("pre") + _SHAPE_MARKER + "@"

    def _aws(self, text: str) -> str:
        hints = [m.start() for m in _AWS_HINT_RE.finditer(text)]
        if not hints:
            return text

        def repl(m: re.Match[str]) -> str:
            token = m.group(0)
            if _HEX_RE.fullmatch(token) or token.lower() == token or token.upper() == token:
                return token  # git SHAs and other hex digests, plain words
            if min(abs(h - m.start()) for h in hints) > _AWS_NEAR:
                return token
            self.remember(token)
            return _SHAPE_MARKER

        return self._outside_markers(lambda t: _AWS_SECRET_RE.sub(repl, t), text)

    def _bearer_repl(self, m: re.Match[str]) -> str:
        if not self._bearer_token(m.group("tok")):
            return m.group(0)
        self.remember(m.group("tok"))
        return m.group(0)[: m.start("tok") - m.start()] + self._mark(_LABEL_SHAPE)

    def _header_repl(self, m: re.Match[str]) -> str:
        if m.group("val").startswith(REDACTED) and _MARKER_RE.fullmatch(m.group("val").strip()):
            return m.group(0)
        self.remember(m.group("val"))
        return m.group("pre") + self._mark(_LABEL_CREDENTIAL)

    def _shell_repl(self, m: re.Match[str]) -> str:
        val = m.group("val").strip("'\"")
        if not self.is_secret_name(m.group("name")) or not val or val.startswith(REDACTED):
            return m.group(0)
        self.remember(val)
        return m.group("pre") + self._mark(_LABEL_CREDENTIAL)

    def _tuple_repl(self, m: re.Match[str]) -> str:
        if not (self.is_secret_name(m.group("name")) or is_login_name(m.group("name"))):
            return m.group(0)
        self.remember([i.group("b") for i in _TUPLE_ITEM_RE.finditer(m.group("items"))])
        start = m.start("items") - m.start()
        end = m.end("items") - m.start()
        whole = m.group(0)
        items = _TUPLE_ITEM_RE.sub(
            lambda i: (
                i.group(0)
                if not i.group("b") or i.group("b").startswith(REDACTED)
                else f"{i.group('pre')}{i.group('q')}{self._mark(_LABEL_CREDENTIAL)}{i.group('q')}"
            ),
            m.group("items"),
        )
        return whole[:start] + items + whole[end:]

    def _literal_repl(self, m: re.Match[str]) -> str:
        if not self.is_secret_name(m.group("name")):
            return m.group(0)
        line_start = m.string.rfind("\n", 0, m.start()) + 1
        if _TUPLE_TARGETS_RE.fullmatch(m.string, line_start, m.start()):
            return m.group(0)  # `user, password = "bob", "…"`: "bob" is the user's (code: see redact_code)
        group = "b3" if m.group("q3") is not None else "b1"
        body = m.group(group)
        if not body or _MARKER_RE.fullmatch(body):
            return m.group(0)
        if "f" in m.group("pre").lower() and "{" in body:
            return m.group(0)  # an f-string interpolating a variable: the variable is what matters
        self.remember(_unescaped(body))
        start = m.start(group) - m.start()
        end = m.end(group) - m.start()
        whole = m.group(0)
        return whole[:start] + self._mark(_LABEL_CREDENTIAL) + whole[end:]

    # ---- code -------------------------------------------------------------------------

    def redact_code(self, code: str) -> str:
        """``code`` with every secret replaced inside its string literal, still valid Python.

        Literals the code's structure marks as secret are found by parsing it (see
        :mod:`nbrefine._codesecrets`: positional arguments of credential-named parameters,
        dataclass fields, tuples under login names, DataFrame columns...) and remembered;
        then the text rules run. If their result no longer parses while the code did (an
        environment value that is also a name in the code), only string literals and
        comments are redacted instead. Code that does not parse is redacted as text.
        """
        out = self._redact_code(code)
        self._count_markers(out, code)
        return out

    def _redact_code(self, code: str) -> str:
        if not code:
            return code
        found = secret_literals(code, self.is_secret_name, self._namespace)
        if found is None:
            return self._redact(code)
        for literal in found:
            if literal.remember:
                self.remember(literal.value)
        structural = _blank_literals(code, found)
        self._remember_lines(code, structural)
        out = self._redact(structural)
        if out == structural or _parses(out):
            return out
        return self._redact_tokens(structural)

    def _remember_lines(self, code: str, redacted: str) -> None:
        """Lines of code that held a secret, to be shown redacted wherever they are quoted
        (the failing line, traceback frames): a secret too short to be matched everywhere
        (``connect("db", 5432, "bob", "pw")``) is still hidden there."""
        before, after = code.splitlines(), redacted.splitlines()
        if len(before) != len(after):
            return
        for old, new in zip(before, after, strict=True):
            old, new = old.strip(), new.strip()
            if old != new and len(old) >= _MIN_NORMALISED and old not in self._lines:
                self._lines[old] = new
                self._version += 1

    def _redact_tokens(self, code: str) -> str:
        """Only string literals (their bodies) and comments redacted: names and syntax untouched."""
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
        except (tokenize.TokenError, SyntaxError):
            return code
        starts = [0]
        for line in code.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))
        out: list[str] = []
        pos = 0
        for tok in tokens:
            if tok.type not in (tokenize.STRING, tokenize.COMMENT) or tok.start[0] > len(starts) - 1:
                continue
            start = starts[tok.start[0] - 1] + tok.start[1]
            end = starts[tok.end[0] - 1] + tok.end[1]
            out.append(code[pos:start])
            out.append(self._redact_token(tok.string, tok.type == tokenize.COMMENT))
            pos = end
        out.append(code[pos:])
        return "".join(out)

    def _redact_token(self, text: str, comment: bool) -> str:
        if comment:
            return "#" + self._redact(text[1:]).replace("\n", " ")
        match = _STRING_TOKEN_RE.fullmatch(text)
        if match is None:
            return text
        body = self._redact(match.group("body"))
        if body == match.group("body"):
            return text
        candidate = f"{match.group('pre')}{match.group('q')}{body}{match.group('q')}"
        if _parses(candidate):
            return candidate
        return f"{match.group('pre')}{match.group('q')}{_CREDENTIAL_MARKER}{match.group('q')}"

    # ---- summaries --------------------------------------------------------------------

    def summarize(self, name: str, value: object, *, max_chars: int = 300) -> ValueSummary:
        """The summary of ``name = value`` with every secret redacted.

        A credential name gives the bare marker (the type is kept in ``type_name``, the
        value is not rendered). Inside containers, values under credential-named keys,
        attributes, fields and DataFrame columns are replaced in the rendering (the
        user's objects are not touched); everything else is rendered and then passed
        through :meth:`redact_text` before it is cut to ``max_chars``.
        """
        type_name = _type_name(value)
        if self.is_secret_name(name) or (is_login_name(name) and isinstance(value, (tuple, list))):
            self._hits[_LABEL_CREDENTIAL] += 1
            # `db_password`, `cfg.api_key`, `env["TOKEN"]` hold a secret; an expression that merely
            # mentions one (`"login failed: password=" + pw`) is not one as a whole.
            if _NAME_PATH_RE.fullmatch(name):
                with contextlib.suppress(Exception):  # a hostile container: it is not rendered anyway
                    self.remember(value)
            return ValueSummary(name, type_name, _CREDENTIAL_MARKER, redacted=True)
        text = _summarize(value, max_chars, 0.2, self)
        text = _clip(self._redact(text), max_chars)
        self._count_markers(text)
        return ValueSummary(name, type_name, text, redacted=REDACTED in text)


# --------------------------------------------------------------------------------------
# Many names
# --------------------------------------------------------------------------------------


def _entry(name: str, text: str) -> str:
    return f"{name}: " + text.replace("\n", "\n    ")


def _skip(name: str, value: object, namespace: Mapping[str, object], skip_modules: bool) -> bool:
    if skip_modules and isinstance(value, types.ModuleType):
        return True
    builtin = builtins.__dict__.get(name, _MISSING)
    if builtin is value and builtin is not _MISSING:
        return True
    if isinstance(value, types.BuiltinFunctionType) and getattr(value, "__self__", None) is builtins:
        return True
    # IPython's own helpers in the user namespace (In, Out, get_ipython, exit, quit).
    if (name == "In" and namespace.get("_ih") is value) or (name == "Out" and namespace.get("_oh") is value):
        return True
    if name in ("get_ipython", "exit", "quit"):
        owner = value.__self__ if isinstance(value, types.MethodType) else value
        module = type(owner).__module__
        return isinstance(module, str) and module.startswith("IPython.")
    return False


_MISSING = object()


def summarize_names(
    names: Iterable[str],
    namespace: Mapping[str, object],
    redactor: Redactor,
    *,
    per_value_chars: int = 300,
    budget_chars: int = 4000,
    skip_modules: bool = True,
) -> tuple[list[ValueSummary], int]:
    """Summaries of the given names that exist in ``namespace``, in the order given.

    Skipped (and not counted as left out): missing names, names starting with ``_``,
    builtins and IPython's own helpers, and modules when ``skip_modules``. Each value
    gets at most ``per_value_chars``; once the rendered entries (as
    :func:`render_summaries` lays them out, without its closing note) would pass
    ``budget_chars``, the last one is shortened to fit if that leaves a useful summary,
    and the remaining names are left out. Returns ``(summaries, number_left_out)``.
    """
    eligible: list[tuple[str, object]] = []
    seen: set[str] = set()
    for name in names:
        if name in seen or not name or name.startswith("_"):
            continue
        seen.add(name)
        try:
            if name not in namespace:
                continue
            value = namespace[name]
        except Exception:
            continue
        try:
            if _skip(name, value, namespace, skip_modules):
                continue
        except Exception:
            pass
        eligible.append((name, value))

    summaries: list[ValueSummary] = []
    used = 0
    min_useful = min(per_value_chars, 40)
    for i, (name, value) in enumerate(eligible):
        separator = 1 if summaries else 0  # the newline between entries
        room = budget_chars - used - separator - len(name) - 2
        if room < min_useful:
            return summaries, len(eligible) - i
        summary = redactor.summarize(name, value, max_chars=min(per_value_chars, room))
        entry = _entry(name, summary.text)
        while len(entry) + separator > budget_chars - used:  # indentation of extra lines
            excess = len(entry) + separator - (budget_chars - used)
            text = _clip(summary.text, len(summary.text) - excess)
            summary = dataclasses.replace(summary, text=text)
            entry = _entry(name, text)
        summaries.append(summary)
        used += len(entry) + separator
    return summaries, 0


def render_summaries(summaries: Sequence[ValueSummary], left_out: int = 0) -> str:
    """``name: <summary>`` per entry (extra lines indented), then a note on names left out."""
    lines = [_entry(s.name, s.text) for s in summaries]
    if left_out:
        lines.append(f"[... {left_out} more names left out for the prompt budget]")
    return "\n".join(lines)

"""Compact, bounded, secret-free summaries of kernel values for a repair prompt.

A repair prompt is grounded in what the kernel actually holds: the shape of the DataFrame, the keys
of the dict, the type of the thing that failed. This module turns live objects into short text
without ever rendering a huge object whole and without being derailed by objects whose
``__repr__`` raises or hangs. Secrets are kept out by the redactor a summary is made with (see
:meth:`nbrefine.grounding.redaction.Redactor.summarize`).

Nothing here imports IPython, numpy or pandas: numpy and pandas objects are recognised through
``sys.modules`` only when the user has already imported them.

Time limits: :func:`summarize_value` arms a one-shot ``ITIMER_REAL``/``SIGALRM`` timer when it runs
in the main thread and no other real-time timer is armed (it never touches someone else's timer),
so even a ``__repr__`` that sleeps is cut off. Otherwise it relies on bounded rendering plus a
cooperative deadline checked between items.

May import: the standard library, the sibling modules of this package and the grounding leaf
modules (text, ipython_names, markers, _objects).
"""

from __future__ import annotations

import builtins
import dataclasses
import types
import warnings
from collections import deque
from collections.abc import (
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Any, Protocol

from .._objects import _dataclass_fields, _default_repr, _is, _namedtuple_fields, _type_name
from ..ipython_names import is_ipython_value
from ._bounded import (
    Redacting,
    _Alarm,
    _clip,
    _Ctx,
    _exc_text,
    _Guard,
    _join_bounded,
    _safe_len,
    _take,
    _Timeout,
)
from ._render import (
    _brackets,
    _callable_text,
    _dataframe_text,
    _index_text,
    _int_text,
    _mapping_body,
    _ndarray_text,
    _nested,
    _record,
    _safe_repr,
    _sequence_body,
    _series_text,
    _str_like,
)

# Rendering limits at the top level.
_TOP_ITEMS = 8  # items shown of a top-level list/tuple/set
_DICT_SMALL = 6  # dicts up to this size are shown whole
_DICT_KEYS = 10  # keys sampled from a big dict (the most items ever iterated)
_DICT_PREVIEWS = 3  # item previews of a big dict
_REDACT_LOOKAHEAD = 4096  # characters past a cut that are redacted before cutting (top level)


@dataclass(frozen=True)
class ValueSummary:
    """The summary of one named value, ready for a prompt."""

    name: str
    type_name: str
    text: str  # the summary (already redacted if needed)
    redacted: bool = False


class SummaryRedactor(Redacting, Protocol):
    """A redactor that also makes a redacted summary of one named value."""

    def summarize(self, name: str, value: object, *, max_chars: int = 300) -> ValueSummary: ...


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


def _summarize(value: object, max_chars: int, time_limit_s: float, redactor: Redacting | None) -> str:
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


def redacted_summary(value: object, max_chars: int, redactor: Redacting) -> str:
    """The summary of ``value`` made with ``redactor``, redacted as a whole and cut to ``max_chars``."""
    return _clip(redactor._redact(_summarize(value, max_chars, 0.2, redactor)), max_chars)


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
    # IPython's own helpers in the user namespace (In, Out, get_ipython, exit, quit, open).
    return is_ipython_value(name, value, namespace)


_MISSING = object()


def summarize_names(
    names: Iterable[str],
    namespace: Mapping[str, object],
    redactor: SummaryRedactor,
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

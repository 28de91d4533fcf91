"""Rendering of one value inside a summary: strings, numbers, callables, containers, records, numpy
arrays and pandas frames, series and indexes, each bounded in items, depth, characters and time.

May import: the standard library, the sibling modules of this package and the grounding leaf
modules they use (markers, _objects).
"""

from __future__ import annotations

import inspect
import math
import types
from collections import deque
from collections.abc import (
    Callable,
    ItemsView,
    KeysView,
    Mapping,
    Sequence,
    ValuesView,
)
from collections.abc import Set as AbstractSet
from typing import Any

from .._objects import _dataclass_fields, _default_repr, _is, _Libs, _namedtuple_fields, _qualname, _type_name
from ..markers import _CREDENTIAL_MARKER
from ._bounded import (
    _clip,
    _Ctx,
    _cut,
    _exc_text,
    _Guard,
    _join_bounded,
    _lookahead,
    _one_line,
    _redacted_head,
    _safe_len,
    _take,
    _Timeout,
)

# Rendering limits inside containers.
_NESTED_ITEMS = 4  # items shown of a container inside a container
_MAX_DEPTH = 2  # containers nested deeper than this are shown as [...]
_NESTED_STR = 40  # characters of a string inside a container
_NESTED_REPR = 60  # characters of any other repr inside a container
_NESTED_LOOKAHEAD = 512  # characters past a cut that are redacted before cutting
_DF_COLUMNS = 20  # columns listed with their dtypes
_DF_PREVIEW_COLS = 8  # columns in the head(3) preview
_DF_ROWS = 3
_SERIES_VALUES = 5
_ARRAY_FLAT_VALUES = 6

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

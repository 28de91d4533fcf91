"""Safe, cheap facts about user objects, shared by the value summaries and the redactor: type
names, numpy/pandas types (only if the user imported them), namedtuple and dataclass fields,
whether a class keeps ``object.__repr__``. Nothing here runs the user's code beyond attribute reads
of types.

May import: the standard library only.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any


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


def _default_repr(t: type) -> bool:
    try:
        return bool(getattr(t, "__repr__", None) is object.__repr__)
    except Exception:
        return False

"""Side-effect-free reads of kernel objects: attributes, keys, columns, type names.

The offline tier never runs user code: an attribute is read statically unless the class is
a trusted library's, only cheap pandas attributes are read for real, and large containers
are not scanned. :class:`_TypeOnly` stands for a value whose type alone is known.

May import: the standard library, nothing else of this package; never the sandbox, the engine,
IPython or the CLI (the offline tier only reads what the failure context gives it)."""

from __future__ import annotations

import inspect
import re
import types
from dataclasses import dataclass
from typing import Any

_MAX_KEYS = 20_000  # containers with more keys than this are not scanned


class _CannotEval(Exception):
    pass


_TRUSTED_MODULES = frozenset(
    {
        "builtins",
        "numpy",
        "pandas",
        "collections",
        "datetime",
        "decimal",
        "fractions",
        "pathlib",
        "re",
        "json",
        "math",
        "statistics",
        "itertools",
        "functools",
        "operator",
        "string",
        "random",
        "typing",
    }
)
#: Attributes of numpy/pandas objects that are cheap and free of side effects to read.
_CHEAP_PANDAS_ATTRIBUTES = frozenset(
    {"columns", "index", "dtypes", "dtype", "shape", "name", "ndim", "size", "loc", "iloc", "at", "iat", "T"}
)


@dataclass(frozen=True)
class _TypeOnly:
    """An expression whose type is known but whose value was not computed."""

    cls: type


_MISSING: Any = object()


def _canonical_type(name: str) -> str:
    """``int``/``float``/``str`` for numpy's scalar types too; other names unchanged."""
    short = name.split(".")[-1]
    if re.fullmatch(r"u?int(8|16|32|64|_|c)?|longlong|intp", short):
        return "int"
    if re.fullmatch(r"float(16|32|64|128|_)?|double|longdouble", short):
        return "float"
    if short in ("str_", "unicode_"):
        return "str"
    return short


def _type_is_trusted(cls: type) -> bool:
    return (getattr(cls, "__module__", "") or "").split(".")[0] in _TRUSTED_MODULES


def _safe_getattr(obj: Any, name: str) -> Any:
    """``obj.name`` when reading it cannot run user code or anything expensive."""
    if isinstance(obj, _TypeOnly):
        try:
            static = inspect.getattr_static(obj.cls, name)
        except AttributeError:
            raise _CannotEval(name) from None
        return _type_of_static(static)
    if isinstance(obj, types.ModuleType):
        if name in obj.__dict__:
            return obj.__dict__[name]
        raise _CannotEval(name)
    cls = type(obj)
    module = (getattr(cls, "__module__", "") or "").split(".")[0]
    if module in ("pandas", "numpy"):
        columns = getattr(obj, "columns", None) if module == "pandas" else None
        if name in _CHEAP_PANDAS_ATTRIBUTES and name != "T":
            return getattr(obj, name)
        if columns is not None and _contains(columns, name):
            return obj[name]
        try:
            static = inspect.getattr_static(obj, name)
        except AttributeError:
            raise _CannotEval(name) from None
        return _type_of_static(static)
    try:
        static = inspect.getattr_static(obj, name)
    except AttributeError:
        raise _CannotEval(name) from None
    if isinstance(static, (staticmethod, classmethod, property)) or (
        hasattr(type(static), "__get__") and not isinstance(static, types.FunctionType)
    ):
        if _type_is_trusted(cls) and isinstance(obj, type):
            return getattr(obj, name)
        return _type_of_static(static)
    return static


def _type_of_static(static: Any) -> Any:
    """What reading a class attribute would give, without calling a descriptor."""
    accessor = getattr(static, "_accessor", None)  # pandas' CachedAccessor (.str, .dt, .cat)
    if isinstance(accessor, type):
        return _TypeOnly(accessor)
    if isinstance(static, property):
        raise _CannotEval("property")
    return static


def _contains(container: Any, key: object) -> bool:
    try:
        return bool(key in container)
    except Exception:
        return False


def _safe_getitem(obj: Any, key: object) -> Any:
    if type(obj) is dict or type(obj) in (list, tuple):
        try:
            return obj[key]
        except (KeyError, IndexError, TypeError):
            raise _CannotEval("item") from None
    module = (getattr(type(obj), "__module__", "") or "").split(".")[0]
    if module == "pandas" and isinstance(key, str):
        columns = getattr(obj, "columns", None)
        if columns is not None and _contains(columns, key):
            return obj[key]
    raise _CannotEval("item")


def _names_of(obj: Any) -> set[str]:
    """The attribute names of ``obj`` read without calling ``__dir__`` of user classes."""
    if isinstance(obj, _TypeOnly):
        return set(type.__dir__(obj.cls))
    if isinstance(obj, types.ModuleType):
        return {name for name in obj.__dict__ if isinstance(name, str)}
    cls = type(obj)
    names = set(type.__dir__(cls))
    if isinstance(obj, type):
        names |= set(type.__dir__(obj))
    try:
        instance_dict = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        instance_dict = None
    if isinstance(instance_dict, dict):
        names |= {name for name in instance_dict if isinstance(name, str)}
    return names


def _keys_of(obj: Any) -> list[str] | None:
    """String keys of a dict, DataFrame columns, Series/Index labels (None when not cheap)."""
    if isinstance(obj, _TypeOnly):
        return None
    if type(obj) is dict:
        return [k for k in obj if isinstance(k, str)] if len(obj) <= _MAX_KEYS else None
    module = (getattr(type(obj), "__module__", "") or "").split(".")[0]
    if module != "pandas":
        return None
    name = type(obj).__name__
    if name == "DataFrame":
        labels: Any = obj.columns
    elif name == "Series":
        labels = obj.index
    elif name.endswith("Index"):
        labels = obj
    else:
        return None
    if len(labels) > _MAX_KEYS:
        return None
    if getattr(labels, "nlevels", 1) > 1:
        return None
    return [k for k in labels if isinstance(k, str)]


def _is_dataframe(obj: Any) -> bool:
    cls = type(obj)
    return cls.__name__ == "DataFrame" and (cls.__module__ or "").startswith("pandas")

"""The AttributeError fixer: a misspelt attribute or method, a method spelt as in another
language (``list.push``), a DataFrame column used as an attribute.

May import: the standard library, the shared modules of this package (``source``, ``failure_site``,
``lookups``, ``spelling``), never another fixer; never the sandbox, the engine, IPython or the CLI
(the offline tier only reads what the failure context gives it)."""

from __future__ import annotations

import ast
import builtins
import contextlib
import keyword
import pkgutil
import re
import sys
import types
from collections.abc import Iterable
from typing import Any

from .failure_site import _FailureSite
from .lookups import _MISSING, _CannotEval, _is_dataframe, _keys_of, _names_of, _safe_getattr, _TypeOnly
from .source import Fix, _NoFix, _quote_style
from .spelling import _close_matches

_ATTRIBUTE_MESSAGES = (
    re.compile(r"^'(?P<type>[\w.]+)' object has no attribute '(?P<attr>\w+)'"),
    re.compile(r"^module '(?P<module>[\w.]+)' has no attribute '(?P<attr>\w+)'"),
    re.compile(r"^type object '(?P<type>[\w.]+)' has no attribute '(?P<attr>\w+)'"),
)
#: Methods spelt as in other languages: (type name, wrong) -> right.
_SYNONYMS = {
    ("list", "push"): "append",
    ("list", "add"): "append",
    ("set", "append"): "add",
    ("set", "push"): "add",
    ("str", "contains"): "__contains__",
    ("dict", "has_key"): "__contains__",
}


def _type_from_name(type_name: str) -> type | None:
    """The class a type name in an error message refers to (builtins, numpy, pandas)."""
    short = type_name.split(".")[-1]
    value = getattr(builtins, short, None)
    if isinstance(value, type):
        return value
    numpy = sys.modules.get("numpy")
    pandas = sys.modules.get("pandas")
    candidates: list[Any] = []
    if type_name.startswith("numpy") and numpy is not None:
        candidates.append(getattr(numpy, short, None))
    if pandas is not None:
        candidates.append(getattr(pandas, short, None))
        groupby = sys.modules.get("pandas.core.groupby")
        if groupby is not None:
            candidates.append(getattr(groupby, short, None))
    if numpy is not None and short == "ndarray":
        candidates.append(numpy.ndarray)
    for candidate in candidates:
        if isinstance(candidate, type):
            return candidate
    return _loaded_class(short)


def _loaded_class(name: str) -> type | None:
    """The one class called ``name`` that a loaded module defines at its top level.

    An object the failing cell made (``fig, ax = plt.subplots()``) is not in the namespace
    the provider sees, but its library is loaded. Only modules already imported are read
    (nothing is imported); two different classes of that name are a guess: None."""
    if not name.isidentifier():
        return None
    found: dict[int, type] = {}
    for module in list(sys.modules.values()):
        if not isinstance(module, types.ModuleType):
            continue
        # Not ``module.__dict__``: a lazy module's own ``__getattribute__`` would import it.
        namespace = object.__getattribute__(module, "__dict__")
        value = namespace.get(name)
        if isinstance(value, type) and value.__name__ == name:
            found[id(value)] = value
            if len(found) > 1:
                return None
    return next(iter(found.values()), None)


def _fix_attribute(state: _FailureSite) -> tuple[list[Fix], str]:
    match = None
    for pattern in _ATTRIBUTE_MESSAGES:
        match = pattern.match(state.message)
        if match:
            break
    if match is None:
        raise _NoFix("")
    attr = match.group("attr")
    groups = match.groupdict()
    src = state.src
    tree = src.need_tree()
    nodes = [n for n in state.failing_nodes() if isinstance(n, ast.Attribute) and n.attr == attr]
    if not nodes:
        raise _NoFix("")
    # The object that lacks the attribute: evaluated, else from the message's type name.
    target: Any = _MISSING
    node = nodes[0]
    for candidate in nodes:
        value = state.try_evaluate(candidate.value)
        if value is not _MISSING and not _has_attr(value, attr):
            target, node = value, candidate
            break
    if target is _MISSING:
        if groups.get("module"):
            module = sys.modules.get(groups["module"])
            if module is None:
                raise _NoFix("")
            target = module
        else:
            cls = _type_from_name(groups["type"])
            if cls is None:
                raise _NoFix("")
            target = cls if groups.get("type") and state.message.startswith("type object") else _TypeOnly(cls)
    if type(target).__name__ == "NoneType" or groups.get("type") == "NoneType":
        raise _NoFix(
            "no quick fix for AttributeError: the object is None (a function or method that returns "
            "None was probably assigned)"
        )
    base_text = src.text(node.value)
    same = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr == attr and src.text(n.value) == base_text
    ]
    private = attr.startswith("_")
    names = {n for n in _names_of(target) if private or not n.startswith("_")}
    if isinstance(target, types.ModuleType):
        names |= _lazy_names(target)
    type_name = (target.cls if isinstance(target, _TypeOnly) else type(target)).__name__
    if isinstance(target, types.ModuleType):
        type_name = target.__name__
    options: list[tuple[str, str]] = []  # (new attribute text or ``[key]``, explanation)
    synonym = _SYNONYMS.get((type_name, attr))
    if synonym is not None and not synonym.startswith("_"):
        options.append((synonym, f"`{type_name}` objects have no `.{attr}()`; the method is `.{synonym}()`."))
    for name in _close_matches(attr, names):
        options.append((name, f"`{type_name}` has no attribute `{attr}`; the closest one is `{name}`."))
    columns = _keys_of(target) if _is_dataframe(target) else None
    if columns:
        quote = _quote_style(src)
        own = _names_of(_TypeOnly(type(target)))
        for column in _close_matches(attr, columns, normalize=True):
            if column.isidentifier() and not keyword.iskeyword(column) and column not in own:
                options.append((column, f"the DataFrame has no column `{attr}`; it is `{column}`."))
            elif quote not in column and "\\" not in column:
                options.append(
                    (f"[{quote}{column}{quote}]", f"the DataFrame has no column `{attr}`; it is {column!r}.")
                )
    parent = src.parents.get(node)
    called = isinstance(parent, ast.Call) and parent.func is node
    if not called:  # ``df.Count.mean()``: a column is likelier than the method ``count``
        options.sort(key=lambda option: not option[1].startswith("the DataFrame has no column"))
    fixes = []
    for new, why in options:
        edits = []
        for n in same:
            _, end = src.span(n)
            start = end - len(attr)
            if src.code[start:end] != attr:
                continue
            if new.startswith("["):
                dot = src.code.rfind(".", 0, start)
                base_end = src.span(n.value)[1]
                if dot < base_end or src.code[base_end:dot].strip():
                    continue
                edits.append((base_end, end, new))
            else:
                edits.append((start, end, new))
        if edits:
            fixes.append(src.fix(edits, why))
    return fixes, f"no quick fix for AttributeError: `{type_name}` has no attribute close to `{attr}`"


def _lazy_names(module: types.ModuleType) -> set[str]:
    """Public names a module gives on first use rather than at import: its ``__all__``, and
    for a package with a module ``__getattr__`` (numpy's ``np.random``) its submodules, listed
    from its folder without importing them."""
    found: set[str] = set()
    namespace = object.__getattribute__(module, "__dict__")  # never a lazy module's own lookup
    exported = namespace.get("__all__")
    if isinstance(exported, (list, tuple)):
        found |= {name for name in exported if isinstance(name, str) and not name.startswith("_")}
    path = namespace.get("__path__")
    if callable(namespace.get("__getattr__")) and isinstance(path, Iterable) and not isinstance(path, str):
        with contextlib.suppress(Exception):
            locations = [entry for entry in list(path)[:8] if isinstance(entry, str)]
            found |= {
                info.name
                for info in pkgutil.iter_modules(locations)
                if not info.name.startswith("_") and info.name not in ("tests", "testing", "conftest")
            }
    return found


def _has_attr(value: Any, attr: str) -> bool:
    try:
        _safe_getattr(value, attr)
    except _CannotEval:
        return attr in _names_of(value)
    except Exception:
        return False
    return True

"""The names IPython puts in a user namespace for itself: the one definition.

A kernel's namespace holds IPython's own objects next to the user's: the input and output
history (``In``, ``Out``, ``_ih``, ``_oh``, ``_i``, ``_ii``, ``_iii``, ``_i3``, ``_``, ``__``,
``___``, ``_3``), the directory history ``_dh``, ``_exit_code`` (set by ``!cmd``), the helpers
``get_ipython``, ``exit``, ``quit`` and IPython's ``open``, and the module dunders. They are
never the user's variables: not shipped to trials, not summarised, not looked up in the history.

- :data:`IPYTHON_NAMES` and :func:`is_ipython_name`: by name only (cheap; for code analysis);
- :func:`is_ipython_value`: by name *and* value, for a live namespace where a user may have
  rebound one of those names (``exit = 3``) and that value is then the user's.

May import: the standard library only.
"""

from __future__ import annotations

import io
import re
import types
from collections.abc import Mapping

__all__ = ["IPYTHON_NAMES", "is_ipython_name", "is_ipython_value"]

#: The fixed names of IPython's own objects in a user namespace (IPython 8 and 9).
IPYTHON_NAMES = frozenset(
    {"In", "Out", "get_ipython", "exit", "quit", "open", "_ih", "_oh", "_dh", "_exit_code", "__builtin__"}
)
# The numbered and stacked history names (_, __, ___, _i, _ii, _iii, _5, _i5) and dunders.
_GENERATED = re.compile(r"_{1,3}|_i{1,3}|_i?\d+|__\w+__")
# Helpers whose live value is a method or function of an IPython object.
_HELPERS = frozenset({"get_ipython", "exit", "quit"})


def is_ipython_name(name: str) -> bool:
    """Whether ``name`` is one IPython keeps in a user namespace for itself."""
    return name in IPYTHON_NAMES or _GENERATED.fullmatch(name) is not None


def is_ipython_value(name: str, value: object, namespace: Mapping[str, object]) -> bool:
    """Whether ``namespace[name] = value`` is IPython's own object (not a user's rebinding).

    ``In``/``Out`` are IPython's when they are the same objects as ``_ih``/``_oh``; the helpers
    when they belong to an ``IPython`` module; the history names always (IPython rebinds them
    after every cell)."""
    if name == "In" or name == "Out":
        return namespace.get("_ih" if name == "In" else "_oh") is value
    if name == "open":  # IPython's wraps io.open (its __module__ says "io")
        code = getattr(value, "__code__", None)
        return getattr(value, "__wrapped__", None) is io.open and "IPython" in getattr(
            code, "co_filename", ""
        )
    if name in _HELPERS:
        owner = value.__self__ if isinstance(value, types.MethodType) else value
        module = type(owner).__module__
        return isinstance(module, str) and module.startswith("IPython.")
    return is_ipython_name(name)

"""The NameError fixer: a missing import, a misspelt name, a module member used unqualified.

It declines, saying why, when the name is a local variable of another function, is used
before the cell assigns it, or is as close to a name of the user's as to a builtin.

May import: the standard library, :mod:`nbrefine.grounding.scope`, the shared modules of this
package (``source``, ``magic_lines``, ``failure_site``, ``lookups``, ``scopes``,
``spelling``, ``importable``), never another fixer; never the sandbox, the engine, IPython or
the CLI (the offline tier only reads what the failure context gives it)."""

from __future__ import annotations

import ast
import builtins
import keyword
import re
import sys
import types
from collections.abc import Sequence

from ...grounding.ipython_names import is_ipython_name
from ...grounding.scope import bound_names
from .failure_site import _FailureSite
from .importable import _UNSAFE_STDLIB, _importable
from .lookups import _names_of
from .magic_lines import _MAGIC, _is_timing_line
from .scopes import _SCOPES, _assigned_plainly, _function_locals, _name_nodes
from .source import Fix, _NoFix, _Source
from .spelling import _close_matches, _distance

#: Well-known names -> the import line that defines them (the first import name must exist).
KNOWN_IMPORTS: dict[str, tuple[str, str]] = {
    "np": ("numpy", "import numpy as np"),
    "pd": ("pandas", "import pandas as pd"),
    "plt": ("matplotlib", "import matplotlib.pyplot as plt"),
    "mpl": ("matplotlib", "import matplotlib as mpl"),
    "sns": ("seaborn", "import seaborn as sns"),
    "tf": ("tensorflow", "import tensorflow as tf"),
    "torch": ("torch", "import torch"),
    "nn": ("torch", "import torch.nn as nn"),
    "F": ("torch", "import torch.nn.functional as F"),
    "sp": ("scipy", "import scipy as sp"),
    "stats": ("scipy", "from scipy import stats"),
    "sm": ("statsmodels", "import statsmodels.api as sm"),
    "px": ("plotly", "import plotly.express as px"),
    "go": ("plotly", "import plotly.graph_objects as go"),
    "pl": ("polars", "import polars as pl"),
    "xr": ("xarray", "import xarray as xr"),
    "nx": ("networkx", "import networkx as nx"),
    "defaultdict": ("collections", "from collections import defaultdict"),
    "Counter": ("collections", "from collections import Counter"),
    "OrderedDict": ("collections", "from collections import OrderedDict"),
    "deque": ("collections", "from collections import deque"),
    "namedtuple": ("collections", "from collections import namedtuple"),
    "Path": ("pathlib", "from pathlib import Path"),
    "dataclass": ("dataclasses", "from dataclasses import dataclass"),
    "field": ("dataclasses", "from dataclasses import field"),
    "partial": ("functools", "from functools import partial"),
    "reduce": ("functools", "from functools import reduce"),
    "lru_cache": ("functools", "from functools import lru_cache"),
    "datetime": ("datetime", "from datetime import datetime"),
    "date": ("datetime", "from datetime import date"),
    "timedelta": ("datetime", "from datetime import timedelta"),
    "pprint": ("pprint", "from pprint import pprint"),
    "tqdm": ("tqdm", "from tqdm import tqdm"),
    "Decimal": ("decimal", "from decimal import Decimal"),
    "Fraction": ("fractions", "from fractions import Fraction"),
    "chain": ("itertools", "from itertools import chain"),
    "product": ("itertools", "from itertools import product"),
    "combinations": ("itertools", "from itertools import combinations"),
    "permutations": ("itertools", "from itertools import permutations"),
    "Any": ("typing", "from typing import Any"),
    "Optional": ("typing", "from typing import Optional"),
}
#: Common misspellings of Python keywords and constants used as names.
_SPELLINGS = {"true": "True", "false": "False", "none": "None", "null": "None", "nil": "None"}
#: Aliases whose module members may be used unqualified (``DataFrame`` -> ``pd.DataFrame``).
_MEMBER_ALIASES = ("pd", "np", "plt", "sns", "math")

#: A deleted ``from module import name``: the names one well-known module clearly provides,
#: by module (curated by hand). Names that several common modules provide as plain names
#: (``mean``: statistics and numpy; ``join``; ``bisect``) or that are common variable names
#: (``e``, ``digits``, ``mode``) are left out: no import is guessed for them. A function or
#: class must be called, subscripted, used as a decorator or in an annotation; a constant may
#: be used anyhow; a module must be used as ``name.x``.
_FROM_IMPORT_TABLE: dict[str, str] = {
    "itertools": "count cycle repeat accumulate islice zip_longest starmap takewhile dropwhile groupby "
    "compress tee pairwise combinations_with_replacement filterfalse",
    "math": "cos sin tan acos asin atan atan2 cosh sinh tanh sqrt isqrt exp log log2 log10 floor ceil "
    "factorial gcd lcm hypot radians degrees isclose comb perm fsum trunc copysign fabs pi tau inf nan",
    "collections": "ChainMap",
    "functools": "wraps cache cached_property total_ordering singledispatch cmp_to_key",
    "operator": "itemgetter attrgetter methodcaller",
    "copy": "deepcopy",
    "random": "randint randrange shuffle uniform gauss choice choices sample",
    "statistics": "stdev pstdev variance pvariance median_low median_high",
    "time": "sleep perf_counter monotonic",
    "datetime": "timezone",
    "string": "ascii_lowercase ascii_uppercase ascii_letters punctuation",
    "os": "listdir getcwd makedirs",
    "os.path": "basename dirname splitext isfile isdir exists",
    "glob": "glob",
    "heapq": "heappush heappop heapify heappushpop nlargest nsmallest",
    "bisect": "bisect_left bisect_right insort",
    "textwrap": "dedent",
    "dataclasses": "asdict astuple",
    "typing": "List Dict Tuple Set FrozenSet Union Callable Iterable Iterator Sequence Mapping Generator "
    "TypeVar NamedTuple Literal",
    "scipy": "interpolate integrate optimize signal special spatial ndimage sparse",
    "sklearn.model_selection": "train_test_split cross_val_score GridSearchCV KFold",
    "sklearn.linear_model": "LinearRegression LogisticRegression Ridge Lasso",
    "sklearn.preprocessing": "StandardScaler MinMaxScaler OneHotEncoder LabelEncoder",
    "sklearn.cluster": "KMeans",
    "sklearn.decomposition": "PCA",
    "sklearn.ensemble": "RandomForestClassifier RandomForestRegressor",
    "sklearn.tree": "DecisionTreeClassifier",
    "sklearn.metrics": "accuracy_score mean_squared_error r2_score confusion_matrix f1_score",
}
FROM_IMPORTS: dict[str, str] = {
    name: module for module, names in _FROM_IMPORT_TABLE.items() for name in names.split()
}
#: Names of ``FROM_IMPORTS`` that are values, not functions or classes.
_IMPORTED_CONSTANTS = frozenset(
    {"pi", "tau", "inf", "nan", "ascii_lowercase", "ascii_uppercase", "ascii_letters", "punctuation"}
)
#: Names of ``FROM_IMPORTS`` that are modules (``from scipy import interpolate``).
_IMPORTED_MODULES = frozenset(_FROM_IMPORT_TABLE["scipy"].split())
#: The constants spelt as keywords; misspelt (``Flase``), they are names.
_KEYWORD_CONSTANTS = ("True", "False", "None")


def _fix_name(state: _FailureSite) -> tuple[list[Fix], str]:
    match = re.match(r"(?:global )?name '(\w+)' is not defined", state.message)
    if not match:
        raise _NoFix("")
    wrong = match.group(1)
    src = state.src
    tree = src.need_tree()
    fixes: list[Fix] = []
    used_as_module = _used_as(tree, wrong, ast.Attribute)
    known = KNOWN_IMPORTS.get(wrong)
    # A module alias must be used as ``np.x``; a class or function must be called (or be a
    # decorator, or subscripted like ``Optional[int]``): ``print(product)`` stays a typo.
    usage = used_as_module
    if known is not None and known[1].startswith("from ") and not usage:
        usage = (
            _used_as(tree, wrong, ast.Call) or _used_as(tree, wrong, ast.Subscript) or _decorates(tree, wrong)
        )
    if known is not None and usage and _importable(known[0]):
        fixes.append(_insert_import(src, known[1], f"`{wrong}` is not defined: it needs `{known[1]}`."))
    elif known is None and wrong in FROM_IMPORTS and _imported_usage(tree, wrong):
        module = FROM_IMPORTS[wrong]
        if _importable(module.split(".")[0]):
            line = f"from {module} import {wrong}"
            fixes.append(_insert_import(src, line, f"`{wrong}` is not defined: it needs `{line}`."))
    if (
        used_as_module
        and wrong in sys.stdlib_module_names
        and wrong not in _UNSAFE_STDLIB
        and not wrong.startswith("_")
        and _importable(wrong)
    ):
        line = f"import {wrong}"
        fixes.append(_insert_import(src, line, f"`{wrong}` is a standard module that was not imported."))
        if len(fixes) == 2 and _module_attributes_used(tree, wrong):
            fixes.reverse()  # ``datetime.date.today()``: the module, not its class of that name

    if _assigned_plainly(tree, wrong):
        if fixes:
            return fixes, ""
        raise _NoFix(
            f"no quick fix for NameError: `{wrong}` is assigned in the cell but used before its first "
            "assignment (initialise it first)"
        )
    elsewhere = _function_locals(state.namespace)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for local in bound_names(node):
                elsewhere.setdefault(local, node.name)
    if wrong in elsewhere and wrong not in state.namespace and not fixes:
        raise _NoFix(
            f"no quick fix for NameError: `{wrong}` is only a local variable of `{elsewhere[wrong]}()`; "
            f"return it from `{elsewhere[wrong]}()` and assign the result, or define it at the top level"
        )

    nodes = _name_nodes(tree, wrong)
    replacements: list[tuple[str, str]] = []
    if wrong in _SPELLINGS:
        replacements.append((_SPELLINGS[wrong], f"`{wrong}` is spelt `{_SPELLINGS[wrong]}` in Python."))
    members = [
        alias
        for alias in _MEMBER_ALIASES
        if isinstance(state.namespace.get(alias), types.ModuleType)
        and wrong in state.namespace[alias].__dict__
        and not wrong.startswith("_")
        and len(wrong) > 1
    ]
    if len(members) == 1:
        replacements.append(
            (f"{members[0]}.{wrong}", f"`{wrong}` is not defined on its own: it is `{members[0]}.{wrong}`.")
        )
    scope = _scope_names(src, nodes) | state.local_names()
    pool = _name_pool(state, tree, wrong) + sorted(scope)
    if all(isinstance(node.ctx, ast.Load) for node in nodes):
        pool += _KEYWORD_CONSTANTS
    close = _close_matches(wrong, pool)
    if not close and len(wrong) >= 2:
        # A short name inside a function: one local one keystroke away is the only candidate.
        near = [n for n in scope if n != wrong and _distance(wrong, n, 1) == 1 and len(n) >= 2]
        close = near if len(near) == 1 else []
    close = _by_scope(wrong, close, scope, set(state.namespace) | bound_names(tree))
    for name in close:
        replacements.append((name, f"`{wrong}` is not defined; the closest defined name is `{name}`."))
    for new, why in replacements:
        edits = []
        for node in nodes:
            start, end = src.span(node)
            if src.code[start:end] == wrong:
                edits.append((start, end, new))
        if edits:
            fixes.append(src.fix(edits, why))
    return fixes, f"no quick fix for NameError: nothing defined is close to `{wrong}`"


def _used_as(tree: ast.Module, name: str, kind: type[ast.Attribute | ast.Call | ast.Subscript]) -> bool:
    """Whether ``name`` appears as ``name.x`` / ``name(...)`` / ``name[...]`` in the cell."""
    for node in ast.walk(tree):
        if isinstance(node, kind):
            inner = node.func if isinstance(node, ast.Call) else node.value
            if isinstance(inner, ast.Name) and inner.id == name:
                return True
    return False


def _module_attributes_used(tree: ast.Module, name: str) -> bool:
    """Whether ``name.x`` uses only members of module ``name`` that its class ``name`` lacks."""
    module = sys.modules.get(name)
    member = getattr(module, name, None) if module is not None else None
    if module is None or member is None:
        return False
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name
    }
    own = _names_of(member)
    return bool(used) and all(attr in module.__dict__ and attr not in own for attr in used)


def _decorates(tree: ast.Module, name: str) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(target, ast.Name) and target.id == name:
                    return True
    return False


def _name_pool(state: _FailureSite, tree: ast.Module, wrong: str) -> list[str]:
    private = wrong.startswith("_")
    names = [
        name
        for name in state.namespace
        if isinstance(name, str) and (private or not name.startswith("_")) and not is_ipython_name(name)
    ]
    names += sorted(bound_names(tree))
    if state.lineno is not None:
        names += sorted(state.local_names())
    names += [v.name for v in state.failure.values if v.name.isidentifier()]
    names += [name for name in dir(builtins) if private or not name.startswith("_")]
    return [name for name in dict.fromkeys(names) if name != wrong and not keyword.iskeyword(name)]


def _scope_names(src: _Source, nodes: Sequence[ast.AST]) -> set[str]:
    """Names bound in the comprehensions, lambdas and functions around ``nodes``."""
    names: set[str] = set()
    parents = src.parents
    for node in nodes:
        parent = parents.get(node)
        while parent is not None:
            if isinstance(parent, _SCOPES) and not isinstance(parent, ast.ClassDef):
                names |= bound_names(parent)
            parent = parents.get(parent)
    return names


def _by_scope(wrong: str, close: list[str], scope: set[str], user: set[str]) -> list[str]:
    """``close`` with the names in scope where the error happened first among equals.

    A name of the user's (in scope, in the cell or in the namespace) and a builtin equally
    close is a guess either way (``vall``: the comprehension's ``val`` or ``all``?): decline."""
    if not close:
        return close
    distance = {name: _distance(wrong.lower(), name.lower(), 3) for name in close}
    best = min(distance.values())
    tied = [name for name in close if distance[name] == best]
    mine = [name for name in tied if name in scope or name in user]
    builtin = [name for name in tied if name not in mine and hasattr(builtins, name)]
    if mine and builtin:
        where = "a name in scope where the error happened" if mine[0] in scope else "a name of yours"
        raise _NoFix(
            f"no quick fix for NameError: `{wrong}` is as close to `{mine[0]}` ({where}) as to the builtin "
            f"`{builtin[0]}`; not guessing between them"
        )
    return sorted(close, key=lambda name: (distance[name], name not in scope))


def _imported_usage(tree: ast.Module, name: str) -> bool:
    """Whether ``name`` is used the way a deleted ``from ... import name`` would be used."""
    if name in _IMPORTED_CONSTANTS:
        return True
    if name in _IMPORTED_MODULES:
        return _used_as(tree, name, ast.Attribute)
    return (
        _used_as(tree, name, ast.Call)
        or _used_as(tree, name, ast.Subscript)
        or _decorates(tree, name)
        or _in_annotation(tree, name)
    )


def _in_annotation(tree: ast.Module, name: str) -> bool:
    annotations: list[ast.expr | None] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            annotations.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
    return any(
        isinstance(inner, ast.Name) and inner.id == name
        for annotation in annotations
        if annotation is not None
        for inner in ast.walk(annotation)
    )


_FROM_LINE = re.compile(r"from ([\w.]+) import (\w+)")


def _insert_import(src: _Source, line: str, explanation: str) -> Fix:
    """``line`` added to the cell: a ``from m import x`` joins the cell's own one-line
    ``from m import ...``; otherwise the line goes at the top, after leading comments, magics
    and ``__future__``."""
    match = _FROM_LINE.fullmatch(line)
    tree = src.tree
    if match is not None and tree is not None:
        for node in tree.body:
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == match.group(1)
                and not node.level
                and node.lineno == node.end_lineno
                and all(alias.name != "*" for alias in node.names)
            ):
                _, end = src.span(node)
                if src.code[end - 1] != ")":
                    return src.fix([(end, end, f", {match.group(2)}")], explanation)
    return _insert_line(src, line, explanation)


def _insert_line(src: _Source, line: str, explanation: str) -> Fix:
    """Insert ``line`` at the top of the cell: after leading comments, magics, ``__future__``."""
    index = 0
    for index, text in enumerate(src.lines):  # noqa: B007 - the index is used after the loop
        stripped = text.strip()
        if not stripped or stripped.startswith("#") or (_MAGIC.match(text) and not _is_timing_line(text)):
            continue
        if stripped.startswith("from __future__"):
            continue
        break
    else:
        index = len(src.lines)
    position = src.starts[index] if index < len(src.lines) else len(src.code)
    prefix = "" if position == 0 or src.code[position - 1] == "\n" else "\n"
    new_line = prefix + line + ("\n" if index < len(src.lines) else "")
    code = src.code[:position] + new_line + src.code[position:]
    return Fix(code, explanation, frozenset({index + 1}))

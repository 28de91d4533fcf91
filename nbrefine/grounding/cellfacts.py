"""Facts about one cell's text that tell where a repair belongs: what it binds, what it defines,
whether it is a cell of checks, whether the notebook locks it.

A failure surfaces in one cell and is often caused in another; finding that other cell
(:mod:`nbrefine.engine.cause`) needs to read cells that may not even parse (the cell above
failed *because* of a missing colon), so :func:`bound_names` falls back to a line-by-line reading
where the parser gives up.

May import: the standard library and the grounding modules below it (scope).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from .scope import light_transform, parse, scan

__all__ = [
    "bound_names",
    "defined_names",
    "is_checks_only",
    "readonly_reason",
    "stored_keys",
    "user_text",
]

_REFINE_LINE = re.compile(r"\A\s*%%refine\b[^\n]*(\n|\Z)")
_ASSIGN = re.compile(r"^([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?::[^=]*)?=(?!=)")
_DEF = re.compile(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")
_IMPORT = re.compile(r"^import\s+(.+)$")
_FROM = re.compile(r"^from\s+\S+\s+import\s+\(?([^)#]+)")
_KEY_STORE = re.compile(r"""\[\s*(['"])([^'"\n]{1,80})\1\s*\]\s*=(?!=)""")
#: Calls that are checks, as assert statements are (numpy's, pandas', unittest's, pytest's).
_CHECK_CALL = re.compile(r"(^|\.)(assert\w*|assert_\w+|check\w*)$")


def user_text(source: str) -> tuple[str, int]:
    """The cell as the user wrote it, without a ``%%refine`` line above it (the CLI puts one on
    every cell it runs; a user's own carries only nbrefine's options): (text, lines dropped)."""
    match = _REFINE_LINE.match(source)
    if match is None:
        return source, 0
    return source[match.end() :], source[: match.end()].count("\n") or 1


def defined_names(code: str) -> tuple[str, ...]:
    """The functions and classes ``code`` defines at top level (by a line reading where it does
    not parse)."""
    tree = parse(light_transform(code))
    if tree is not None:
        return tuple(
            node.name
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        )
    return tuple(dict.fromkeys(m.group(1) for line in code.splitlines() if (m := _DEF.match(line))))


def bound_names(code: str) -> frozenset[str]:
    """The names ``code`` binds at module level (assigned, imported, defined), read line by line
    where it does not parse."""
    tree = parse(light_transform(code))
    if tree is not None:
        return frozenset(name for name, bound in scan(tree).effects if bound)
    names: set[str] = set()
    for line in code.splitlines():
        names.update(_bound_on_line(line))
    return frozenset(names)


def _bound_on_line(line: str) -> list[str]:
    if line[:1].isspace():
        return []  # inside a block: not module level, or not reliably so
    if match := _DEF.match(line):
        return [match.group(1)]
    if match := _ASSIGN.match(line):
        return [name.strip() for name in match.group(1).split(",")]
    if match := _IMPORT.match(line):
        return [part.split(" as ")[-1].strip().split(".")[0] for part in match.group(1).split(",")]
    if match := _FROM.match(line):
        return [part.split(" as ")[-1].strip() for part in match.group(1).split(",") if part.strip()]
    return []


def stored_keys(code: str) -> frozenset[str]:
    """String keys the cell stores into (``df["density"] = ...``): a later cell's KeyError on one
    of them is this cell's, when this cell failed."""
    return frozenset(m.group(2) for m in _KEY_STORE.finditer(code))


def is_checks_only(code: str) -> bool:
    """Every top-level statement is an ``assert`` or a call of a check function
    (``np.testing.assert_allclose(...)``, ``check(...)``): a cell of checks, never the fix's place."""
    tree = parse(light_transform(code))
    if tree is None or not tree.body:
        return False
    return all(_is_check(statement) for statement in tree.body)


def _is_check(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Assert):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        return bool(_CHECK_CALL.search(ast.unparse(statement.value.func)))
    return False


def readonly_reason(metadata: Mapping[str, Any]) -> str:
    """Why the notebook says a cell may not change ("" : it may): ``editable: false``, an nbgrader
    test cell (``grade`` without ``solution``) or a cell nbgrader locks."""
    nbgrader = metadata.get("nbgrader")
    if isinstance(nbgrader, Mapping):
        if nbgrader.get("grade") and not nbgrader.get("solution"):
            return "an nbgrader test cell"
        if nbgrader.get("locked") and not nbgrader.get("solution"):
            return "a cell nbgrader locks"
    if metadata.get("editable") is False:
        return "a cell the notebook marks read-only"
    return ""

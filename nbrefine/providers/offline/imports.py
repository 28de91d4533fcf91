"""The ModuleNotFoundError / ImportError fixer: a misspelt module, submodule or imported name.

A module that is not there is usually a package that is not installed: then the reason to
decline says what to ``%pip install``.

May import: the standard library, the shared modules of this package (``source``, ``failure_site``,
``scopes``, ``spelling``, ``importable``), never another fixer; never the sandbox, the engine,
IPython or the CLI (the offline tier only reads what the failure context gives it)."""

from __future__ import annotations

import ast
import re
import sys

from .failure_site import _FailureSite
from .importable import _IMPORT_NAMES, _KNOWN_PACKAGES, PIP_NAMES, _importable, _submodules, _top_modules
from .scopes import _name_nodes
from .source import Fix, _NoFix, _Source
from .spelling import _close_matches


def _fix_module(state: _FailureSite) -> tuple[list[Fix], str]:
    match = re.match(r"No module named '([\w.]+)'", state.message)
    if not match:
        if state.failure.error_type == "ImportError":
            return _fix_import_name(state)
        raise _NoFix("")
    missing = match.group(1)
    parts = missing.split(".")
    # The first component that does not exist.
    index = 0
    if _importable(parts[0]):
        index = 1
        while index < len(parts) - 1:
            subs = _submodules(".".join(parts[:index]))
            if subs is None or parts[index] not in subs:
                break
            index += 1
    wrong = parts[index]
    # A module that is not there is often a package that is not installed: a lookalike that is
    # (``array`` for ``xarray``) would import, and pass a trial of a cell that only imports it.
    if index == 0:
        options = []
        alias = _IMPORT_NAMES.get(wrong.lower().replace("-", "_"))
        if alias is not None and _importable(alias):
            options.append(alias)
        if wrong not in _KNOWN_PACKAGES:
            options += [m for m in _close_matches(wrong, _top_modules(), two_edits=False) if _importable(m)]
        options = [m for m in dict.fromkeys(options) if not m.startswith("_") or wrong.startswith("_")]
    else:
        subs = [
            s
            for s in _submodules(".".join(parts[:index])) or []
            if not s.startswith("_") or wrong.startswith("_")
        ]
        options = _close_matches(wrong, subs, two_edits=False)
    src = state.src
    tree = src.need_tree()
    stmt = state.statement()
    if not isinstance(stmt, (ast.Import, ast.ImportFrom)) or not options:
        top = parts[0]
        pip = PIP_NAMES.get(top) or PIP_NAMES.get(".".join(parts[:2])) or top.replace("_", "-")
        if index == 0:
            raise _NoFix(f"no module named {top!r} is installed: `%pip install {pip}` then re-run")
        raise _NoFix(f"no quick fix for ModuleNotFoundError: {missing!r} has no submodule close to {wrong!r}")
    fixes = []
    for option in options:
        edits = _module_edits(src, tree, stmt, parts, index, option)
        if edits:
            new_name = ".".join([*parts[:index], option])
            fixes.append(
                src.fix(edits, f"There is no module `{'.'.join(parts[: index + 1])}`; it is `{new_name}`.")
            )
    return fixes, ""


def _module_edits(
    src: _Source,
    tree: ast.Module,
    stmt: ast.Import | ast.ImportFrom,
    parts: list[str],
    index: int,
    option: str,
) -> list[tuple[int, int, str]]:
    wrong_prefix = ".".join(parts[: index + 1])
    stmt_start, stmt_end = src.span(stmt)
    text = src.code[stmt_start:stmt_end]
    edits: list[tuple[int, int, str]] = []
    pattern = re.compile(r"(?<![\w.])" + re.escape(wrong_prefix) + r"(?![\w])")
    for found in pattern.finditer(text):
        start = stmt_start + found.start() + len(wrong_prefix) - len(parts[index])
        edits.append((start, stmt_start + found.end(), option))
    if not edits:
        return []
    # ``import pandsa`` binds ``pandsa``: rename the uses too.
    if isinstance(stmt, ast.Import) and index == 0:
        for alias in stmt.names:
            if alias.asname is None and alias.name.split(".")[0] == parts[0]:
                for node in _name_nodes(tree, parts[0]):
                    start, end = src.span(node)
                    if src.code[start:end] == parts[0]:
                        edits.append((start, end, option))
    return edits


def _fix_import_name(state: _FailureSite) -> tuple[list[Fix], str]:
    match = re.match(r"cannot import name '(\w+)' from '([\w.]+)'", state.message)
    if not match:
        raise _NoFix("")
    wrong, module_name = match.groups()
    module = sys.modules.get(module_name)
    if module is None:
        raise _NoFix("")
    src = state.src
    tree = src.need_tree()
    stmt = state.statement()
    if not isinstance(stmt, ast.ImportFrom):
        raise _NoFix("")
    names = [n for n in module.__dict__ if not n.startswith("_")]
    fixes = []
    for option in _close_matches(wrong, names):
        edits = []
        for alias in stmt.names:
            if alias.name == wrong:
                start, _ = src.span(alias)
                if src.code[start : start + len(wrong)] == wrong:
                    edits.append((start, start + len(wrong), option))
                    if alias.asname is None:
                        for node in _name_nodes(tree, wrong):
                            s, e = src.span(node)
                            if src.code[s:e] == wrong:
                                edits.append((s, e, option))
        if edits:
            fixes.append(src.fix(edits, f"`{module_name}` has no `{wrong}`; the closest name is `{option}`."))
    return fixes, f"no quick fix for ImportError: `{module_name}` has nothing close to `{wrong}`"

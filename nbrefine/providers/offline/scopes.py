"""What the fixers ask about names beyond the one scope analysis (:mod:`nbrefine.grounding.scope`,
which says what a scope binds): whether the cell assigns a name plainly, every use of one
binding, the local variables of the namespace's functions.

May import: the standard library and :mod:`nbrefine.grounding.scope`, nothing else of this package;
never the sandbox, the engine, IPython or the CLI (the offline tier only reads what the failure
context gives it)."""

from __future__ import annotations

import ast
import types
from collections.abc import Mapping
from typing import Any

from ...grounding.scope import bound_names, scope_nodes

_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def _assigned_plainly(tree: ast.Module, name: str) -> bool:
    """Whether the cell's top level binds ``name`` other than by ``name += ...``."""
    augmented = {id(node.target) for node in scope_nodes(tree) if isinstance(node, ast.AugAssign)}
    for node in scope_nodes(tree):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            if id(node) not in augmented:
                return True
        elif _defines(node, name):
            return True
    return False


def _defines(node: ast.AST, name: str) -> bool:
    """Whether ``node`` is a def, class or import statement binding ``name``."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((alias.asname or alias.name).split(".")[0] == name for alias in node.names)
    return False


def _name_nodes(tree: ast.AST, name: str) -> list[ast.Name]:
    """Every ``Name`` node spelling ``name`` that refers to the same (non-local) binding."""
    found: list[ast.Name] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES) and name in bound_names(child):
                continue
            if isinstance(child, ast.Name) and child.id == name:
                found.append(child)
            visit(child)

    visit(tree)
    return found


def _function_locals(namespace: Mapping[str, Any]) -> dict[str, str]:
    """Local variable name -> function name, for the functions in the namespace."""
    found: dict[str, str] = {}

    def walk(code: types.CodeType, owner: str, depth: int) -> None:
        for local in (*code.co_varnames, *code.co_cellvars):
            found.setdefault(local, owner)
        if depth < 3:
            for const in code.co_consts:
                if isinstance(const, types.CodeType):
                    walk(const, owner, depth + 1)

    for key, value in list(namespace.items())[:5000]:
        if isinstance(value, types.FunctionType) and not key.startswith("_"):
            walk(value.__code__, value.__name__, 0)
    return found

"""Scopes and names: which names a scope binds, where a name is assigned, every use of a binding.

May import: the standard library, nothing else of this package; never the sandbox, the engine,
IPython or the CLI (the offline tier only reads what the failure context gives it)."""

from __future__ import annotations

import ast
import types
from collections.abc import Iterator, Mapping
from typing import Any

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


def _scope_children(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``node``'s own scope (nested scopes' bodies excluded, their names kept)."""
    for child in ast.iter_child_nodes(node):
        yield child
        if isinstance(child, _SCOPES):
            continue
        yield from _scope_children(child)


def _bound_names(scope: ast.AST) -> set[str]:
    """Names bound in ``scope`` itself (parameters, assignments, defs, imports, for targets)."""
    names: set[str] = set()
    declared: set[str] = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = scope.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                names.add(arg.arg)
    if isinstance(scope, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        for generator in scope.generators:
            for node in ast.walk(generator.target):
                if isinstance(node, ast.Name):
                    names.add(node.id)
        return names
    for node in _scope_children(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
    return names - declared


def _assigned_plainly(tree: ast.Module, name: str) -> bool:
    """Whether the cell's top level binds ``name`` other than by ``name += ...``."""
    augmented = {id(node.target) for node in _scope_children(tree) if isinstance(node, ast.AugAssign)}
    for node in _scope_children(tree):
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
            if isinstance(child, _SCOPES) and name in _bound_names(child):
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

"""The UnboundLocalError fixer: a missing ``global`` or ``nonlocal`` declaration.

May import: the standard library, :mod:`nbrefine.grounding.scope`, the shared modules of this
package (``source``, ``failure_site``), never another fixer; never the sandbox, the engine, IPython or the
CLI (the offline tier only reads what the failure context gives it)."""

from __future__ import annotations

import ast
import re

from ...grounding.scope import bound_names, scope_nodes
from .failure_site import _FailureSite
from .source import Fix, _indent_of, _NoFix


def _fix_unbound(state: _FailureSite) -> tuple[list[Fix], str]:
    match = re.match(
        r"(?:cannot access local variable '(\w+)'|local variable '(\w+)' referenced before assignment)",
        state.message,
    )
    if not match:
        raise _NoFix("")
    name = match.group(1) or match.group(2)
    src = state.src
    tree = src.need_tree()
    functions = state.enclosing_functions(state.need_line())
    if not functions:
        raise _NoFix("")
    function = functions[-1]
    if name not in bound_names(function):
        raise _NoFix("")
    first = _first_use(function, name)
    if first != "load":
        raise _NoFix(
            f"no quick fix for UnboundLocalError: `{name}` is only assigned on some paths in "
            f"`{function.name}()`; give it a value before it is used"
        )
    outer = [f for f in functions[:-1] if name in bound_names(f)]
    if outer:
        statement = f"nonlocal {name}"
        why = f"`{name}` belongs to the enclosing `{outer[-1].name}()`: declare it `nonlocal`."
    elif name in state.namespace or name in bound_names(tree):
        statement = f"global {name}"
        why = f"`{function.name}()` assigns the global `{name}`, which makes it local: declare it `global`."
    else:
        raise _NoFix(
            f"no quick fix for UnboundLocalError: `{name}` is used in `{function.name}()` before it is "
            "assigned and there is no global of that name"
        )
    body = function.body
    first_stmt = body[0]
    if (
        isinstance(first_stmt, ast.Expr)
        and isinstance(first_stmt.value, ast.Constant)
        and isinstance(first_stmt.value.value, str)
        and len(body) > 1
    ):
        anchor = body[1]
    else:
        anchor = first_stmt
    if anchor.lineno == function.lineno:
        raise _NoFix("")
    indent = _indent_of(src.line(anchor.lineno))
    if src.offset(anchor.lineno, anchor.col_offset) != src.starts[anchor.lineno - 1] + len(indent):
        raise _NoFix("")
    position = src.starts[anchor.lineno - 1]
    code = src.code[:position] + f"{indent}{statement}\n" + src.code[position:]
    return [Fix(code, why, frozenset({anchor.lineno}))], ""


def _first_use(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> str:
    """``load`` when ``name``'s first use in ``function`` (source order) reads it."""
    uses: list[tuple[int, int, str]] = []
    for node in scope_nodes(function):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            uses.append((node.lineno, node.col_offset, "load"))
        elif isinstance(node, ast.Name) and node.id == name:
            uses.append((node.lineno, node.col_offset, "load" if isinstance(node.ctx, ast.Load) else "store"))
    if not uses:
        return ""
    uses.sort()
    # An assignment's target is written after its value is read: ``x = x + 1`` reads first.
    first_line = uses[0][0]
    on_line = [u for u in uses if u[0] == first_line]
    return "load" if any(kind == "load" for _, _, kind in on_line) else on_line[0][2]

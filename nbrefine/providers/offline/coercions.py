"""The TypeError fixer: str/number mix-ups (``"a" + 1``, ``"2" * 1.5``, ``"3" < 4``, ``range(2.0)``).

May import: the standard library, the shared modules of this package (``source``, ``failure_site``,
``lookups``), never another fixer; never the sandbox, the engine, IPython or the CLI (the offline
tier only reads what the failure context gives it)."""

from __future__ import annotations

import ast
import re

from .failure_site import _FailureSite
from .lookups import _canonical_type
from .source import Fix, _NoFix, _Source

_OPS: dict[str, type[ast.operator]] = {
    "+": ast.Add,
    "-": ast.Sub,
    "*": ast.Mult,
    "/": ast.Div,
    "//": ast.FloorDiv,
    "%": ast.Mod,
    "**": ast.Pow,
}
_NUMBERS = ("int", "float", "int64", "int32", "float64", "float32")


def _fix_type(state: _FailureSite) -> tuple[list[Fix], str]:
    message = state.message
    concat = re.match(r'can only concatenate str \(not "([\w.]+)"\) to str', message)
    if concat:
        return _fix_concat(state, _canonical_type(concat.group(1)))
    operands = re.match(r"unsupported operand type\(s\) for (\S+?)=?: '([\w.]+)' and '([\w.]+)'", message)
    if operands:
        op, left, right = operands.groups()
        return _fix_operands(state, op, _canonical_type(left), _canonical_type(right))
    compare = re.match(r"'(<|>|<=|>=)' not supported between instances of '([\w.]+)' and '([\w.]+)'", message)
    if compare:
        return _fix_compare(state, _canonical_type(compare.group(2)), _canonical_type(compare.group(3)))
    sequence = re.match(r"can't multiply sequence by non-int of type '(float|str)'", message)
    if sequence and sequence.group(1) == "float":
        return _fix_str_times_float(state)
    interpreted = re.match(r"'(str|float)' object cannot be interpreted as an integer", message)
    if interpreted:
        return _fix_range(state, interpreted.group(1))
    raise _NoFix("")


def _binary_nodes(state: _FailureSite, op: type[ast.operator]) -> list[tuple[ast.AST, ast.expr, ast.expr]]:
    found: list[tuple[ast.AST, ast.expr, ast.expr]] = []
    for node in state.failing_nodes():
        if isinstance(node, ast.BinOp) and isinstance(node.op, op):
            found.append((node, node.left, node.right))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, op):
            found.append((node, node.target, node.value))
    return found


def _wrap(src: _Source, node: ast.expr, function: str) -> tuple[int, int, str]:
    start, end = src.span(node)
    return start, end, f"{function}({src.code[start:end]})"


def _fix_concat(state: _FailureSite, other: str) -> tuple[list[Fix], str]:
    src = state.src
    exact: list[ast.expr] = []
    loose: list[ast.expr] = []
    for _, left, right in _binary_nodes(state, ast.Add):
        left_type, right_type = state.type_name_of(left), state.type_name_of(right)
        if left_type not in ("str", None) or right_type == "str":
            continue
        if right_type is not None and right_type == other:
            exact.append(right)
        elif right_type is None and left_type == "str":
            loose.append(right)
    chosen = exact or (loose if len(loose) == 1 else [])
    if not chosen:
        raise _NoFix("")
    edits = [_wrap(src, node, "str") for node in chosen]
    shown = ", ".join(f"`{src.text(node)}`" for node in chosen)
    why = f"A str cannot be joined to {other} {shown} with `+`: convert it with `str()`."
    return [src.fix(edits, why)], ""


def _str_value(state: _FailureSite, node: ast.expr) -> str | None:
    value = state.try_evaluate(node)
    return value if isinstance(value, str) else None


def _number_function(state: _FailureSite, node: ast.expr, other: str) -> list[str]:
    """``int``/``float`` to turn the str operand ``node`` into a number (best first)."""
    text = _str_value(state, node)
    if text is not None:
        try:
            int(text)
            return ["int"] if other.startswith("int") else ["float"]
        except ValueError:
            pass
        try:
            float(text)
            return ["float"]
        except ValueError:
            return []
    return ["int", "float"] if other.startswith("int") else ["float"]


def _fix_operands(state: _FailureSite, op: str, left: str, right: str) -> tuple[list[Fix], str]:
    op_type = _OPS.get(op)
    if op_type is None or "NoneType" in (left, right):
        raise _NoFix("")
    if not ({left, right} & {"str"}) or not ({left, right} & set(_NUMBERS)):
        raise _NoFix("")
    src = state.src
    matches = []
    for _, lnode, rnode in _binary_nodes(state, op_type):
        ltype, rtype = state.type_name_of(lnode), state.type_name_of(rnode)
        if ltype not in (left, None) or rtype not in (right, None) or (ltype is None and rtype is None):
            continue
        matches.append((lnode, rnode))
    if len(matches) != 1:
        raise _NoFix("")
    lnode, rnode = matches[0]
    str_node, num_node, num_type = (lnode, rnode, right) if left == "str" else (rnode, lnode, left)
    fixes = []
    for function in _number_function(state, str_node, num_type):
        why = f"`{src.text(str_node)}` is a str holding a number: convert it with `{function}()`."
        fixes.append(src.fix([_wrap(src, str_node, function)], why))
    if op == "+" and left != "str":
        why = f"`{src.text(num_node)}` is a number joined to text: convert it with `str()`."
        fixes.append(src.fix([_wrap(src, num_node, "str")], why))
    return fixes, ""


def _fix_str_times_float(state: _FailureSite) -> tuple[list[Fix], str]:
    """``rate * 2.0`` where ``rate`` is a str holding a number: ``float(rate) * 2.0``."""
    src = state.src
    matches = []
    for _, left, right in _binary_nodes(state, ast.Mult):
        types_ = (state.type_name_of(left), state.type_name_of(right))
        if types_ == ("str", "float"):
            matches.append(left)
        elif types_ == ("float", "str"):
            matches.append(right)
    if len(matches) != 1:
        raise _NoFix("")
    node = matches[0]
    if _number_function(state, node, "float") != ["float"]:
        raise _NoFix("")
    why = f"`{src.text(node)}` is a str holding a number: convert it with `float()`."
    return [src.fix([_wrap(src, node, "float")], why)], ""


def _fix_compare(state: _FailureSite, left: str, right: str) -> tuple[list[Fix], str]:
    if "str" not in (left, right) or not ({left, right} & set(_NUMBERS)):
        raise _NoFix("")
    src = state.src
    matches = []
    for node in state.failing_nodes():
        if isinstance(node, ast.Compare) and len(node.comparators) == 1:
            lnode, rnode = node.left, node.comparators[0]
            ltype, rtype = state.type_name_of(lnode), state.type_name_of(rnode)
            if ltype in (left, None) and rtype in (right, None) and not (ltype is None and rtype is None):
                matches.append((lnode, rnode))
    if len(matches) != 1:
        raise _NoFix("")
    lnode, rnode = matches[0]
    str_node, num_type = (lnode, right) if left == "str" else (rnode, left)
    fixes = []
    for function in _number_function(state, str_node, num_type):
        why = f"`{src.text(str_node)}` is a str compared with a number: convert it with `{function}()`."
        fixes.append(src.fix([_wrap(src, str_node, function)], why))
    return fixes, ""


def _fix_range(state: _FailureSite, type_name: str) -> tuple[list[Fix], str]:
    src = state.src
    edits = []
    for node in state.failing_nodes():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            for arg in node.args:
                if state.type_name_of(arg) == type_name:
                    edits.append(_wrap(src, arg, "int"))
    if not edits:
        raise _NoFix("")
    why = f"`range()` needs integers, not {type_name}: convert with `int()`."
    return [src.fix(edits, why)], ""

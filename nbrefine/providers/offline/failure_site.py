"""What a fixer works with: the failure, the parsed cell, the failing line and safe evaluation.

:class:`_FailureSite` finds the failing line in the code (also inside a timing magic), the statements
on it, the functions around it, and evaluates name/attribute/constant-subscript chains through
``lookups`` only.

May import: the standard library, ``source``, ``magic_lines``, ``lookups``,
:mod:`nbrefine.grounding.scope` and ``nbrefine.providers.base``; never the sandbox, the engine,
IPython or the CLI (the offline tier only reads what the failure context gives it)."""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator, Mapping
from typing import Any

from ...grounding.scope import bound_names
from ..base import RepairContext
from .lookups import _MISSING, _CannotEval, _canonical_type, _safe_getattr, _safe_getitem, _TypeOnly
from .magic_lines import _RUN_MAGIC, _is_timing_line
from .source import _NoFix, _Source


class _FailureSite:
    """What a fixer needs: the context, the parsed source and safe lookups."""

    def __init__(self, context: RepairContext, src: _Source) -> None:
        self.context = context
        failure = context.failure
        assert failure is not None
        self.failure = failure
        self.message = failure.message.strip()
        self.src = src
        self.namespace: Mapping[str, Any] = context.namespace
        #: lines the failure may be on when it happened inside a timing magic (else None)
        self.region: tuple[int, int] | None = None
        self.lineno = self._locate(failure.lineno, failure.line)
        self.value_types = {v.name: v.type_name for v in failure.values}
        self._local_names: set[str] | None = None

    def _locate(self, lineno: int | None, line: str) -> int | None:
        """The failing line in ``code``: the reported one, or the unique line with its text.

        A failure inside ``%timeit``/``%time`` is reported on the line IPython made of the
        magic (``get_ipython().run_line_magic(...)``): the magic's line, or for a cell magic
        the whole cell, is where it happened."""
        magic = _RUN_MAGIC.match(line)
        if magic is not None and magic.group(2) in ("time", "timeit"):
            if magic.group(1) == "cell" and _is_timing_line(self.src.line(1)):
                self.region = (1, len(self.src.lines))
                return 1
            if lineno is not None and _is_timing_line(self.src.line(lineno)):
                self.region = (lineno, lineno)
                return lineno
        if lineno is not None and (not line.strip() or self.src.line(lineno).strip() == line.strip()):
            return lineno if 0 < lineno <= len(self.src.lines) else None
        if line.strip():
            found = [i + 1 for i, text in enumerate(self.src.lines) if text.strip() == line.strip()]
            if len(found) == 1:
                return found[0]
        return None

    def need_line(self) -> int:
        if self.lineno is None:
            raise _NoFix("")
        return self.lineno

    # ---- statements, scopes

    def statements(self) -> list[ast.stmt]:
        """The simple statements and compound headers on the failing line, innermost last."""
        tree = self.src.need_tree()
        lineno = self.need_line()
        found: list[ast.stmt] = []
        for node in ast.walk(tree):
            if not isinstance(node, ast.stmt):
                continue
            if self.region is not None:
                if self.region[0] <= node.lineno <= self.region[1]:
                    found.append(node)
                continue
            end = node.end_lineno or node.lineno
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                end = max(body[0].lineno - 1, node.lineno)
            if node.lineno <= lineno <= end:
                found.append(node)
        if not found:
            raise _NoFix("")
        found.sort(key=lambda n: (n.lineno, n.col_offset))
        return found

    def statement(self) -> ast.stmt:
        """The innermost simple statement (or compound header) holding the failing line."""
        return self.statements()[-1]

    def failing_nodes(self) -> list[ast.AST]:
        """Every node of the statements on the failing line (headers only for compounds)."""
        return [node for stmt in self.statements() for node in self.nodes_of_statement(stmt)]

    def nodes_of_statement(self, stmt: ast.stmt) -> Iterator[ast.AST]:
        """The nodes of ``stmt`` (only the header of a compound statement)."""
        if isinstance(stmt, (ast.If, ast.While)):
            roots: list[ast.AST] = [stmt.test]
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            roots = [stmt.target, stmt.iter]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            roots = list(stmt.items)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            roots = [*stmt.decorator_list]
        elif isinstance(stmt, ast.Try):
            roots = []
        else:
            roots = [stmt]
        for root in roots:
            yield from ast.walk(root)

    def enclosing_functions(self, lineno: int) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The functions of the cell whose bodies hold ``lineno``, outermost first."""
        tree = self.src.tree
        if tree is None:
            return []
        found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = node.body[0].lineno if node.body else node.lineno
                if start <= lineno <= (node.end_lineno or node.lineno):
                    found.append(node)
        found.sort(key=lambda n: (n.lineno, n.col_offset))
        return found

    def local_names(self) -> set[str]:
        """Names bound in the functions the failing line is in (empty at the top level)."""
        if self._local_names is None:
            names: set[str] = set()
            if self.lineno is not None:
                for function in self.enclosing_functions(self.lineno):
                    names |= bound_names(function)
            self._local_names = names
        return self._local_names

    # ---- safe evaluation

    def evaluate(self, node: ast.AST) -> Any:
        """The value (or a :class:`_TypeOnly`) of a name/attribute/constant-subscript chain."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.local_names():
                raise _CannotEval(node.id)
            if node.id in self.namespace:
                return self.namespace[node.id]
            if hasattr(builtins, node.id):
                return getattr(builtins, node.id)
            raise _CannotEval(node.id)
        if isinstance(node, ast.Attribute):
            base = self.evaluate(node.value)
            return _safe_getattr(base, node.attr)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            base = self.evaluate(node.value)
            return _safe_getitem(base, node.slice.value)
        raise _CannotEval(type(node).__name__)

    def try_evaluate(self, node: ast.AST) -> Any:
        try:
            return self.evaluate(node)
        except _CannotEval:
            return _MISSING
        except Exception:  # a library attribute that raised: treat as unknown
            return _MISSING

    def type_name_of(self, node: ast.expr) -> str | None:
        """The canonical type name of an operand (``int`` for ``numpy.int64``), when cheaply known."""
        found = self._type_name_of(node)
        return _canonical_type(found) if found is not None else None

    def _type_name_of(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant):
            return type(node.value).__name__
        if isinstance(node, ast.JoinedStr):
            return "str"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            known = {
                "str": "str",
                "repr": "str",
                "input": "str",
                "int": "int",
                "len": "int",
                "float": "float",
            }
            if node.func.id in known and node.func.id not in self.namespace:
                return known[node.func.id]
        try:
            text = ast.unparse(node)
        except Exception:
            text = ""
        if text in self.value_types:
            return self.value_types[text].split(".")[-1].split()[0]
        value = self.try_evaluate(node)
        if value is _MISSING:
            return None
        if isinstance(value, _TypeOnly):
            return value.cls.__name__
        return type(value).__name__

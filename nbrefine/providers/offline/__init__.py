"""Quick fixes without a model: deterministic candidates grounded in the live kernel state.

:class:`OfflineProvider` reads the structured :class:`~nbrefine.providers.base.RepairContext`
(the code, how it failed, the objects it saw) and proposes the smallest edit that a precise
error message pins down: a misspelt name, attribute, column or module, a missing import,
a missing ``global``, a str/int mix-up, and the common syntax slips. Every edit is made on
exact token/AST positions, so everything else in the cell (comments, quotes, indentation)
stays as it was. Candidates are ranked; when one fails its trial the next one is offered,
and when nothing is left the provider declines with a one-line reason.

Nothing here executes user code: objects are only inspected through cheap, side-effect-free
reads (module dictionaries, static class attributes, ``DataFrame.columns``, dict keys).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import difflib
import importlib.machinery
import importlib.util
import inspect
import io
import itertools
import keyword
import pkgutil
import re
import sys
import threading
import tokenize
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..base import DECLINED, ProviderReply, ProviderRequest, RepairContext, TextCallback

__all__ = ["Fix", "OfflineProvider", "propose_fixes"]

_MODEL = "quick-fixes"
_MAX_MEMORY = 256  # (code, error) entries kept per provider instance
_MAX_KEYS = 20_000  # containers with more keys than this are not scanned
_CUTOFF = 0.7  # difflib ratio below which a name is never proposed


@dataclass(frozen=True)
class Fix:
    """One candidate: the whole corrected cell and why."""

    code: str
    explanation: str
    lines: frozenset[int] = frozenset()  # 1-based lines of ``code`` that the edit touched


# --------------------------------------------------------------------------------------
# The provider
# --------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Entry:
    """The ranked candidates for one (code, error), and where they came from."""

    fixes: list[Fix]
    reason: str
    failure_type: str
    failure_message: str
    parent: _Entry | None = None
    next_index: int = 0

    def take(self, proposed: set[str]) -> Fix | None:
        while self.next_index < len(self.fixes):
            fix = self.fixes[self.next_index]
            self.next_index += 1
            if fix.code not in proposed:
                return fix
        return None


class OfflineProvider:
    """Proposes deterministic quick fixes; declines (``stop_reason == DECLINED``) otherwise.

    It remembers what it proposed for each (code, error): asked again about the same pair,
    or about a candidate of its own that failed the same way, it offers the next candidate
    of the ranked list."""

    name = "offline"

    def __init__(self) -> None:
        self.model = _MODEL
        self._memory: dict[tuple[str, str], _Entry] = {}
        self._origin: dict[str, _Entry] = {}  # candidate code -> the entry it was taken from
        self._proposed: set[str] = set()

    def complete(self, request: ProviderRequest, on_text: TextCallback | None = None) -> ProviderReply:
        context = request.context
        if context is None:
            return _declined("the offline provider needs the failure context")
        if context.failure is None:
            return _declined(_no_error(request.user))
        try:
            reply = self._complete(context)
        except Exception:  # never let a quick-fix bug escape into the loop
            reply = _declined(f"no quick fix for {_describe(context)}")
        if on_text is not None:
            on_text(reply.text)
        return reply

    def _complete(self, context: RepairContext) -> ProviderReply:
        failure = context.failure
        assert failure is not None
        key = (context.code, _failure_key(failure))
        entry = self._memory.get(key)
        if entry is None:
            fixes, reason = propose_fixes(context)
            parent = self._origin.get(context.code)
            entry = _Entry(fixes, reason, failure.error_type, failure.message.strip(), parent)
            if len(self._memory) >= _MAX_MEMORY:
                self._memory.clear()
            self._memory[key] = entry
            self._proposed.update((context.code, context.original_code))
            if parent is not None and _prefer_sibling(parent, context, fixes):
                fix = self._take_from_ancestors(parent)
                if fix is not None:
                    return self._offer(fix, parent)
        self._proposed.update((context.code, context.original_code))
        fix = entry.take(self._proposed)
        if fix is not None:
            return self._offer(fix, entry)
        if entry.parent is not None:
            fix = self._take_from_ancestors(entry.parent)
            if fix is not None:
                return self._offer(fix, entry.parent)
        return _declined(entry.reason)

    def _take_from_ancestors(self, entry: _Entry | None) -> Fix | None:
        while entry is not None:
            fix = entry.take(self._proposed)
            if fix is not None:
                return fix
            entry = entry.parent
        return None

    def _offer(self, fix: Fix, entry: _Entry) -> ProviderReply:
        # ``entry`` may be an ancestor: find the entry that actually holds ``fix``.
        holder: _Entry | None = entry
        while holder is not None and fix not in holder.fixes:
            holder = holder.parent
        self._origin[fix.code] = holder or entry
        self._proposed.add(fix.code)
        text = f"{fix.explanation}\n\n```python\n{fix.code.rstrip()}\n```"
        return ProviderReply(text=text, model=_MODEL, stop_reason="end_turn")


def _declined(reason: str) -> ProviderReply:
    return ProviderReply(text=" ".join(reason.split()), model=_MODEL, stop_reason=DECLINED)


#: How the latest candidate's outcome reads in the request (see ``TrialOutcome.render``).
_OUTCOME = re.compile(r"^## What happened when attempt (\d+) ran\nOutcome: (\w+)(?: \((.*)\))?$", re.M)
_OUTCOME_WORDS = {
    "timeout": "timed out",
    "cpu_limit": "hit the CPU time limit",
    "memory_limit": "hit the memory limit",
    "output_limit": "printed more than the output limit",
    "refused": "did something the sandbox refuses",
    "crashed": "crashed",
    "exited": "exited",
    "interrupted": "was interrupted",
    "sandbox_error": "could not be run by the sandbox",
    "passed": "passed",
}


def _no_error(user: str) -> str:
    """Why there is nothing to repair when the code under repair did not fail with an error:
    the latest candidate's outcome (a timeout, a limit), read from the request."""
    found = list(_OUTCOME.finditer(user))
    if not found:
        return (
            "no quick fix: the code to repair did not fail with an error (no exception or failed "
            "assert to work from), and the offline tier repairs only errors"
        )
    number, status, detail = found[-1].groups()
    what = _OUTCOME_WORDS.get(status, status.replace("_", " "))
    detail = f" ({detail})" if detail else ""
    return (
        f"no quick fix: the candidate of attempt {number} {what}{detail}, so there is no error to "
        "repair (the offline tier repairs only errors: a model is needed to go on)"
    )


def _failure_key(failure: Any) -> str:
    return f"{failure.error_type}|{failure.message.strip()[:300]}|{failure.lineno}"


def _prefer_sibling(parent: _Entry, context: RepairContext, fixes: Sequence[Fix]) -> bool:
    """Whether a candidate of ours that failed is better replaced than built upon.

    The same error again, or a type error on the very line we edited, says the substitution
    itself was wrong; a different lookup error (another name, key, attribute) is a second slip."""
    failure = context.failure
    if failure is None or not fixes:
        return True
    if failure.error_type == parent.failure_type and failure.message.strip() == parent.failure_message:
        return True
    fix = next((f for f in parent.fixes if f.code == context.code), None)
    on_edited_line = fix is not None and failure.lineno in fix.lines
    return failure.error_type in ("TypeError", "ValueError") and on_edited_line


def _describe(context: RepairContext) -> str:
    failure = context.failure
    if failure is None:
        return "this failure"
    first = failure.message.strip().splitlines()[0] if failure.message.strip() else ""
    if not first and failure.assertion:
        first = failure.assertion.splitlines()[0]
    return f"{failure.error_type}: {first}"[:200].rstrip(": ")


# --------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------


def propose_fixes(context: RepairContext) -> tuple[list[Fix], str]:
    """The ranked candidates for ``context``, and the reason to give when there are none."""
    failure = context.failure
    if failure is None:
        return [], "the offline provider needs the failure context"
    default = f"no quick fix for {_describe(context)}"
    if failure.where.startswith("check"):
        return [], f"{default} (it failed in an extra check, not in the cell)"
    fixer = _FIXERS.get(failure.error_type.rsplit(".", 1)[-1])
    if fixer is None:
        return [], default
    src = _Source(context.code)
    state = _State(context, src)
    try:
        fixes, reason = fixer(state)
    except _NoFix as why:
        fixes, reason = [], str(why) or default
    except Exception:  # a quick fix must never break the loop: no candidate is a safe answer
        fixes, reason = [], default
    unique: list[Fix] = []
    seen = {context.code}
    for fix in fixes:
        if fix.code not in seen:
            seen.add(fix.code)
            unique.append(fix)
    return unique, reason or default


class _NoFix(Exception):
    """Raised by a fixer with the reason to decline (an empty reason: the default one)."""


class _CannotEval(Exception):
    pass


# --------------------------------------------------------------------------------------
# Source handling: exact positions, edits, magics
# --------------------------------------------------------------------------------------

_MAGIC = re.compile(r"^[ \t]*[%!]")
#: A timing magic and its options, followed by Python code: ``%timeit -n 10 f(x)``, ``%time
#: y = f(x)``, or the setup statement on the first line of a ``%%timeit`` cell.
_TIMING = re.compile(
    r"^[ \t]*(?:%timeit|%time|%%timeit)"
    r"(?:[ \t]+-[nrp][ \t]*\d+|[ \t]+-[tcqo](?=[ \t])|[ \t]+-v[ \t]*\w+)*"  # timeit's options
    r"[ \t]+(?=\S)"
)
_TIMING_START = re.compile(r"^[ \t]*%%?time(?:it)?(?!\w)")
#: How IPython runs a magic line or cell (the failing line of a failure inside one).
_RUN_MAGIC = re.compile(r"^\s*get_ipython\(\)\.run_(line|cell)_magic\(\s*'(\w+)'")


def _mask_line(line: str) -> str:
    """A magic line as Python with the same length and columns: a timing magic's code stays
    (``%timeit f(x)`` -> ``pass;   f(x)``) so that typos in it can be fixed; any other magic or
    shell line becomes ``pass``."""
    if not _MAGIC.match(line):
        return line
    indent = line[: len(line) - len(line.lstrip())]
    timing = _TIMING.match(line)
    if timing is not None and timing.end() - len(indent) >= len("pass;"):
        code = line[timing.end() :]
        try:
            body = ast.parse(code).body
        except (SyntaxError, ValueError):
            body = []
        if body and not any(hasattr(node, "body") for node in body):  # simple statements only
            return indent + "pass;".ljust(timing.end() - len(indent)) + code
    return indent + "pass"


def _is_timing_line(line: str) -> bool:
    return _TIMING_START.match(line) is not None


class _Source:
    """The code with line offsets, an AST of it (IPython magic lines masked) and edits."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.lines = code.split("\n")
        self.starts: list[int] = []
        pos = 0
        for line in self.lines:
            self.starts.append(pos)
            pos += len(line) + 1
        self.masked = "\n".join(_mask_line(line) for line in self.lines)
        self._tree: ast.Module | None = None
        self._parsed = False
        self._parents: dict[ast.AST, ast.AST] | None = None

    @property
    def tree(self) -> ast.Module | None:
        if not self._parsed:
            self._parsed = True
            try:
                self._tree = ast.parse(self.masked)
            except (SyntaxError, ValueError):
                self._tree = None
        return self._tree

    def need_tree(self) -> ast.Module:
        tree = self.tree
        if tree is None:
            raise _NoFix("")
        return tree

    @property
    def parents(self) -> dict[ast.AST, ast.AST]:
        if self._parents is None:
            self._parents = {}
            tree = self.tree
            if tree is not None:
                for node in ast.walk(tree):
                    for child in ast.iter_child_nodes(node):
                        self._parents[child] = node
        return self._parents

    def line(self, lineno: int) -> str:
        return self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""

    def offset(self, lineno: int, col_bytes: int) -> int:
        """The index in ``code`` of (1-based line, UTF-8 byte column) as the AST gives them."""
        text = self.line(lineno)
        col = (
            col_bytes if text.isascii() else len(text.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))
        )
        return self.starts[lineno - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        end_lineno = getattr(node, "end_lineno", None)
        end_col = getattr(node, "end_col_offset", None)
        if end_lineno is None or end_col is None:
            raise _NoFix("")
        return self.offset(node.lineno, node.col_offset), self.offset(end_lineno, end_col)  # type: ignore[attr-defined]

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.code[start:end]

    def line_end(self, lineno: int) -> int:
        """Where the code of a line ends: before a trailing comment and whitespace."""
        text = self.line(lineno)
        cut = _comment_start(text)
        return self.starts[lineno - 1] + len(text[:cut].rstrip())

    def apply(self, edits: Iterable[tuple[int, int, str]]) -> tuple[str, frozenset[int]]:
        """The code with ``edits`` (start, end, replacement) made; the 1-based lines they touch."""
        ordered = sorted(set(edits), key=lambda e: (e[0], e[1]))
        for (_, end1, _), (start2, _, _) in itertools.pairwise(ordered):
            if start2 < end1:
                raise _NoFix("")
        code = self.code
        for start, end, new in reversed(ordered):
            code = code[:start] + new + code[end:]
        touched: set[int] = set()
        shift = 0
        for start, end, new in ordered:
            first = code.count("\n", 0, start + shift) + 1
            touched.update(range(first, first + new.count("\n") + 1))
            shift += len(new) - (end - start)
        return code, frozenset(touched)

    def fix(self, edits: Iterable[tuple[int, int, str]], explanation: str) -> Fix:
        code, lines = self.apply(edits)
        return Fix(code, explanation, lines)


def _comment_start(line: str) -> int:
    """The index of a ``#`` comment in one physical line (len(line) when there is none)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        tokens = []
        # An unterminated bracket: fall back to a scan that skips simple strings.
        quote = ""
        for index, char in enumerate(line):
            if quote:
                if char == quote:
                    quote = ""
            elif char in "'\"":
                quote = char
            elif char == "#":
                return index
        return len(line)
    for token in tokens:
        if token.type == tokenize.COMMENT:
            return token.start[1]
    return len(line)


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _indent_unit(src: _Source) -> str:
    """The cell's indentation step: a tab, or the smallest indentation in use (4 by default)."""
    indents = [_indent_of(line) for line in src.lines if line.strip() and _indent_of(line)]
    if indents and "\t" in indents[0]:
        return "\t"
    smallest = min((len(indent) for indent in indents), default=4)
    return " " * smallest if smallest in (2, 3, 4) else "    "


def _quote_style(src: _Source) -> str:
    single = len(re.findall(r"(?<![\w\"])'", src.code))
    double = len(re.findall(r"(?<![\w'])\"", src.code))
    return "'" if single > double else '"'


# --------------------------------------------------------------------------------------
# The state a fixer works with
# --------------------------------------------------------------------------------------

_TRUSTED_MODULES = frozenset(
    {
        "builtins",
        "numpy",
        "pandas",
        "collections",
        "datetime",
        "decimal",
        "fractions",
        "pathlib",
        "re",
        "json",
        "math",
        "statistics",
        "itertools",
        "functools",
        "operator",
        "string",
        "random",
        "typing",
    }
)
#: Attributes of numpy/pandas objects that are cheap and free of side effects to read.
_CHEAP_PANDAS_ATTRIBUTES = frozenset(
    {"columns", "index", "dtypes", "dtype", "shape", "name", "ndim", "size", "loc", "iloc", "at", "iat", "T"}
)
_IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})


@dataclass(frozen=True)
class _TypeOnly:
    """An expression whose type is known but whose value was not computed."""

    cls: type


class _State:
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
                    names |= _bound_names(function)
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


_MISSING: Any = object()


def _canonical_type(name: str) -> str:
    """``int``/``float``/``str`` for numpy's scalar types too; other names unchanged."""
    short = name.split(".")[-1]
    if re.fullmatch(r"u?int(8|16|32|64|_|c)?|longlong|intp", short):
        return "int"
    if re.fullmatch(r"float(16|32|64|128|_)?|double|longdouble", short):
        return "float"
    if short in ("str_", "unicode_"):
        return "str"
    return short


def _type_is_trusted(cls: type) -> bool:
    return (getattr(cls, "__module__", "") or "").split(".")[0] in _TRUSTED_MODULES


def _safe_getattr(obj: Any, name: str) -> Any:
    """``obj.name`` when reading it cannot run user code or anything expensive."""
    if isinstance(obj, _TypeOnly):
        try:
            static = inspect.getattr_static(obj.cls, name)
        except AttributeError:
            raise _CannotEval(name) from None
        return _type_of_static(static)
    if isinstance(obj, types.ModuleType):
        if name in obj.__dict__:
            return obj.__dict__[name]
        raise _CannotEval(name)
    cls = type(obj)
    module = (getattr(cls, "__module__", "") or "").split(".")[0]
    if module in ("pandas", "numpy"):
        columns = getattr(obj, "columns", None) if module == "pandas" else None
        if name in _CHEAP_PANDAS_ATTRIBUTES and name != "T":
            return getattr(obj, name)
        if columns is not None and _contains(columns, name):
            return obj[name]
        try:
            static = inspect.getattr_static(obj, name)
        except AttributeError:
            raise _CannotEval(name) from None
        return _type_of_static(static)
    try:
        static = inspect.getattr_static(obj, name)
    except AttributeError:
        raise _CannotEval(name) from None
    if isinstance(static, (staticmethod, classmethod, property)) or (
        hasattr(type(static), "__get__") and not isinstance(static, types.FunctionType)
    ):
        if _type_is_trusted(cls) and isinstance(obj, type):
            return getattr(obj, name)
        return _type_of_static(static)
    return static


def _type_of_static(static: Any) -> Any:
    """What reading a class attribute would give, without calling a descriptor."""
    accessor = getattr(static, "_accessor", None)  # pandas' CachedAccessor (.str, .dt, .cat)
    if isinstance(accessor, type):
        return _TypeOnly(accessor)
    if isinstance(static, property):
        raise _CannotEval("property")
    return static


def _contains(container: Any, key: object) -> bool:
    try:
        return bool(key in container)
    except Exception:
        return False


def _safe_getitem(obj: Any, key: object) -> Any:
    if type(obj) is dict or type(obj) in (list, tuple):
        try:
            return obj[key]
        except (KeyError, IndexError, TypeError):
            raise _CannotEval("item") from None
    module = (getattr(type(obj), "__module__", "") or "").split(".")[0]
    if module == "pandas" and isinstance(key, str):
        columns = getattr(obj, "columns", None)
        if columns is not None and _contains(columns, key):
            return obj[key]
    raise _CannotEval("item")


def _names_of(obj: Any) -> set[str]:
    """The attribute names of ``obj`` read without calling ``__dir__`` of user classes."""
    if isinstance(obj, _TypeOnly):
        return set(type.__dir__(obj.cls))
    if isinstance(obj, types.ModuleType):
        return {name for name in obj.__dict__ if isinstance(name, str)}
    cls = type(obj)
    names = set(type.__dir__(cls))
    if isinstance(obj, type):
        names |= set(type.__dir__(obj))
    try:
        instance_dict = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        instance_dict = None
    if isinstance(instance_dict, dict):
        names |= {name for name in instance_dict if isinstance(name, str)}
    return names


def _keys_of(obj: Any) -> list[str] | None:
    """String keys of a dict, DataFrame columns, Series/Index labels (None when not cheap)."""
    if isinstance(obj, _TypeOnly):
        return None
    if type(obj) is dict:
        return [k for k in obj if isinstance(k, str)] if len(obj) <= _MAX_KEYS else None
    module = (getattr(type(obj), "__module__", "") or "").split(".")[0]
    if module != "pandas":
        return None
    name = type(obj).__name__
    if name == "DataFrame":
        labels: Any = obj.columns
    elif name == "Series":
        labels = obj.index
    elif name.endswith("Index"):
        labels = obj
    else:
        return None
    if len(labels) > _MAX_KEYS:
        return None
    if getattr(labels, "nlevels", 1) > 1:
        return None
    return [k for k in labels if isinstance(k, str)]


def _is_dataframe(obj: Any) -> bool:
    cls = type(obj)
    return cls.__name__ == "DataFrame" and (cls.__module__ or "").startswith("pandas")


# --------------------------------------------------------------------------------------
# Scopes and names
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------------------


def _distance(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance (a transposition counts 1), capped at ``limit + 1``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                value = min(value, previous2[j - 2] + 1)
            current[j] = value
        if min(current) > limit:
            return limit + 1
        previous2, previous = previous, current
    return previous[len(b)]


_SEPARATORS = re.compile(r"[\s_\-]+")
_DIGITS = re.compile(r"\d")


def _close_matches(
    word: str,
    pool: Iterable[str],
    *,
    normalize: bool = False,
    limit: int = 4,
    prefix: bool = False,
    two_edits: bool = True,
) -> list[str]:
    """Close spellings of ``word`` in ``pool``, best first; never loose guesses.

    Equal ignoring case (and, with ``normalize``, surrounding space and ``_``/`` ``/``-``) comes
    first; then a small edit distance with a difflib ratio of at least 0.7 (a swap of two
    neighbouring letters needs no ratio: ``ptl`` -> ``plt``). Spellings that differ only in
    digits (``df2``/``df``) are not close: they name different things. When nothing is that
    close, one spelling two edits away is offered if it is the only one (``sqroot`` ->
    ``sqrt``; two such spellings tie and none is offered; not with ``two_edits=False``). With
    ``prefix``, a single candidate that extends ``word`` by whole words (``salary`` ->
    ``salary_usd``) comes last."""
    scored = _scored_matches(word, pool, normalize=normalize, prefix=prefix)
    found = [candidate for _, _, candidate in scored.close]
    if not found and two_edits and len(scored.two_edits) == 1:
        found = list(scored.two_edits)
    if len(scored.extended) == 1 and scored.extended[0] not in found:
        found.append(scored.extended[0])
    return found[:limit]


@dataclass
class _Scored:
    close: list[tuple[int, float, str]]  # (edits, -ratio, candidate), best first; edits 0: same ignoring case
    two_edits: list[str]  # two edits away where the word allows only one
    extended: list[str]  # ``word`` extended by whole words


def _scored_matches(
    word: str, pool: Iterable[str], *, normalize: bool = False, prefix: bool = False
) -> _Scored:
    def norm(text: str) -> str:
        text = text.lower()
        return _SEPARATORS.sub("_", text.strip()) if normalize else text

    target = norm(word)
    digits = _DIGITS.sub("", word)
    exact: list[str] = []
    scored: list[tuple[int, float, str]] = []
    two_edits: list[str] = []
    extended: list[str] = []
    max_edits = max(1, len(target) // 4)
    # Two edits in a word of five letters or more are still a typo, never in a shorter one.
    reach = max(max_edits, 2) if len(target) >= 5 else max_edits
    matcher = difflib.SequenceMatcher(None)
    matcher.set_seq2(target)
    for candidate in dict.fromkeys(pool):
        if candidate == word or not candidate:
            continue
        normed = norm(candidate)
        if normed == target:
            exact.append(candidate)
            continue
        if prefix and len(target) >= 3 and (normed.startswith(target + "_") or normed.endswith("_" + target)):
            extended.append(candidate)
        if abs(len(normed) - len(target)) > reach:
            continue
        matcher.set_seq1(normed)
        if matcher.real_quick_ratio() < _CUTOFF or matcher.quick_ratio() < _CUTOFF:
            continue
        if _DIGITS.sub("", candidate) == digits:
            continue
        edits = _distance(target, normed, reach)
        if edits > reach:
            continue
        ratio = matcher.ratio()
        if ratio < _CUTOFF and not (edits == 1 and len(target) >= 3 and _is_swap(target, normed)):
            continue
        if edits <= max_edits:
            scored.append((edits, -ratio, candidate))
        else:
            two_edits.append(candidate)
    exact.sort(key=lambda c: (c.strip() != c, c.lower() != c.lower().strip(), c))
    scored.sort()
    return _Scored([(0, -1.0, c) for c in exact] + scored, two_edits, extended)


def _is_swap(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with two neighbouring characters swapped."""
    if len(a) != len(b):
        return False
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]


# --------------------------------------------------------------------------------------
# Modules: what can be imported (cached once)
# --------------------------------------------------------------------------------------

_MODULE_LOCK = threading.Lock()
_TOP_MODULES: frozenset[str] | None = None
_FIND_SPEC_CACHE: dict[str, bool] = {}

#: import name -> the name to ``%pip install``.
PIP_NAMES = {
    "sklearn": "scikit-learn",
    "cv2": "opencv-python",
    "PIL": "pillow",
    "yaml": "pyyaml",
    "bs4": "beautifulsoup4",
    "dateutil": "python-dateutil",
    "skimage": "scikit-image",
    "Bio": "biopython",
    "dotenv": "python-dotenv",
    "docx": "python-docx",
    "fitz": "pymupdf",
    "attr": "attrs",
    "Crypto": "pycryptodome",
    "serial": "pyserial",
    "jwt": "pyjwt",
    "magic": "python-magic",
    "google.protobuf": "protobuf",
}
#: A package's install name written as an import -> the import name.
_IMPORT_NAMES = {
    "scikit_learn": "sklearn",
    "scikitlearn": "sklearn",
    "opencv": "cv2",
    "opencv_python": "cv2",
    "pillow": "PIL",
    "pyyaml": "yaml",
    "beautifulsoup4": "bs4",
    "beautifulsoup": "bs4",
    "python_dateutil": "dateutil",
    "scikit_image": "skimage",
    "pytorch": "torch",
    "tensorflow_gpu": "tensorflow",
}
#: Import names of well-known packages: one that is missing is not installed, not misspelt.
_POPULAR_PACKAGES = (
    "numpy pandas matplotlib seaborn scipy sklearn statsmodels plotly polars xarray pyarrow dask numba "
    "sympy networkx bokeh altair xgboost lightgbm catboost torch torchvision tensorflow keras jax "
    "transformers datasets requests httpx openpyxl xlrd tqdm pydantic fastapi flask django sqlalchemy "
    "psycopg2 pymongo redis boto3 geopandas shapely folium nltk spacy gensim"
)
_KNOWN_PACKAGES = frozenset(
    {*PIP_NAMES, *(module.split(".")[0] for module in PIP_NAMES), *_POPULAR_PACKAGES.split()}
)
_UNSAFE_STDLIB = frozenset({"antigravity", "this", "idlelib", "turtle", "turtledemo", "tkinter", "__hello__"})


def _importable(name: str) -> bool:
    """Whether top-level module ``name`` can be imported (without importing it)."""
    if _FIND_SPEC_CACHE.get(name) or name in sys.modules:
        return True
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError, AttributeError):
        found = False
    if found:  # only successes are kept: a package installed later must still be found
        _FIND_SPEC_CACHE[name] = True
    return found


def _top_modules() -> frozenset[str]:
    global _TOP_MODULES
    with _MODULE_LOCK:
        if _TOP_MODULES is None:
            names = set(sys.builtin_module_names)
            names |= {name.split(".")[0] for name in list(sys.modules)}
            with contextlib.suppress(Exception):
                names |= {info.name for info in pkgutil.iter_modules()}
            _TOP_MODULES = frozenset(n for n in names if n.isidentifier())
        return _TOP_MODULES


def _submodules(package: str) -> list[str] | None:
    """Submodule names of a dotted package, found without importing it (None: not a package)."""
    parts = package.split(".")
    try:
        spec = importlib.util.find_spec(parts[0]) if parts[0] not in sys.modules else None
    except (ImportError, ValueError, AttributeError):
        return None
    module = sys.modules.get(parts[0])
    locations: list[str] | None
    if module is not None:
        locations = list(getattr(module, "__path__", []) or [])
    else:
        locations = list(spec.submodule_search_locations or []) if spec is not None else None
    if not locations:
        return None
    for index in range(1, len(parts)):
        full = ".".join(parts[: index + 1])
        loaded = sys.modules.get(full)
        if loaded is not None:
            locations = list(getattr(loaded, "__path__", []) or [])
        else:
            sub = importlib.machinery.PathFinder.find_spec(full, locations)
            if sub is None or not sub.submodule_search_locations:
                return None
            locations = list(sub.submodule_search_locations)
        if not locations:
            return None
    return [info.name for info in pkgutil.iter_modules(locations)]


# --------------------------------------------------------------------------------------
# NameError
# --------------------------------------------------------------------------------------

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


def _fix_name(state: _State) -> tuple[list[Fix], str]:
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
            for local in _bound_names(node):
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
    close = _by_scope(wrong, close, scope, set(state.namespace) | _bound_names(tree))
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


def _name_pool(state: _State, tree: ast.Module, wrong: str) -> list[str]:
    private = wrong.startswith("_")
    names = [
        name
        for name in state.namespace
        if isinstance(name, str) and (private or not name.startswith("_")) and name not in _IPYTHON_NAMES
    ]
    names += sorted(_bound_names(tree))
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
                names |= _bound_names(parent)
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


# --------------------------------------------------------------------------------------
# AttributeError
# --------------------------------------------------------------------------------------

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


def _fix_attribute(state: _State) -> tuple[list[Fix], str]:
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


# --------------------------------------------------------------------------------------
# KeyError (dicts, DataFrame columns)
# --------------------------------------------------------------------------------------

_PANDAS_KEY_MESSAGES = (
    re.compile(r"not in index$"),
    re.compile(r"^None of \["),
    re.compile(r"not found in axis$"),
    re.compile(r"^(Column|Label)\(s\) \["),
    re.compile(r"do not exist$"),
    re.compile(r"are in the \[?columns\]?$"),
    re.compile(r"^Columns not found: "),
    re.compile(r"^Index\(\["),
    re.compile(r"not found in columns\.?$"),
)
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")


def _missing_keys(message: str) -> list[str]:
    try:
        value = ast.literal_eval(message)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        value = message
    if isinstance(value, (list, tuple)):
        return [item for item in value if isinstance(item, str)]
    if not isinstance(value, str):
        return []
    single = re.match(r"^Column not found: (.+)$", value)
    if single:
        return [single.group(1)]
    if any(pattern.search(value) for pattern in _PANDAS_KEY_MESSAGES):
        keys = []
        for match in _QUOTED.finditer(value):
            raw = match.group(1) if match.group(1) is not None else match.group(2)
            try:
                keys.append(ast.literal_eval(f"'{raw}'") if match.group(1) is not None else raw)
            except (ValueError, SyntaxError):
                keys.append(raw)
        return keys
    return [value]


def _string_literal_edit(src: _Source, node: ast.Constant, new: str) -> tuple[int, int, str] | None:
    """An edit replacing the content of a plain string literal, keeping its prefix and quotes."""
    start, end = src.span(node)
    token = src.code[start:end]
    match = re.fullmatch(r"([rRuU]?)('''|\"\"\"|'|\")(.*)\2", token, re.S)
    if match is None:
        return None
    prefix, quote, body = match.groups()
    if body != node.value or "\\" in new or quote[0] in new or "\n" in new:
        return None
    inner = start + len(prefix) + len(quote)
    return inner, inner + len(body), new


def _root_name(node: ast.expr) -> ast.Name | None:
    """``df`` for ``df.groupby(...)["x"].mean()``: down through calls, attributes, subscripts."""
    while not isinstance(node, ast.Name):
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        else:
            return None
    return node


def _containers_for(state: _State, literal: ast.Constant) -> list[tuple[ast.expr, str]]:
    """Expressions whose keys ``literal`` should be one of, with the kind of keys."""
    parents = state.src.parents
    child: ast.AST = literal
    parent = parents.get(child)
    while isinstance(parent, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.keyword, ast.Starred)):
        child, parent = parent, parents.get(parent)
    if isinstance(parent, ast.Subscript) and child is parent.slice:
        container = parent.value
        if isinstance(container, ast.Attribute) and container.attr in ("loc", "at"):
            frame = container.value
            if isinstance(parent.slice, ast.Tuple) and len(parent.slice.elts) == 2:
                in_columns = _is_inside(parents, literal, parent.slice.elts[1])
                return [(frame, "columns" if in_columns else "index")]
            return [(frame, "index")]
        return [(container, "keys")]
    if isinstance(parent, ast.Call):
        frames: list[tuple[ast.expr, str]] = []
        if isinstance(parent.func, ast.Attribute):
            frames.append((parent.func.value, "columns"))
        frames += [(arg, "columns") for arg in parent.args if isinstance(arg, ast.Name)]
        frames += [(kw.value, "columns") for kw in parent.keywords if isinstance(kw.value, ast.Name)]
        return frames
    return []


def _is_inside(parents: dict[ast.AST, ast.AST], node: ast.AST, ancestor: ast.AST) -> bool:
    current: ast.AST | None = node
    while current is not None:
        if current is ancestor:
            return True
        current = parents.get(current)
    return False


def _pool_for(state: _State, container: ast.expr, kind: str) -> tuple[list[str] | None, str]:
    """The keys (or columns, or row labels) ``container`` has, and what to call them.

    What the failing frame held comes first: the failure's summary of the container (an
    object the cell itself made or rebound is only there). The namespace value fills in keys a
    long summary left out, unless the cell rebinds the name (then it is an older object)."""
    root = container if isinstance(container, ast.Name) else _root_name(container)
    stale = root is not None and _rebound(state, root.id)
    value = _MISSING if stale else state.try_evaluate(container)
    if value is _MISSING and root is not None and root is not container and not stale:
        value = state.try_evaluate(root)
        if value is not _MISSING and not _is_dataframe(value):
            value = _MISSING
        else:
            container = root
    seen, seen_label = _keys_seen(state, container)
    if seen is None and root is not None and root is not container:
        seen, seen_label = _keys_seen(state, root)
        seen = seen if seen_label == "column" else None
    if kind == "index":
        index = getattr(value, "index", None) if _is_dataframe(value) else None
        keys = _keys_of(index) if index is not None else None
        return keys, "row label"
    keys = _keys_of(value) if value is not _MISSING else None
    made = _keys_set_in_cell(state, container)
    if keys is None and seen is None and not made:
        return None, ""
    label = ("column" if _is_dataframe(value) else "key") if keys is not None else seen_label or "key"
    return (seen or []) + (keys or []) + made, label


def _rebound(state: _State, name: str) -> bool:
    """Whether the cell binds ``name`` itself (at its top level, or as a local where it failed)."""
    tree = state.src.tree
    return name in state.local_names() or (tree is not None and _assigned_plainly(tree, name))


#: ``columns: a: int64, b c: datetime64[ns, UTC], … (+3 more)`` in a DataFrame's summary.
_COLUMN_ENTRY = re.compile(r"(?:^|, )(.+?): ([A-Za-z]\w*(?:\[[^\]]*\])?)(?=, |$)")
_MAPPING_TYPES = frozenset({"dict", "defaultdict", "OrderedDict", "Counter"})


def _keys_seen(state: _State, container: ast.expr) -> tuple[list[str] | None, str]:
    """String keys of ``container`` read from its summary in the failure (the failing frame's
    object), and what to call them; (None, "") when the failure has no usable summary."""
    try:
        name = ast.unparse(container)
    except Exception:
        return None, ""
    for summary in state.failure.values:
        if summary.name != name:
            continue
        text = summary.text
        if summary.type_name == "DataFrame":
            for line in text.splitlines():
                if line.startswith("columns: "):
                    body = re.sub(r",? ?… \(\+\d+ more\)$", "", line[len("columns: ") :])
                    return [match.group(1) for match in _COLUMN_ENTRY.finditer(body)], "column"
        elif summary.type_name in _MAPPING_TYPES:
            sample = text.find("keys sample: [")
            if sample >= 0:
                return _literal_strings(text[sample + len("keys sample: ") :], ","), "key"
            brace = text.find("{")
            if brace >= 0:
                return _literal_strings(text[brace:], ":"), "key"
    return None, ""


def _literal_strings(text: str, follower: str) -> list[str]:
    """The string literals directly inside the bracket ``text`` opens, each followed by
    ``follower`` (``:`` for a dict's keys) or by the closing bracket; a cut-off rest is ignored."""
    found: list[str] = []
    depth = 0
    previous: tokenize.TokenInfo | None = None
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth -= 1
                if depth <= 0:
                    if previous is not None and previous.type == tokenize.STRING and follower == ",":
                        found.append(previous.string)
                    break
            elif (
                depth == 1
                and previous is not None
                and previous.type == tokenize.STRING
                and token.type == tokenize.OP
                and token.string == follower
            ):
                found.append(previous.string)
            previous = token
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    keys = []
    for literal in found:
        with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
            value = ast.literal_eval(literal)
            if isinstance(value, str):
                keys.append(value)
    return keys


def _keys_set_in_cell(state: _State, container: ast.expr) -> list[str]:
    """String keys the cell itself gives ``container``: ``df["new"] = ...``, and the literal
    keys of ``d = {...}``, ``d = dict(a=...)`` or ``df = pd.DataFrame({...})``."""
    tree = state.src.tree
    if tree is None:
        return []
    text = state.src.text(container)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
            and state.src.text(node.value) == text
        ):
            found.append(node.slice.value)
        elif isinstance(node, ast.Assign) and any(state.src.text(t) == text for t in node.targets):
            found += _literal_keys(node.value)
    return found


_MAKERS = frozenset({"dict", "OrderedDict", "defaultdict", "DataFrame"})


def _literal_keys(value: ast.expr) -> list[str]:
    """The string keys written in a dict display, or in a ``dict``/``DataFrame`` call's first
    argument or keywords."""
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name not in _MAKERS:
            return []
        keys = [kw.arg for kw in value.keywords if kw.arg is not None] if name != "DataFrame" else []
        dicts = [arg for arg in value.args[:2] if isinstance(arg, ast.Dict)]
        return keys + [key for display in dicts for key in _literal_keys(display)]
    if isinstance(value, ast.Dict):
        return [k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


def _fix_key(state: _State) -> tuple[list[Fix], str]:
    keys = _missing_keys(state.message)
    if not keys:
        raise _NoFix("no quick fix for KeyError: the missing key is not a string")
    src = state.src
    tree = src.need_tree()
    in_statement = [
        n
        for n in state.failing_nodes()
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in keys
    ]
    literals = in_statement
    if not literals:
        everywhere = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in keys
        ]
        if len(everywhere) != len(keys):
            raise _NoFix(f"no quick fix for KeyError: {keys[0]!r} is not written as a literal in the cell")
        literals = everywhere
    # For each missing key: the ranked replacements, from the keys its container has.
    per_key: dict[str, list[tuple[str, str]]] = {}
    fallback = [n for n in state.failing_nodes() if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    for literal in literals:
        key = literal.value
        assert isinstance(key, str)
        if key in per_key:
            continue
        containers = _containers_for(state, literal) if literal in in_statement else []
        if not containers:
            containers = [(name, "keys") for name in fallback]
        pool: list[str] = []
        label = "key"
        for container, kind in containers:
            keys_found, found_label = _pool_for(state, container, kind)
            if keys_found:
                pool += keys_found
                label = found_label
        if not pool:  # the container could not be read: the containers named on the line
            for name in fallback:
                keys_found, found_label = _pool_for(state, name, "keys")
                if keys_found:
                    pool += keys_found
                    label = found_label
        if key in pool:
            continue  # that container has it: the error came from elsewhere
        matches = _close_matches(key, pool, normalize=True, prefix=True)
        per_key[key] = [(m, f"there is no {label} {key!r}; the closest one is {m!r}.") for m in matches]
    if not any(per_key.values()):
        shown = ", ".join(repr(k) for k in keys[:3])
        raise _NoFix(f"no quick fix for KeyError: no key close to {shown}")
    # Candidate i uses the i-th choice for each key (the best for all keys first).
    fixes = []
    depth = max(len(options) for options in per_key.values())
    for rank in range(depth):
        edits = []
        whys = []
        for literal in literals:
            options = per_key.get(str(literal.value)) or []
            if not options:
                continue
            new, why = options[min(rank, len(options) - 1)]
            edit = _string_literal_edit(src, literal, new)
            if edit is not None:
                edits.append(edit)
                if why not in whys:
                    whys.append(why)
        if edits:
            text = " ".join(whys)
            fixes.append(src.fix(edits, text[:1].upper() + text[1:]))
    return fixes, ""


# --------------------------------------------------------------------------------------
# ModuleNotFoundError / ImportError
# --------------------------------------------------------------------------------------


def _fix_module(state: _State) -> tuple[list[Fix], str]:
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


def _fix_import_name(state: _State) -> tuple[list[Fix], str]:
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


# --------------------------------------------------------------------------------------
# UnboundLocalError
# --------------------------------------------------------------------------------------


def _fix_unbound(state: _State) -> tuple[list[Fix], str]:
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
    if name not in _bound_names(function):
        raise _NoFix("")
    first = _first_use(function, name)
    if first != "load":
        raise _NoFix(
            f"no quick fix for UnboundLocalError: `{name}` is only assigned on some paths in "
            f"`{function.name}()`; give it a value before it is used"
        )
    outer = [f for f in functions[:-1] if name in _bound_names(f)]
    if outer:
        statement = f"nonlocal {name}"
        why = f"`{name}` belongs to the enclosing `{outer[-1].name}()`: declare it `nonlocal`."
    elif name in state.namespace or name in _bound_names(tree):
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
    for node in _scope_children(function):
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


# --------------------------------------------------------------------------------------
# TypeError coercions
# --------------------------------------------------------------------------------------

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


def _fix_type(state: _State) -> tuple[list[Fix], str]:
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


def _binary_nodes(state: _State, op: type[ast.operator]) -> list[tuple[ast.AST, ast.expr, ast.expr]]:
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


def _fix_concat(state: _State, other: str) -> tuple[list[Fix], str]:
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


def _str_value(state: _State, node: ast.expr) -> str | None:
    value = state.try_evaluate(node)
    return value if isinstance(value, str) else None


def _number_function(state: _State, node: ast.expr, other: str) -> list[str]:
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


def _fix_operands(state: _State, op: str, left: str, right: str) -> tuple[list[Fix], str]:
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


def _fix_str_times_float(state: _State) -> tuple[list[Fix], str]:
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


def _fix_compare(state: _State, left: str, right: str) -> tuple[list[Fix], str]:
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


def _fix_range(state: _State, type_name: str) -> tuple[list[Fix], str]:
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


# --------------------------------------------------------------------------------------
# SyntaxError / IndentationError / TabError
# --------------------------------------------------------------------------------------

_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_COMPOUND = re.compile(r"^\s*(if|elif|else|for|while|def|class|with|try|except|finally|async|match|case)\b")


def _compile_error(code: str) -> SyntaxError | None:
    try:
        compile(code, "<cell>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as err:
        return err
    except (ValueError, MemoryError, RecursionError):
        return SyntaxError("unparsable")
    return None


def _fix_syntax(state: _State) -> tuple[list[Fix], str]:
    src = state.src
    err = _compile_error(src.masked)
    if err is None or err.lineno is None:
        raise _NoFix("")
    msg = err.msg or ""
    lineno = err.lineno
    line = src.line(lineno)
    offset = (err.offset or 1) - 1  # 0-based character column (CPython gives characters here)
    candidates: list[tuple[list[tuple[int, int, str]], str]] = []
    base = src.starts[lineno - 1] if 0 < lineno <= len(src.lines) else 0
    if re.match(r"^\s*else\s+if\b", line):
        match = re.match(r"^(\s*)else\s+if\b", line)
        assert match is not None
        candidates.append(
            ([(base + len(match.group(1)), base + match.end(), "elif")], "Python spells it `elif`.")
        )
    elif msg == "expected ':'":
        end = src.line_end(lineno)
        candidates.append(([(end, end, ":")], "The statement header is missing its `:`."))
    elif re.match(r"'[(\[{]' was never closed", msg):
        candidates += _close_bracket(src, lineno, offset)
    elif re.match(r"unmatched '[)\]}]'", msg):
        if line[offset : offset + 1] in ")]}":
            candidates.append(
                ([(base + offset, base + offset + 1, "")], f"Removed an unmatched `{line[offset]}`.")
            )
    elif match := re.match(r"closing parenthesis '(.)' does not match opening parenthesis '(.)'", msg):
        closer, opener = match.groups()
        if line[offset : offset + 1] == closer:
            right = _CLOSERS[opener]
            at = base + offset
            candidates.append(
                ([(at, at + 1, right)], f"`{opener}` is closed with `{right}`, not `{closer}`.")
            )
            candidates.append(([(at, at, right)], f"The `{opener}` was never closed: added `{right}`."))
    elif msg.startswith("Missing parentheses in call to 'print'"):
        candidates += _print_call(src, lineno)
    elif msg.startswith("invalid syntax. Maybe you meant '==' or ':=' instead of '='?") or re.match(
        r"cannot assign to .* here\. Maybe you meant '==' instead of '='\?", msg
    ):
        candidates += _equals(src, err)
    elif msg.startswith("invalid syntax. Perhaps you forgot a comma?"):
        code = _with_commas(src, err)
        if code is not None:
            fix = Fix(code, "Items were missing the comma between them.", frozenset({lineno}))
            return ([fix] if _syntax_progress(code, err) else []), ""
    elif msg.startswith("unterminated string literal"):
        quote = line[offset : offset + 1]
        prefix_free = re.match(r"[rRbBuUfF]{0,2}(['\"])", line[offset:])
        if prefix_free:
            quote = prefix_free.group(1)
        if quote in ("'", '"'):
            end = base + len(line.rstrip())
            candidates.append(([(end, end, quote)], f"The string was not closed: added the closing {quote}."))
    elif (
        msg in ("inconsistent use of tabs and spaces in indentation",)
        or state.failure.error_type == "TabError"
    ):
        candidates += _expand_tabs(src)
    elif msg == "unexpected indent":
        candidates += _unexpected_indent(src, lineno)
    elif msg.startswith("expected an indented block"):
        candidates += _indent_block(src, lineno)
    elif msg == "unindent does not match any outer indentation level":
        candidates += _unindent(src, lineno)
    fixes = []
    for edits, why in candidates:
        try:
            fix = src.fix(edits, why)
        except _NoFix:
            continue
        if _syntax_progress(fix.code, err):
            fixes.append(fix)
    return fixes, ""


def _syntax_progress(code: str, before: SyntaxError) -> bool:
    """Whether ``code`` compiles, or fails only on a later line than ``before`` did."""
    after = _compile_error("\n".join(_mask_line(line) for line in code.split("\n")))
    if after is None:
        return True
    return (after.lineno or 0) > (before.lineno or 0)


def _close_bracket(src: _Source, lineno: int, offset: int) -> list[tuple[list[tuple[int, int, str]], str]]:
    base_indent = len(_indent_of(src.line(lineno)))
    last = lineno
    for following in range(lineno + 1, len(src.lines) + 1):
        text = src.line(following)
        if not text.strip() or len(_indent_of(text)) <= base_indent:
            break
        last = following
    start = src.starts[lineno - 1] + offset
    end = src.line_end(last)
    stack: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(src.code[start:end]).readline):
            if token.type == tokenize.OP and token.string in _CLOSERS:
                stack.append(token.string)
            elif token.type == tokenize.OP and token.string in ")]}" and stack:
                stack.pop()
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    if not stack:
        return []
    closers = "".join(_CLOSERS[o] for o in reversed(stack))
    position = end
    code_part = src.code[src.starts[last - 1] : end]
    if code_part.rstrip().endswith(":") and _COMPOUND.match(src.line(lineno)):
        position = src.starts[last - 1] + len(code_part.rstrip()) - 1
    return [([(position, position, closers)], f"Closed the bracket that was never closed with `{closers}`.")]


def _print_call(src: _Source, lineno: int) -> list[tuple[list[tuple[int, int, str]], str]]:
    line = src.line(lineno)
    match = re.match(r"^(\s*)print\b\s*(.*)$", line[: _comment_start(line)].rstrip())
    if not match:
        return []
    args = match.group(2)
    if not args or args.startswith("("):
        return []
    new_args = args
    if args.startswith(">>"):
        target, _, rest = args[2:].partition(",")
        new_args = f"{rest.strip()}, file={target.strip()}"
    elif args.endswith(","):
        new_args = args[:-1].rstrip() + ', end=" "'
    start = src.starts[lineno - 1] + len(match.group(1))
    end = src.starts[lineno - 1] + match.end()
    return [
        ([(start, end, f"print({new_args})")], "Python 3's `print` is a function: added the parentheses.")
    ]


def _tokens_in(src: _Source, err: SyntaxError) -> list[tuple[tokenize.TokenInfo, int]]:
    """The tokens of the error's line range, with their absolute offsets in ``code``."""
    lineno = err.lineno or 1
    end_lineno = err.end_lineno or lineno
    start = src.starts[lineno - 1]
    stop = src.starts[end_lineno - 1] + len(src.line(end_lineno))
    found: list[tuple[tokenize.TokenInfo, int]] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(src.code[start:stop]).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT):
                continue
            row, col = token.start
            found.append((token, src.starts[lineno - 1 + row - 1] + col))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return found


def _equals(src: _Source, err: SyntaxError) -> list[tuple[list[tuple[int, int, str]], str]]:
    """``=`` -> ``==`` for the first ``=`` from the error on, at the error's bracket depth."""
    lineno = err.lineno or 1
    low = src.starts[lineno - 1] + (err.offset or 1) - 1
    depth = 0
    level: int | None = None
    for token, position in _tokens_in(src, err):
        if level is None and position >= low:
            level = depth
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.type == tokenize.OP and token.string == "=" and position >= low and depth == level:
            return [([(position, position + 1, "==")], "A comparison is written `==`; `=` assigns.")]
    return []


def _with_commas(src: _Source, err: SyntaxError) -> str | None:
    """The code with commas between adjacent items, as long as CPython asks for them."""
    code: str | None = None
    for _ in range(20):
        edits = _commas(src, err)
        if not edits:
            return code
        code = src.apply(edits)[0]
        src = _Source(code)
        after = _compile_error(src.masked)
        if after is None or not (after.msg or "").startswith("invalid syntax. Perhaps you forgot a comma?"):
            return code
        err = after
    return code


def _commas(src: _Source, err: SyntaxError) -> list[tuple[int, int, str]]:
    lineno = err.lineno or 1
    low = src.starts[lineno - 1] + (err.offset or 1) - 1
    high = src.starts[(err.end_lineno or lineno) - 1] + (err.end_offset or 0) - 1
    tokens = [(t, p) for t, p in _tokens_in(src, err) if low <= p < high]
    edits = []
    depth = 0
    for (token, position), (following, _) in itertools.pairwise(tokens):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        ends_atom = token.type in (tokenize.NAME, tokenize.NUMBER, tokenize.STRING) or token.string in ")]}"
        starts_atom = following.type in (tokenize.NUMBER, tokenize.STRING) or (
            following.type == tokenize.NAME and not keyword.iskeyword(following.string)
        )
        if (
            token.type == tokenize.NAME
            and keyword.iskeyword(token.string)
            and token.string
            not in (
                "True",
                "False",
                "None",
            )
        ):
            ends_atom = False
        if depth == 0 and ends_atom and starts_atom:
            end = position + len(token.string)
            edits.append((end, end, ","))
    return edits


def _expand_tabs(src: _Source) -> list[tuple[list[tuple[int, int, str]], str]]:
    inside_strings = _string_lines(src)
    candidates = []
    for size in (4, 8):
        edits = []
        for number, line in enumerate(src.lines, start=1):
            indent = _indent_of(line)
            if "\t" in indent and number not in inside_strings:
                start = src.starts[number - 1]
                edits.append((start, start + len(indent), indent.expandtabs(size)))
        if edits:
            why = f"The indentation mixed tabs and spaces: tabs are now {size} spaces."
            candidates.append((edits, why))
    return candidates


def _string_lines(src: _Source) -> set[int]:
    """Lines that start inside a multi-line string literal."""
    lines: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(src.code).readline):
            if token.type == tokenize.STRING and token.end[0] > token.start[0]:
                lines.update(range(token.start[0] + 1, token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return lines


def _previous_code_line(src: _Source, lineno: int) -> int | None:
    for number in range(lineno - 1, 0, -1):
        text = src.line(number)
        if text.strip() and not text.strip().startswith("#"):
            return number
    return None


def _unexpected_indent(src: _Source, lineno: int) -> list[tuple[list[tuple[int, int, str]], str]]:
    previous = _previous_code_line(src, lineno)
    target = _indent_of(src.line(previous)) if previous is not None else ""
    current = _indent_of(src.line(lineno))
    if len(current) <= len(target):
        return []
    edits = []
    for number in range(lineno, len(src.lines) + 1):
        text = src.line(number)
        if not text.strip():
            continue
        indent = _indent_of(text)
        if len(indent) < len(current):
            break
        start = src.starts[number - 1]
        edits.append((start, start + len(current), target))
    return [(edits, "The line was indented for no reason: aligned it with the line before.")]


def _indent_block(src: _Source, lineno: int) -> list[tuple[list[tuple[int, int, str]], str]]:
    header = _previous_code_line(src, lineno)
    if header is None:
        return []
    indent = _indent_of(src.line(header)) + _indent_unit(src)
    text = src.line(lineno)
    start = src.starts[lineno - 1]
    current = _indent_of(text)
    return [([(start, start + len(current), indent)], "The block after the `:` was not indented.")]


def _unindent(src: _Source, lineno: int) -> list[tuple[list[tuple[int, int, str]], str]]:
    current = len(_indent_of(src.line(lineno)).expandtabs(8))
    levels: set[int] = set()
    for number in range(1, lineno):
        text = src.line(number)
        if text.strip() and not text.strip().startswith("#"):
            levels.add(len(_indent_of(text).expandtabs(8)))
    distances = sorted((abs(level - current), level) for level in levels)
    if not distances or distances[0][0] > 2 or (len(distances) > 1 and distances[1][0] == distances[0][0]):
        return []
    level = distances[0][1]
    start = src.starts[lineno - 1]
    end = start + len(_indent_of(src.line(lineno)))
    return [
        (
            [(start, end, " " * level)],
            "The line's indentation matched no block: aligned it with the nearest one.",
        )
    ]


_Fixer = Callable[[_State], tuple[list[Fix], str]]
_FIXERS: dict[str, _Fixer] = {
    "NameError": _fix_name,
    "AttributeError": _fix_attribute,
    "KeyError": _fix_key,
    "ModuleNotFoundError": _fix_module,
    "ImportError": _fix_module,
    "UnboundLocalError": _fix_unbound,
    "TypeError": _fix_type,
    "SyntaxError": _fix_syntax,
    "IndentationError": _fix_syntax,
    "TabError": _fix_syntax,
}

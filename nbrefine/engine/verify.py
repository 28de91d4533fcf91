"""What "verified" means, and whether a verified fix still holds where Accept runs it.

A trial that passed proves something only if the candidate left the checks alone. A candidate
can pass cheaply by deleting the failing assert, by hiding the failure in ``try/except
Exception: pass``, by reaching into nbrefine or the trial process (``import nbrefine.sandbox as
s; s.run_checks = ...``, the trial's own frames, its file descriptors), by comparing with
``unittest.mock.ANY``, or by defining itself the function an assert of the cell calls.
:class:`ChecksVerifier` reads the candidate next to the original cell and says why a pass does not count
("" when it does); the loop then shows the attempt as "changes the checks" and keeps looking for
a verified one.

A pass from the snapshot (the state before the cell ran) also says nothing about the live state
when the failed run, or a later cell, changed in place an object the fix reads. Accept compares
content fingerprints of the names the fix reads, taken by :func:`fingerprint_spec` in the trial's
runner and again in a fork of the live state, and trial-runs the fix from the live state when
they differ (see :meth:`nbrefine.engine.session.RefineSession.accept`).

A cell being repaired for a SyntaxError does not parse; the verifier still reads what it already did
(leniently: its chunks that parse, the lines and tokens of those that do not), so that an ``eval``
or an assert the cell had is not held against its fix.

What the text cannot show, the trial reports in ``outcome.suspect``: an assert or a check compared
an object whose class's comparison methods are not the built-in ones of a trusted type (see
:mod:`nbrefine.sandbox.execute`); a suspect pass never counts (:meth:`ChecksVerifier.__call__`), in the loop
and when Accept trial-runs a fix again from the live state.

The text checks are a tripwire for the forms a model writes, not a proof. The trial's status is
observed rather than reported by the code under trial (:mod:`nbrefine.sandbox.execute` says how,
and what does not hold; so does the README).

May import: the standard library, :mod:`nbrefine.sandbox` and :mod:`nbrefine.grounding.text`.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import io
import json
import os
import re
import sys
import sysconfig
import textwrap
import tokenize
import types
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..grounding.text import clip
from ..sandbox import TrialOutcome, TrialPolicy, TrialSpec, names_to_ship

__all__ = [
    "ChecksVerifier",
    "changed_names",
    "drift",
    "fingerprint_spec",
    "fingerprints_of",
    "known_fingerprints",
    "names_read",
    "plain_python",
    "read_fingerprints",
]

#: Bytes hashed per fingerprint trial, in all (about 0.1 s at 64 MiB here): past it, values are
#: "unknown", and Accept trial-runs the fix from the live state instead of comparing.
FINGERPRINT_CAP = 64 << 20
_MARK = "@@nbrefine-fingerprints@@ "
_BLANKET = frozenset({"Exception", "BaseException"})
_MAX_REASONS = 3


def _same(code: str) -> str:
    return code


# --------------------------------------------------------------------------- the checks verifier


@dataclass(frozen=True)
class ChecksVerifier:
    """Why a passed trial of a candidate does not count as verified ("" when it does).

    ``original`` is the cell under repair and ``checks`` how many checks every trial must run.
    ``failing_lines`` are the original's lines that failed (a blanket ``except`` counts when it
    is around them; with none known, anywhere). ``blamed`` are the names the failure message
    quotes when the cell crashed (``name 'totl' is not defined``): an assert may change those
    (``assert totl == 7`` → ``assert total == 7``), nothing else of it. ``transform`` turns IPython
    syntax into Python before anything is read."""

    original: str
    checks: int = 0
    failing_lines: tuple[int, ...] = ()
    blamed: frozenset[str] = frozenset()
    transform: Callable[[str], str] = field(default=_same, compare=False)

    @classmethod
    def for_failures(
        cls,
        original: str,
        failures: Sequence[Any],
        checks: int,
        *,
        label: str = "cell",
        transform: Callable[[str], str] = _same,
    ) -> ChecksVerifier:
        """The verifier for a cell from its captured failures
        (:class:`nbrefine.grounding.capture.Failure`)."""
        own = [f for f in failures if f.where == label]
        lines = tuple(f.lineno for f in own if f.lineno)
        crashed = [f for f in own if f.error_type != "AssertionError"]
        blamed = frozenset(w for f in crashed for w in re.findall(r"""['"]([^'"\s]{1,80})['"]""", f.message))
        return cls(original, checks, lines, blamed, transform)

    def __call__(self, candidate: str, outcome: TrialOutcome) -> str:
        reasons = self.static_reasons(candidate)
        if outcome.suspect:
            reasons.append(f"the trial flagged its pass: {outcome.suspect}")
        if outcome.checks_total < self.checks:
            reasons.append(f"the trial ran {outcome.checks_total} of its {self.checks} checks")
        return "; ".join(reasons[:_MAX_REASONS])

    def static_reasons(self, candidate: str) -> list[str]:
        """What the candidate's text changes about the checks (empty: nothing)."""
        original, code = plain_python(self.original, self.transform), plain_python(candidate, self.transform)
        new_tree = _parse(code)
        if new_tree is None:
            return []  # its trial cannot have passed: a SyntaxError fails it
        old_tree, broken = _lenient_parse(original)
        reasons = _dropped_asserts([*_asserts(old_tree), *_assert_lines(broken)], new_tree, self.blamed)
        reasons += _blanket_handlers(old_tree, new_tree, self.failing_lines)
        reasons += _added_reaches(old_tree, broken, new_tree)
        reasons += _redefined_predicates(old_tree, new_tree)
        return list(dict.fromkeys(reasons))


def plain_python(code: str, transform: Callable[[str], str]) -> str:
    """``transform(code)``, or ``code`` itself where the transform fails (IPython's raises on a
    cell with an IndentationError: the very cells being repaired)."""
    try:
        return transform(code)
    except Exception:
        return code


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _clip(text: str, limit: int = 80) -> str:
    return clip(" ".join(text.split()), limit)


# ------------------------------------------------------ an original cell that does not parse

# The cell under repair for a SyntaxError or IndentationError is exactly one that does not parse.
# Read as nothing, every assert, blanket except and eval it already had would count as the
# candidate's doing, and its honest fix would be refused ("changes the checks: eval"). So it is
# read leniently: parsed, and at each error the top-level chunk the error is in (from a line at
# column 0 to the next) is repaired (a header's missing colon, a pasted indent) or blanked, and
# the cell parsed again; the blanked lines are then read one by one (:func:`_assert_lines`,
# :func:`_broken_reaches`). All of it is the original's own text (at most a colon added or an
# indent taken off): it can excuse only what the cell already did. Blanking keeps the line
# numbers, which the failing lines refer to.

_MAX_PARSES = 50  # of the whole cell; past them, it is read line by line
_HEADER = re.compile(r"\s*(async\s+)?(def|class|if|elif|else|for|while|with|try|except|finally)\b")


def _lenient_parse(code: str) -> tuple[ast.Module, list[str]]:
    """The original's tree, with the chunks that do not parse blanked out, and their lines."""
    lines = re.split(r"\r\n?|\n", code)  # the lines the parser counts
    broken: list[str] = []
    for _ in range(_MAX_PARSES):
        error = _syntax_error(lines)
        if error is None:
            return ast.parse("\n".join(lines)), broken
        if error.lineno is None:
            break
        repaired = _repaired(lines, error.lineno)
        if repaired is None:
            start, end = _chunk_at(lines, error.lineno)
            broken += lines[start:end]
            repaired = lines[:start] + [""] * (end - start) + lines[end:]
        lines = repaired
    return ast.Module(body=[], type_ignores=[]), re.split(r"\r\n?|\n", code)


def _syntax_error(lines: list[str]) -> SyntaxError | None:
    """Why the lines do not parse (None: they do; no line number: not a line's fault)."""
    try:
        ast.parse("\n".join(lines))
    except SyntaxError as err:
        return err
    except (ValueError, RecursionError, MemoryError) as err:
        return SyntaxError(str(err))
    return None


def _line_index(lines: list[str], lineno: int) -> int:
    return min(max(lineno, 1), len(lines)) - 1  # an error at the end of the cell: its last line


def _chunk_at(lines: list[str], lineno: int) -> tuple[int, int]:
    """The top-level chunk around line ``lineno``, as a slice of ``lines``: from the line at
    column 0 that starts it (comments do not) to the next one."""
    starts = [i for i, line in enumerate(lines) if line[:1].strip() and not line.startswith("#")]
    at = _line_index(lines, lineno)
    start = max((i for i in starts if i <= at), default=0)
    return start, min((i for i in starts if i > at), default=len(lines))


def _repaired(lines: list[str], lineno: int) -> list[str] | None:
    """``lines`` with the error at ``lineno`` repaired: the cell parses, or fails only on a later
    line. None when neither repair does that."""
    start, end = _chunk_at(lines, lineno)
    at = _line_index(lines, lineno)
    colon = [*lines[:at], _with_colon(lines[at]), *lines[at + 1 :]]
    dedented = [*lines[:start], *textwrap.dedent("\n".join(lines[start:end])).split("\n"), *lines[end:]]
    for attempt in (colon, dedented):
        if attempt == lines:
            continue
        error = _syntax_error(attempt)
        if error is None or (error.lineno or 0) > lineno:
            return attempt
    return None


def _with_colon(line: str) -> str:
    """A block header (``def f(x)``, ``else``) with the colon it lacks."""
    code, sharp, comment = line.partition("#") if not {"'", '"'} & set(line) else (line, "", "")
    code = code.rstrip()
    if not _HEADER.match(code) or code.endswith(":"):
        return line
    return f"{code}:" + (f"  {sharp}{comment}" if sharp else "")


# ----------------------------------------------------------- every assert of the cell is kept


def _asserts(tree: ast.Module) -> Iterator[tuple[ast.Assert, bool]]:
    """Every assert, and whether it is a statement at the cell's top level."""
    top = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            yield node, id(node) in top


def _dropped_asserts(
    kept: Sequence[tuple[ast.Assert, bool]], new: ast.Module, blamed: frozenset[str]
) -> list[str]:
    """Why the candidate does not keep each of the original's asserts (``kept``)."""
    available = list(_asserts(new))
    reasons = []
    for node, top in kept:
        match = next(
            (i for i, (cand, cand_top) in enumerate(available)
             if (cand_top or not top) and _same_test(node.test, cand.test, blamed)),
            None,
        )  # fmt: skip
        if match is not None:
            available.pop(match)
            continue
        elsewhere = top and any(_same_test(node.test, cand.test, blamed) for cand, _ in available)
        text = _clip(ast.unparse(node.test))
        reasons.append(
            f"moves `assert {text}` off the cell's top level" if elsewhere else f"drops `assert {text}`"
        )
    return reasons


def _assert_lines(lines: Sequence[str]) -> Iterator[tuple[ast.Assert, bool]]:
    """The asserts of lines that do not parse in place (see :func:`_lenient_parse`), line by line."""
    for line in lines:
        tree = _parse(line.strip()) if line.strip().startswith("assert") else None
        if tree is not None and tree.body and isinstance(tree.body[0], ast.Assert):
            yield tree.body[0], not line[:1].isspace()


def _same_test(old: ast.AST, new: ast.AST, blamed: frozenset[str]) -> bool:
    """Equal trees, except that a name, attribute or string the failure blamed may change."""
    if type(old) is not type(new):
        return False
    if isinstance(old, ast.Name) and isinstance(new, ast.Name):
        return old.id == new.id or old.id in blamed
    if isinstance(old, ast.Attribute) and isinstance(new, ast.Attribute):
        same_attr = old.attr == new.attr or old.attr in blamed
        return same_attr and _same_test(old.value, new.value, blamed)
    if isinstance(old, ast.Constant) and isinstance(new, ast.Constant):
        if isinstance(old.value, str) and old.value in blamed and isinstance(new.value, str):
            return True
        return type(old.value) is type(new.value) and old.value == new.value
    for name, value in ast.iter_fields(old):
        if name == "ctx":
            continue
        other = getattr(new, name, None)
        if isinstance(value, list):
            if not isinstance(other, list) or len(value) != len(other):
                return False
            if not all(_same_test(a, b, blamed) if isinstance(a, ast.AST) else a == b
                       for a, b in zip(value, other, strict=True)):  # fmt: skip
                return False
        elif isinstance(value, ast.AST):
            if not isinstance(other, ast.AST) or not _same_test(value, other, blamed):
                return False
        elif value != other:
            return False
    return True


# ------------------------------------------------- no blanket except around the failing lines


@dataclass(frozen=True)
class _Blanket:
    line: int
    what: str
    body: tuple[ast.stmt, ...]


def _blankets(tree: ast.Module) -> list[_Blanket]:
    """``try`` statements with a bare/Exception/BaseException handler that does not re-raise,
    and ``with`` statements given Exception or BaseException (``contextlib.suppress``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Try | ast.TryStar):
            for handler in node.handlers:
                if _is_blanket(handler.type) and not any(isinstance(s, ast.Raise) for s in handler.body):
                    what = "except" + (f" {ast.unparse(handler.type)}" if handler.type else "")
                    found.append(_Blanket(handler.lineno, what, tuple(node.body)))
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                call = item.context_expr
                if isinstance(call, ast.Call) and any(_is_blanket(arg) for arg in call.args):
                    found.append(_Blanket(node.lineno, ast.unparse(call), tuple(node.body)))
    return found


def _is_blanket(node: ast.expr | None) -> bool:
    if node is None:
        return True
    if isinstance(node, ast.Tuple):
        return any(_is_blanket(element) for element in node.elts)
    if isinstance(node, ast.Name):
        return node.id in _BLANKET
    return isinstance(node, ast.Attribute) and node.attr in _BLANKET


def _names_in(nodes: Sequence[ast.AST]) -> set[str]:
    return {
        n.id if isinstance(n, ast.Name) else n.attr
        for node in nodes
        for n in ast.walk(node)
        if isinstance(n, ast.Name | ast.Attribute)
    }


def _footprint(tree: ast.Module, lines: tuple[int, ...]) -> set[str] | None:
    """The names of the original's failing statements (builtins left out); None: not known."""
    if not lines:
        return None
    failing = [s for s in tree.body if any(s.lineno <= n <= (s.end_lineno or s.lineno) for n in lines)]
    names = {n for n in _names_in(failing) if not hasattr(builtins, n)}
    return names or None


def _blanket_handlers(old: ast.Module, new: ast.Module, lines: tuple[int, ...]) -> list[str]:
    footprint = _footprint(old, lines)

    def around(blanket: _Blanket) -> bool:
        return footprint is None or bool(footprint & _names_in(blanket.body))

    before = len([b for b in _blankets(old) if around(b)])
    added = [b for b in _blankets(new) if around(b)]
    where = "the failing statement" if footprint is not None else "the cell"
    return [f"adds a blanket `{_clip(b.what, 50)}` (line {b.line}) around {where}" for b in added[before:]]


# ------------------------------------------------------- no reaching into nbrefine or the sandbox

_FRAME_ATTRS = frozenset(
    {"f_back", "f_locals", "f_globals", "f_builtins", "f_lineno", "f_trace", "tb_frame", "gi_frame",
     "cr_frame", "ag_frame", "_getframe", "_current_frames", "settrace", "setprofile"}
)  # fmt: skip
_MODULE_CALLS = {
    "os": frozenset({"_exit", "write", "writev", "pwrite", "pwritev", "dup", "dup2", "fdopen",
                     "sendfile", "close", "closerange"}),
    "gc": frozenset({"get_objects", "get_referrers", "get_referents"}),
    "inspect": frozenset({"currentframe", "stack", "trace", "getouterframes", "getinnerframes"}),
}  # fmt: skip
_MODULE_CALLS["posix"] = _MODULE_CALLS["os"]
_SANDBOX_MODULES = frozenset({"ctypes", "_ctypes", "nbrefine"})
_FD_PATHS = re.compile(r"/proc/(self|thread-self|\d+)/(fd|mem)|/dev/fd\b")
_DYNAMIC = frozenset({"exec", "eval", "compile", "__import__", "import_module"})


def _reaches(tree: ast.Module, known: Mapping[str, str] | None = None) -> Iterator[tuple[str, int]]:
    """(why, line) for each way the code reaches into nbrefine or the trial process (``known``:
    module aliases imported elsewhere in the cell)."""
    aliases = {**(known or {}), **_module_aliases(tree)}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        for why in _why_node(node, aliases):
            yield why, line


def _added_reaches(old: ast.Module, broken: Sequence[str], new: ast.Module) -> list[str]:
    """The candidate's reaches beyond the original's, counted: a second ``eval`` is its own."""
    before = Counter(why for why, _ in _reaches(old)) + _broken_reaches(broken, _module_aliases(old))
    added = []
    for why, line in sorted(_reaches(new), key=lambda pair: pair[1]):
        if before[why] > 0:
            before[why] -= 1
        else:
            added.append(f"{why} (line {line})")
    return added


def _broken_reaches(lines: Sequence[str], aliases: Mapping[str, str]) -> Counter[str]:
    """What :func:`_reaches` finds in lines that do not parse in place: in each line alone, or
    where even that fails, in each expression its tokens mark out."""
    found: Counter[str] = Counter()
    for line in map(str.strip, lines):
        tree = _parse(line)
        if tree is not None:
            found.update(why for why, _ in _reaches(tree, aliases))
            continue
        tokens = _tokens(line)
        at = 0
        while at < len(tokens):
            end, piece = _expression(line, tokens, at)
            tree = _parse(piece) if piece else None
            whys = [why for why, _ in _reaches(tree, aliases)] if tree is not None else []
            found.update(whys or _called_by_name(piece))
            at = end if tree is not None else at + 1  # else the expressions inside it are read
    return found


def _defined(tree: ast.Module) -> set[str]:
    """The names the code defines (``def``, ``class``, assignments) outside functions and classes."""
    defined: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return defined


def _redefined_predicates(old: ast.Module, new: ast.Module) -> list[str]:
    """An assert of the cell whose test is a call (``assert is_valid(rows)``): the candidate may not
    define that function itself when the cell did not (it would be the check's own predicate)."""
    called = {
        node.test.func.id
        for node, _ in _asserts(old)
        if isinstance(node.test, ast.Call) and isinstance(node.test.func, ast.Name)
    }
    if not called:
        return []
    before, after = _defined(old), _defined(new)
    return [
        f"defines `{name}` itself, which the cell's `assert {name}(...)` calls"
        for name in sorted(called & after - before)
    ]


_LAYOUT = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER,
                     tokenize.INDENT, tokenize.DEDENT})  # fmt: skip
_BRACKETS = {"(": ")", "[": "]", "{": "}"}


def _tokens(line: str) -> list[tokenize.TokenInfo]:
    """The tokens of one line, as far as it tokenizes."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(line).readline):
            if token.type not in _LAYOUT and token.start[0] == token.end[0] == 1:
                found.append(token)
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return found


def _expression(line: str, tokens: Sequence[tokenize.TokenInfo], at: int) -> tuple[int, str]:
    """(the index past it, its text) for the expression that starts at ``tokens[at]``: a name or
    a string with the attributes, calls and subscripts after it, the brackets the line leaves
    open closed. ``""``: none starts there."""
    first = tokens[at]
    if first.type not in (tokenize.NAME, tokenize.STRING) or (at and tokens[at - 1].string == "."):
        return at + 1, ""
    closers: list[str] = []
    end = at + 1
    while end < len(tokens):
        token = tokens[end]
        if token.type == tokenize.OP and token.string in _BRACKETS:
            closers.append(_BRACKETS[token.string])
        elif closers:  # inside brackets: anything
            if token.string == closers[-1]:
                closers.pop()
        elif token.string != "." and not (tokens[end - 1].string == "." and token.type == tokenize.NAME):
            break
        end += 1
    return end, line[first.start[1] : tokens[end - 1].end[1]] + "".join(reversed(closers))


def _called_by_name(piece: str) -> list[str]:
    """A call of ``eval``, ``exec``, … whose arguments the broken line cut off."""
    called = re.match(r"(?:\w+\s*\.\s*)*(\w+)\s*\(", piece)
    return [_runs_named(called[1])] if called and called[1] in _DYNAMIC else []


def _runs_named(name: str) -> str:
    return f"runs code or imports a module named at run time: {name}"


def _module_aliases(tree: ast.Module) -> dict[str, str]:
    aliases = {name: name for name in (*_MODULE_CALLS, "sys")}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name.split(".")[0]
    return aliases


def _top_module(name: str) -> str:
    return name.split(".")[0]


def _why_node(node: ast.AST, aliases: Mapping[str, str]) -> Iterator[str]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield from _why_import(node)
    elif isinstance(node, ast.Name) and node.id in _SANDBOX_MODULES:
        yield _mention(node.id)
    elif isinstance(node, ast.Attribute):
        yield from _why_attribute(node, aliases)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield from _why_text(node.value)
    elif isinstance(node, ast.Call):
        yield from _why_call(node, aliases)


def _mention(module: str) -> str:
    return "mentions nbrefine" if module == "nbrefine" else f"reaches into the sandbox: {module}"


_EQUAL_TO_ANYTHING = "compares with unittest.mock.ANY, which is equal to anything"
_MOCK_MODULES = frozenset({"unittest.mock", "mock"})


def _why_import(node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    mocking = isinstance(node, ast.ImportFrom) and node.module in _MOCK_MODULES
    if mocking and any(alias.name in ("ANY", "_ANY", "*") for alias in node.names):
        yield _EQUAL_TO_ANYTHING
    modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    for module in modules:
        if _top_module(module) == "nbrefine":
            yield "imports nbrefine"
        elif _top_module(module) in _SANDBOX_MODULES:
            yield f"reaches into the sandbox: imports {module}"
    if isinstance(node, ast.ImportFrom):
        calls = _MODULE_CALLS.get(_top_module(node.module or ""), frozenset()) | _FRAME_ATTRS
        for alias in node.names:
            if alias.name in calls:
                yield f"reaches into the sandbox: {node.module}.{alias.name}"


def _why_attribute(node: ast.Attribute, aliases: Mapping[str, str]) -> Iterator[str]:
    owner = aliases.get(node.value.id, "") if isinstance(node.value, ast.Name) else ""
    if node.attr in ("ANY", "_ANY") and (
        owner in ("unittest", "mock") or ast.unparse(node.value).split(".")[-1] == "mock"
    ):
        yield _EQUAL_TO_ANYTHING
    if node.attr in _FRAME_ATTRS:
        yield f"reaches into the sandbox: {_clip(ast.unparse(node), 40)}"
    elif node.attr in _MODULE_CALLS.get(owner, frozenset()):
        yield f"reaches into the sandbox: {owner}.{node.attr}"
    elif owner == "sys" and node.attr == "modules":
        yield "reaches into the sandbox: sys.modules"
    elif node.attr in _SANDBOX_MODULES:
        yield _mention(node.attr)


def _why_text(text: str) -> Iterator[str]:
    if "nbrefine" in text:
        yield "mentions nbrefine"
    if _FD_PATHS.search(text):
        yield "reaches into the sandbox: its /proc or /dev/fd files"
    if text in _SANDBOX_MODULES - {"nbrefine"}:
        yield _mention(text)


def _why_call(node: ast.Call, aliases: Mapping[str, str]) -> Iterator[str]:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    first = node.args[0] if node.args else None
    text = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
    if name in _DYNAMIC:
        if first is not None and text is None:
            yield _runs_named(name)
        elif text is not None and name in ("exec", "eval", "compile"):
            inner = _parse(text)  # a constant: read it like the cell itself
            yield from (why for why, _ in (_reaches(inner) if inner is not None else ()))
        elif text is not None and _top_module(text) in _SANDBOX_MODULES:
            yield _mention(_top_module(text))
    elif name == "getattr" and len(node.args) >= 2:
        owner = node.args[0]
        attr = node.args[1]
        module = aliases.get(owner.id, "") if isinstance(owner, ast.Name) else ""
        if module and not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
            yield f"reaches into the sandbox: getattr({module}, …)"
        elif isinstance(attr, ast.Constant) and isinstance(attr.value, str):
            fake = ast.Attribute(value=owner, attr=attr.value, ctx=ast.Load())
            yield from _why_attribute(fake, aliases)
    elif name in ("open", "FileIO") and isinstance(first, ast.Constant) and isinstance(first.value, int):
        yield f"reaches into the sandbox: {name}() of file descriptor {first.value}"


# --------------------------------------------------------------------------- names and state


class _AnyName(Mapping[str, object]):
    """Every name is "in" it: names_to_ship's scope analysis without its namespace filter."""

    _VALUE = object()

    def __getitem__(self, key: str) -> object:
        return self._VALUE

    def __contains__(self, key: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def names_read(code: str, checks: Sequence[str] = ()) -> list[str] | None:
    """The names ``code`` and then its checks read from the namespace, in order of first use
    (the spawn sandbox's scope analysis); None when the code is not plain Python."""
    whole = "\n".join([code, *checks])
    if _parse(whole) is None:
        return None
    return names_to_ship(whole, _AnyName())


def _nbrefine_fingerprints(namespace: Any, names: Any, cap: int, known: Any = None) -> dict[str, str]:
    # Runs in a trial process: its source is the trial's code (see fingerprint_spec), so it is
    # self-contained. Content digests (pickle protocol 5, out-of-band buffers hashed in place,
    # so arrays and frames are not copied); functions also by code, closures and identity (a
    # fork keeps every address); anything that cannot be pickled within what is left of ``cap``
    # (bytes hashed for all the names together) is "unknown".
    #
    # ``known`` (see :func:`known_fingerprints`, which runs this outside a trial): a predicate on
    # every object pickling meets; one it refuses raises ``Unknown`` out of the whole call, since
    # pickling it might run code of the user's (a ``__reduce__``) that only a trial may run.
    import hashlib
    import marshal
    import pickle
    import types

    class TooLarge(Exception):
        pass

    class Unknown(BaseException):  # not an Exception: one() must not turn it into "unknown"
        pass

    hashed = [0]  # by every Sink: the cap is for the whole trial

    class Vetting(pickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if not known(obj):
                raise Unknown
            return NotImplemented  # pickled as it would be: the digest is a trial's

    class Sink:
        def __init__(self) -> None:
            self.digest = hashlib.sha256()  # with SHA extensions, faster than blake2b
            self.size = 0

        def write(self, data: Any) -> int:
            view = memoryview(data)
            self.size += view.nbytes
            if hashed[0] + self.size > cap:
                raise TooLarge
            self.digest.update(view)
            return view.nbytes

    def pickled(value: Any) -> str:
        sink = Sink()

        def out_of_band(buffer: Any) -> bool:
            # pickle's contract: a false value keeps the buffer out of the stream (hashed here,
            # in place); a true one serialises it in band
            try:
                sink.write(buffer.raw())
            except BufferError:
                return True  # not contiguous: pickled in band, within the cap
            return False

        pickler = (pickle.Pickler if known is None else Vetting)(
            sink, protocol=5, buffer_callback=out_of_band
        )
        numeric = type(value).__module__.partition(".")[0] in ("numpy", "pandas")
        size = getattr(value, "nbytes", None) if numeric else None
        if isinstance(size, int) and hashed[0] + size > cap:
            raise TooLarge  # (an array past the cap: known without pickling any of it)
        pickler.dump(value)
        hashed[0] += sink.size
        return sink.digest.hexdigest()

    def function(value: Any) -> str:
        cells = [c.cell_contents for c in value.__closure__ or () if _filled(c)]
        parts = [marshal.dumps(value.__code__).hex(), one((value.__defaults__, value.__kwdefaults__))]
        parts += [one(c) for c in cells]
        return f"function@{id(value):x}:" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]

    def _filled(cell: Any) -> bool:
        try:
            cell.cell_contents  # noqa: B018 - an empty cell raises
        except ValueError:
            return False
        return True

    def one(value: Any) -> str:
        kind = type(value)
        if (
            known is not None
            and kind not in (types.ModuleType, types.FunctionType, type)
            and not known(value)
        ):
            raise Unknown  # (checked before isinstance, which may ask the value its __class__)
        try:
            if isinstance(value, types.ModuleType):
                return "module:" + value.__name__
            if isinstance(value, types.FunctionType):
                return function(value)
            if isinstance(value, type):
                return f"class:{value.__module__}.{value.__qualname__}@{id(value):x}"
            return pickled(value)
        except TooLarge:
            return f"unknown: past the {cap >> 20} MiB hashed per check"
        except RecursionError:
            return "unknown: nested too deeply"
        except Exception as err:
            return f"unknown: {type(err).__name__}"

    def globals_read(value: Any) -> list[str]:
        found: list[str] = []
        stack = [value.__code__]
        while stack:
            code = stack.pop()
            found += [n for n in code.co_names if n in value.__globals__ and not n.startswith("__")]
            stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        return found

    if known is not None and not all(isinstance(n, str) for n in names):
        raise TypeError("names must be strings")
    result: dict[str, str] = {}
    pending = [(name, namespace) for name in names]
    while pending and len(result) < 500:
        name, scope = pending.pop(0)
        if name in result:
            continue
        if name not in scope:
            result[name] = "absent"
            continue
        value = scope[name]
        result[name] = one(value)
        if isinstance(value, types.FunctionType):  # what the cell's functions read counts too
            pending += [(n, value.__globals__) for n in globals_read(value)]
    return result


#: What pickling may meet in a fingerprint taken outside a trial (:func:`known_fingerprints`):
#: the plain built-in values, and the objects of these libraries, whose reductions are library
#: code. A user's class, or a library object holding one, needs a trial.
_PLAIN = frozenset(
    {int, float, complex, bool, str, bytes, bytearray, type(None), tuple, list, dict, set, frozenset,
     range, slice, type(Ellipsis)}
)  # fmt: skip
_KNOWN_ROOTS = frozenset(
    {"builtins", "copyreg", "_codecs", "numpy", "pandas", "datetime", "decimal", "fractions",
     "collections", "uuid", "pathlib", "zoneinfo"}
)  # fmt: skip
_KNOWN_META_ROOTS = _KNOWN_ROOTS | {"abc", "enum"}
#: Cython's function types (pandas' reconstructors), whose module is Cython's, not the library's
_COMPILED_FUNCTIONS = frozenset({"cython_function_or_method", "fused_cython_function"})


def _module_of(kind: type) -> str:
    """A type's module, read past any ``__module__`` its metaclass defines (which may be code)."""
    module = _TYPE_MODULE.__get__(kind, type)
    if isinstance(module, str):
        return module
    # Cython's types hold a descriptor there (for their instances); type's own repr names them
    named = type.__repr__(kind).removeprefix("<class '").removesuffix("'>")
    return named.rpartition(".")[0]


_TYPE_MODULE: Any = type.__dict__["__module__"]


def _known_owner(owner: object, roots: frozenset[str]) -> bool:
    return isinstance(owner, str) and owner.partition(".")[0] in roots


def _stdlib_function(obj: Any) -> bool:
    """A C function of a standard library module (``io.open``, ``math.sqrt``, ``posix.fspath``:
    what IPython's ``open`` and many a user's function read), pickled by name: pickle imports
    nothing new (the module is loaded) and reads one attribute of a module that is the standard
    library's own, built in or on its path (never a file of the user's that shadows its name).
    A bound method of an object is not one (its ``__self__`` would be pickled)."""
    owner, module_name = obj.__self__, obj.__module__  # C slots of the function: no code runs
    if owner is not None and not _stdlib_module(owner):
        return False
    return isinstance(module_name, str) and _stdlib_module(sys.modules.get(module_name))


def _stdlib_module(module: object) -> bool:
    if type(module) is not types.ModuleType:
        return False
    name, path = module.__dict__.get("__name__"), module.__dict__.get("__file__")
    if not isinstance(name, str) or name.partition(".")[0] not in sys.stdlib_module_names:
        return False
    if path is None:  # built into the interpreter (whose name may be another: _io says "io")
        return any(sys.modules.get(built_in) is module for built_in in sys.builtin_module_names)
    if not isinstance(path, str):
        return False
    real = os.path.realpath(path)  # (site-packages may sit inside the stdlib's folder: not it)
    return real.startswith(_STDLIB_DIRS) and not any(f"{os.sep}{d}{os.sep}" in real for d in _INSTALLED)


_INSTALLED = ("site-packages", "dist-packages")
_STDLIB_DIRS = tuple(
    os.path.realpath(sysconfig.get_paths()[key]) + os.sep for key in ("stdlib", "platstdlib")
)


def _known_to_pickle(obj: Any) -> bool:
    """Whether pickling ``obj`` runs library code only (its type's attributes are read, never
    the object's: a property of the user's could run). Functions and classes are pickled by
    name; only a library's own count."""
    kind = type(obj)
    if kind in _PLAIN:
        return True
    meta = type(kind)
    if meta is not type and not (
        type(meta) is type
        and (_known_owner(_module_of(meta), _KNOWN_META_ROOTS) or _module_of(meta).startswith("_cython_"))
    ):
        return False  # a metaclass of the user's: even its attributes may be code
    if kind is types.BuiltinFunctionType and _stdlib_function(obj):
        return True
    if kind in (types.FunctionType, types.BuiltinFunctionType) or kind.__name__ in _COMPILED_FUNCTIONS:
        return _known_owner(getattr(obj, "__module__", None), _KNOWN_ROOTS)
    if issubclass(kind, type):  # a class (not isinstance: that may ask the object its __class__)
        return _known_owner(_module_of(obj), _KNOWN_ROOTS)
    return _known_owner(_module_of(kind), _KNOWN_ROOTS)


def known_fingerprints(namespace: Mapping[str, Any], names: Sequence[str]) -> dict[str, str] | None:
    """The fingerprints a :func:`fingerprint_spec` trial would print for ``names``, taken here and
    now, without a trial; None when a value holds an object whose pickling might run the user's
    code (then only a trial may take them). The same digests, so either side of a comparison may
    come from a trial and the other from here."""
    try:
        return _nbrefine_fingerprints(namespace, list(names), FINGERPRINT_CAP, _known_to_pickle)
    except BaseException as err:  # Unknown (local to the function), or anything odd
        if isinstance(err, KeyboardInterrupt | SystemExit):
            raise
        return None


@functools.cache
def _fingerprint_source() -> str:
    """The source of :func:`_nbrefine_fingerprints` without its annotations: a trial compiles
    code without this module's ``from __future__ import annotations``, where ``Any`` is unbound."""
    tree = ast.parse(inspect.getsource(_nbrefine_fingerprints))
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            node.annotation = None
        elif isinstance(node, ast.FunctionDef):
            node.returns = None
    return ast.unparse(tree) + "\n"


def fingerprint_spec(
    names: Sequence[str], *, timeout_s: float = 10.0, policy: TrialPolicy | None = None
) -> TrialSpec:
    """A trusted trial that prints the fingerprints of ``names`` in the runner's namespace."""
    ship = "".join(f"{name}, " for name in names if name.isidentifier())
    code = (
        _fingerprint_source()
        + (f"if False:\n    ({ship})  # the names a spawn sandbox must ship\n" if ship else "")
        + f"print({_MARK!r} + __import__('json').dumps("
        + f"_nbrefine_fingerprints(globals(), {list(names)!r}, {FINGERPRINT_CAP})))\n"
    )
    return TrialSpec(code=code, timeout_s=timeout_s, label="fingerprint", policy=policy or TrialPolicy())


def read_fingerprints(outcome: TrialOutcome) -> dict[str, str] | None:
    """The fingerprints a :func:`fingerprint_spec` trial printed; None when it did not finish."""
    if not outcome.ok:
        return None
    for line in outcome.stdout.splitlines():
        if line.startswith(_MARK):
            try:
                data = json.loads(line[len(_MARK) :])
            except ValueError:
                return None
            return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None
    return None


def fingerprints_of(
    runner: Any,
    names: Sequence[str],
    *,
    timeout_s: float = 10.0,
    policy: TrialPolicy | None = None,
) -> dict[str, str] | None:
    """Fingerprints of ``names`` as ``runner`` (a trial runner) sees them; None: could not be taken.

    A runner that can look at its own namespace in place (``inspect(fn, *args)``: the snapshot
    process, the live kernel) gives :func:`known_fingerprints` there, which needs no trial (a
    trial costs its fork and hardening, about 10 to 30 ms); where those cannot be taken, or it
    cannot, a trial takes them."""
    inspect_in_place = getattr(runner, "inspect", None)
    try:
        if callable(inspect_in_place):
            found = inspect_in_place(known_fingerprints, list(names))
            if isinstance(found, dict):
                return found
        outcome = runner.run(fingerprint_spec(names, timeout_s=timeout_s, policy=policy))
    except KeyboardInterrupt:
        return None
    return read_fingerprints(outcome)


def changed_names(before: Mapping[str, str] | None, now: Mapping[str, str] | None) -> list[str] | None:
    """Names whose value differs, or cannot be compared; None when either side is missing."""
    if before is None or now is None:
        return None
    return [
        name
        for name in dict.fromkeys([*before, *now])
        if before.get(name) != now.get(name) or before.get(name, "").startswith("unknown")
    ]


def drift(before: Mapping[str, str] | None, now: Mapping[str, str] | None) -> str:
    """In words, why the live state may not be what the trial saw ("" : provably the same)."""
    changed = changed_names(before, now)
    if changed is None:
        return "the state it reads could not be compared with the live one"
    assert before is not None and now is not None
    unknown = [n for n in changed if before.get(n, "").startswith("unknown") and now.get(n) == before.get(n)]
    moved = [n for n in changed if n not in unknown]
    parts = []
    if moved:
        parts.append(f"{_names_text(moved)} changed since (the failed run or a later cell changed it)")
    if unknown:
        why = before[unknown[0]].removeprefix("unknown: ")
        parts.append(f"{_names_text(unknown)} could not be compared ({why})")
    return "; ".join(parts)


def _names_text(names: Sequence[str]) -> str:
    shown = ", ".join(f"`{name}`" for name in names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")

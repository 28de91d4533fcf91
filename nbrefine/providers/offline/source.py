"""A cell's code as the fixers edit it: exact positions, edits, and the :class:`Fix` they make.

:class:`_Source` maps the AST's (line, UTF-8 byte column) positions onto the code, parses it
with IPython magic lines masked (see ``magic_lines``), and applies non-overlapping edits; a fixer
that cannot go on raises :class:`_NoFix` with the reason to decline.

May import: the standard library, ``magic_lines``; never the sandbox, the engine, IPython or the CLI (the
offline tier only reads what the failure context gives it)."""

from __future__ import annotations

import ast
import io
import itertools
import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass

from .magic_lines import _mask_line


@dataclass(frozen=True)
class Fix:
    """One candidate: the whole corrected cell and why."""

    code: str
    explanation: str
    lines: frozenset[int] = frozenset()  # 1-based lines of ``code`` that the edit touched


class _NoFix(Exception):
    """Raised by a fixer with the reason to decline (an empty reason: the default one)."""


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

"""What a reply changes, cell by cell: a model's fenced blocks mapped to the cells they fix.

The prompt shows the failing cell and the cells a fix may need (the function a cell of checks
calls, a cell that must run first) and asks for one fenced block per changed cell, labelled like
``### In [1] (cell 'search')``. Real models answer in more layouts than that: a label above the
fence or as the block's first comment line, one block holding the whole failing cell, a block per
function, or (asked to fix a cell of asserts) a corrected ``def search`` above the unchanged
asserts in one block. :func:`split_reply` reads all of them. A block goes to the cell its label
names, else to the failing cell; inside it, each top-level definition that another cell defines
replaces that definition in that cell (the rest of that cell is kept byte for byte), and what
remains is the new source of the cell the block is for. Read-only cells (checks) never change: a
reply that changes one says so in ``touched_readonly``.

May import: the standard library and :mod:`nbrefine.engine.cells` / :mod:`nbrefine.engine.prompt`.
"""

from __future__ import annotations

import ast
import difflib
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .cells import CellEdits, CellRef
from .prompt import _FENCE, _PYTHON_TAGS, declines

__all__ = ["split_reply"]

_NO_BLOCK = "the reply contained no fenced code block"
_NO_PYTHON = "the reply contained no Python code block"
_CUT_OFF = "the reply's code block was cut off before its closing ```"
_EMPTY = "the reply's code block was empty"
_NO_CELL = "the reply's code matched no cell it may change"
_UNCHANGED = "the reply's code left every cell as it was"
_READONLY_ONLY = "the reply changed only cells it may not change (the checks)"

_COUNT = re.compile(r"\bIn\s*\[\s*(\d+)\s*\]")
_OPENING = re.compile(r"^[ \t]*(?:`{3,}|~{3,})", re.M)
_HEADING = re.compile(r"^(?:#{1,6}\s|\*\*|__)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_LABEL_FILLER = re.compile(r"\b(?:cell|id|fixed|corrected|updated|new)\b|[\s%:()\[\]*`'\".,;—–-]+", re.I)
#: The prose of a reply that says the fix needs something else first, or cannot be known.
_IMPORT = re.compile(r"(?:import|from)\s")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class _Block:
    """A fenced block of the reply: its language tag, its code, where it is, its opening line."""

    tag: str
    body: str
    start: int
    end: int
    fence: str

    @property
    def info(self) -> str:
        """What follows the language tag on the opening line (``python In [1]``)."""
        return self.fence.split("\n", 1)[0].lstrip(" \t`~")[len(self.tag) :]


@dataclass(frozen=True)
class _Section:
    """The code a reply gives for one cell (``label``), or for the cell it matches (None)."""

    code: str
    label: CellRef | None


@dataclass(frozen=True)
class _Stmt:
    """A top-level statement of a block: lines ``start:end`` (0-based, decorators included)."""

    kind: str  # "def" (a function or class), "import" or "other"
    name: str
    start: int  # with the comment block directly above a definition
    end: int
    comment: bool  # a comment block directly above came with it


@dataclass(frozen=True)
class _Unit:
    """A definition that replaces the one of the same name in a cell."""

    name: str
    text: str
    comment: bool


@dataclass(frozen=True)
class _Edit:
    """A new whole source for a cell, or definitions replaced in place in it."""

    key: str
    source: str | None = None
    units: tuple[_Unit, ...] = ()


def split_reply(text: str, cells: Sequence[CellRef]) -> CellEdits:
    """The new whole source of every cell ``text`` changes among ``cells`` (the cells the prompt showed)."""
    text = text.replace("\r\n", "\n")
    found = [
        _Block(m.group(2).lower(), m.group(3), m.start(), m.end(), m.group(0)) for m in _FENCE.finditer(text)
    ]
    code = [b for b in found if b.tag in _PYTHON_TAGS] or [b for b in found if not b.tag]
    spans = [(b.start, b.end) for b in found]
    explanation = _prose(text, spans)
    if not code:
        cut = _OPENING.search(_blank_out(text, spans))
        reason = _CUT_OFF if cut else _NO_PYTHON if found else _NO_BLOCK
        return CellEdits(explanation=explanation, reason=reason, declined=_declines(explanation))
    sections: list[_Section] = []
    for block in code:
        before = text[max((b.end for b in found if b.end <= block.start), default=0) : block.start]
        label = _one(_mentioned(block.info, cells)) or _label_before(before, cells)
        sections += _sections(_dedent(block.body), label, cells)
    if not sections:
        return CellEdits(explanation=explanation, reason=_EMPTY)
    return _edits(sections, cells, explanation)


def _edits(sections: list[_Section], cells: Sequence[CellRef], explanation: str) -> CellEdits:
    """Route each section to its cells, apply the edits in order and keep what changed."""
    failing = next((c for c in cells if c.role == "failing"), None)
    routed = [_route(section, cells, failing) for section in sections]
    current = _apply([edit for edits in routed if edits for edit in edits], cells)
    changes = {c.key: current[c.key] for c in cells if c.editable and _changed(c, current)}
    touched = tuple(c.key for c in cells if c.readonly and _changed(c, current))
    reason = _reason(changes, touched, unmatched=None in routed)
    declined = reason == _UNCHANGED and _declines(explanation)
    return CellEdits(changes, explanation, reason, touched, declined)


def _reason(changes: dict[str, str], touched: tuple[str, ...], *, unmatched: bool) -> str | None:
    """Why nothing was taken from a reply that had code (None: something was)."""
    if changes:
        return None
    if touched:
        return _READONLY_ONLY
    return _NO_CELL if unmatched else _UNCHANGED


def _changed(cell: CellRef, current: dict[str, str]) -> bool:
    return _norm(current[cell.key]) != _norm(cell.source)


def _declines(prose: str) -> bool:
    return declines(prose)


# --------------------------------------------------------------------------- prose and labels


def _blank_out(text: str, spans: list[tuple[int, int]]) -> str:
    for start, end in spans:
        text = text[:start] + " " * (end - start) + text[end:]
    return text


def _prose(text: str, spans: list[tuple[int, int]]) -> str:
    """The reply without its code blocks (nor a block cut off), blank runs squeezed, at most 2000 chars."""
    pieces, last = [], 0
    for start, end in spans:
        pieces.append(text[last:start])
        last = end
    tail = text[last:]
    cut = _OPENING.search(tail)
    pieces.append(tail[: cut.start()] if cut else tail)
    prose = re.sub(r"[ \t]+\n", "\n", "\n".join(pieces))
    prose = _LABEL_LINE.sub("", prose)  # a block's label (``### In [1] (cell 'a')``) without its block
    return re.sub(r"\n{3,}", "\n\n", prose).strip()[:2000]


#: A line that is only a heading or a bold label naming a cell, as models put above each block.
_LABEL_LINE = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]+|\*\*)?(?:In[ \t]*\[\d+\]|[Cc]ell)[^\n]{0,80}?(?:\*\*)?:?[ \t]*$\n?", re.M
)


def _mentioned(text: str, cells: Sequence[CellRef]) -> list[CellRef]:
    """The cells ``text`` names, by execution count (``In [1]``) or by cell id (``cell 'search'``)."""
    counts = {int(m.group(1)) for m in _COUNT.finditer(text)}
    return [
        c
        for c in cells
        if (c.count is not None and c.count in counts) or (c.cell_id and _id_label(c.cell_id).search(text))
    ]


def _id_label(cell_id: str) -> re.Pattern[str]:
    name = re.escape(cell_id)
    return re.compile(rf"\bcell(?:\s+id)?\s*[:=]?\s*(?:([`'\"]){name}\1|(?<=\s){name}(?![\w-]))", re.I)


def _one(found: list[CellRef]) -> CellRef | None:
    return found[0] if len(found) == 1 else None


def _label_before(before: str, cells: Sequence[CellRef]) -> CellRef | None:
    """The cell named by the line just above a fence (or by a heading just above that line).

    A line of prose names the cell its block is for only when it introduces the block (it ends
    with a colon) or is only a label: "this needs In [3] to run first." names no block's cell."""
    lines = [line.strip() for line in before.splitlines() if line.strip()]
    for i, line in enumerate(reversed(lines[-2:])):
        heading = bool(_HEADING.match(line))
        if i and not heading:
            break
        found = _mentioned(_SENTENCE_END.split(line)[-1], cells)
        if found and (heading or line.rstrip("*_` ").endswith(":") or _only_label(line, cells)):
            return _one(found)
    return None


def _only_label(text: str, cells: Sequence[CellRef]) -> bool:
    """Whether ``text`` names cells and says nothing else (``In [1] (cell 'search')``, ``cell search.``)."""
    rest = _COUNT.sub("", text)
    for cell in cells:
        rest = _id_label(cell.cell_id).sub("", rest) if cell.cell_id else rest
    return not _LABEL_FILLER.sub("", rest)


def _label_comment(line: str, cells: Sequence[CellRef]) -> tuple[bool, CellRef | None] | None:
    """(only a label?, the cell) for a comment line that labels a cell (``# In [1]``, ``# %%``), else None."""
    if not line.startswith("#"):
        return None
    body = line.lstrip("#").strip()
    marker = body.startswith("%%")
    body = body.removeprefix("%%").strip()
    found = _mentioned(body, cells)
    if marker:
        return True, _one(found)
    if not found or not (_COUNT.match(body) or re.match(r"cell\b", body, re.I)):
        return None
    return _only_label(body, cells), _one(found)


def _sections(code: str, label: CellRef | None, cells: Sequence[CellRef]) -> list[_Section]:
    """A block's code per cell: comment lines that are only a label start a new cell (and are dropped)."""
    lines = code.splitlines()
    first = next((line for line in lines if line.strip()), "")
    named = _label_comment(first, cells)
    if label is None and named is not None and not named[0]:
        label = named[1]
    sections: list[_Section] = []
    current: list[str] = []
    for line in lines:
        named = _label_comment(line, cells)
        if named is None or not named[0]:
            current.append(line)
            continue
        if _clean("\n".join(current)):
            sections.append(_Section(_clean("\n".join(current)), label))
            label = named[1]
        else:  # a label at the top of the block
            label = named[1] or label
        current = []
    if _clean("\n".join(current)):
        sections.append(_Section(_clean("\n".join(current)), label))
    return sections


# --------------------------------------------------------------------------- routing


def _route(section: _Section, cells: Sequence[CellRef], failing: CellRef | None) -> list[_Edit] | None:
    """The edits one section makes; None when its code matches no cell it may change."""
    target = section.label or failing
    stmts = _statements(section.code) if target is not None else None
    if target is None or stmts is None:
        return _whole(section, cells, failing)
    owners = [_owner(stmt, target, cells) for stmt in stmts]
    moved = {i: owner for i, owner in enumerate(owners) if owner is not None and owner.key != target.key}
    lines = section.code.splitlines()
    if not moved:
        own = _own_defs(stmts, lines, target)
        return [_Edit(target.key, units=own)] if own else _whole(section, cells, failing)
    _take_companions(stmts, moved, lines, target, cells)
    edits = _moved_edits(stmts, moved, lines)
    kept = [stmt for i, stmt in enumerate(stmts) if i not in moved]
    own = _own_defs(kept, lines, target)
    if own:
        edits.append(_Edit(target.key, units=own))
    elif kept:
        edits.append(_Edit(target.key, source=_remainder(lines, [stmts[i] for i in moved])))
    return edits


def _whole(section: _Section, cells: Sequence[CellRef], failing: CellRef | None) -> list[_Edit] | None:
    """A block that is a cell's whole source: the labelled cell, the failing one, or the closest."""
    code = section.code
    if section.label is not None:
        return [_Edit(section.label.key, source=code)]
    if failing is not None and (failing.editable or _norm(code) == _norm(failing.source)):
        return [_Edit(failing.key, source=code)]
    best = max((c for c in cells if c.editable), key=lambda c: _ratio(code, c.source), default=None)
    score = _ratio(code, best.source) if best else 0.0
    failing_score = _ratio(code, failing.source) if failing else 0.0
    if best is not None and score > 0.5 and score >= failing_score:
        return [_Edit(best.key, source=code)]
    if failing is not None and failing_score > 0.5:  # the checks, rewritten
        return [_Edit(failing.key, source=code)]
    return None


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, _norm(a), _norm(b)).ratio()


def _statements(code: str) -> list[_Stmt] | None:
    """The top-level statements of ``code``, or None when it does not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    lines = code.splitlines()
    stmts: list[_Stmt] = []
    floor = 0
    for node in tree.body:
        first = _first_line(node)
        start = _comment_start(lines, first, floor) if isinstance(node, _DEFS) else first
        name = node.name if isinstance(node, _DEFS) else ""
        floor = node.end_lineno or node.lineno
        stmts.append(_Stmt(_kind(node), name, start, floor, start < first))
    return stmts


def _kind(node: ast.stmt) -> str:
    if isinstance(node, _DEFS):
        return "def"
    return "import" if isinstance(node, ast.Import | ast.ImportFrom) else "other"


def _first_line(node: ast.stmt) -> int:
    """The 0-based first line of a statement, its decorators included."""
    decorators = node.decorator_list if isinstance(node, _DEFS) else []
    return min([node.lineno, *(d.lineno for d in decorators)]) - 1


def _comment_start(lines: Sequence[str], start: int, floor: int) -> int:
    """The first line of the comment block directly above line ``start`` (not above ``floor``)."""
    while start > floor and lines[start - 1].startswith("#"):
        start -= 1
    return start


def _owner(stmt: _Stmt, target: CellRef, cells: Sequence[CellRef]) -> CellRef | None:
    """The cell a definition belongs to: the target if it defines it, else the one editable cell that does."""
    if stmt.kind != "def":
        return None
    if stmt.name in target.defines:
        return target
    found = [c for c in cells if c.key != target.key and c.editable and stmt.name in c.defines]
    return _one(found)


def _unit(stmt: _Stmt, lines: Sequence[str]) -> _Unit:
    return _Unit(stmt.name, "\n".join(lines[stmt.start : stmt.end]).rstrip(), stmt.comment)


def _own_defs(stmts: Sequence[_Stmt], lines: Sequence[str], target: CellRef) -> tuple[_Unit, ...]:
    """The units to replace in place in ``target`` when ``stmts`` are only some of its definitions."""
    names = {stmt.name for stmt in stmts}
    if not stmts or any(s.kind != "def" or s.name not in target.defines for s in stmts):
        return ()
    try:
        tree = ast.parse(target.source)
    except SyntaxError:
        return tuple(_unit(s, lines) for s in stmts) if set(target.defines) - names else ()
    if all(isinstance(node, _DEFS) and node.name in names for node in tree.body):
        return ()  # the block is the whole cell
    return tuple(_unit(s, lines) for s in stmts)


def _take_companions(
    stmts: Sequence[_Stmt],
    moved: dict[int, CellRef],
    lines: Sequence[str],
    target: CellRef,
    cells: Sequence[CellRef],
) -> None:
    """Move the imports and new helpers of a block along with its moved definitions, when what
    is left of the block without them is the target cell unchanged (or nothing)."""
    companions = [
        i
        for i, s in enumerate(stmts)
        if i not in moved
        and (s.kind == "import" or (s.kind == "def" and not any(s.name in c.defines for c in cells)))
    ]
    if not companions or _norm(_remainder(lines, [stmts[i] for i in moved])) == _norm(target.source):
        return
    without = _remainder(lines, [stmts[i] for i in [*moved, *companions]])
    if _norm(without) and _norm(without) != _norm(target.source):
        return
    anchors = sorted(moved)
    for i in companions:
        moved[i] = moved[next((a for a in anchors if a > i), anchors[-1])]


def _moved_edits(stmts: Sequence[_Stmt], moved: dict[int, CellRef], lines: Sequence[str]) -> list[_Edit]:
    """One in-place edit per cell the moved definitions go to (imports and helpers join the next one)."""
    units: dict[str, list[_Unit]] = {}
    pending: dict[str, list[str]] = {}
    for i in sorted(moved):
        owner, unit = moved[i], _unit(stmts[i], lines)
        if unit.name in owner.defines:
            text = _join([*pending.pop(owner.key, []), unit.text])
            units.setdefault(owner.key, []).append(_Unit(unit.name, text, unit.comment))
        elif unit.text not in owner.source:
            pending.setdefault(owner.key, []).append(unit.text)
    for key, texts in pending.items():  # after the cell's last definition
        last = units[key][-1]
        units[key][-1] = _Unit(last.name, _join([last.text, *texts]), last.comment)
    return [_Edit(key, units=tuple(found)) for key, found in units.items()]


def _join(texts: Sequence[str]) -> str:
    """Top-level pieces of code as one: two blank lines between, none between two imports."""
    joined = texts[0]
    for before, text in itertools.pairwise(texts):
        joined += ("\n" if _IMPORT.match(before) and _IMPORT.match(text) else "\n\n\n") + text
    return joined


def _remainder(lines: Sequence[str], removed: Sequence[_Stmt]) -> str:
    """The block without the ``removed`` statements (and the blank lines after each)."""
    drop: set[int] = set()
    for stmt in removed:
        end = stmt.end
        while end < len(lines) and not lines[end].strip():
            end += 1
        drop.update(range(stmt.start, end))
    return _clean("\n".join(line for i, line in enumerate(lines) if i not in drop))


# --------------------------------------------------------------------------- applying


def _apply(edits: Sequence[_Edit], cells: Sequence[CellRef]) -> dict[str, str]:
    """Each cell's source after the edits, in order (a later whole source wins)."""
    current = {c.key: c.source for c in cells}
    defines = {c.key: c.defines for c in cells}
    for edit in edits:
        if edit.source is not None:
            current[edit.key] = edit.source
        else:
            current[edit.key] = _replace(current[edit.key], edit.units, defines[edit.key])
    return current


def _replace(source: str, units: Sequence[_Unit], defines: Sequence[str]) -> str:
    """``source`` with each unit's definition replaced in place (appended when it has none)."""
    latest = list({unit.name: unit for unit in units}.values())
    try:
        tree: ast.Module | None = ast.parse(source)
    except SyntaxError:
        tree = None
        if set(defines) <= {unit.name for unit in latest}:
            return _join([unit.text for unit in latest])
    lines = source.splitlines(keepends=True)
    spans: list[tuple[int, int, _Unit]] = []
    missing: list[str] = []
    for unit in latest:
        span = _ast_span(tree, lines, unit) if tree else _regex_span(lines, unit)
        if span is None:
            missing.append(unit.text)
        else:
            spans.append((*span, unit))
    for start, end, unit in sorted(spans, key=lambda span: span[0], reverse=True):
        lines[start:end] = [unit.text + ("\n" if lines[end - 1].endswith("\n") else "")]
    kept = "".join(lines)
    return _join([kept.rstrip(), *missing]) if missing and kept.strip() else kept or _join(missing)


def _ast_span(tree: ast.Module, lines: Sequence[str], unit: _Unit) -> tuple[int, int] | None:
    """Lines ``start:end`` of the last top-level definition of ``unit.name`` in a cell that parses."""
    floor, span = 0, None
    for node in tree.body:
        if isinstance(node, _DEFS) and node.name == unit.name:
            first = _first_line(node)
            span = (
                _comment_start(lines, first, floor) if unit.comment else first,
                node.end_lineno or node.lineno,
            )
        floor = node.end_lineno or node.lineno
    return span


def _regex_span(lines: Sequence[str], unit: _Unit) -> tuple[int, int] | None:
    """The lines of ``def name(``/``class name`` up to the next top-level statement, in a cell
    that does not parse."""
    name = re.escape(unit.name)
    head = re.compile(rf"(?:async\s+)?def\s+{name}\s*\(|class\s+{name}\b")
    starts = [i for i, line in enumerate(lines) if head.match(line)]
    if not starts:
        return None
    start = starts[-1]
    end = start + 1
    while end < len(lines) and not _top_level(lines[end]):
        end += 1
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1
    while start > 0 and lines[start - 1].startswith("@"):
        start -= 1
    return (_comment_start(lines, start, 0) if unit.comment else start), end


def _top_level(line: str) -> bool:
    return bool(line.strip()) and not line[0].isspace() and not line.startswith(("#", ")", "]", "}"))


# --------------------------------------------------------------------------- text


def _dedent(code: str) -> str:
    """``textwrap.dedent`` that keeps whitespace-only lines as they are (a docstring's blank line
    indented like its text is part of the cell, byte for byte)."""
    lines = code.split("\n")
    indents = [len(line) - len(line.lstrip(" \t")) for line in lines if line.strip()]
    cut = min(indents, default=0)
    if not cut:
        return code
    return "\n".join(line[cut:] if line.strip() else line[: max(len(line) - cut, 0)] for line in lines)


def _clean(code: str) -> str:
    """``code`` without blank lines at its start nor trailing whitespace at its end."""
    return re.sub(r"\A(?:[ \t]*\n)+", "", code).rstrip()


def _norm(code: str) -> str:
    """``code`` for comparison: trailing whitespace stripped per line, no blank lines at both ends."""
    return "\n".join(line.rstrip() for line in code.splitlines()).strip("\n")

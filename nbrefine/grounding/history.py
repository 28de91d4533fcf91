"""The notebook's history, for the repair prompt: which cells ran, in which order, which cell
last defined each name the failing code uses, and what looks stale.

Notebook crashes are often caused by an earlier cell or by stale state (a cell edited and not
re-run, cells run out of order, a name left behind by a deleted cell). The adapter records
only O(1) facts per executed cell (its execution count, notebook cell id and, optionally,
the time it ran); everything here runs lazily, once a cell has failed. No IPython import.

- :func:`analyse` -> :class:`HistoryReport` (``render(budget)`` is the prompt section);
- :func:`cross_cell_target` / :func:`defining_cell`: the cell that defined the function or
  class the error was raised in, matched through the per-cell file names IPython and
  ipykernel compile cells under (their source is in :mod:`linecache`);
- :func:`notebook_cells` / :func:`notebook_path`: the notebook as saved on disk;
- :func:`free_names`: the names a cell reads without binding them first (from
  :mod:`nbrefine.grounding.scope`, the one scope analysis this module reads cells with).

May import: the standard library, nbformat (lazily) and the grounding modules below it (scope,
ipython_names, text, redaction).
"""

from __future__ import annotations

import builtins
import itertools
import linecache
import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from .cellfacts import readonly_reason, user_text
from .ipython_names import is_ipython_name
from .redaction import Redactor
from .scope import free_names, is_ipython_syntax, light_transform, parse, scan
from .text import clip

__all__ = [
    "CellTarget",
    "ExecutedCell",
    "HistoryReport",
    "NotebookCell",
    "analyse",
    "cross_cell_target",
    "defining_cell",
    "free_names",
    "notebook_cells",
    "notebook_path",
]

#: How many cells the dependency walk follows (names used by the cells that define the
#: names the failing code uses, and so on) and how many warnings a report keeps.
_DEPTH = 2
_MAX_DEPENDENCIES = 40
_MAX_WARNINGS = 8

#: Cell magics whose body is Python that runs in the user namespace.
_PYTHON_BODY_MAGICS = frozenset({"refine", "time", "capture"})
_IPYTHON_INPUT = re.compile(r"^<ipython-input-(\d+)-[0-9a-f]+>$")
_CUT = "\n[... truncated]"  # the end of a history section cut to its budget
_RESET = re.compile(r"^\s*%reset\b(?!_)(?!.*\b(in|out|dhist|array)\b)", re.M)
_RUN = re.compile(r"^\s*%run\b", re.M)


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class ExecutedCell:
    """One cell the kernel ran (a stored run: ``In[count]``)."""

    count: int
    source: str  # as typed: IPython's ``history_manager.input_hist_raw[count]``
    cell_id: str | None = None  # the nbformat cell id (``ExecutionInfo.cell_id``)
    code: str | None = None  # the Python IPython ran (``In[count]``); None: derived from source
    ran_at: float | None = None  # time.time() after it ran; lets analyse tell edits from unsaved runs
    failed: bool = False  # the run raised (and no accepted fix ran in its place since)


@dataclass(frozen=True)
class NotebookCell:
    """A code cell of the notebook as saved on disk (a list of them is in notebook order)."""

    cell_id: str
    source: str
    readonly: str = ""  # why the notebook says it may not change (nbgrader test cell, editable false)
    #: what its latest run did, where the caller knows (``nbrefine fix`` does): "ok", "failed",
    #: "not_run"; None: unknown (the notebook as saved on disk)
    status: str | None = None
    count: int | None = None  # the execution count of its latest run, where known
    solution: bool = False  # an nbgrader solution cell: where a student's fix goes


@dataclass(frozen=True)
class HistoryReport:
    """What :func:`analyse` found; :meth:`render` is the prompt section."""

    executed: tuple[ExecutedCell, ...]  # execution order (cell ids inferred from the notebook filled in)
    definers: dict[str, int]  # name the code uses -> execution count of the cell that last bound it
    warnings: tuple[str, ...]  # stale state, plain sentences
    indirect: dict[str, int] = field(default_factory=dict)  # names those cells use, same mapping

    def render(self, budget_chars: int, redactor: Redactor | None = None) -> str:
        """The history section, at most ``budget_chars`` characters.

        Warnings, then where each name was defined, then the cells in execution order,
        chosen most relevant first (the definers, then the most recent) and each clipped;
        the cells left out are marked ``[... N earlier cells not shown]``. Each cell's
        source is redacted (:meth:`Redactor.redact_code`) *before* it is clipped, so a
        secret is never shown in part; without a ``redactor``, one that knows no
        environment still redacts what the code's structure marks as secret."""
        return _render(self, budget_chars, redactor or Redactor(environ={}))


@dataclass(frozen=True)
class CellTarget:
    """The error was raised in code that another cell defined: that cell is where to look."""

    cell: ExecutedCell  # the cell as it ran (cell_id filled in from the notebook when it can be)
    function: str  # the code object's name: the function, method or class body
    lineno: int  # the failing line, 1-based within that cell's Python
    line: str

    @property
    def cell_id(self) -> str | None:
        return self.cell.cell_id

    @property
    def source(self) -> str:
        return self.cell.source

    def note(self) -> str:
        """One sentence for the prompt's notes."""
        where = "" if self.function in ("", "<module>") else f" inside `{self.function}`"
        line = f": `{self.line.strip()}`" if self.line.strip() else ""
        return (
            f"The error was raised{where}, which {_name_cell(self.cell)} defined "
            f"(line {self.lineno} of that cell{line}); the fix may belong in that cell."
        )


# --------------------------------------------------------------------------- per-cell facts


@dataclass(frozen=True)
class _Facts:
    """What one cell's source binds, deletes and reads at module level (cached by source)."""

    effects: tuple[tuple[str, bool], ...]  # (name, bound?) for each name, the last effect, in order
    spans: Mapping[str, tuple[int, int]]  # name -> raw-source lines of the statement that bound it
    loads: frozenset[str]
    dynamic: tuple[str, ...]  # "from m import *", "%run": may define names nobody can see
    resets: bool  # %reset: the namespace was cleared before this cell's own effects


@lru_cache(maxsize=2048)
def _facts(source: str, code: str | None) -> _Facts:
    python, offset = _python_of(source, code)
    tree = parse(python)
    if tree is None and code is not None:  # IPython's translation did not parse: try ours
        python, offset = _python_of(source, None)
        tree = parse(python)
    dynamic = ("%run",) if _RUN.search(source) else ()
    resets = bool(_RESET.search(source))
    names = scan(tree) if tree is not None else scan("")
    effects = dict(names.effects)
    lines = dict(names.lines)
    first = source.lstrip().split("\n", 1)[0]
    if first.startswith("%%capture"):  # %%capture [options] name binds name
        words = [w for w in first.split()[1:] if not w.startswith("-")]
        if words and words[-1].isidentifier():
            effects[words[-1]] = True
            lines[words[-1]] = (1 - offset, 1 - offset)  # the magic's own line
    return _Facts(
        effects=tuple(effects.items()),
        spans={name: (start + offset, end + offset) for name, (start, end) in lines.items()},
        loads=frozenset(names.free),
        dynamic=(*names.star_imports, *dynamic),
        resets=resets,
    )


def _python_of(source: str, code: str | None) -> tuple[str, int]:
    """The Python text to scan, and how many raw-source lines precede it."""
    stripped = source.lstrip("\n")
    lead = len(source) - len(stripped)
    if stripped.startswith("%%"):
        first, _, body = stripped.partition("\n")
        magic = first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""
        if magic in _PYTHON_BODY_MAGICS:
            return light_transform(body), lead + 1
        return "", 0  # %%bash, %%html, %%timeit (runs in a function): binds nothing here
    if code is not None:
        return code, 0
    return light_transform(source), 0


# --------------------------------------------------------------------------- analyse


def analyse(
    executed: Sequence[ExecutedCell],
    names: Iterable[str],
    notebook: Sequence[NotebookCell] | None = None,
    *,
    namespace: Collection[str] | None = None,
    current_cell_id: str | None = None,
    saved_at: float | None = None,
) -> HistoryReport:
    """Which executed cell last defined each of ``names``, and what looks stale.

    ``executed``: the stored runs of this kernel session, excluding the failing run.
    ``names``: the names the failing code reads (:func:`free_names`). ``notebook``: the
    notebook as saved (:func:`notebook_cells`), for the edited / out-of-order / deleted
    checks. ``namespace``: the user namespace's names (a name nobody defined is reported
    only if it exists there). ``current_cell_id``: the failing cell's id. ``saved_at``: the
    notebook file's mtime; with each cell's ``ran_at`` it tells an edited cell from one
    that ran after the last save (whose saved source may simply be older)."""
    cells = _dedupe(executed)
    nb_index = {cell.cell_id: i for i, cell in enumerate(notebook or ())}
    nb_source = {cell.cell_id: cell.source for cell in notebook or ()}
    if notebook is not None:
        cells = _infer_ids(cells, notebook)
    wanted = list(dict.fromkeys(n for n in names if not is_ipython_name(n)))

    # Newest first, parsing only the cells whose text mentions a name still unresolved: the
    # cost follows the cells that matter, not the length of the session.
    last_reset = max(
        (i for i, c in enumerate(cells) if "%reset" in c.source and _RESET.search(c.source)), default=0
    )
    active = cells[last_reset:]
    definer: dict[str, ExecutedCell] = {}
    deleted: dict[str, ExecutedCell] = {}

    patterns: dict[str, re.Pattern[str]] = {}

    def resolve(pending: list[str]) -> None:
        pending = [n for n in pending if n not in definer and n not in deleted]
        for name in pending:  # the name as a word, not an attribute
            patterns[name] = re.compile(rf"(?<![\w.]){re.escape(name)}(?!\w)")
        for cell in reversed(active):
            if not pending:
                return
            hits = [n for n in pending if n in cell.source and patterns[n].search(cell.source)]
            if not hits:
                continue
            effects = dict(_facts(cell.source, cell.code).effects)
            for name in hits:
                if name in effects:
                    (definer if effects[name] else deleted)[name] = cell
                    pending.remove(name)

    resolve(wanted)
    direct = {name: definer[name] for name in wanted if name in definer}
    indirect: dict[str, ExecutedCell] = {}
    frontier = list(dict.fromkeys(direct.values()))
    seen = set(wanted)
    for _ in range(_DEPTH):
        loads = sorted(
            {n for c in frontier for n in _facts(c.source, c.code).loads} - seen - set(dir(builtins))
        )
        loads = [n for n in loads if not is_ipython_name(n)]
        seen.update(loads)
        resolve(loads)
        found = {n: definer[n] for n in loads if n in definer}
        indirect.update(list(found.items())[: max(_MAX_DEPENDENCIES - len(indirect), 0)])
        frontier = list(dict.fromkeys(found.values()))

    context = _Context(nb_index, nb_source, cells, saved_at, notebook is not None)
    warnings: list[str] = []
    for name, cell in {**direct, **indirect}.items():
        warnings.extend(context.edited(name, cell))
        warnings.extend(context.deleted_cell(name, cell))
    warnings.extend(context.order([*direct.values(), *indirect.values()], current_cell_id))
    for name in wanted:
        if name in definer:
            continue
        if name in deleted and (namespace is None or name not in namespace):
            warnings.append(f"`{name}` was deleted by {_name_cell(deleted[name])}.")
        elif namespace is not None and name in namespace and not hasattr(builtins, name):
            dynamic = [
                (cell, what)
                for cell in active
                if "import *" in cell.source or "%run" in cell.source
                for what in _facts(cell.source, cell.code).dynamic
            ]
            warnings.append(_undefined(name, dynamic))
    return HistoryReport(
        executed=tuple(cells),
        definers={name: cell.count for name, cell in direct.items()},
        warnings=tuple(dict.fromkeys(warnings))[:_MAX_WARNINGS],
        indirect={name: cell.count for name, cell in indirect.items()},
    )


def _dedupe(executed: Sequence[ExecutedCell]) -> list[ExecutedCell]:
    by_count: dict[int, ExecutedCell] = {}
    for cell in executed:
        by_count[cell.count] = cell
    return [by_count[count] for count in sorted(by_count)]


def _infer_ids(cells: list[ExecutedCell], notebook: Sequence[NotebookCell]) -> list[ExecutedCell]:
    """Cells that ran without an id get the id of the one saved cell with the same source."""
    if all(cell.cell_id is not None for cell in cells):
        return cells
    owners: dict[str, list[str]] = {}
    for nb_cell in notebook:
        owners.setdefault(_norm(nb_cell.source), []).append(nb_cell.cell_id)
    out = []
    for cell in cells:
        if cell.cell_id is None:
            ids = owners.get(_norm(cell.source), [])
            if len(ids) == 1:
                cell = replace(cell, cell_id=ids[0])
        out.append(cell)
    return out


def _norm(source: str) -> str:
    lines = [line.rstrip() for line in source.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def _name_cell(cell: ExecutedCell) -> str:
    return f"In [{cell.count}] (cell '{cell.cell_id}')" if cell.cell_id else f"In [{cell.count}]"


def _undefined(name: str, dynamic: list[tuple[ExecutedCell, str]]) -> str:
    text = (
        f"`{name}` exists in the kernel, but no cell run in this session defines it "
        "(a %run script, a startup file, an extension, or a cell whose run was not recorded)"
    )
    if dynamic:
        cell, what = dynamic[-1]
        text += f"; {_name_cell(cell)} has `{what}`, which may define it"
    return text + "."


@dataclass
class _Context:
    nb_index: dict[str, int]
    nb_source: dict[str, str]
    cells: list[ExecutedCell]
    saved_at: float | None
    have_notebook: bool

    def _saved_after(self, cell: ExecutedCell) -> bool | None:
        """Whether the notebook was saved after ``cell`` ran; None: unknown."""
        if self.saved_at is None or cell.ran_at is None:
            return None
        return self.saved_at >= cell.ran_at

    def _hedge(self, cell: ExecutedCell) -> str:
        return " (or the notebook was not saved since)" if self._saved_after(cell) is None else ""

    def edited(self, name: str, cell: ExecutedCell) -> list[str]:
        if cell.cell_id is None:
            return []
        later = [c for c in self.cells if c.cell_id == cell.cell_id and c.count > cell.count]
        if later:  # re-run since, and the new version no longer binds the name
            return [
                f"`{name}` comes from {_name_cell(cell)}, an earlier version of that cell: its latest "
                f"run, In [{later[-1].count}], no longer defines `{name}`, so the kernel holds a stale value."
            ]
        saved = self.nb_source.get(cell.cell_id)
        if saved is None or _same_text(saved, cell.source) or self._saved_after(cell) is False:
            return []
        lost = dict(_facts(saved, None).effects).get(name) is not True
        tail = f"; its current source no longer defines `{name}`" if lost else ""
        return [
            f"`{name}` was last defined by {_name_cell(cell)}, which has been edited since it ran "
            f"and not re-run{self._hedge(cell)}: the kernel has the old version's result{tail}."
        ]

    def deleted_cell(self, name: str, cell: ExecutedCell) -> list[str]:
        if not self.have_notebook or cell.cell_id is None or cell.cell_id in self.nb_index:
            return []
        if self._saved_after(cell) is False:
            return []
        return [
            f"`{name}` only exists because of {_name_cell(cell)}, which is no longer in the notebook"
            f"{self._hedge(cell)}: a restart and Run All would not define it."
        ]

    def order(self, dependencies: list[ExecutedCell], current: str | None) -> list[str]:
        latest: dict[str, ExecutedCell] = {}
        for cell in dependencies:
            if cell.cell_id in self.nb_index and (
                cell.cell_id not in latest or latest[cell.cell_id].count < cell.count
            ):
                latest[cell.cell_id] = cell
        ordered = sorted(latest.values(), key=lambda c: self.nb_index[c.cell_id or ""])
        swapped = [(a, b) for a, b in itertools.pairwise(ordered) if a.count > b.count]
        out = [
            f"{_name_cell(above)} is above {_name_cell(below)} in the notebook but ran after it "
            "(cells this code depends on ran out of order)."
            for above, below in swapped[:3]
        ]
        if len(swapped) > 3:
            out.append(f"{len(swapped) - 3} more pairs of the cells this code depends on ran out of order.")
        if current is not None and current in self.nb_index:
            here = self.nb_index[current]
            below = [cell for cell in ordered if self.nb_index[cell.cell_id or ""] > here]
            if below:
                them = ", ".join(_name_cell(c) for c in below[:4]) + (" and others" if len(below) > 4 else "")
                verb, obj = ("is", "it") if len(below) == 1 else ("are", "them")
                out.append(
                    f"{them} {verb} below the failing cell in the notebook, yet it depends on {obj}: "
                    "running the notebook from the top would fail here."
                )
        return out


# --------------------------------------------------------------------------- render


def _render(report: HistoryReport, budget: int, redactor: Redactor) -> str:
    if budget <= 0:
        return ""
    by_count = {cell.count: cell for cell in report.executed}
    head: list[str] = []
    if report.warnings:
        head.append("Stale state (check these first):")
        head.extend(f"- {w}" for w in report.warnings)
    if report.definers or report.indirect:
        head.append("Where the names this code uses were last defined:")
        for name, count in report.definers.items():
            head.append(f"- {name}: {_name_cell(by_count[count])}{_failed_mark(by_count[count])}")
        for name, count in report.indirect.items():
            cell = by_count[count]
            head.append(f"- {name} (used by those cells): {_name_cell(cell)}{_failed_mark(cell)}")
    head_text = _clip_lines(head, max(budget * 3 // 5, min(budget, 300)))

    relevant: list[int] = list(dict.fromkeys([*report.definers.values(), *report.indirect.values()]))
    recent = [c.count for c in reversed(report.executed) if c.count not in relevant]
    defines: dict[int, list[str]] = {}
    for name, count in [*report.definers.items(), *report.indirect.items()]:
        defines.setdefault(count, []).append(name)

    total = len(report.executed)
    title = f"Cells run in this session, in execution order ({total} run"
    room = budget - len(head_text) - len(title) - 40
    # Re-runs of the same cell with the same source are shown once, under all their counts.
    groups: dict[tuple[str | None, str], list[int]] = {}
    for cell in report.executed:
        groups.setdefault((cell.cell_id, _norm(cell.source)), []).append(cell.count)
    group_of = {count: key for key, counts in groups.items() for count in counts}

    chosen: dict[tuple[str | None, str], str] = {}
    for count in [*relevant, *recent]:
        key = group_of[count]
        if key in chosen:
            continue
        is_relevant = count in defines
        cap = max(300, budget // 3) if is_relevant else max(160, budget // 6)
        # A definer is clipped to what room is left; another cell is shown at its cap or not at all.
        limit = min(cap, room - 30) if is_relevant else cap
        block = _cell_block(by_count, groups[key], defines, limit, redactor)
        if block is None or len(block) + 1 > room - 30:
            if is_relevant:
                continue
            break  # the rest are older and less relevant: stop here
        chosen[key] = block
        room -= len(block) + 1

    shown_counts = {c for key in chosen for c in groups[key]}
    lines: list[str] = []
    skipped = 0
    for cell in report.executed:
        key = group_of[cell.count]
        if cell.count not in shown_counts:
            skipped += 1
            continue
        if cell.count != groups[key][-1]:
            continue  # a group is shown at its latest run
        if skipped:
            lines.append(_gap(skipped, first=not lines))
            skipped = 0
        lines.append(chosen[key])
    if skipped:
        lines.append(f"[... {skipped} later cell{'s' if skipped != 1 else ''} not shown]")
    shown = len(shown_counts)
    parts = [head_text] if head_text else []
    if total:
        parts.append(f"{title}; {shown} shown):" if shown < total else f"{title}):")
        parts.extend(lines)
    else:
        parts.append("No cells have run in this session before this one.")
    text = "\n".join(parts)
    return text if len(text) <= budget else clip(text, budget, _CUT)


def _same_text(saved: str, ran: str) -> bool:
    """The notebook's cell and the source that ran are the same cell text: a ``%%refine`` line
    above either (nbrefine fix puts one above every cell it runs) does not count."""
    return _norm(user_text(saved)[0]) == _norm(user_text(ran)[0])


def _failed_mark(cell: ExecutedCell) -> str:
    return " (but that run failed: the name may not be bound as the cell says)" if cell.failed else ""


def _gap(n: int, first: bool) -> str:
    return (
        f"[... {n} earlier cell{'s' if n != 1 else ''} not shown]"
        if first
        else (f"[... {n} cell{'s' if n != 1 else ''} not shown]")
    )


def _cell_block(
    by_count: dict[int, ExecutedCell],
    counts: list[int],
    defines: dict[int, list[str]],
    limit: int,
    redactor: Redactor,
) -> str | None:
    if limit < 60:
        return None
    cell = by_count[counts[-1]]
    label = ", ".join(f"In [{c}]" for c in counts[-4:])
    if len(counts) > 4:
        label = f"{len(counts)} runs, the latest {label}"
    cell_part = f" (cell '{cell.cell_id}')" if cell.cell_id else ""
    names = [n for c in counts for n in defines.get(c, [])]
    header = f"{label}{cell_part}" + (f", defines {', '.join(names)}:" if names else ":")
    if cell.failed:
        header = header.replace(", defines ", ", would define ").rstrip(":") + " (its run FAILED):"
    spans = _facts(cell.source, cell.code).spans if names else {}
    text, dropped = user_text(cell.source)  # the %%refine line nbrefine fix put there is not the user's
    keep = [(start - dropped, end - dropped) for start, end in (spans[n] for n in names if n in spans)]
    body = _clip_source(redactor.redact_code(text), limit - len(header) - 1, keep)
    if body is None:
        return None
    return f"{header}\n{body}"


def _clip_source(source: str, limit: int, keep: list[tuple[int, int]]) -> str | None:
    """The source indented by four spaces, at most ``limit`` characters: the lines in
    ``keep`` (1-based inclusive ranges) first, then lines from the top; gaps marked."""
    lines = _norm(source).split("\n") if source.strip() else ["(empty)"]
    rendered = ["    " + line for line in lines]
    if sum(len(r) + 1 for r in rendered) <= limit:
        return "\n".join(rendered)
    width = max(limit // 3, 40)
    rendered = [r if len(r) <= width else r[: width - 5] + " […]" for r in rendered]
    wanted = list(dict.fromkeys(i for start, end in keep for i in range(start - 1, min(end, len(lines)))))
    wanted = [i for i in wanted if i >= 0]
    reserve = 32 * (len(keep) + 2)  # the gap markers
    picked: list[int] = []
    used = 0
    for i in wanted:
        if used + len(rendered[i]) + 1 + reserve > limit:
            break
        picked.append(i)
        used += len(rendered[i]) + 1
    chosen = set(picked)
    for i in range(len(lines)):
        if i in chosen:
            continue
        if used + len(rendered[i]) + 1 + reserve > limit:
            break
        picked.append(i)
        chosen.add(i)
        used += len(rendered[i]) + 1
    while picked:
        text = _with_gaps(rendered, set(picked))
        if len(text) <= limit:
            return text
        picked.pop()
    return None


def _with_gaps(rendered: list[str], picked: set[int]) -> str:
    out: list[str] = []
    gap = 0
    for i, text in enumerate(rendered):
        if i in picked:
            if gap:
                out.append(f"    [... {gap} line{'s' if gap != 1 else ''}]")
                gap = 0
            out.append(text)
        else:
            gap += 1
    if gap:
        out.append(f"    [... {gap} more line{'s' if gap != 1 else ''}]")
    return "\n".join(out)


def _clip_lines(lines: list[str], limit: int) -> str:
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        if used + len(line) + 1 > limit - 40:
            out.append(f"[... {len(lines) - i} more line{'s' if len(lines) - i != 1 else ''}]")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


# --------------------------------------------------------------------------- cross-cell


def defining_cell(
    filename: str,
    executed: Sequence[ExecutedCell],
    linecache_lines: Sequence[str] | None = None,
    *,
    counts: Mapping[str, int] | None = None,
) -> ExecutedCell | None:
    """The executed cell whose source was compiled under ``filename``.

    IPython compiles each cell under ``<ipython-input-N-hash>``, ipykernel under a temp-file
    name hashed from the source; both put the cell's Python in :mod:`linecache` under that
    name (``linecache_lines``; None: read from linecache). ``counts`` is IPython's own map of
    file name to execution count (``shell.compile._filename_map``), used when it agrees with
    the source. The source match prefers the newest run."""
    lines = list(linecache_lines) if linecache_lines is not None else _cached_lines(filename)
    text = _norm("".join(lines))
    by_count = {cell.count: cell for cell in executed}
    hint = counts.get(filename) if counts is not None else None
    match = _IPYTHON_INPUT.match(filename)
    if hint is None and match:
        hint = int(match.group(1))
    hinted = by_count.get(hint) if hint is not None else None
    if hinted is not None and (not text or _same_code(hinted, text)):
        return hinted
    if not text:
        return None
    for cell in reversed(executed):
        if _same_code(cell, text):
            return cell
    return None


def _cached_lines(filename: str) -> list[str]:
    entry = linecache.cache.get(filename)
    if entry is not None and len(entry) >= 3:
        return list(entry[2])
    return []


def _same_code(cell: ExecutedCell, text: str) -> bool:
    """Whether ``text`` (normalised) is what IPython compiled for ``cell``."""
    raws = [cell.source]
    stripped = cell.source.lstrip("\n")
    if stripped.startswith("%%"):
        raws.append(stripped.partition("\n")[2])  # %%refine / %%time run the body
    candidates = raws + ([cell.code] if cell.code is not None else [])
    if any(_norm(candidate) == text for candidate in candidates):
        return True
    # IPython syntax in the cell: its lines are translated, the others are identical.
    code_lines = text.split("\n")
    for raw in raws:
        raw_lines = _norm(raw).split("\n")
        if len(raw_lines) != len(code_lines):
            continue
        syntax = [is_ipython_syntax(r) for r in raw_lines]
        if any(syntax) and all(s or r == c for s, r, c in zip(syntax, raw_lines, code_lines, strict=True)):
            return True
    return False


def cross_cell_target(
    exc: BaseException,
    executed: Sequence[ExecutedCell],
    user_globals: Mapping[str, Any],
    *,
    counts: Mapping[str, int] | None = None,
    notebook: Sequence[NotebookCell] | None = None,
    current_cell_id: str | None = None,
) -> CellTarget | None:
    """When the innermost notebook frame of ``exc`` is code another cell defined (a function,
    a method, a class body), that cell; None when the error is in the failing cell itself or
    the defining cell is not among ``executed``.

    Notebook frames are those whose globals are ``user_globals``; the failing cell is the
    outermost such module-level frame. Code from an earlier run of the failing cell itself
    (``current_cell_id``) is no other cell: None (analyse reports it as stale)."""
    tb = exc.__traceback__
    outer: str | None = None
    inner: tuple[str, int, str] | None = None
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_globals is user_globals:
            code = frame.f_code
            if outer is None and code.co_name == "<module>":
                outer = code.co_filename
            inner = (code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    if inner is None or inner[0] == outer:
        return None
    filename, lineno, function = inner
    lines = _cached_lines(filename)
    cell = defining_cell(filename, executed, lines, counts=counts)
    if cell is None:
        return None
    if cell.cell_id is None and notebook is not None:
        cell = _infer_ids([cell], notebook)[0]
    if current_cell_id is not None and cell.cell_id == current_cell_id:
        return None
    line = lines[lineno - 1].rstrip("\n") if 0 < lineno <= len(lines) else ""
    return CellTarget(cell=cell, function=function, lineno=lineno, line=line)


# --------------------------------------------------------------------------- the saved notebook


def notebook_path(user_ns: Mapping[str, Any]) -> str | None:
    """The notebook file of this kernel, if the frontend said: ``__session__`` (ipykernel, set
    from ``JPY_SESSION_NAME`` by Jupyter Server: JupyterLab, Notebook 7) or
    ``__vsc_ipynb_file__`` (VS Code). None when unknown or not an existing .ipynb file."""
    for key in ("__session__", "__vsc_ipynb_file__"):
        value = user_ns.get(key)
        if isinstance(value, str) and value.endswith(".ipynb") and os.path.isfile(value):
            return os.path.abspath(value)
    return None


def notebook_cells(path: str) -> list[NotebookCell] | None:
    """The code cells of the notebook saved at ``path``, in order; None on any problem
    (unreadable, not a notebook, or cells without ids: nbformat < 4.5). Never raises."""
    try:
        import nbformat

        read: Any = nbformat.read  # untyped
        nb = read(path, as_version=4)
        cells = []
        missing = 0
        for cell in nb.cells:
            if cell.get("cell_type") != "code":
                continue
            cell_id, source = cell.get("id"), cell.get("source", "")
            if isinstance(source, list):
                source = "".join(source)
            if not isinstance(cell_id, str) or not isinstance(source, str):
                missing += 1
                continue
            metadata = cell.get("metadata") or {}
            nbgrader = metadata.get("nbgrader") or {}
            cells.append(
                NotebookCell(
                    cell_id=cell_id,
                    source=source,
                    readonly=readonly_reason(metadata),
                    solution=bool(isinstance(nbgrader, dict) and nbgrader.get("solution")),
                )
            )
        if missing and not cells:
            return None
        return cells
    except Exception:  # a notebook being written, a non-notebook file, a bad JSON: no history
        return None

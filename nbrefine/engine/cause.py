"""Where a failure is caused, found before anyone is asked: the cell to repair may not be the cell
where the error surfaced.

:func:`find_cause` reads the failing cell, its failure, the kernel's history and (where the
adapter knows it) the notebook's cells in order, and says which of five situations it is:

- ``here``: the failing cell itself is where to look;
- ``raised_in``: the error was raised inside a function or class another cell defined;
- ``checked``: a failed ``assert`` (or ``-t`` check) calls functions, classes or objects that
  another cell defined (``assert search(x, s) == 6``): that cell is a candidate for the fix, and
  a cell of checks never changes;
- ``cascade``: a name the failing cell uses would have been bound by an earlier cell, but that
  cell failed: the earlier cell is the cause and the later one is not patched;
- ``below``: a name is bound only by a cell below that has not run: the fix is to run that cell
  first (move it above), never to invent a definition.

May import: the standard library, :mod:`nbrefine.grounding` and the engine's cells.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..grounding.capture import Failure
from ..grounding.cellfacts import bound_names, defined_names, is_checks_only, stored_keys, user_text
from ..grounding.history import CellTarget, ExecutedCell, NotebookCell, cross_cell_target
from ..grounding.ipython_names import is_ipython_name
from ..grounding.scope import free_names, parse
from .cells import CellRef

__all__ = ["Cause", "CauseKind", "Situation", "find_cause"]

CauseKind = Literal["here", "raised_in", "checked", "cascade", "below"]

#: How many cells already run that use a changed definition a trial re-runs as checks.
_MAX_DEPENDENTS = 8
_MAX_CAUSES = 3


def _as_is(code: str) -> str:
    return code


@dataclass(frozen=True)
class Situation:
    """Everything :func:`find_cause` reads: the failing cell, its failure and the notebook."""

    source: str  # the failing cell as the user wrote it (a %%refine line above it is dropped)
    error: BaseException | None
    failures: Sequence[Failure] = ()
    executed: Sequence[ExecutedCell] = ()  # the runs before the failing one, oldest first
    notebook: Sequence[NotebookCell] | None = None  # the notebook's code cells in order, if known
    namespace: Mapping[str, Any] = field(default_factory=dict)
    cell_id: str | None = None
    count: int | None = None  # the failing run's execution count
    counts: Mapping[str, int] | None = None  # compiled file name -> execution count (IPython's)
    checks: Sequence[str] = ()  # the user's -t checks
    transform: Callable[[str], str] = _as_is  # the kernel's syntax into Python


@dataclass(frozen=True)
class Cause:
    """Where the failure of :attr:`failing` is caused, and which cells a fix may touch."""

    kind: CauseKind
    failing: CellRef
    causes: tuple[CellRef, ...] = ()  # the cause cells (role "cause", or "moved" for kind below)
    names: tuple[str, ...] = ()  # the names that tie them to the failing cell
    dependents: tuple[CellRef, ...] = ()  # cells already run that use what the causes define
    target: CellTarget | None = None  # kind raised_in: where the error was raised

    @property
    def cells(self) -> tuple[CellRef, ...]:
        """The cells a candidate may be about, in notebook order as far as known: the causes, then
        the failing cell."""
        return (*self.causes, self.failing)

    @property
    def spans_cells(self) -> bool:
        return bool(self.causes)

    def sentence(self) -> str:
        """One sentence for the prompt's notes, the panel and the report."""
        names = ", ".join(f"`{n}`" for n in self.names)
        labels = " and ".join(c.label for c in self.causes)
        if self.kind == "raised_in" and self.target is not None:
            return self.target.note()
        if self.kind == "checked":
            several = len(self.causes) > 1
            where = (
                "define: the fix belongs in those cells"
                if several
                else "defines: the fix belongs in that cell"
            )
            return f"The failed check uses {names}, which {labels} {where}" + (
                "; the failing cell holds checks and must not change." if self.failing.readonly else "."
            )
        if self.kind == "cascade":
            return (
                f"{self.failing.label} fails because {labels} failed: that cell would have bound {names}. "
                f"Fix {labels} first; this cell is not patched."
            )
        if self.kind == "below":
            where = " and ".join(f"cell '{c.cell_id}'" if c.cell_id else c.label for c in self.causes)
            return (
                f"{names} is defined only by {where}, below this cell, which has not run: run it first "
                "(move it above this cell); do not define it again here."
            )
        return ""


def find_cause(situation: Situation) -> Cause:
    """Which cell causes the failure of ``situation``'s cell (see the module's docstring)."""
    failing = _failing_ref(situation)
    for finder in (_cascade, _below, _raised_in, _checked):
        cause = finder(situation, failing)
        if cause is not None:
            return cause
    return Cause("here", failing)


# --------------------------------------------------------------------------- the cells


def _key(cell_id: str | None, count: int | None) -> str:
    return cell_id or (f"In [{count}]" if count is not None else "the failing cell")


def _notebook_cell(situation: Situation, cell_id: str | None) -> NotebookCell | None:
    if cell_id is None or situation.notebook is None:
        return None
    return next((c for c in situation.notebook if c.cell_id == cell_id), None)


def _index(situation: Situation, cell_id: str | None) -> int | None:
    if cell_id is None or situation.notebook is None:
        return None
    return next((i for i, c in enumerate(situation.notebook) if c.cell_id == cell_id), None)


def _failing_ref(situation: Situation) -> CellRef:
    text, _ = user_text(situation.source)
    saved = _notebook_cell(situation, situation.cell_id)
    readonly = saved.readonly if saved is not None else ""
    if not readonly and is_checks_only(situation.transform(text)):
        readonly = "a cell of checks"
    return CellRef(
        key=_key(situation.cell_id, situation.count),
        source=text,
        role="failing",
        count=situation.count,
        cell_id=situation.cell_id,
        defines=defined_names(situation.transform(text)),
        readonly=readonly,
        index=_index(situation, situation.cell_id),
    )


def _ref(situation: Situation, cell: ExecutedCell, role: Literal["cause", "dependent"]) -> CellRef:
    text, _ = user_text(cell.source)
    saved = _notebook_cell(situation, cell.cell_id)
    if saved is not None and saved.status is not None and saved.count == cell.count:
        # the driver's copy is the cell byte for byte (IPython empties a cell magic's blank lines)
        text = user_text(saved.source)[0]
    return CellRef(
        key=_key(cell.cell_id, cell.count),
        source=text,
        role=role,
        count=cell.count,
        cell_id=cell.cell_id,
        defines=defined_names(situation.transform(text)),
        readonly=saved.readonly if saved is not None else "",
        index=_index(situation, cell.cell_id),
    )


def _latest_runs(situation: Situation) -> list[ExecutedCell]:
    """Each cell's latest run (by cell id where known), oldest first, without the failing cell."""
    latest: dict[str, ExecutedCell] = {}
    for cell in situation.executed:
        if situation.count is not None and cell.count == situation.count:
            continue
        latest[_key(cell.cell_id, cell.count)] = cell
    latest.pop(_key(situation.cell_id, situation.count), None)
    if situation.cell_id is not None:
        latest.pop(situation.cell_id, None)
    return sorted(latest.values(), key=lambda c: c.count)


def _binds(situation: Situation, cell: ExecutedCell) -> frozenset[str]:
    return bound_names(situation.transform(user_text(cell.source)[0]))


def _last_definer(situation: Situation, name: str) -> ExecutedCell | None:
    """The cell whose latest run last bound ``name``."""
    for cell in reversed(_latest_runs(situation)):
        if name in _binds(situation, cell):
            return cell
    return None


# --------------------------------------------------------------------------- the situations


def _missing_name(situation: Situation) -> str | None:
    error = situation.error
    if isinstance(error, NameError) and not isinstance(error, UnboundLocalError):
        name = getattr(error, "name", None)
        if isinstance(name, str) and name not in situation.namespace:
            return name
    return None


def _missing_key(situation: Situation) -> str | None:
    error = situation.error
    if isinstance(error, KeyError) and error.args and isinstance(error.args[0], str):
        return error.args[0]
    return None


def _cascade(situation: Situation, failing: CellRef) -> Cause | None:
    """A name (or a key) the failing cell needs would have been made by a cell whose run failed."""
    name, key = _missing_name(situation), _missing_key(situation)
    if name is None and key is None:
        return None
    definer = _last_definer(situation, name) if name is not None else None
    for cell in reversed(_latest_runs(situation)):
        if not cell.failed:
            continue
        code = situation.transform(user_text(cell.source)[0])
        if name is not None and definer in (None, cell) and name in bound_names(code):
            return Cause("cascade", failing, (_ref(situation, cell, "cause"),), (name,))
        if key is not None and key in stored_keys(code):
            return Cause("cascade", failing, (_ref(situation, cell, "cause"),), (key,))
    return None


def _below(situation: Situation, failing: CellRef) -> Cause | None:
    """A missing name that only a cell below the failing one binds, and that cell has not run."""
    name = _missing_name(situation)
    here = failing.index
    if name is None or here is None or situation.notebook is None or _last_definer(situation, name):
        return None
    ran = {c.cell_id for c in situation.executed if c.cell_id}
    for index, cell in enumerate(situation.notebook):
        if index <= here or cell.status == "ok" or (cell.status is None and cell.cell_id in ran):
            continue
        if name in bound_names(situation.transform(user_text(cell.source)[0])):
            moved = CellRef(
                key=cell.cell_id,
                source=user_text(cell.source)[0],
                role="moved",
                cell_id=cell.cell_id,
                defines=defined_names(situation.transform(cell.source)),
                readonly=cell.readonly,
                index=index,
            )
            return Cause("below", failing, (moved,), (name,))
    return None


def _raised_in(situation: Situation, failing: CellRef) -> Cause | None:
    if situation.error is None or not situation.executed:
        return None
    target = cross_cell_target(
        situation.error,
        situation.executed,
        situation.namespace,
        counts=situation.counts,
        notebook=situation.notebook,
        current_cell_id=situation.cell_id,
    )
    if target is None:
        return None
    cause = _ref(situation, target.cell, "cause")
    if cause.readonly:
        return None
    names = (target.function,) if target.function not in ("", "<module>") else ()
    return Cause("raised_in", failing, (cause,), names, _dependents(situation, (cause,)), target)


def _checked(situation: Situation, failing: CellRef) -> Cause | None:
    """A failed assert or check whose operands come from code another cell defined."""
    expressions = _failed_checks(situation, failing)
    names = [n for expr in expressions for n in free_names(expr) if not is_ipython_name(n)]
    names += _computed_from(situation.transform(failing.source), names)
    found: dict[str, tuple[ExecutedCell, list[str]]] = {}
    for name in dict.fromkeys(names):
        if not _user_defined(situation.namespace.get(name)) or name in failing.defines:
            continue
        cell = _last_definer(situation, name)
        if cell is None or cell.failed:
            continue
        found.setdefault(_key(cell.cell_id, cell.count), (cell, []))[1].append(name)
    causes = [_ref(situation, cell, "cause") for cell, _ in found.values()]
    causes = [c for c in causes if c.editable][:_MAX_CAUSES]
    if not causes:
        return None
    tied = tuple(n for c in causes for n in found[c.key][1])
    return Cause("checked", failing, tuple(causes), tied, _dependents(situation, tuple(causes)))


def _computed_from(code: str, names: list[str], depth: int = 2) -> list[str]:
    """The names the failing cell's own statements read to compute ``names``: in ``avg =
    mean(scores)`` then ``assert avg == 4``, the failed check's operand comes from ``mean``."""
    tree = parse(code)
    if tree is None:
        return []
    wanted, found = set(names), list[str]()
    for _ in range(depth):
        new: list[str] = []
        for statement in tree.body:
            if isinstance(statement, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                bound = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                if bound & wanted and statement.value is not None:
                    new += [n for n in free_names(ast.unparse(statement.value)) if n not in wanted]
        wanted.update(new)
        found += new
    return list(dict.fromkeys(found))


def _failed_checks(situation: Situation, failing: CellRef) -> list[str]:
    """The source of each failed assert of the failing cell, and each failed -t check."""
    out: list[str] = []
    code = situation.transform(failing.source)
    tree = parse(code)
    for failure in situation.failures:
        if failure.error_type != "AssertionError":
            continue
        if failure.where.startswith("check"):
            number = failure.where.removeprefix("check").strip()
            if number.isdigit() and 0 < int(number) <= len(situation.checks):
                out.append(situation.checks[int(number) - 1])
            continue
        if tree is None or failure.lineno is None:
            continue
        for statement in tree.body:
            if isinstance(statement, ast.Assert) and statement.lineno <= failure.lineno <= (
                statement.end_lineno or statement.lineno
            ):
                out.append(ast.unparse(statement.test))
    return out


def _user_defined(value: Any) -> bool:
    """A function, class or object of a class that the notebook defined (not a library's)."""
    if value is None:
        return False
    if inspect.isfunction(value) or inspect.isclass(value):
        return getattr(value, "__module__", None) == "__main__"
    if inspect.ismethod(value):
        return getattr(value.__func__, "__module__", None) == "__main__"
    return getattr(type(value), "__module__", None) == "__main__"


def _dependents(situation: Situation, causes: tuple[CellRef, ...]) -> tuple[CellRef, ...]:
    """Cells already run (and passing) that use a function or class the causes define: a fix of
    ``search`` must keep every other cell calling ``search`` passing."""
    defined = {name for cause in causes for name in cause.defines}
    skip = {cause.key for cause in causes} | {_key(situation.cell_id, situation.count)}
    if not defined:
        return ()
    out: list[CellRef] = []
    for cell in _latest_runs(situation):
        ref = _ref(situation, cell, "dependent")
        if cell.failed or ref.key in skip or not defined & set(free_names(situation.transform(ref.source))):
            continue
        out.append(ref)
    return tuple(out[-_MAX_DEPENDENTS:])

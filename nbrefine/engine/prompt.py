"""The repair prompt (labelled sections inside a total budget) and the reply parser.

May import: the standard library, :mod:`nbrefine.grounding`, :mod:`nbrefine.providers.base` and
the engine's types.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..grounding.capture import Failure
from ..grounding.redaction import Redactor
from ..grounding.summaries import ValueSummary, render_summaries
from ..grounding.text import TRUNCATED, clip
from ..providers.base import ProviderRequest, RepairContext
from .cells import CellRef
from .types import Attempt

__all__ = ["SYSTEM_PROMPT", "ParsedReply", "RepairTask", "build_request", "declines", "parse_reply"]

SYSTEM_PROMPT = """\
You repair one failing cell of a Jupyter notebook. You are shown the cell, the failure as it \
happened in the user's live kernel (exception, traceback mapped to cell lines, the values on the \
failing line, the operands of a failed assert), summaries of the variables the cell uses, and the \
outcome of earlier repair attempts, each of which was really executed.

Rules:
- Keep the user's intent, names and style; change as little as needed.
- Never delete, weaken or skip an assert or a check, and never hide the error with try/except.
- Do not invent data or hard-code expected results; compute them.
- The corrected cell runs on the same kernel state the original saw.
- Candidates are verified in a sandbox without network, subprocesses or file writes outside a \
scratch folder. If the cell needs those, keep them: never delete what the cell is for.

If the intended result cannot be known from the notebook (nothing checks it and the code does not \
say), or the fix needs another cell to run first, say so and reply with no code rather than guess.

Reply with at most three sentences explaining the cause and the fix, then a fenced ```python \
block holding the whole corrected cell (when the fix belongs in several cells, one block per cell, \
labelled as the request asks)."""

_SECTION_LIMITS = {
    "failure": 4000,
    "checks": 1500,
    "candidate": 4000,
    "feedback": 3500,
    "earlier_attempts": 1500,
    "notes": 1000,
}


@dataclass(frozen=True)
class RepairTask:
    """Everything about the original failure that every attempt's prompt repeats."""

    code: str
    failures: tuple[Failure, ...]  # the cell's failure and/or failed checks, all at once
    checks: tuple[str, ...] = ()
    values: tuple[ValueSummary, ...] = ()
    values_left_out: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    label: str = "cell"
    namespace: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    history: str = ""  # the notebook's history, rendered within its own budget (nbrefine.grounding.history)
    #: a repair that spans cells (nbrefine.engine.cause): the cells the fix may change and the
    #: read-only ones, the failing cell among them; empty: the one cell ``code``
    cells: tuple[CellRef, ...] = ()
    dependents: tuple[CellRef, ...] = ()  # cells already run that use what the fix may change
    trial_legend: str = ""  # how a trial of a candidate that spans cells numbers its checks


def _section(title: str, body: str) -> str:
    return f"## {title}\n{body.rstrip()}\n"


def _fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def build_request(
    task: RepairTask,
    attempts: Sequence[Attempt],
    redactor: Redactor,
    *,
    budget: int = 16000,
    max_tokens: int = 4096,
    user_note: str = "",
) -> ProviderRequest:
    """The request for the next attempt. Every part of the text passes through ``redactor``.

    First the redactor learns what is secret: the namespace's credentials, and the literals
    the code marks as secret (positional arguments, dataclass fields...). Then each section
    is redacted before it is cut to its limit, so a secret straddling a cut is never shown
    in part: code with :meth:`Redactor.redact_code` (it stays valid Python), the rest with
    the text rules. If redacting a section found a secret not known before, the sections
    are redacted again so that it is hidden in the earlier ones too.
    """
    if task.namespace:
        redactor.learn_namespace(task.namespace)
    pieces = [
        task.code,
        *task.checks,
        *(c.source for c in (*task.cells, *task.dependents)),
        *(a.code for a in attempts if a.code is not None),
    ]
    for _ in range(2):
        version = redactor._version
        code = {piece: redactor._redact_code(piece) for piece in dict.fromkeys(pieces)}
        if redactor._version != version:
            code = {piece: redactor._redact_code(piece) for piece in code}
        version = redactor._version
        fixed, varying = _sections(task, attempts, redactor, code, user_note, budget)
        if redactor._version == version:
            break
    # What every attempt repeats comes first, so that providers can cache it.
    stable = "\n".join(fixed) + "\n"
    text = _clip_redacted(stable + "\n".join(varying), budget, redactor, lambda t: t)
    redactor._count_markers(text)
    return ProviderRequest(
        system=SYSTEM_PROMPT,
        user=text,
        max_tokens=max_tokens,
        context=_repair_context(task, attempts),
        cache_prefix=len(stable) if len(stable) < len(text) else 0,
    )


def _sections(
    task: RepairTask,
    attempts: Sequence[Attempt],
    redactor: Redactor,
    code: Mapping[str, str],
    user_note: str,
    budget: int,
) -> tuple[list[str], list[str]]:
    """The prompt's sections, each redacted and cut to its limit: (repeated ones, this attempt's)."""

    def text(body: str, limit: int) -> str:
        return _clip_redacted(body, limit, redactor, redactor._redact)

    failed_in = f"In {_failing_label(task)}:\n" if task.cells else ""
    fixed = [
        *(_cells_sections(task, code) if task.cells else [_section("The cell", _fenced(code[task.code]))]),
        _section(
            "How it failed in the kernel",
            failed_in + text("\n\n".join(f.render() for f in task.failures), _SECTION_LIMITS["failure"]),
        ),
    ]
    if task.history:
        fixed.append(_section("Notebook history (cells run before this one)", text(task.history, 3000)))
    if task.checks:
        checks = "\n".join(code[check] for check in task.checks)
        fixed.append(
            _section("Extra checks that must also pass after the cell", clip(checks, 1500, TRUNCATED))
        )
    if task.notes:
        fixed.append(_section("Notes", text("\n".join(task.notes), _SECTION_LIMITS["notes"])))
    if user_note:
        fixed.append(_section("Note from the user", text(user_note, 1000)))
    varying = [
        *_attempt_sections(attempts, code, text),
        _section("Your task", _closing_instruction(attempts, bool(task.cells), task.trial_legend)),
    ]
    used = sum(len(part) for part in fixed) + sum(len(part) for part in varying)
    room = max(budget - used - 200, 0)
    if task.values and room > 200:
        values = text(render_summaries(task.values, task.values_left_out), room)
        fixed.insert(2, _section("Variables the cell uses (kernel state before the cell ran)", values))
    return fixed, varying


def _clip_redacted(text: str, limit: int, redactor: Redactor, redact: Callable[[str], str]) -> str:
    """``text`` redacted, then cut to ``limit`` like :func:`~nbrefine.grounding.text.clip`.

    Only a window reaching well past the cut is redacted (trial output can be a megabyte),
    and the part kept loses any trailing beginning of a secret the cut went through."""
    margin = 4096 + 4 * redactor._longest_value
    window = text[: limit + margin]
    redacted = redact(window)
    if len(redacted) <= limit and len(window) == len(text):
        return redacted
    dropped = max(len(text), len(redacted)) - limit
    marker = TRUNCATED.replace("{dropped}", str(dropped))
    return redactor.guard_cut(redacted[: max(limit - len(marker), 0)]) + marker


def _repair_context(task: RepairTask, attempts: Sequence[Attempt]) -> RepairContext:
    base = _current_base(attempts) if attempts else None
    if base is not None and base.code is not None and base.outcome is not None:
        code, failure = base.code, base.outcome.first_failure
    else:
        code, failure = task.code, task.failures[0] if task.failures else None
    return RepairContext(
        code=code,
        failure=failure,
        namespace=task.namespace,
        attempt=len(attempts) + 1,
        original_code=task.code,
    )


def _attempt_sections(
    attempts: Sequence[Attempt], code: Mapping[str, str], text: Callable[[str, int], str]
) -> list[str]:
    if not attempts:
        return []
    sections = []
    if len(attempts) > 1:
        lines = [f"- attempt {a.number}: {a.summary()}" for a in attempts[:-1]]
        sections.append(
            _section("Earlier attempts", text("\n".join(lines), _SECTION_LIMITS["earlier_attempts"]))
        )
    current = _current_base(attempts)
    if current.code is not None:
        sections.append(
            _section(
                f"Attempt {current.number} (your latest candidate)",
                clip(_fenced(code[current.code]), _SECTION_LIMITS["candidate"], TRUNCATED),
            )
        )
    sections.append(
        _section(
            f"What happened when attempt {current.number} ran",
            text(current.feedback(), _SECTION_LIMITS["feedback"]),
        )
    )
    last = attempts[-1]
    if last is not current:
        worse = text(f"{last.summary()}\nIt was discarded; improve attempt {current.number} instead.", 1000)
        sections.append(_section(f"Attempt {last.number} was worse", worse))
    return sections


def _current_base(attempts: Sequence[Attempt]) -> Attempt:
    """The candidate to build on: the latest one, unless it regressed."""
    for attempt in reversed(attempts):
        if attempt.code is not None and not attempt.regression:
            return attempt
    return attempts[-1]


def _failing_label(task: RepairTask) -> str:
    failing = next((c for c in task.cells if c.role == "failing"), None)
    return failing.label if failing is not None else "the failing cell"


def _cell_heading(cell: CellRef) -> str:
    what = {
        "failing": "the cell that failed",
        "cause": "defines " + ", ".join(cell.defines) if cell.defines else "where the cause may be",
        "moved": "below the failing cell, not run yet",
        "dependent": "already ran; uses what the fix may change",
    }.get(cell.role, "")
    if cell.role == "cause" and not cell.defines:
        what = "where the cause may be"
    readonly = f"; read-only: {cell.readonly}" if cell.readonly else ""
    return f"### {cell.label}" + (f" — {what}{readonly}" if what or readonly else "")


def _cells_sections(task: RepairTask, code: Mapping[str, str]) -> list[str]:
    """The cells a fix may change, each labelled as the reply must label it; then, apart, what must
    hold and may not change."""
    editable = [c for c in task.cells if c.editable]
    readonly = [c for c in task.cells if not c.editable]
    parts = [
        _section(
            "The cells the fix may change (in notebook order)",
            "\n\n".join(f"{_cell_heading(c)}\n{_fenced(code[c.source])}" for c in editable),
        )
    ]
    held = [f"{_cell_heading(c)}\n{_fenced(code[c.source])}" for c in readonly]
    if task.dependents:
        names = ", ".join(c.label for c in task.dependents)
        held.append(f"These cells already ran and passed, and will run again after the fix: {names}.")
    if held:
        parts.append(
            _section("What must hold after the fix (read-only: never change these)", "\n\n".join(held))
        )
    return parts


def _closing_instruction(attempts: Sequence[Attempt], cells: bool = False, legend: str = "") -> str:
    if cells:
        head = (
            "Fix the cause where it is, which may be another cell than the one that failed"
            if not attempts
            else "The latest candidate still fails (see above). Fix it, taking the real outcome into account"
        )
        return (
            f"{head}. Reply with a short explanation, then one ```python block per cell you change, each "
            "right under a line naming that cell as it is labelled above (for example `### In [1] (cell "
            "'abc')`) and holding that whole cell. Never change the read-only cells, and do not define "
            "again, in the failing cell, what another cell defines. If the fix needs another cell to run "
            "first, or the intended result cannot be known from the notebook, say so and reply with no code."
            + (f" {legend}" if legend else "")
        )
    if not attempts:
        return "Fix the cell. Reply with a short explanation and one ```python block with the whole cell."
    return (
        "The latest candidate still fails (see above). Fix it, taking the real outcome into account. "
        "Reply with a short explanation and one ```python block with the whole corrected cell."
    )


# --------------------------------------------------------------------------- parsing

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.S | re.M)
_PYTHON_TAGS = {"python", "py", "python3", "ipython", "ipython3", "pycon"}


_DECLINE = re.compile(
    r"\brun (?:the )?(?:cell\b|In\s*\[)|\bneeds? (?:the )?(?:cell\b|In\s*\[)|\brun first\b"
    r"|\bcan(?:no|['’])t (?:tell|know)\b|\bcan(?:no|['’])t be known\b|\bimpossible to (?:tell|know)\b"
    r"|\bnot guessing\b|\bwithout guessing\b|\bwould be a guess\b|\bI(?: am|['’]m) not going to guess\b",
    re.I,
)


def declines(prose: str) -> bool:
    """The reply's prose says the fix cannot be made from here: a cell must run first, or the
    intended result cannot be known from the notebook (the prompt offers the model that way out)."""
    return bool(_DECLINE.search(prose))


@dataclass(frozen=True)
class ParsedReply:
    code: str | None
    explanation: str
    reason: str | None = None  # why no code was taken
    declined: bool = False  # the model said the fix cannot be made from here (a cell must run first...)
    #: a candidate that spans cells: the new source of each cell it changes, by cell key (two
    #: readings of a reply are the same trial only when code and edits are the same)
    edits: tuple[tuple[str, str], ...] = ()


def parse_reply(text: str) -> ParsedReply:
    """Take the last python block (or, failing that, the last untagged block) as the whole cell."""
    text = text.replace("\r\n", "\n")
    blocks = [(m.group(2).lower(), m.group(3), m.span()) for m in _FENCE.finditer(text)]
    chosen = next((b for b in reversed(blocks) if b[0] in _PYTHON_TAGS), None)
    chosen = chosen or next((b for b in reversed(blocks) if not b[0]), None)
    if chosen is None:
        unterminated = re.search(r"```[ \t]*(python|py)?[^\n]*\n", text)
        reason = (
            "the reply's code block was cut off before its closing ```"
            if unterminated
            else "the reply contained no fenced code block"
        )
        prose = text.strip()[:2000]
        if not unterminated and declines(prose):
            return ParsedReply(
                None, prose, "the model declined: " + prose.splitlines()[0][:300], declined=True
            )
        return ParsedReply(None, prose, reason)
    _, code, (start, end) = chosen
    explanation = (text[:start] + text[end:]).strip()
    explanation = re.sub(r"\n{3,}", "\n\n", explanation)[:2000]
    if not code.strip():
        return ParsedReply(None, explanation, "the reply's code block was empty")
    return ParsedReply(code.rstrip(), explanation)

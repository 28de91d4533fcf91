"""The tutor's prompt: one explanation or hint, built on the repair prompt's sections.

May import: the standard library, :mod:`nbrefine.grounding`, :mod:`nbrefine.providers.base`, the
engine's repair prompt, the names of the modes and :mod:`.hints`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from ...grounding.redaction import Redactor
from ...grounding.text import TRUNCATED, clip
from ...providers.base import ProviderRequest
from ..modes import TEACHING_MODES
from ..prompt import RepairTask, build_request
from .hints import MAX_LEVEL

TEACHING_SYSTEM_PROMPT = """\
You are a patient, encouraging programming tutor. A student's cell in a Jupyter notebook failed. \
You are shown the cell, the failure as it happened in the student's live kernel (exception, \
traceback mapped to cell lines, the values on the failing line, the operands of a failed assert) \
and summaries of the variables the cell uses.

Help the student find and fix the mistake themselves:
- Never write the corrected cell, a corrected line or any code that would make the cell work, not \
even disguised as pseudo-code, a diff or "replace X with Y". nbrefine trial-runs any code in your \
reply and removes whatever would solve the exercise, so such code never reaches the student.
- Refer to places by cell line number; quote at most a few words of the student's own code.
- Write plain, kind, encouraging sentences addressed to the student ("you"). Explain any technical \
word you use. Keep it short.
- Reply with text only (Markdown is fine), without fenced code blocks."""

_EXPLAIN_TASK = (
    "Explain the error, nothing more: what this kind of error means in general, where it happened "
    "(the cell line), and why it happened here, in terms of the actual values shown above. Do not "
    "suggest a fix, do not say what to change, and write no code. Two to four sentences."
)

_LEVEL_TASKS = {
    1: "a gentle nudge. Say which line to look at and which concept is involved (for example the "
    "spelling of a name, the type of a value, where a range starts or stops), without saying what "
    "exactly is wrong. One or two sentences. No code.",
    2: "more specific. Say what is wrong with which value or name, using the actual values shown "
    "above, but not how to write the fix. Two or three sentences. No code.",
    3: "nearly there. Describe in words the change to make. You may show one tiny example of how a "
    "function, method or operator is used, on different data and in one line of inline code, but "
    "never the corrected line or cell. Three or four sentences.",
}


def _teaching_task(mode: str, level: int, number: int, total: int | None, has_previous: bool) -> str:
    if mode == "explain":
        text = _EXPLAIN_TASK
    else:
        of = f" of {total}" if total else ""
        text = f"Give hint {number}{of}: {_LEVEL_TASKS[level]}"
    if has_previous:
        text += " Add something new to what was already said above; do not repeat it."
    return text


def teaching_request(
    task: RepairTask,
    redactor: Redactor,
    *,
    mode: str,
    level: int = 1,
    previous_hints: Sequence[str] = (),
    budget: int = 12000,
    max_tokens: int = 800,
    number: int | None = None,
    total: int | None = None,
    user_note: str = "",
    not_shown: str = "",
) -> ProviderRequest:
    """The request for one explanation (``mode="explain"``) or hint (``"hint"``/``"graduated"``,
    ``level`` 1 to 3). It reuses the repair prompt's labelled sections (cell, failure, values),
    adds the hints already given, and asks for text only; asked again for the same hint,
    ``not_shown`` says why the last answer was not shown. The whole text passes ``redactor``."""
    if mode not in TEACHING_MODES:
        raise ValueError(f"teaching_request needs one of {', '.join(TEACHING_MODES)}, not {mode!r}")
    level = max(1, min(level, MAX_LEVEL))
    number = number or level
    given = [clip(hint.strip(), 800, TRUNCATED) for hint in previous_hints if hint.strip()][-6:]
    extra = ""
    if given:
        noun = "Explanations" if mode == "explain" else "Hints"
        listed = "\n".join(f"{i}. {textwrap.indent(hint, '   ').lstrip()}" for i, hint in enumerate(given, 1))
        extra += f"## {noun} already given for this cell\n{listed}\n"
    if not_shown:
        noun = "explanation" if mode == "explain" else "hint"
        extra += f"\n## Why your last {noun} was not shown\n{clip(not_shown.strip(), 1200, TRUNCATED)}\n"
    extra += f"\n## Your task\n{_teaching_task(mode, level, number, total, bool(given))}\n"
    base = build_request(
        task, [], redactor, budget=max(budget - len(extra), 2000), max_tokens=max_tokens, user_note=user_note
    )
    body = base.user
    cut = body.rfind("## Your task\n")
    if cut >= 0:
        body = body[:cut]
    text = body.rstrip() + "\n\n" + extra
    return ProviderRequest(
        system=TEACHING_SYSTEM_PROMPT,
        user=redactor.redact_text(text),
        max_tokens=max_tokens,
        context=base.context,
    )

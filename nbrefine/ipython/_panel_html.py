"""What the review panel says, as HTML: pure functions of a session (or of two texts), no widgets.

The generic pieces: a unified or side-by-side diff, highlighted and marked (+ / −) for readers who
do not see the colours; the small Markdown models write; a fold (``<details>``); the summary line.
Then what a session's panel shows: the headline (the only place outside the details that names the
error), the verdict above the buttons, where it failed, the folded details (why, each attempt with
its diff against the one before, the trial notes, tokens and cost), the live progress line, the
hints of a teaching mode, and the one line that replaces the panel once the fixed cell ran
(:func:`fixed_output`). :mod:`.panel` puts these into its widgets.

May import: :mod:`nbrefine.engine` and below, pygments (optional), :mod:`._panel_css` and the
protocol types of :mod:`.writeback`; never ipywidgets or IPython.
"""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Callable, Iterable

from ..engine import (
    Attempt,
    RefineSession,
    TeachingResult,
    attempt_mark,
    attempt_outcome,
    count_tries,
    describe_failure,
    provider_failed,
)
from ..engine.accept import AcceptPlan
from ..grounding.capture import Failure
from ._panel_css import STYLE
from .writeback import FixedOutput

__all__ = [
    "counted_attempts",
    "details_html",
    "diff_html",
    "fixed_output",
    "headline_html",
    "hints_html",
    "markdown_html",
    "plan_diff_html",
    "progress_html",
    "side_by_side_html",
    "spans_several",
    "teaching_headline_html",
    "verdict_html",
    "where_html",
]


# ---------------------------------------------------------------------------------- markup


def _highlight(line: str) -> str:
    """One line of Python as HTML with pygments' token classes (the stylesheet colours them with
    the editor theme's variables); plain escaped text where pygments is missing."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:
        return html.escape(line)
    out: str = highlight(line, PythonLexer(), HtmlFormatter(nowrap=True))
    return out.rstrip("\n")


def _row(sign: str, line: str | None, kind: str = "") -> str:
    if line is None:  # the other side of a side-by-side change: keeps the rows aligned
        return '<div class="nbr-line nbr-blank"><span class="nbr-sign"></span><code></code></div>'
    cls = f"nbr-line {kind}".strip()
    label = {"nbr-add": "added", "nbr-del": "removed"}.get(kind, "")
    aria = f' aria-label="{label}"' if label else ""
    return (
        f'<div class="{cls}"><span class="nbr-sign"{aria}>{sign}</span><code>{_highlight(line)}</code></div>'
    )


def diff_html(old: str, new: str, labels: tuple[str, str] = ("your cell", "the fix")) -> str:
    """A unified diff in words ("your cell → the fix", "⋯ line 12"), highlighted, with added and
    removed lines tinted and marked (+ / −) for readers who do not see the colours."""
    rows: list[str] = []
    a, b = old.splitlines(), new.splitlines()
    for group in difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(3):
        first = group[0]
        if first[1] > 0 or first[3] > 0 or rows:
            gap = f"line {first[3] + 1}"
            rows.append(
                f'<div class="nbr-line nbr-gap"><span class="nbr-sign">⋯</span><code>{gap}</code></div>'
            )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows.extend(_row(" ", line) for line in a[i1:i2])
                continue
            rows.extend(_row("−", line, "nbr-del") for line in a[i1:i2])
            rows.extend(_row("+", line, "nbr-add") for line in b[j1:j2])
    if not rows:
        return '<div class="nbr-note">no change</div>'
    head = f'<div class="nbr-label">{html.escape(labels[0])} → {html.escape(labels[1])}</div>'
    return f'{head}<div class="nbr-code" tabindex="0">{"".join(rows)}</div>'


def side_by_side_html(old: str, new: str, labels: tuple[str, str] = ("your cell", "the fix")) -> str:
    """Two columns, each scrolling sideways on its own; stacked when the panel is narrow."""
    a, b = old.splitlines(), new.splitlines()
    left, right = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        for k in range(max(i2 - i1, j2 - j1)):
            old_line = a[i1 + k] if i1 + k < i2 else None
            new_line = b[j1 + k] if j1 + k < j2 else None
            changed = tag != "equal"
            left.append(_row("−" if changed else " ", old_line, "nbr-del" if changed else ""))
            right.append(_row("+" if changed else " ", new_line, "nbr-add" if changed else ""))
    columns = (
        f'<div><div class="nbr-label">{html.escape(label)}</div>'
        f'<div class="nbr-code" tabindex="0">{"".join(rows)}</div></div>'
        for label, rows in zip(labels, (left, right), strict=True)
    )
    return f'<div class="nbr-sbs">{"".join(columns)}</div>'


_INLINE = [
    (re.compile(r"`([^`\n]+)`"), r"<code>\1</code>"),
    (re.compile(r"\*\*([^*\n]+)\*\*"), r"<b>\1</b>"),
    (re.compile(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])"), r"<i>\1</i>"),
]


def _inline(text: str) -> str:
    """Inline Markdown on escaped text: code spans first, so nothing inside them is touched."""
    parts = re.split(r"(`[^`\n]+`)", html.escape(text, quote=False))
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{part[1:-1]}</code>")
            continue
        for pattern, replacement in _INLINE[1:]:
            part = pattern.sub(replacement, part)
        out.append(part)
    return "".join(out)


_HEADING = re.compile(r"^#{1,6}\s+(\S.*?)\s*#*$")


def markdown_html(text: str) -> str:
    """The small Markdown models write in explanations (paragraphs, lists, code spans and fenced
    code, bold, italics, headings) as HTML; everything else stays text, escaped. A heading with
    nothing under it (the label of a code block that is shown elsewhere) is left out."""
    blocks: list[str] = []
    lines = text.strip().splitlines()
    index = 0
    paragraph: list[str] = []
    items: list[str] = []
    heading: list[str] = []  # the latest heading, until something comes under it

    def flush() -> None:
        if paragraph:
            blocks.append(f"<p>{_inline(' '.join(paragraph))}</p>")
            paragraph.clear()
        if items:
            blocks.append("<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in items) + "</ul>")
            items.clear()

    def under_heading() -> None:
        if heading:
            blocks.append(f'<p class="nbr-md-h"><b>{_inline(heading.pop())}</b></p>')

    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        title = _HEADING.match(stripped)
        if title:
            flush()
            heading[:] = [title.group(1)]
            index += 1
            continue
        if stripped:
            under_heading()
        if stripped.startswith("```"):
            flush()
            code = []
            index += 1
            while index < len(lines) and not lines[index].strip().startswith("```"):
                code.append(lines[index])
                index += 1
            blocks.append('<div class="nbr-code">' + "".join(_row(" ", c) for c in code) + "</div>")
        elif re.match(r"^([-*]|\d+[.)])\s+", stripped):
            if paragraph:
                flush()
            items.append(re.sub(r"^([-*]|\d+[.)])\s+", "", stripped))
        elif not stripped:
            flush()
        else:
            if items:
                flush()
            paragraph.append(stripped)
        index += 1
    flush()
    return f'<div class="nbr-md">{"".join(blocks)}</div>'


def _summary_html(icon: str, title: str, sub: str) -> str:
    """The panel's first line (its icon is decoration: the words say it all) and the line under it."""
    head = f'<div class="nbr-summary"><span class="nbr-icon" aria-hidden="true">{icon}</span>{title}</div>'
    return head + (f'<div class="nbr-sub">{sub}</div>' if sub else "")


def _fold(summary: str, body: str, cls: str = "", open_: bool = False) -> str:
    attrs = (f' class="{cls}"' if cls else "") + (" open" if open_ else "")
    return f'<details{attrs}><summary>{summary}</summary><div class="nbr-body">{body}</div></details>'


# ---------------------------------------------------------------------------------- a session


def counted_attempts(attempts: Iterable[Attempt]) -> list[Attempt]:
    """The attempts that count as tries: a provider error is not one."""
    return [attempt for attempt in attempts if not provider_failed(attempt)]


def _failure_text(session: RefineSession) -> str:
    failure = session.failure
    if failure is None:
        return "the cell failed"
    return html.escape(describe_failure(failure, session.line_offset))


def headline_html(session: RefineSession) -> str:
    """The one line at the top (the only place outside the details that names the error)."""
    icon, title, sub = _headline_parts(session)
    return _summary_html(icon, html.escape(title), sub)


def _headline_parts(session: RefineSession) -> tuple[str, str, str]:
    """(icon, title, the line under it as HTML) for the session's state."""
    failure = _failure_text(session)
    tries = count_tries(len(counted_attempts(session.attempts)))
    if session.running:
        return "⟳", "Looking for a fix", f"for {failure}"
    if session.decision == "accepted":
        anyway = " (applied anyway, not verified)" if session.accepted_anyway else ""
        if session.accept_ok is False:
            return (
                "⚠",
                f"Fixed by nbrefine{anyway} — it raised when run in the kernel",
                f"{tries} · was {failure}",
            )
        return "✔", f"Fixed by nbrefine{anyway}", f"{tries} · was {failure}"
    if session.decision == "rejected":
        return "✘", "Rejected — nothing was changed", failure
    if session.fixed_code is not None:
        return _offer_parts(session, failure, tries)
    return _ended_parts(session, failure, tries)


def _offer_parts(session: RefineSession, failure: str, tries: str) -> tuple[str, str, str]:
    """A fix (or an unverified proposal) waiting for the user's decision."""
    if session.needs_review:
        return "⚠", "Needs review — the fix adds what the cell did not do", f"For {failure} · {tries}"
    if session.unchecked:
        return "⚠", "A proposal — it runs, but nothing checks the result", f"For {failure} · {tries}"
    if session.status == "changes_checks":
        return "⚠", "No verified fix — the only proposal changes the checks", f"For {failure} · {tries}"
    if session.accept_refused:
        return "⚠", "Not applied — the fix fails from the live state", f"For {failure} · {tries}"
    return "✔", "Verified fix ready — it passed a trial run", f"Fixes {failure} · {tries}"


def _ended_parts(session: RefineSession, failure: str, tries: str) -> tuple[str, str, str]:
    """The loop ended without a fix to offer."""
    message = html.escape(session.message)
    if session.status == "error":
        reason = session.result.stop_reason if session.result else ""
        if reason == "sandbox_error":
            return "✘", "The trial sandbox failed", message
        title = "Could not ask the model" if reason in ("", "provider_error") else "Could not get a fix"
        return "✘", title, message + _how_to_fix(session.message)
    if session.status == "unfixed" and session.cause is not None and session.cause.kind == "cascade":
        return "✘", "Not patched — an earlier cell failed", message
    if session.status == "unfixed":
        return "✘", f"No fix found — {tries}", failure + (f" · {message}" if message else "")
    if session.status == "interrupted":
        return "■", f"Stopped — {tries}", failure
    if session.status == "budget":
        return "■", "Stopped by the budget", message
    if session.status == "no_error":
        return "✔", "The cell ran without error", ""
    return "", session.headline().removeprefix("nbrefine: "), ""


def _how_to_fix(message: str) -> str:
    """What to do about a provider error, when the message shows which one it is."""
    if "API key" in message or "credentials" in message or "API_KEY" in message:
        return (
            "<br>Set the key where the kernel reads it, e.g. "
            "<code>%env ANTHROPIC_API_KEY=sk-ant-…</code> in a cell (or choose another provider: "
            '<code>%config Refine.provider = "offline"</code>), then Retry.'
        )
    return "<br>Retry when the service answers again." if message else ""


def verdict_html(session: RefineSession) -> str:
    """Why this fix is not applied by Accept, or what Accept found before it applied it."""
    cause = _cause_html(session)
    if session.fixed_code is not None and session.needs_review and session.decision == "pending":
        adds = "".join(f"<li>it {html.escape(what)}</li>" for what in session.needs_review)
        return cause + (
            '<div class="nbr-verdict">Before it runs, review what the fix adds, which the cell did not do: '
            f'<ul class="nbr-list">{adds}</ul>It passed its trial in the sandbox, but code can behave '
            "differently outside it. <b>Apply anyway</b> runs it in your kernel, where what its trial "
            "refused stays refused.</div>"
        )
    if session.fixed_code is not None and session.unchecked and session.decision == "pending":
        what = html.escape(session.unchecked)
        return cause + (
            f'<div class="nbr-verdict">It runs, but nothing checks the result: {what}. The intent was '
            "guessed, so it is a proposal, not a verified fix. <b>Apply anyway</b> runs it all the same; "
            "an <code>assert</code> (or <code>-t</code>) that says what the cell should compute lets "
            "nbrefine verify it.</div>"
        )
    return cause + _verdict_of_fix(session)


def _cause_html(session: RefineSession) -> str:
    """Where the cause is, when it is another cell, and the checks that passed."""
    cause = session.cause
    if cause is None or cause.kind in ("here", "cascade"):
        return ""
    note = f'<div class="nbr-note">Where the cause is: {_inline(cause.sentence())}</div>'
    return note + _checks_html(session)


def spans_several(session: RefineSession) -> bool:
    """The fix is more than one cell's new source: several cells change, or one moves (a fix of
    one other cell alone is written into that cell like a fix of the failing cell)."""
    plan = session.plan
    return plan is not None and plan.spans_cells and (len(plan.changes) != 1 or bool(plan.moves))


def _checks_html(session: RefineSession) -> str:
    """A verified fix that spans cells: what its trial checked, numbered as the trial ran it (the
    failing cell is check 1, then the ``-t`` checks, then the cells that use what changed)."""
    plan = session.plan
    if plan is None or not plan.spans_cells or not session.verified or session.decision == "rejected":
        return ""
    roles = [cell for cell, _ in plan.runs]
    items = [f"{html.escape(plan.failing.label)}, the failing cell"]
    checks = session.job.task.checks if session.job is not None else ()
    items += [f"<code>{html.escape(check)}</code>" for check in checks]
    items += [
        f"{html.escape(cell.label)}, which uses what the fix changes"
        for cell in roles
        if cell.role == "dependent"
    ]
    listed = "".join(f"<li>check {n}: {item}</li>" for n, item in enumerate(items, start=1))
    return (
        '<div class="nbr-label">what its trial checked</div>'
        f'<ul class="nbr-list nbr-checks">{listed}</ul>'
        '<div class="nbr-note">All passed, run in notebook order after the fixed cells.</div>'
    )


def _sentence(text: str) -> str:
    """``text`` with a capital first letter (``str.capitalize`` would lower "In [3]" and ids)."""
    return text[:1].upper() + text[1:]


#: A diff renderer (:func:`diff_html`, :func:`side_by_side_html`): old, new, the two sides' labels.
Render = Callable[[str, str, tuple[str, str]], str]


def plan_diff_html(plan: AcceptPlan, render: Render, *, ran: bool = False) -> str:
    """A fix that spans cells: the moves (with the code of the moved cell, unchanged), one
    labelled diff per changed cell, and the order Accept runs them in (``ran``: ran them in)."""
    parts = []
    changed = {change.cell.key for change in plan.changes}
    for move in plan.moves:
        step = html.escape(_sentence(move.label))
        parts.append(f'<div class="nbr-step"><span aria-hidden="true">↥ </span>{step}.</div>')
        if move.cell.key not in changed:
            rows = "".join(_row(" ", line) for line in move.cell.source.rstrip().splitlines())
            parts.append(f'<div class="nbr-cell-label">{html.escape(move.cell.label)} · unchanged</div>')
            parts.append(f'<div class="nbr-code" tabindex="0">{rows}</div>')
    for change in plan.changes:
        parts.append(f'<div class="nbr-cell-label">{html.escape(change.label)}</div>')
        parts.append(
            render(change.cell.source.rstrip(), change.new_source.rstrip(), ("as it ran", "the fix"))
        )
    if plan.runs:
        order = ", then ".join(html.escape(cell.label) for cell, _ in plan.runs)
        said = (
            "Ran, in this order"
            if ran
            else "Accept makes these changes as one (one undo puts them back), then runs"
        )
        parts.append(f'<div class="nbr-note">{said}: {order}.</div>')
    return f'<div class="nbr-plan">{"".join(parts)}</div>'


def _verdict_of_fix(session: RefineSession) -> str:
    if session.fixed_code is not None and not session.verified and session.decision == "pending":
        why = html.escape(session.unverified_reason)
        return (
            f'<div class="nbr-verdict">It passed its trial run, but it changes the checks ({why}), so it '
            "is not verified. <b>Apply anyway</b> runs it in the kernel all the same.</div>"
        )
    if session.accept_refused and session.decision == "pending":
        why = html.escape(session.accept_refused)
        return (
            f'<div class="nbr-verdict">Accept did not apply it: {why}. <b>Apply anyway</b> runs it all '
            "the same.</div>"
        )
    if session.live_check:
        return f'<div class="nbr-note">Before it ran: {html.escape(session.live_check)}.</div>'
    return ""


def progress_html(what: str, streamed: int, elapsed: float, finished: list[str]) -> str:
    """The live line: one counter, the step, a timer that moves, the attempts done so far."""
    received = f" · {streamed:,} characters received" if streamed else ""
    line = f'<div>{html.escape(what)}{received} · <span class="nbr-timer">{elapsed:.1f} s</span></div>'
    done = "".join(f"<li>{html.escape(item)}</li>" for item in finished)
    return line + (f'<ul class="nbr-list">{done}</ul>' if done else "")


def details_html(session: RefineSession) -> str:
    """Everything else, folded: why, the attempts, the trial notes, usage ("" when none)."""
    parts, names = [], []
    if session.explanation and not session.running:
        parts.append(f'<div class="nbr-label">why</div>{markdown_html(session.explanation)}')
        names.append("why")
    tries = counted_attempts(session.attempts)
    if tries and not session.running:
        parts.append(_attempts_html(session, tries))
        names.append(count_tries(len(tries)).replace("try", "attempt").replace("tries", "attempts"))
    if session.notes:
        notes = "".join(f"<li>{html.escape(note)}</li>" for note in session.notes)
        parts.append(f'<div class="nbr-label">about the trial runs</div><ul class="nbr-list">{notes}</ul>')
    usage = session.usage
    if usage.tokens and not session.running:
        model = f" ({html.escape(session.model)})" if session.model else ""
        parts.append(
            f'<div class="nbr-label">usage</div><div>Tokens: {html.escape(usage.describe())}{model}</div>'
        )
        names.append("cost")
    return _fold("Details: " + ", ".join(names), "".join(parts), "nbr-more") if parts else ""


def _attempts_html(session: RefineSession, tries: list[Attempt]) -> str:
    """Each attempt on its own fold (several can be open): its outcome once, in the title,
    and its diff against the attempt before it, labelled so."""
    items = []
    previous, previous_label = session.original_code.rstrip(), "your cell"
    for number, attempt in enumerate(tries, start=1):
        outcome = f"{attempt_outcome(attempt, session.line_offset)} ({attempt.duration_s:.2f} s)"
        title = f"{attempt_mark(attempt)} Attempt {number}: {outcome}"
        body = ""
        label = f"attempt {number}"
        if attempt.code is not None:
            body += diff_html(previous, attempt.code, (previous_label, label))
            if not attempt.regression:
                previous, previous_label = attempt.code, label
        if attempt.explanation:
            body += markdown_html(attempt.explanation)
        reasons = attempt.alternative_reasons + [""] * len(attempt.alternatives)
        for index, (code, trial) in enumerate(attempt.alternatives, start=1):
            verdict = trial.one_line() if not trial.ok else "also passed"
            if trial.ok and reasons[index - 1]:
                verdict = f"passed but changes the checks: {reasons[index - 1]}"
            body += f"<div>Alternative {index} (not chosen): {html.escape(verdict)}</div>"
            body += diff_html(session.original_code.rstrip(), code, ("your cell", f"alternative {index}"))
        items.append(_fold(html.escape(title), body or '<div class="nbr-note">no code</div>', "nbr-attempt"))
    return '<div class="nbr-label">attempts</div>' + "".join(items)


def where_html(failure: Failure, line_offset: int) -> str:
    """Where it failed, in the user's own frames, with "the full traceback" one click away."""
    hidden = failure.library_frames_hidden
    library = f" and {hidden} library frame{'s' if hidden != 1 else ''}" if hidden else ""
    toggle = _fold(
        f"The full traceback{library}",
        '<div class="nbr-note">Shown under the panel while this is open.</div>',
        "nbr-tb",
    )
    frames = _frames_html(failure, line_offset)
    return f'<div class="nbr-label">where it failed</div>{frames}{toggle}'


def _frames_html(failure: Failure, line_offset: int = 0) -> str:
    """Where it failed: the user's own frames, and how many library frames were folded."""
    own = [frame for frame in failure.frames if frame.in_code or not frame.label.startswith("/")]
    items = []
    for frame in own or failure.frames[:1]:
        mine = frame.label in ("cell", "candidate")
        where = "your cell" if mine else frame.label
        func = f", in {html.escape(frame.function)}" if frame.function not in ("<module>", "") else ""
        code = f" <code>{html.escape(frame.line.strip())}</code>" if frame.line.strip() else ""
        line = frame.lineno + (line_offset if mine else 0)
        items.append(f"<li>{html.escape(where)}, line {line}{func}:{code}</li>")
    if failure.lineno and not items:
        line = failure.lineno + line_offset
        items.append(f"<li>line {line}: <code>{html.escape(failure.line.strip())}</code></li>")
    return f'<ul class="nbr-frames">{"".join(items)}</ul>' if items else ""


def teaching_headline_html(session: RefineSession, teaching: TeachingResult) -> str:
    """A teaching mode's first line: "Hints for …" (or why no hint came) and what to do."""
    noun = "Explanation" if teaching.mode == "explain" else "Hints"
    title = f"{noun} for {_failure_text(session)}"
    if session.status == "error":
        title = "Could not get a hint"
    error = session.status == "error"
    sub = html.escape(session.message) + _how_to_fix(session.message) if error else ""
    return _summary_html("✎", title, sub)


def hints_html(shown: list[TeachingResult], teaching: TeachingResult) -> str:
    """Every hint so far, the newest last, and a note on the last one ("" when none)."""
    blocks = [
        f'<div class="nbr-hint"><h4>{html.escape(h.step.header())}</h4>{markdown_html(h.text)}</div>'
        for h in shown
    ]
    if teaching.status == "exhausted":
        blocks.append(f'<div class="nbr-note">{html.escape(teaching.text)}</div>')
    elif teaching.last_note and shown:
        blocks.append(f'<div class="nbr-note">{html.escape(teaching.last_note)}</div>')
    return "".join(blocks)


def _changed_cells(plan: AcceptPlan) -> list[str]:
    """The keys of the cells a plan writes or moves."""
    return list(dict.fromkeys([*(m.cell.key for m in plan.moves), *(c.cell.key for c in plan.changes)]))


def fixed_output(session: RefineSession) -> FixedOutput:
    """The one line that replaces the panel once the fixed cell ran (the extension puts it above
    the fixed run's outputs): "✔ Fixed by nbrefine — 2 tries · details · undo". Its buttons are
    handled by the extension; the details (the diff, the attempts, why) unfold in place. A fix
    that spans cells puts the same line above each changed cell's outputs ("· 2 cells"), its
    details the plan's diffs, and undo in any of them puts them all back."""
    tries = count_tries(len(counted_attempts(session.attempts)))
    anyway = " (applied anyway: not verified)" if session.accepted_anyway else ""
    plan = session.plan
    several = plan is not None and spans_several(session)
    cells = f" · {len(_changed_cells(plan))} cells" if plan is not None and several else ""
    line = f"Fixed by nbrefine — {tries}{cells}{anyway}"
    offset = session.line_offset
    attempts = "".join(
        f"<li>{html.escape(attempt_mark(a))} attempt {n}: {html.escape(attempt_outcome(a, offset))}</li>"
        for n, a in enumerate(counted_attempts(session.attempts), start=1)
    )
    why = markdown_html(session.explanation) if session.explanation else ""
    if plan is not None and several:
        diff = plan_diff_html(plan, diff_html, ran=True)
    else:
        diff = diff_html(session.original_code.rstrip(), session.fixed_code or "")
    details = f'{diff}{why}<ul class="nbr-list">{attempts}</ul>'
    buttons = (
        ' · <button type="button" class="nbr-link" data-nbrefine-action="details" aria-expanded="false">'
        "details</button>"
        ' · <button type="button" class="nbr-link" data-nbrefine-action="undo" '
        'title="put the code the cell had before the fix back">undo</button><span class="nbr-below"></span>'
    )
    markup = (
        f'{STYLE}<div class="nbr-panel nbr-fixed nbr-ok"><div class="nbr-fixed-line">'
        f'<span class="nbr-icon" aria-hidden="true">✔</span>{html.escape(line)}{buttons}</div>'
        f'<div class="nbr-fixed-details" hidden>{details}</div></div>'
    )
    return {
        "output_type": "display_data",
        "data": {"text/html": markup, "text/plain": f"✔ {line}"},
        "metadata": {"nbrefine": {"fixed": True}},
    }

"""The class report of a teaching run: a feedback file per student, one HTML page for the instructor.

A student's feedback holds the errors of their notebook and the hints nbrefine gave, which the
no-solution guard checked in the kernel; it never holds a fix, a diff or an explanation of one.
The instructor's page says which exercises fail most (an exercise is nbgrader's ``grade_id`` of
the cell where there is one, else the cell's position), the error types per exercise, the most
common mistakes grouped by error signature with one anonymised example each, and plots of the
same figures. :class:`ClassTotals` adds up one record entry at a time: its size depends on the
exercises and the distinct mistakes, not on the number of notebooks.

May import: this package's :mod:`.files`, the standard library and (lazily, for the charts) matplotlib."""

from __future__ import annotations

import ast
import base64
import html
import io
import re
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from .files import atomic_text

__all__ = ["ClassTotals", "anonymise", "error_signature", "feedback_markdown", "is_teaching"]

_EXAMPLE_LINES = 25


def is_teaching(entry: dict[str, Any]) -> bool:
    """Whether the notebook ran under a teaching policy (then its student gets feedback)."""
    report = entry.get("report") or {}
    mode = (report.get("teaching") or {}).get("mode")
    return (mode not in (None, "fix")) or any(c.get("hint") for c in report.get("cells") or [])


def exercise_of(cell: dict[str, Any]) -> str:
    grade_id = (cell.get("nbgrader") or {}).get("grade_id")
    return str(grade_id) if grade_id else f"cell {cell.get('cell')}"


def sheet_of(entry: dict[str, Any]) -> str:
    """What students submitted the same of: ``assignment/notebook`` in nbgrader's layout, else
    the notebook's file name."""
    place = entry.get("nbgrader")
    if isinstance(place, dict):
        return f"{place.get('assignment')}/{place.get('notebook')}"
    return PurePosixPath(str(entry.get("path", ""))).name


def error_signature(error_type: str, message: str, private: tuple[str, ...] = ()) -> str:
    """A mistake's signature: the error type and its message with numbers, addresses and the
    student's own words taken out, so the same mistake groups across students."""
    first = next((line.strip() for line in str(message).splitlines() if line.strip()), "")
    first = re.sub(r"0x[0-9a-fA-F]+", "0x…", first)
    first = re.sub(r"(?<![\w.'\"])-?\d+(?:\.\d+)?(?![\w'\"])", "N", first)
    first = _hide(first, private)
    if len(first) > 100:
        first = first[:99] + "…"
    return f"{error_type}: {first}" if first else error_type


_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def _hide(text: str, private: tuple[str, ...]) -> str:
    text = _EMAIL.sub("<email>", text)
    for word in private:
        if len(word) >= 2:
            text = re.sub(re.escape(word), "<student>", text, flags=re.IGNORECASE)
    return text


def anonymise(source: str, private: tuple[str, ...]) -> str:
    """A student's cell with what could name them taken out: comments (where names and
    e-mail addresses go), e-mail addresses and the student's identifiers anywhere else."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        kept = [t for t in tokens if t.type != tokenize.COMMENT]
        text = tokenize.untokenize(kept)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        text = "\n".join(re.sub(r"\s*#.*$", "", line) for line in source.splitlines())
    lines = [line.rstrip() for line in _hide(text, private).splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    if len(lines) > _EXAMPLE_LINES:
        lines = [*lines[:_EXAMPLE_LINES], "…"]
    return "\n".join(lines)


def bound_names(source: str) -> set[str]:
    """The names a cell's top-level statements define (what later cells lack if it failed)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # a cell that does not parse defines what it tried to
        return set(re.findall(r"^\s*(\w+)\s*=[^=]", source, flags=re.MULTILINE))
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.For | ast.With):
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
    return names


def _missing_name(cell: dict[str, Any]) -> str | None:
    """The name of a ``NameError: name 'x' is not defined``, else None."""
    if cell.get("error_type") != "NameError":
        return None
    found = re.search(r"name '(\w+)' is not defined", str(cell.get("error_message") or ""))
    return found[1] if found else None


def private_words(entry: dict[str, Any]) -> tuple[str, ...]:
    place = entry.get("nbgrader")
    return (str(place.get("student")),) if isinstance(place, dict) and place.get("student") else ()


# --------------------------------------------------------------------------- the student's file


def feedback_markdown(entry: dict[str, Any]) -> str:
    """What one student reads: their errors and hints, never a fix."""
    report = entry.get("report") or {}
    place = entry.get("nbgrader") if isinstance(entry.get("nbgrader"), dict) else None
    name = place["notebook"] if place else PurePosixPath(str(entry.get("path", ""))).name
    title = f"# Feedback on {name}" + (f" ({place['assignment']})" if place else "")
    summary = report.get("summary") or {}
    failed = [c for c in report.get("cells") or [] if c.get("status") in ("fixed", "unfixed")]
    out = [
        title,
        "",
        f"nbrefine ran your notebook from top to bottom: {summary.get('cells_run', 0)} code cells ran.",
    ]
    if entry.get("status") == "error":
        out += ["", f"It could not be run: {entry.get('message')}"]
        return "\n".join(out) + "\n"
    if not failed:
        out += ["", "Every cell ran without an error. Well done!"]
        return "\n".join(out) + "\n"
    out.append(f"{len(failed)} of them raised an error. Here is what to look at, one exercise at a time.")
    for cell in failed:
        out += [
            "",
            f"## {exercise_of(cell)}"
            + ("" if exercise_of(cell).startswith("cell ") else f" (cell {cell.get('cell')})"),
        ]
        error = f"{cell.get('error_type')}: {_first(cell.get('error_message'))}".strip(": ")
        out += ["", f"Your cell raised `{error}`."]
        hint = cell.get("hint") or {}
        if hint and hint.get("status") != "error":
            out += [
                "",
                f"**{hint.get('header')}** ({hint.get('mode')} mode)",
                "",
                str(hint.get("text") or "").strip(),
            ]
        else:
            out += ["", "No hint this time: read the error message and the line it points at."]
    if entry.get("message"):
        out += ["", f"The run stopped early: {entry['message']}"]
    return "\n".join(out) + "\n"


def _first(text: Any) -> str:
    return next((line.strip() for line in str(text or "").splitlines() if line.strip()), "")


# --------------------------------------------------------------------------- the instructor's page


@dataclass
class _Exercise:
    submissions: int = 0
    failed: int = 0
    knock_on: int = 0  # of ``failed``: a name an earlier failing cell was to define (not its mistake)
    hints: int = 0
    errors: Counter[str] = field(default_factory=Counter)

    @property
    def own(self) -> int:
        return self.failed - self.knock_on


@dataclass
class _Mistake:
    count: int
    example: str
    error: str
    hint: str


@dataclass
class ClassTotals:
    exercises: dict[tuple[str, str], _Exercise] = field(default_factory=dict)
    mistakes: dict[tuple[str, str, str], _Mistake] = field(default_factory=dict)
    failing_per_submission: Counter[int] = field(default_factory=Counter)
    submissions: int = 0
    could_not_run: int = 0
    students: set[str] = field(default_factory=set)
    modes: Counter[str] = field(default_factory=Counter)
    knock_ons: int = 0

    def add(self, entry: dict[str, Any]) -> None:
        if entry.get("status") in ("cancelled", "not_run"):
            return
        place = entry.get("nbgrader")
        if isinstance(place, dict):
            self.students.add(str(place.get("student")))
        if entry.get("status") == "error":
            self.could_not_run += 1
            return
        self.submissions += 1
        report = entry.get("report") or {}
        self.modes[str((report.get("teaching") or {}).get("mode") or "fix")] += 1
        sheet, private = sheet_of(entry), private_words(entry)
        failing = 0
        undefined: set[str] = set()  # names that cells which stayed broken were to define
        for cell in report.get("cells") or []:
            if cell.get("status") not in ("passed", "fixed", "unfixed"):
                continue
            exercise = self.exercises.setdefault((sheet, exercise_of(cell)), _Exercise())
            exercise.submissions += 1
            if cell["status"] == "passed":
                continue
            failing += 1
            self._add_failure(sheet, exercise, cell, private, knock_on=_missing_name(cell) in undefined)
            if cell["status"] == "unfixed":
                undefined |= bound_names(str(cell.get("original_source") or ""))
        self.failing_per_submission[failing] += 1

    def _add_failure(
        self,
        sheet: str,
        exercise: _Exercise,
        cell: dict[str, Any],
        private: tuple[str, ...],
        *,
        knock_on: bool,
    ) -> None:
        error_type = str(cell.get("error_type") or "?")
        exercise.failed += 1
        hint = cell.get("hint") or {}
        given = bool(hint) and hint.get("status") != "error"
        exercise.hints += given
        if knock_on:  # the earlier cell's mistake, not this one's: counted, not listed
            exercise.knock_on += 1
            self.knock_ons += 1
            return
        exercise.errors[error_type] += 1
        key = (
            sheet,
            exercise_of(cell),
            error_signature(error_type, str(cell.get("error_message") or ""), private),
        )
        known = self.mistakes.get(key)
        if known is not None:
            known.count += 1
            return
        error = _hide(f"{error_type}: {_first(cell.get('error_message'))}", private)
        text = _hide(str(hint.get("text") or ""), private) if given else ""
        self.mistakes[key] = _Mistake(
            1, anonymise(str(cell.get("original_source") or ""), private), error, text
        )

    # ---------------------------------------------------------------- the page

    def write_html(self, path: Path, meta: dict[str, Any]) -> None:
        with atomic_text(path) as fh:
            fh.write(self.render(meta))

    def render(self, meta: dict[str, Any]) -> str:
        ranked = sorted(self.exercises.items(), key=lambda kv: (-_rate(kv[1]), -kv[1].failed, kv[0]))
        ranked = [item for item in ranked if item[1].submissions]
        parts = [_HEAD.format(title=html.escape(f"nbrefine class report: {self.submissions} submissions"))]
        parts.append(self._overview(meta))
        parts.append(self._exercise_table(ranked))
        parts.append(self._plots(ranked))
        parts.append(self._mistakes_section())
        parts.append("</body></html>\n")
        return "".join(parts)

    def _overview(self, meta: dict[str, Any]) -> str:
        modes = ", ".join(f"{m} {n}" for m, n in self.modes.most_common()) or "none"
        failing = self.submissions - self.failing_per_submission.get(0, 0)
        rows = [
            ("students", str(len(self.students)) if self.students else "– (not an nbgrader layout)"),
            ("submissions run", str(self.submissions)),
            ("submissions with a failing cell", str(failing)),
            ("could not be run", str(self.could_not_run)),
            ("teaching modes", modes),
            ("provider", str(meta.get("provider") or "")),
        ]
        if meta.get("interrupted"):
            rows.append(("note", "the batch was interrupted: these figures cover the notebooks run"))
        body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
        return f"<h1>Class report</h1><table class='kv'>{body}</table>"

    def _exercise_table(self, ranked: list[tuple[tuple[str, str], _Exercise]]) -> str:
        rows = []
        for (sheet, name), ex in ranked:
            types = ", ".join(f"{html.escape(t)} {n}" for t, n in ex.errors.most_common())
            rows.append(
                f"<tr><td>{html.escape(sheet)}</td><td><code>{html.escape(name)}</code></td>"
                f"<td class='n'>{ex.submissions}</td><td class='n'>{ex.failed}</td>"
                f"<td class='n'>{ex.knock_on}</td><td class='n'>{_rate(ex):.0%}</td>"
                f"<td>{types}</td><td class='n'>{ex.hints}</td></tr>"
            )
        head = (
            "<tr><th>notebook</th><th>exercise</th><th>submissions</th><th>failed</th>"
            "<th>of which after an earlier failure</th><th>share failed by its own mistake</th>"
            "<th>error types (own mistakes)</th><th>hints given</th></tr>"
        )
        note = (
            "<p>A cell that fails on a name an earlier cell was to define, and did not because it "
            "failed, is counted as failing after an earlier failure: the mistake is the earlier "
            "cell's (nbgrader's test cells after a wrong answer, later steps of an analysis).</p>"
        )
        return f"<h2>Exercises that fail most</h2>{note}<table>{head}{''.join(rows)}</table>"

    def _mistakes_section(self) -> str:
        ranked = sorted(self.mistakes.items(), key=lambda kv: (-kv[1].count, kv[0]))
        out = [
            "<h2>Most common mistakes</h2>",
            "<p>Grouped by exercise and error signature; each example is "
            "one student's cell, anonymised (comments, e-mail addresses and the student's name removed).</p>",
        ]
        for (sheet, exercise, signature), mistake in ranked[:30]:
            students = "student" if mistake.count == 1 else "students"
            out.append(
                f"<div class='mistake'><h3>{mistake.count} {students} · {html.escape(sheet)} · "
                f"<code>{html.escape(exercise)}</code></h3><p class='sig'>{html.escape(signature)}</p>"
                f"<pre>{html.escape(mistake.example)}</pre><p class='err'>{html.escape(mistake.error)}</p>"
            )
            if mistake.hint:
                out.append(
                    f"<details><summary>the hint it got</summary><p>{html.escape(mistake.hint)}</p></details>"
                )
            out.append("</div>")
        if len(ranked) > 30:
            out.append(f"<p>… and {len(ranked) - 30} rarer mistakes.</p>")
        if self.knock_ons:
            out.append(
                f"<p>Not listed: {self.knock_ons} failures that followed from an earlier cell's failure.</p>"
            )
        return "".join(out)

    def _plots(self, ranked: list[tuple[tuple[str, str], _Exercise]]) -> str:
        if not ranked:
            return ""
        try:
            images = [
                _rate_plot(ranked),
                _types_plot(ranked),
                _per_submission_plot(self.failing_per_submission),
            ]
        except ImportError:
            return "<p class='note'>The plots need matplotlib: <code>pip install 'nbrefine[plot]'</code>.</p>"
        tags = "".join(
            f"<figure><img alt='{html.escape(alt)}' src='data:image/png;base64,{data}'></figure>"
            for alt, data in images
        )
        return f"<h2>Plots</h2><div class='plots'>{tags}</div>"


def _rate(ex: _Exercise) -> float:
    """The share of submissions where the cell failed by its own mistake."""
    return ex.own / ex.submissions if ex.submissions else 0.0


def _label(key: tuple[str, str]) -> str:
    sheet, name = key
    return f"{sheet.removesuffix('.ipynb')} · {name}"


def _figure(height: float) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, height), dpi=100)
    return fig, fig.add_subplot(1, 1, 1)


def _png(fig: Any, alt: str) -> tuple[str, str]:
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return alt, base64.b64encode(buffer.getvalue()).decode("ascii")


def _rate_plot(ranked: list[tuple[tuple[str, str], _Exercise]]) -> tuple[str, str]:
    shown = ranked[:20][::-1]
    fig, ax = _figure(1.4 + 0.35 * len(shown))
    labels = [_label(k) for k, _ in shown]
    own = [100 * _rate(ex) for _, ex in shown]
    after = [100 * ex.knock_on / ex.submissions if ex.submissions else 0.0 for _, ex in shown]
    ax.barh(labels, own, color="#c0392b", label="its own mistake")
    ax.barh(labels, after, left=own, color="#bbbbbb", label="after an earlier failure")
    ax.set_xlabel("share of submissions where the cell failed (%)")
    ax.set_xlim(0, 100)
    ax.set_title("Exercises that fail most")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(fig, "share of submissions failing, per exercise")


def _types_plot(ranked: list[tuple[tuple[str, str], _Exercise]]) -> tuple[str, str]:
    shown = [(k, ex) for k, ex in ranked[:20] if ex.own][::-1]
    kinds = [t for t, _ in sum((ex.errors for _, ex in shown), Counter()).most_common(8)]
    fig, ax = _figure(1.6 + 0.35 * max(1, len(shown)))
    left = [0] * len(shown)
    for kind in kinds:
        counts = [ex.errors.get(kind, 0) for _, ex in shown]
        ax.barh([_label(k) for k, _ in shown], counts, left=left, label=kind)
        left = [a + b for a, b in zip(left, counts, strict=True)]
    other = [ex.own - done for (_, ex), done in zip(shown, left, strict=True)]
    if any(other):
        ax.barh([_label(k) for k, _ in shown], other, left=left, label="other")
    ax.set_xlabel("submissions failing by their own mistake")
    ax.set_title("Error types per exercise")
    if kinds:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(fig, "error types per exercise")


def _per_submission_plot(counts: Counter[int]) -> tuple[str, str]:
    fig, ax = _figure(3.0)
    xs = list(range(0, max(counts, default=0) + 1))
    ax.bar(xs, [counts.get(x, 0) for x in xs], color="#2c7fb8")
    ax.set_xticks(xs)
    ax.set_xlabel("failing cells in the submission")
    ax.set_ylabel("submissions")
    ax.set_title("How many cells failed per submission")
    return _png(fig, "failing cells per submission")


_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; }}
table {{ border-collapse: collapse; margin: 1rem 0; }}
th, td {{ border: 1px solid #ccc; padding: .3rem .6rem; text-align: left; vertical-align: top; }}
td.n {{ text-align: right; }}
table.kv th {{ background: #f4f4f4; }}
pre {{ background: #f6f8fa; padding: .6rem; overflow-x: auto; }}
.mistake {{ border-top: 1px solid #ddd; margin-top: 1rem; }}
.sig {{ font-family: monospace; color: #555; }}
.err {{ color: #a00; font-family: monospace; }}
figure {{ margin: 1rem 0; }} img {{ max-width: 100%; }}
</style></head><body>
"""

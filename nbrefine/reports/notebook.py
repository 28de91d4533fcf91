"""The report of one notebook's repair (``nbrefine fix NOTEBOOK``): the summary printed at the end,
and the ``--report`` file as JSON or Markdown.

:func:`report_data` is the report as plain data: the JSON report, and what a batch keeps for each
notebook in its run record (the batch's own reports, :mod:`.summary` and :mod:`.classroom`, read it).

May import: :mod:`nbrefine.headless` (the results it renders), :mod:`nbrefine.grounding` (text
helpers), :mod:`nbrefine._version` and the standard library.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from .._version import __version__
from ..grounding.text import clip
from ..headless.fixer import CellResult, FixOptions, ProviderChoice, RunResult
from ..headless.notebook_files import first_line

__all__ = ["OFFLINE_HINT", "report_data", "report_json", "report_markdown", "summary_text"]

OFFLINE_HINT = (
    "The offline quick fixes repair typos, missing imports and the like, not logic; with "
    "ANTHROPIC_API_KEY set, or --provider anthropic, a model is asked as well."
)


def summary_text(run: RunResult, opts: FixOptions, choice: ProviderChoice, written: str) -> str:
    """What ``nbrefine fix`` prints at the end: the counts, the error types, every fix's diff and
    the cells still failing; ``written`` is the line saying what was written."""
    s = run.summary()
    rows = [
        ("cells run", s["cells_run"]),
        ("passed as they were", s["passed_as_they_were"]),
        ("failed", s["failed"]),
        ("  fixed at first attempt", s["fixed_at_first_attempt"]),
    ]
    after = s["fixed_after_attempts"]
    if after:
        rows.extend((f"  fixed after {n} attempts", count) for n, count in after.items())
    else:
        rows.append(("  fixed after more attempts", 0))
    rows.append(("  unfixed", s["unfixed"]))
    if s["not_run"]:
        rows.append(("not run", s["not_run"]))
    lines = [f"nbrefine fix {opts.notebook}: {s['cells_run']} cells in {run.duration_s:.1f} s", ""]
    lines.extend(f"  {label:<28}{value:>4}" for label, value in rows)
    if s["by_error_type"]:
        width = max(12, *(len(k) for k in s["by_error_type"]))
        lines += ["", f"  {'error type':<{width}}  failed  fixed  unfixed"]
        for name, row in s["by_error_type"].items():
            lines.append(f"  {name:<{width}}  {row['failed']:>6}  {row['fixed']:>5}  {row['unfixed']:>7}")
    lines += _fixed_lines(run)
    lines += _failing_lines(run, choice)
    lines.append("")
    if run.stopped:
        lines.append(f"stopped: {run.stopped}")
    lines.append(written)
    unfixed = sum(c.status == "unfixed" for c in run.cells)
    failing = "1 cell still fails" if unfixed == 1 else f"{unfixed} cells still fail"
    lines.append("every cell passes" if run.all_pass else failing + (" (run stopped)" if run.stopped else ""))
    return "\n".join(lines)


def _fixed_lines(run: RunResult) -> list[str]:
    lines: list[str] = []
    for cell in run.cells:
        if cell.status == "fixed":
            lines += [
                "",
                f"cell {cell.number}{_id_note(cell)}: {cell.error_type}, fixed at attempt "
                f"{len(cell.attempts)} ({cell.provider}, {cell.repair_s:.2f} s)",
            ]
            lines.extend("  " + line for line in cell.diff.splitlines())
    return lines


def _failing_lines(run: RunResult, choice: ProviderChoice) -> list[str]:
    unfixed = [c for c in run.cells if c.status == "unfixed"]
    if not unfixed:
        return []
    lines = ["", "still failing:"]
    for c in unfixed:
        lines.append(clip(f"  cell {c.number}{_id_note(c)}: {c.failing_text()}", 300))
        if c.hint and c.hint["status"] != "error":
            lines.extend(f"    {line}" for line in str(c.hint["text"] or "").splitlines())
    if choice.name == "offline" and any(c.attempts for c in unfixed):
        first, _, rest = OFFLINE_HINT.partition("; ")
        lines += [f"  ({first};", f"  {rest})"]
    return lines


def _id_note(cell: CellResult) -> str:
    return f" [{cell.cell_id}]" if cell.cell_id else ""


def report_json(
    run: RunResult, opts: FixOptions, choice: ProviderChoice, written: str | None, code: int
) -> str:
    return json.dumps(report_data(run, opts, choice, written, code), indent=2, ensure_ascii=False) + "\n"


def report_data(
    run: RunResult, opts: FixOptions, choice: ProviderChoice, written: str | None, code: int
) -> dict[str, Any]:
    """One notebook's report as plain data (the JSON report; a batch keeps one per notebook)."""
    return {
        "nbrefine_version": __version__,
        "notebook": str(opts.notebook),
        "output": written,
        "provider": {
            "name": choice.name,
            "requested": choice.requested,
            "quick_fixes": choice.quick_fixes,
            "model": choice.model,
            "note": choice.note,
        },
        "duration_s": round(run.duration_s, 3),
        "exit_code": code,
        "stopped": run.stopped,
        "summary": run.summary(),
        "cells": [c.to_json() for c in run.cells],
    }


def report_markdown(
    run: RunResult, opts: FixOptions, choice: ProviderChoice, written: str | None, code: int
) -> str:
    s = run.summary()
    out = [
        f"# nbrefine report: `{opts.notebook}`",
        "",
        f"- {choice.describe()}",
        f"- output: {f'`{written}`' if written else 'none (dry run)' if opts.output is None else 'none'}",
        f"- ran in {run.duration_s:.1f} s; exit code {code}"
        + (" (every cell passes)" if run.all_pass else " (some cell still fails)"),
    ]
    if run.stopped:
        out.append(f"- **stopped**: {run.stopped}")
    after = ", ".join(f"{n} attempts: {c}" for n, c in s["fixed_after_attempts"].items()) or "0"
    out += [
        "",
        "| cells run | passed as they were | failed | fixed at first attempt "
        "| fixed after more attempts | unfixed |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {s['cells_run']} | {s['passed_as_they_were']} | {s['failed']} | {s['fixed_at_first_attempt']} "
        f"| {after} | {s['unfixed']} |",
    ]
    if s["by_error_type"]:
        out += ["", "| error type | failed | fixed | unfixed |", "|---|---:|---:|---:|"]
        out += [
            f"| {k} | {v['failed']} | {v['fixed']} | {v['unfixed']} |" for k, v in s["by_error_type"].items()
        ]
    out += _cell_table(run)
    out += _cell_sections(run)
    if choice.name == "offline" and any(c.status == "unfixed" and c.attempts for c in run.cells):
        out += ["", f"_{OFFLINE_HINT}_"]
    return "\n".join(out) + "\n"


def _cell_table(run: RunResult) -> list[str]:
    out = [
        "",
        "## Cells",
        "",
        "| cell | id | result | error | attempts | provider | time |",
        "|---:|---|---|---|---:|---|---:|",
    ]
    for cell in run.cells:
        if cell.status in ("empty", "skipped"):
            continue
        error = _md(f"{cell.error_type}: {cell.error_message}") if cell.error_type else ""
        out.append(
            f"| {cell.number} | {_md(cell.cell_id or '')} | {cell.status} | {error} "
            f"| {len(cell.attempts) or ''} | {cell.provider} | {cell.duration_s:.2f} s |"
        )
    return out


def _cell_sections(run: RunResult) -> list[str]:
    out: list[str] = []
    for cell in run.cells:
        if cell.status == "fixed":
            out += [
                "",
                f"### Cell {cell.number}: {cell.error_type}, fixed at attempt {len(cell.attempts)}",
                "",
            ]
            if cell.cause:
                out += [f"Where the cause is: {cell.cause}", ""]
            out += [
                f"- moved cell `{m['id']}` above cell `{m['above']}` and ran it first" for m in cell.moved
            ]
            out += [f"- changed {c['label']}" for c in cell.changed_cells if c["id"] != cell.cell_id]
            if cell.moved or cell.changed_cells:
                out.append("")
            if cell.accept_note:
                out += [f"Accept: {cell.accept_note}.", ""]
            if cell.explanation:
                out += [cell.explanation, ""]
            if cell.diff:
                out += ["```diff", cell.diff, "```"]
        elif cell.status == "unfixed":
            out += ["", f"### Cell {cell.number}: still failing", ""]
            out.append(
                f"`{cell.error_type}: {first_line(cell.error_message)}`"
                if cell.error_type
                else cell.error_message
            )
            if cell.hint and cell.hint["status"] != "error":
                out += ["", f"**{cell.hint['header']}** ({cell.hint['mode']} mode)", ""]
                out.append(str(cell.hint["text"] or ""))
            elif cell.reason:
                out += ["", cell.reason]
            if cell.proposal and cell.proposed_source is not None:
                proposed = difflib.unified_diff(
                    cell.original_source.splitlines(), cell.proposed_source.splitlines(), lineterm=""
                )
                out += ["", "The proposal (not applied; `--apply-proposals` applies such fixes):", ""]
                out += ["```diff", *list(proposed)[2:], "```"]
    return out


def _md(text: str) -> str:
    return clip(first_line(text), 120).replace("|", "\\|")

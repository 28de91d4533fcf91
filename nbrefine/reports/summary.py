"""The summary of a batch for a repository or CI: Markdown, JSON and JUnit XML.

:class:`Totals` is filled one record entry at a time while the batch runs (it holds counts, not
notebooks); the renderers take it and stream the per-notebook rows from the run record.
``--fail-on unfixed`` (the default) fails a notebook when a cell still fails after the repair;
``--fail-on any`` also when a cell failed at all, even if nbrefine fixed it (the notebook as
committed is broken).

May import: this package's :mod:`.files` and the standard library."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from xml.sax.saxutils import escape, quoteattr

from .files import atomic_text

__all__ = ["FAIL_ON", "Totals", "write_json", "write_junit", "write_markdown"]

FAIL_ON = ("unfixed", "any")
Entries = Callable[[], Iterator[dict[str, Any]]]


def outcome(entry: dict[str, Any], fail_on: str) -> str:
    """ "pass", "fail", "error" (bad input: not run) or "not_run" (the batch was interrupted)."""
    status = entry.get("status")
    if status == "error":
        return "error"
    if status in ("cancelled", "not_run"):
        return "not_run"
    if status == "fail":
        return "fail"
    failed = int(_summary(entry).get("failed") or 0)
    return "fail" if fail_on == "any" and failed else "pass"


def _summary(entry: dict[str, Any]) -> dict[str, Any]:
    summary = (entry.get("report") or {}).get("summary")
    return summary if isinstance(summary, dict) else {}


def _cells(entry: dict[str, Any]) -> list[dict[str, Any]]:
    cells = (entry.get("report") or {}).get("cells")
    return cells if isinstance(cells, list) else []


@dataclass
class Totals:
    """Counts over the notebooks of a batch, added up as their entries come in."""

    fail_on: str = "unfixed"
    notebooks: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("pass", "fail", "error", "not_run"), 0)
    )
    resumed: int = 0
    changed: int = 0
    cells: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("run", "failed", "fixed", "unfixed", "hints"), 0)
    )
    by_error_type: dict[str, dict[str, int]] = field(default_factory=dict)
    tokens: int = 0
    cost_usd: float = 0.0
    cost_unknown: int = 0  # notebooks whose model replies had no known price
    seconds: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(
            ("total_s", "queued_s", "kernel_start_s", "spare_start_s", "setup_s", "cells_s", "shutdown_s"),
            0.0,
        )
    )
    timed: int = 0  # notebooks run in this batch (not resumed), whose timings are added up

    @property
    def count(self) -> int:
        return sum(self.notebooks.values())

    def add(self, entry: dict[str, Any]) -> None:
        self.notebooks[outcome(entry, self.fail_on)] += 1
        self.resumed += bool(entry.get("resumed"))
        self.changed += bool(entry.get("changed"))
        summary = _summary(entry)
        for key, source in (("run", "cells_run"), ("failed", "failed"), ("unfixed", "unfixed")):
            self.cells[key] += int(summary.get(source) or 0)
        cells = _cells(entry)
        self.cells["fixed"] += sum(c.get("status") == "fixed" for c in cells)
        self.cells["hints"] += sum(bool(c.get("hint")) and c["hint"].get("status") != "error" for c in cells)
        self._add_types(cells)
        self._add_usage(entry)
        timings = entry.get("timings") or {}
        if timings and not entry.get("resumed") and entry.get("status") in ("pass", "fail"):
            self.timed += 1
            for key in self.seconds:
                self.seconds[key] += float(timings.get(key) or 0.0)

    def _add_types(self, cells: list[dict[str, Any]]) -> None:
        seen: set[str] = set()
        for cell in cells:
            if cell.get("status") not in ("fixed", "unfixed"):
                continue
            name = str(cell.get("error_type") or "?")
            row = self.by_error_type.setdefault(
                name, dict.fromkeys(("failed", "fixed", "unfixed", "notebooks"), 0)
            )
            row["failed"] += 1
            row["fixed" if cell["status"] == "fixed" else "unfixed"] += 1
            if name not in seen:
                seen.add(name)
                row["notebooks"] += 1

    def _add_usage(self, entry: dict[str, Any]) -> None:
        usage = (entry.get("report") or {}).get("usage")
        if not isinstance(usage, dict):
            return
        self.tokens += sum(
            int(usage.get(k) or 0)
            for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
        )
        if usage.get("cost_usd") is None:
            self.cost_unknown += 1
        else:
            self.cost_usd += float(usage["cost_usd"])

    def exit_code(self) -> int:
        """2: some input was bad; 1: some notebook fails (per ``fail_on``); 0: all pass."""
        if self.notebooks["error"]:
            return 2
        return 1 if self.notebooks["fail"] else 0

    def mean(self, key: str) -> float | None:
        return self.seconds[key] / self.timed if self.timed else None

    def to_json(self) -> dict[str, Any]:
        return {
            "fail_on": self.fail_on,
            "notebooks": self.count,
            **{f"notebooks_{k}": v for k, v in self.notebooks.items()},
            "resumed": self.resumed,
            "changed": self.changed,
            **{f"cells_{k}": v for k, v in self.cells.items()},
            "by_error_type": dict(sorted(self.by_error_type.items())),
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "notebooks_with_unknown_cost": self.cost_unknown,
            "mean_per_notebook_s": {k: _round(self.mean(k)) for k in self.seconds},
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


# --------------------------------------------------------------------------- JSON


def write_json(path: Path, meta: dict[str, Any], totals: Totals, entries: Entries) -> None:
    """One JSON document; the notebooks (each with its full report) are streamed into it."""
    with atomic_text(path) as fh:
        head = {**meta, "summary": totals.to_json()}
        text = json.dumps(head, indent=2, ensure_ascii=False, default=str)
        fh.write(text[:-2] + ',\n  "notebooks": [')
        for number, entry in enumerate(entries()):
            row = {**_public(entry), "outcome": outcome(entry, totals.fail_on)}
            fh.write(("," if number else "") + "\n    " + json.dumps(row, ensure_ascii=False, default=str))
        fh.write("\n  ]\n}\n")


def _public(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("kind", "run")}


# --------------------------------------------------------------------------- Markdown


def write_markdown(path: Path, meta: dict[str, Any], totals: Totals, entries: Entries) -> None:
    with atomic_text(path) as fh:
        _markdown_head(fh, meta, totals)
        _markdown_notebooks(fh, totals, entries)
        _markdown_failures(fh, totals, entries)


def _markdown_head(fh: TextIO, meta: dict[str, Any], totals: Totals) -> None:
    n, c = totals.notebooks, totals.cells
    state = "**interrupted** after" if meta.get("interrupted") else "finished in"
    fh.write(f"# nbrefine fix: {totals.count} notebooks\n\n")
    fh.write(f"- {meta.get('provider', '')}\n")
    fh.write(f"- {state} {float(meta.get('duration_s') or 0):.1f} s with {meta.get('jobs')} jobs; ")
    fh.write(f"exit code {meta.get('exit_code')} (`--fail-on {totals.fail_on}`)\n")
    if meta.get("interrupted"):
        fh.write("- the notebooks the interruption left unfinished are listed as not run\n")
    if totals.resumed:
        fh.write(
            f"- {totals.resumed} notebooks were done by an earlier run with the same settings (`--resume`)\n"
        )
    fh.write("\n| notebooks | pass | fail | could not run | not run |\n|---:|---:|---:|---:|---:|\n")
    fh.write(f"| {totals.count} | {n['pass']} | {n['fail']} | {n['error']} | {n['not_run']} |\n\n")
    fh.write("| cells run | failed | fixed | still failing | hints given |\n|---:|---:|---:|---:|---:|\n")
    fh.write(f"| {c['run']} | {c['failed']} | {c['fixed']} | {c['unfixed']} | {c['hints']} |\n")
    if totals.by_error_type:
        fh.write("\n## By error type\n\n| error type | cells failed | fixed | still failing | notebooks |\n")
        fh.write("|---|---:|---:|---:|---:|\n")
        ranked = sorted(totals.by_error_type.items(), key=lambda kv: (-kv[1]["failed"], kv[0]))
        for name, row in ranked:
            counts = f"{row['failed']} | {row['fixed']} | {row['unfixed']} | {row['notebooks']}"
            fh.write(f"| {_md(name)} | {counts} |\n")
    gate = meta.get("requests")
    if isinstance(gate, dict) and gate.get("requests"):
        fh.write(
            f"\n**Model requests:** {gate['requests']} (at most {gate.get('max_in_flight')} at once, "
            f"limit {meta.get('max_requests')}); rate limited {gate.get('rate_limited', 0)} times "
            f"(every job paused {float(gate.get('paused_s') or 0):.1f} s in all); {_usage_text(totals)}.\n"
        )


def _usage_text(totals: Totals) -> str:
    cost = f"${totals.cost_usd:.4f}"
    if totals.cost_unknown:
        cost += f" (+ {totals.cost_unknown} notebooks at an unknown price)"
    return f"{totals.tokens:,} tokens, {cost}"


def _markdown_notebooks(fh: TextIO, totals: Totals, entries: Entries) -> None:
    fh.write("\n## Notebooks\n\n")
    fh.write("| notebook | result | cells run | failed | fixed | still failing | time | output |\n")
    fh.write("|---|---|---:|---:|---:|---:|---:|---|\n")
    for entry in entries():
        s, result = _summary(entry), outcome(entry, totals.fail_on)
        fixed = sum(c.get("status") == "fixed" for c in _cells(entry))
        time_s = float((entry.get("timings") or {}).get("total_s") or 0.0)
        label = {"error": "could not run", "not_run": "not run"}.get(result, result)
        if entry.get("resumed"):
            label += " (earlier run)"
        output = f"`{entry['output']}`" if entry.get("output") else ""
        fh.write(
            f"| `{_md(entry.get('path', ''))}` | {label} | {s.get('cells_run', '')} | {s.get('failed', '')} "
            f"| {fixed if s else ''} | {s.get('unfixed', '')} | {time_s:.1f} s | {output} |\n"
        )


def _markdown_failures(fh: TextIO, totals: Totals, entries: Entries) -> None:
    if totals.cells["unfixed"] or totals.notebooks["fail"]:
        fh.write("\n## Still failing\n\n")
        for entry in entries():
            for line in failing_lines(entry):
                fh.write(f"- `{_md(entry.get('path', ''))}` {_md(line, 300)}\n")
    if totals.notebooks["error"]:
        fh.write("\n## Could not run\n\n")
        for entry in entries():
            if entry.get("status") == "error":
                message = str(entry.get("message", ""))
                message = message.removeprefix(f"{entry.get('path')}: ")
                fh.write(f"- `{_md(entry.get('path', ''))}`: {_md(message, 300)}\n")


def failing_lines(entry: dict[str, Any]) -> list[str]:
    """One line per cell that still fails (and why the run stopped, if it did)."""
    lines = []
    for cell in _cells(entry):
        if cell.get("status") != "unfixed":
            continue
        cid = f" [{cell['id']}]" if cell.get("id") else ""
        error = f"{cell.get('error_type')}: {_first(cell.get('error_message'))}".strip(": ")
        why = _first(cell.get("reason"))
        lines.append(f"cell {cell.get('cell')}{cid}: {error}" + (f" — {why}" if why else ""))
    if entry.get("status") == "fail" and entry.get("message"):
        lines.append(f"stopped: {entry['message']}")
    return lines


def _first(text: Any) -> str:
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[0] if lines else ""


def _md(text: Any, limit: int = 120) -> str:
    one = _first(text)
    one = one if len(one) <= limit else one[: limit - 1] + "…"
    return one.replace("|", "\\|").replace("`", "'")


# --------------------------------------------------------------------------- JUnit XML


def write_junit(path: Path, meta: dict[str, Any], totals: Totals, entries: Entries) -> None:
    """JUnit XML as CI systems read it: one test case per notebook, ``<failure>`` when it fails
    (per ``--fail-on``), ``<error>`` when it could not run, ``<skipped>`` when it was not run."""
    n = totals.notebooks
    with atomic_text(path) as fh:
        fh.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        attrs = (
            f'name="nbrefine fix" tests="{totals.count}" failures="{n["fail"]}" errors="{n["error"]}" '
            f'skipped="{n["not_run"]}" time="{float(meta.get("duration_s") or 0):.3f}"'
        )
        fh.write(f"<testsuites {attrs}>\n  <testsuite {attrs}>\n")
        for entry in entries():
            fh.write(_testcase(entry, totals.fail_on))
        fh.write("  </testsuite>\n</testsuites>\n")


def _testcase(entry: dict[str, Any], fail_on: str) -> str:
    path = Path(str(entry.get("path", "")))
    classname = ".".join(path.parent.parts) or "notebooks"
    time_s = float((entry.get("timings") or {}).get("total_s") or 0.0)
    head = f'    <testcase classname={quoteattr(classname)} name={quoteattr(path.name)} time="{time_s:.3f}"'
    result = outcome(entry, fail_on)
    if result == "pass":
        return head + " />\n"
    if result == "error":
        body = f'<error message={quoteattr(_first(entry.get("message")))} type="InputError" />'
    elif result == "not_run":
        body = '<skipped message="not run: the batch was interrupted" />'
    else:
        lines = failing_lines(entry) or [
            f"cell {c.get('cell')}: {c.get('error_type')}, fixed by nbrefine"
            for c in _cells(entry)
            if c.get("status") == "fixed"
        ]
        kinds = sorted(
            {str(c.get("error_type")) for c in _cells(entry) if c.get("status") in ("fixed", "unfixed")}
        )
        message = (
            f"{len(lines)} failing cell(s): {', '.join(kinds)}"
            if kinds
            else (lines[0] if lines else "failed")
        )
        kind = quoteattr(kinds[0] if kinds else "Failure")
        text = escape("\n".join(lines))
        body = f"<failure message={quoteattr(message)} type={kind}>{text}</failure>"
    return f"{head}>\n      {body}\n    </testcase>\n"


def iter_entries(entries: Iterable[dict[str, Any]]) -> Entries:
    """An :data:`Entries` over a list (tests, and one-notebook runs)."""
    items = list(entries)
    return lambda: iter(items)

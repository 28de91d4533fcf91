"""The cross-cell corpus through ``nbrefine fix``: is each fix placed where the bug is?

Each case of ``tests/corpus/crosscell/`` (a function cell and a checks cell from QuixBugs or
HumanEvalFix, the same as an nbgrader assignment, cascades, out-of-order cells, unchecked index
edits; see its README) is written as a notebook and repaired by ``nbrefine fix`` in a real kernel,
the model being the scripted provider with the case's replies (shaped as real models answer).

    .venv/bin/python bench/crosscell_corpus.py          # the figures the README quotes
    OTHER_VENV/bin/python bench/crosscell_corpus.py     # the same corpus through another nbrefine

prints, per kind and in all: placed right (every cell the case expects changed holds exactly the
expected source, every other cell is byte-identical, the moved cell is where it belongs), checks
kept (the read-only cells are byte-identical), proposals (fixes not applied because nothing checks
them), and the wall time. ``tests/e2e/test_crosscell_corpus.py`` asserts every case.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus" / "crosscell"


@dataclass
class CaseOutcome:
    name: str
    kind: str
    placed_right: bool
    checks_kept: bool
    proposal: bool
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    report: dict[str, Any] = field(default_factory=dict)


def cases() -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(CORPUS.glob("*.json"))]


def notebook_of(case: dict[str, Any]) -> Any:
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    cells = []
    for cell in case["cells"]:
        make = new_code_cell if cell["type"] == "code" else new_markdown_cell
        cells.append(make(cell["source"], id=cell["id"], metadata=cell.get("metadata") or {}))
    notebook = new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nbformat.from_dict(notebook)


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_case(case: dict[str, Any], folder: Path) -> CaseOutcome:
    """Repair the case's notebook with ``nbrefine fix`` and compare with what it expects."""
    import nbformat

    from nbrefine.cli.main import main

    folder.mkdir(parents=True, exist_ok=True)
    source, out, report = folder / "case.ipynb", folder / "case.fixed.ipynb", folder / "report.json"
    nbformat.write(notebook_of(case), source)
    (folder / "replies.json").write_text(json.dumps(case["replies"]))
    started = time.perf_counter()
    with (
        _environ(NBREFINE_SCRIPTED_REPLIES=str(folder / "replies.json")),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        main(
            [
                "fix",
                str(source),
                "-o",
                str(out),
                "--report",
                str(report),
                "--provider",
                "scripted",
                *case["args"],
            ]
        )
    seconds = time.perf_counter() - started
    fixed = nbformat.read(out, as_version=4)
    data = json.loads(report.read_text())
    return _compare(case, fixed, data, seconds)


def _compare(case: dict[str, Any], fixed: Any, report: dict[str, Any], seconds: float) -> CaseOutcome:
    expect = case["expect"]
    original = {cell["id"]: cell for cell in case["cells"]}
    now = {cell.get("id"): cell for cell in fixed.cells}
    order = [cell.get("id") for cell in fixed.cells]
    problems: list[str] = []
    for cell_id, source in expect.get("changed", {}).items():
        if now[cell_id].source != source:
            problems.append(f"{cell_id}: not the expected fix")
    for cell_id in expect.get("identical", []):
        if now[cell_id].source != original[cell_id]["source"]:
            problems.append(f"{cell_id}: changed, expected byte-identical")
    moved = expect.get("moved")
    if moved and order.index(moved["cell"]) != order.index(moved["above"]) - 1:
        problems.append(f"{moved['cell']}: not moved just above {moved['above']}")
    if not moved and order != [cell["id"] for cell in case["cells"]]:
        problems.append("the cell order changed")
    by_id = {cell["id"]: cell for cell in report["cells"]}
    for cell_id, status in expect.get("status", {}).items():
        got = by_id[cell_id]["status"]
        if status == "proposal":
            if not by_id[cell_id].get("proposal"):
                problems.append(f"{cell_id}: not reported as a proposal ({got}: {by_id[cell_id]['reason']})")
        elif got != status:
            problems.append(f"{cell_id}: status {got}, expected {status} ({by_id[cell_id]['reason'][:160]})")
    for cell_id, cause in expect.get("cause", {}).items():
        sentence = by_id[cell_id].get("cause", "")  # an older nbrefine's report has no cause
        if cause == cell_id and sentence:
            problems.append(f"{cell_id}: the cause is the cell itself, yet nbrefine said {sentence!r}")
        elif cause != cell_id and f"'{cause}'" not in sentence:
            problems.append(f"{cell_id}: cause {sentence!r} does not name cell {cause!r}")
    readonly = [
        c["id"]
        for c in case["cells"]
        if c["type"] == "code" and (c["metadata"].get("nbgrader", {}).get("locked") or c["id"] == "checks")
    ]
    checks_kept = all(now[i].source == original[i]["source"] for i in readonly)
    proposal = any(cell.get("proposal") for cell in report["cells"])
    placed = not [p for p in problems if "status" not in p and "cause" not in p]
    return CaseOutcome(case["name"], case["kind"], placed, checks_kept, proposal, problems, seconds, report)


def _row(kind: str, rows: list[CaseOutcome]) -> str:
    counts = (
        sum(o.placed_right for o in rows),
        sum(o.checks_kept for o in rows),
        sum(o.proposal for o in rows),
        sum(not o.problems for o in rows),
    )
    return f"{kind:10} {len(rows):5} " + " ".join(
        f"{n:>{w}}" for n, w in zip(counts, (13, 12, 10, 16), strict=True)
    )


def main() -> int:
    import tempfile

    outcomes: list[CaseOutcome] = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases():
            outcome = run_case(case, Path(tmp) / case["name"])
            outcomes.append(outcome)
            mark = "ok " if not outcome.problems else "BAD"
            problems = "; ".join(outcome.problems)
            print(f"{mark} {outcome.kind:9} {outcome.name:48} {outcome.seconds:5.1f} s  {problems}")
    kinds = Counter(o.kind for o in outcomes)
    heads = ("placed right", "checks kept", "proposals", "all as expected")
    print(f"\n{'kind':10} {'cases':>5} " + " ".join(f"{h:>{len(h) + 1}}" for h in heads))
    for kind in sorted(kinds):
        rows = [o for o in outcomes if o.kind == kind]
        print(_row(kind, rows))
    print(_row("all", outcomes))
    print(f"wall time {sum(o.seconds for o in outcomes):.1f} s for {len(outcomes)} notebooks")
    return 0 if all(not o.problems for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())  # nbrefine as the running interpreter has it installed (another venv: another one)

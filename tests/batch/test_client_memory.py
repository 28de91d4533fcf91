"""The client of a batch keeps no notebook in memory: each result is written, recorded and counted,
then dropped; the reports are rendered from the run record on disk.

One notebook is repaired for real (its own kernel); its result then comes back for hundreds of
notebooks through an executor that replays it, as a cluster would send results back.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tracemalloc
from collections.abc import Iterable, Iterator
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from nbrefine.batch.client import BatchOptions, run_batch
from nbrefine.batch.display import QUIET
from nbrefine.batch.notebook_job import JobSettings, NotebookResult, NotebookTask, repair_one
from nbrefine.headless import choose_provider

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("clean_env")]


class Replay:
    """An executor whose every task comes back with the same real result."""

    def __init__(self, result: NotebookResult) -> None:
        self.result = result

    def run(self, tasks: Iterable[NotebookTask]) -> Iterator[NotebookResult]:
        for task in tasks:
            yield dataclasses.replace(self.result, index=task.index, path=task.path)

    def cancel(self) -> None:
        pass


def test_client_memory_does_not_grow_with_the_number_of_notebooks(tmp_path: Path) -> None:
    source = tmp_path / "big.ipynb"
    nb = new_notebook(cells=[new_code_cell("print('x' * 60_000)"), new_code_cell("total = sum(pricez)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, source)
    settings = JobSettings(provider="offline")
    choice = choose_provider(settings.fix_options(source))
    real = repair_one(NotebookTask(0, str(source), str(tmp_path), settings, choice))
    assert real.status == "fail" and real.notebook is not None and len(real.notebook) > 60_000

    def peak(count: int) -> tuple[int, dict[str, object]]:
        folder = tmp_path / f"in{count}" / "submitted"  # a class: nbgrader's layout
        for i in range(count):
            (folder / f"student{i:04d}/ps1").mkdir(parents=True)
            shutil.copy(source, folder / f"student{i:04d}/ps1/ps1.ipynb")
        out = tmp_path / f"out{count}"
        reports = tuple(out / f"summary{ext}" for ext in (".md", ".json", ".xml", ".html"))
        opts = BatchOptions(
            arguments=(str(folder),),
            settings=settings,
            choice=choice,
            output_dir=out,
            record=out / "run.jsonl",
            reports=reports,
            verbosity=QUIET,
        )
        tracemalloc.start()
        try:
            code = run_batch(opts, Replay(real))
            _, top = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert code == 1
        assert len(list(out.glob("student*/ps1/ps1.ipynb"))) == count  # every result was written
        summary = json.loads((out / "summary.json").read_text())
        return top, summary

    peak(5)  # first imports (the plots' matplotlib, ...) happen once, outside the comparison
    small, few = peak(20)
    large, many = peak(200)

    assert (few["summary"]["notebooks_fail"], many["summary"]["notebooks_fail"]) == (20, 200)
    assert len(many["notebooks"]) == 200
    per_notebook = (large - small) / 180
    # Holding the results would cost more than the notebook's text each (60 kB of output).
    # What may stay per notebook is its summary row (the reports' per-notebook table), a few KB:
    # measured 2.2-3.3 KB; the repaired notebook itself (60 KB here) must never be kept.
    assert per_notebook < 0.10 * len(real.notebook), (small, large, per_notebook)

"""A batch worker's kernels: the next notebook's kernel is started ahead (while the current one
runs) and the last one is shut down in the background. Real kernels, through ``repair_one`` as
a worker calls it, and through ``nbrefine fix`` itself; no timing is asserted."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from kernel_io import exists, kernels_in
from nbformat.v4 import new_code_cell, new_notebook

from nbrefine.batch.notebook_job import JobSettings, NotebookResult, NotebookTask, repair_one, spare_kernels
from nbrefine.cli.main import main
from nbrefine.headless import SpareKernels, choose_provider

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("clean_env_in_tmp")]

SETTINGS = JobSettings(provider="offline")
# Where the kernel runs, who it is, and whether a name of an earlier notebook is there.
PROBE = (
    "import os\n"
    "open('probe.json', 'w').write(__import__('json').dumps({'pid': os.getpid(), 'cwd': os.getcwd(), "
    "'leaked': 'secret_of_a' in globals()}))"
)


def notebook(path: Path, *sources: str) -> Path:
    nb = new_notebook(cells=[new_code_cell(src, id=f"c{i}") for i, src in enumerate(sources, 1)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


class Job:
    """``repair_one`` as a pool worker calls it, keeping what the job tells its client."""

    def __init__(self, spares: SpareKernels) -> None:
        self.spares = spares
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, path: Path, next_folder: Path | None) -> NotebookResult:
        choice = choose_provider(SETTINGS.fix_options(path))
        task = NotebookTask(
            0, str(path), str(path.parent), SETTINGS, choice, next_folder=str(next_folder or "")
        )
        self.events = []
        return repair_one(task, lambda kind, data: self.events.append((kind, data)), self.spares)

    def pid(self, kind: str) -> int:
        return next(int(data["pid"]) for k, data in self.events if k == kind)

    def notes(self) -> list[str]:
        return [str(data["text"]) for k, data in self.events if k == "note"]


def probe(folder: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((folder / "probe.json").read_text())
    return found


def test_the_next_notebook_runs_in_the_kernel_started_ahead_in_its_folder_with_nothing_of_the_last(
    tmp_path: Path,
) -> None:
    a = notebook(tmp_path / "a/first.ipynb", "secret_of_a = 42", PROBE)
    b = notebook(tmp_path / "b/second.ipynb", PROBE, "prices = [1, 2]", "total = sum(pricez)")
    with spare_kernels() as spares:
        job = Job(spares)
        first = job(a, next_folder=b.parent)
        assert first.status == "pass", first.report
        spare = job.pid("spare")
        assert spare and spare != job.pid("kernel") and spares.spare is not None
        assert spares.spare.folder == b.parent
        second = job(b, next_folder=None)  # the last one: no spare for nothing
        assert job.pid("kernel") == spare and "spare" not in dict(job.events)
        assert spares.spare is None
    assert probe(b.parent) == {"pid": spare, "cwd": str(b.parent), "leaked": False}
    assert probe(a.parent)["cwd"] == str(a.parent)
    cells = nbformat.reads(second.notebook or "", as_version=4).cells
    assert [c.execution_count for c in cells] == [1, 2, 3]  # the warm-up left no count, no history
    assert second.report["summary"]["fixed_at_first_attempt"] == 1  # the warmed-up engine repairs
    assert not exists(probe(a.parent)["pid"]) and not exists(spare)  # every kernel shut down, and reaped


def test_a_spare_kernel_for_another_folder_is_not_used(tmp_path: Path) -> None:
    a = notebook(tmp_path / "a/first.ipynb", "x = 1")
    c = notebook(tmp_path / "c/third.ipynb", PROBE)
    (tmp_path / "b").mkdir()
    with spare_kernels() as spares:
        job = Job(spares)
        job(a, next_folder=tmp_path / "b")  # expected b next; c comes
        spare = job.pid("spare")
        result = job(c, next_folder=None)
        assert result.status == "pass" and job.notes() == []
    assert probe(c.parent)["cwd"] == str(c.parent) and probe(c.parent)["pid"] != spare
    assert not exists(spare) and not exists(probe(c.parent)["pid"])


def test_a_spare_kernel_that_died_is_replaced_by_a_fresh_one_with_a_one_line_note(tmp_path: Path) -> None:
    a = notebook(tmp_path / "a/first.ipynb", "x = 1")
    b = notebook(tmp_path / "a/second.ipynb", PROBE)
    with spare_kernels() as spares:
        job = Job(spares)
        job(a, next_folder=a.parent)
        spare = job.pid("spare")
        os.killpg(spare, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while spares.spare is not None and spares.spare.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        result = job(b, next_folder=None)
        assert result.status == "pass", result.message
        [note] = job.notes()
        assert note.startswith("the kernel started ahead could not be used (") and "\n" not in note
        assert note.endswith("; starting a fresh one")
    fresh = probe(a.parent)["pid"]
    assert fresh != spare and not exists(fresh) and not exists(spare)


def test_no_kernel_is_left_when_the_worker_is_interrupted(tmp_path: Path) -> None:
    a = notebook(tmp_path / "a/first.ipynb", "x = 1")
    with pytest.raises(KeyboardInterrupt), spare_kernels() as spares:
        job = Job(spares)
        job(a, next_folder=a.parent)
        spare = job.pid("spare")
        raise KeyboardInterrupt
    assert not exists(spare) and not exists(job.pid("kernel"))
    assert kernels_in(tmp_path) == []


def test_a_batch_leaves_no_kernel_and_uses_its_spares(tmp_path: Path, capsys: Any) -> None:
    for name in ("a", "b", "c"):
        notebook(tmp_path / f"nbs/{name}.ipynb", "prices = [1, 2]", "total = sum(pricez)")
    code = main(["fix", "nbs", "--provider", "offline", "--jobs", "1", "--dry-run", "--report", "r.json"])
    assert code == 0, capsys.readouterr()
    report = json.loads((tmp_path / "r.json").read_text())
    timings = [entry["timings"] for entry in report["notebooks"]]
    assert [bool(t["spare_start_s"]) for t in timings] == [True, True, False]  # none after the last
    assert kernels_in(tmp_path) == []


def test_the_kernel_started_ahead_imported_the_engine_and_holds_nothing_else(tmp_path: Path) -> None:
    from nbrefine.headless import open_kernel
    from nbrefine.headless.kernel import call_code

    nb = new_notebook(cells=[new_code_cell("x = 1")])
    warm = call_code("warm_up", "offline")
    with SpareKernels() as spares:
        spares.prepare("python3", tmp_path, warm)
        with open_kernel(nb, "python3", tmp_path, 60, spares=spares) as kernel:
            ran = kernel.run(
                "print(__import__('json').dumps({'loaded': [m in __import__('sys').modules for m in"
                " ('nbrefine.ipython.repairs',"
                " 'nbrefine.providers.offline', 'detect_secrets')],"
                " 'names': sorted(n for n in get_ipython().user_ns if not n.startswith('_')"
                " and n not in get_ipython().user_ns_hidden),"
                " 'count': get_ipython().execution_count, 'cwd': __import__('os').getcwd()}))",
                0,
                store_history=False,
            )
            seen = json.loads(ran.stdout())
    assert seen == {"loaded": [True, True, True], "names": [], "count": 1, "cwd": str(tmp_path)}

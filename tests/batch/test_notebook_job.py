"""batch/notebook_job.py: what one job sends back to the batch's client. A real kernel, through
``repair_one`` as a pool worker calls it."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from nbrefine.batch.notebook_job import JobSettings, NotebookResult, NotebookTask, repair_one
from nbrefine.headless import choose_provider

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("clean_env_in_tmp")]

# What the client does with a result it is sent: unpickle it, then read its report.
UNPICKLE = """
import pickle, sys
result = pickle.load(sys.stdin.buffer)
assert result.status == "pass" and result.report["cells"], result
print(sorted(m for m in sys.modules if m.partition(".")[0] in ("nbformat", "jsonschema")))
"""


def job(tmp_path: Path, *sources: str) -> NotebookResult:
    path = tmp_path / "sales.ipynb"
    nb = new_notebook(cells=[new_code_cell(src, id=f"c{i}") for i, src in enumerate(sources)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    settings = JobSettings(provider="offline")
    return repair_one(
        NotebookTask(0, str(path), str(tmp_path), settings, choose_provider(settings.fix_options(path)))
    )


def test_a_batch_kernels_snapshots_get_no_trial_ready_ahead(tmp_path: Path) -> None:
    """Most cells of a notebook pass: the snapshot each cell gets readies its trials only if the
    cell fails (Refine.trials_ahead off), and a failing cell is still repaired."""
    probe = "print(get_ipython().magics_manager.registry['RefineMagics'].settings.trials_ahead)"
    result = job(tmp_path, "revenue = {'N': 3}", probe, "best = max(revenu)")
    assert result.status == "pass" and result.changed, result.message
    cells = nbformat.reads(result.notebook or "", as_version=4).cells
    assert [o.get("text") for o in cells[1].outputs] == ["False\n"]


def test_a_result_is_plain_data_that_the_client_unpickles_without_nbformat(tmp_path: Path) -> None:
    """The report holds what the kernel published (a repair's attempts, the usage), which comes
    out of notebook outputs. Sent as nbformat's nodes, its unpickling in the client imported
    nbformat there, and with it jsonschema's grammars: 0.8 s of CPU per batch."""
    result = job(tmp_path, "revenue = {'N': 3, 'S': 5}", "best = max(revenu, key=revenue.get)\nbest")
    assert result.status == "pass" and result.changed, result.message
    assert result.report["cells"][1]["attempts"], "no repair was reported (vacuous test)"
    client = subprocess.run(
        [sys.executable, "-c", UNPICKLE], input=pickle.dumps(result), capture_output=True, check=False
    )
    assert client.returncode == 0, client.stderr.decode()[-2000:]
    assert client.stdout.decode().strip() == "[]"

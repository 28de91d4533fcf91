"""The local executor (``--jobs N``) through ``nbrefine fix``: real workers, a real zygote, real
kernels. What it does when a worker dies or Ctrl-C comes is in test_client.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from kernel_io import ended
from nbformat.v4 import new_code_cell, new_notebook

from nbrefine.cli.main import main

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.usefixtures("clean_env_in_tmp"),
    pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="the zygote needs pidfds (Linux 5.3)"),
]

# Waits until two notebooks run at once (a worker runs one at a time), so that both workers take
# one however slowly either starts; then prints the kernel's parent, its zygote.
PARENT = """import os, pathlib, time
running = pathlib.Path("../running")
running.mkdir(exist_ok=True)
(running / str(os.getpid())).touch()
deadline = time.monotonic() + 60
while len(list(running.iterdir())) < 2 and time.monotonic() < deadline:
    time.sleep(0.01)
print(os.getppid())"""


def test_every_worker_forks_its_kernels_from_the_one_zygote_the_batch_started(
    tmp_path: Path, capsys: Any
) -> None:
    for i in range(4):
        nb = new_notebook(cells=[new_code_cell(PARENT, id="c1")])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        (tmp_path / "nbs").mkdir(exist_ok=True)
        nbformat.write(nb, tmp_path / f"nbs/n{i}.ipynb")
    code = main(
        ["fix", "nbs", "--provider", "offline", "--jobs", "2", "-o", "out", "--report", "r.json", "--quiet"]
    )
    assert code == 0, capsys.readouterr()
    entries = json.loads(Path("r.json").read_text())["notebooks"]
    workers = {entry["worker"] for entry in entries}
    parents = {
        nbformat.read(entry["output"], as_version=4).cells[0].outputs[0].text.strip() for entry in entries
    }
    assert len(workers) == 2, entries
    assert len(parents) == 1  # one zygote for both workers (each had its own before)
    (zygote,) = parents
    assert int(zygote) not in {int(w.split(":")[1]) for w in workers}
    assert ended(int(zygote))  # it ended with the batch

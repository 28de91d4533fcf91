"""``%load_ext nbrefine`` stays light (issue 20): the engine, sandbox, providers and SDKs are imported
at the first repair, never by the load or a passing cell. Checked in a fresh interpreter with a real
IPython shell, since this test process has imported everything long ago. No timings here:
bench/bench_load.py measures them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbrefine
from nbrefine import engine

TREE = Path(nbrefine.__file__).resolve().parent.parent  # the code this test process runs

# What a passing cell must not pay for: nbrefine's heavy half and the libraries it may bring.
HEAVY = (
    "nbrefine.engine.job",
    "nbrefine.engine.session",
    "nbrefine.engine.loop",
    "nbrefine.engine.kernel_state",
    "nbrefine.engine.teaching",
    "nbrefine.sandbox",
    "nbrefine.sandbox.fork",
    "nbrefine.providers",
    "nbrefine.grounding",
    "nbrefine.ipython.repairs",
    "nbrefine.ipython.panel",
    "anthropic",
    "openai",
    "detect_secrets",
    "numpy",
    "pandas",
    "rich",
    "ipywidgets",
)

CHILD = r"""
import json, sys
import comm
from IPython.core.interactiveshell import InteractiveShell

heavy = json.loads(sys.argv[1])
seen = {}

def loaded(stage):
    seen[stage] = sorted(name for name in heavy if name in sys.modules)

class Frontend:  # the JupyterLab extension's end of the watch_cells comm
    def on_msg(self, callback):
        self.send = lambda cells: callback({"content": {"data": {"cells": cells}}})

frontend = Frontend()
comm.create_comm = lambda **kwargs: frontend

shell = InteractiveShell.instance()
loaded("before load")
shell.run_line_magic("load_ext", "nbrefine")
loaded("after load")
shell.run_line_magic("config", "Refine.max_attempts = 2")  # the configurable is there at once
shell.run_line_magic("config", "Refine.display = 'text'")
shell.run_line_magic("config", "Refine.quick_fixes = False")  # the scripted provider answers
shell.run_line_magic("config", "Refine.response_cache = False")
settings = next(c for c in shell.configurables if type(c).__name__ == "Refine")
for mode in ("off", "offer"):
    shell.run_line_magic("refine", f"auto {mode}")
    assert shell.run_cell("x = 1", store_history=True).success
    loaded(f"passing cell, auto {mode}")
shell.run_line_magic("refine", "help")
from nbrefine.ipython.watched_cells import watch_cells
watch_cells()  # in a kernel the magics open it; here the fake frontend answers
frontend.send([{"id": "told-1", "source": "x = 1", "metadata": {}}])
loaded("cells told")

try:
    shell.run_cell_magic("refine", "--provider scripted", "y = xx + 1\nassert y == 2")
except Exception as err:
    stopped = type(err).__name__
import nbrefine
from nbrefine.engine import current

session = nbrefine.last_session()
told = [cell.cell_id for cell in current().notebook or ()]
frontend.send([{"id": "told-2", "source": "x = 1", "metadata": {}}])
shell.run_line_magic("refine", "accept")
failing = shell.run_cell("1 / 0", store_history=True)  # automatic mode (offer) after the engine loaded
print(json.dumps({
    "seen": seen, "max_attempts": settings.max_attempts, "stopped": stopped,
    "status": session.status, "decision": session.decision, "y": shell.user_ns.get("y"),
    "told": told, "told later": [cell.cell_id for cell in current().notebook or ()],
    "offered": failing.error_in_exec is not None and shell.magics_manager.registry[
        "RefineMagics"].auto.last_failure is not None,
    "after the repair": sorted(name for name in heavy if name in sys.modules),
}))
"""


def run_child(tmp_path: Path) -> dict[str, object]:
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(["Use the name that exists.\n```python\ny = x + 1\nassert y == 2\n```"]))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NBREFINE_", "ANTHROPIC_", "OPENAI_"))}
    env.update(PYTHONPATH=str(TREE), HOME=str(tmp_path), NBREFINE_SCRIPTED_REPLIES=str(replies))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(HEAVY)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_load_and_passing_cells_import_nothing_heavy_and_the_first_repair_works(tmp_path: Path) -> None:
    out = run_child(tmp_path)
    seen = out["seen"]
    assert seen == {
        "before load": [],
        "after load": [],
        "passing cell, auto off": [],
        "passing cell, auto offer": [],
        "cells told": [],  # kept unread until a repair needs them
    }
    assert out["max_attempts"] == 2
    outcome = (out["stopped"], out["status"], out["decision"], out["y"])
    assert outcome == ("RefineStop", "fixed", "accepted", 2)
    assert out["told"] == ["told-1"]  # what the frontend said before the engine loaded is read then
    assert out["told later"] == ["told-2"]  # and read at once afterwards
    assert out["offered"] is True
    ours = {name for name in HEAVY if name.startswith("nbrefine.") and name != "nbrefine.ipython.panel"}
    assert ours <= set(out["after the repair"])  # the list names modules that exist and do load


def test_every_name_of_the_engine_resolves_from_its_module() -> None:
    """nbrefine.engine imports a name's module at its first use: its table and __all__ agree."""
    table = engine._MODULE_OF
    assert sorted(table) == sorted(engine.__all__)
    for name, module in table.items():
        assert getattr(engine, name) is getattr(sys.modules[f"nbrefine.engine{module}"], name), name

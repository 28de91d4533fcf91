"""The whole flow in a real browser: ``%%refine`` fails, the panel shows the fix, Accept writes it.

JupyterLab 4 and Notebook 7 servers with nbrefine's labextension; the kernel reaches the
loopback fake of the Anthropic API (``ANTHROPIC_BASE_URL``), which answers a wrong candidate
first and a right one second, so the panel reads "Verified fix ready" (2 tries). Accept writes
the fix into the cell and the extension runs the cell, so the panel gives way to the fixed run's
outputs under one line, "✔ Fixed by nbrefine — 2 tries"; tests/browser/test_panel.py looks at
that line and at the panel itself more closely.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from browser_driver import App, JupyterServer, artifact, expect

pytestmark = pytest.mark.timeout(240)

SETUP = "\n".join(
    [
        "%load_ext nbrefine",
        "%config Refine.quick_fixes = False",  # the model path, not the offline quick fixes
        "%config Refine.max_retries = 0",
        "%config Refine.request_timeout = 30.0",
    ]
)
DATA = "prices = [2.5, 4.0, 1.5]\nqty = [2, 1, 4]"
MAGIC = '%%refine -t "assert revenue == 15.0"'
BROKEN = "revenue = sum(p * q for p, q in zip(prices, qtty))"
WRONG = "revenue = sum(p * q for p, q in zip(prices, qty[5]))"
RIGHT = "revenue = sum(p * q for p, q in zip(prices, qty))"
REFINE = f"{MAGIC}\n{BROKEN}"
FIXED = f"{MAGIC}\n{RIGHT}"
SHOW = 'print("revenue is", globals().get("revenue"))'
CELLS = [SETUP, DATA, REFINE, SHOW]
I_REFINE, I_SHOW = 2, 3
PANEL_TIMEOUT = 90_000


def block(code: str, explanation: str) -> dict[str, str]:
    return {"text": f"{explanation}\n\n```python\n{code}\n```"}


def script_wrong_then_right(fake: Any) -> None:
    fake.script(block(WRONG, "The list is called qty."), block(RIGHT, "Zip the two lists as they are."))


def run_to_panel(app: App, name: str, refine_index: int = I_REFINE, first: int = 0) -> Any:
    """Run the cells up to the %%refine one; the cell's locator once the panel shows the fix."""
    for index in range(first, refine_index):
        out = app.run(name, index)
        assert "Error" not in out, out
    app.run(name, refine_index)
    cell = app.cell(name, refine_index, f"refine-{refine_index}")
    expect(cell.get_by_text("Verified fix ready — it passed a trial run")).to_be_visible(
        timeout=PANEL_TIMEOUT
    )
    expect(cell.get_by_role("button", name="Accept")).to_be_enabled()
    return cell


def screenshot(cell: Any, name: str) -> None:
    artifact(cell, name)


def status_of(cell: Any, text: str) -> None:
    expect(cell.get_by_text(text)).to_be_visible(timeout=30_000)


def test_accept_writes_the_fix_advances_the_kernel_and_undo_restores(lab: App, fake: Any) -> None:
    name = "accept.ipynb"
    lab.server.write_notebook(name, CELLS)
    script_wrong_then_right(fake)
    lab.open(name)
    cell = run_to_panel(lab, name)
    expect(cell.get_by_text("zip(prices, qty)").first).to_be_visible()  # the diff
    screenshot(cell, "panel-lab.png")

    cell.get_by_role("button", name="Accept").click()
    lab.wait_source(name, I_REFINE, FIXED)
    status_of(cell, "Fixed by nbrefine — 2 tries")
    screenshot(cell, "panel-lab-accepted.png")
    assert lab.sources(name) == [SETUP, DATA, FIXED, SHOW]
    provenance = lab.js("metadata", name, I_REFINE, "nbrefine")
    assert provenance["original_source"] == REFINE
    assert provenance["attempts"] == 2
    assert len(fake.requests) == 2

    # The kernel ran the fix: the next cell sees the new variable.
    assert lab.run(name, I_SHOW).strip() == "revenue is 15.0"

    # Undo in the cell (Ctrl+Z in its editor) restores the original source.
    cell.locator(".jp-InputArea .cm-content").click()
    lab.page.keyboard.press("Control+z")
    lab.wait_source(name, I_REFINE, REFINE)
    assert lab.sources(name) == CELLS


def test_reject_leaves_the_source_and_the_kernel_as_they_were(lab: App, fake: Any) -> None:
    name = "reject.ipynb"
    lab.server.write_notebook(name, CELLS)
    script_wrong_then_right(fake)
    lab.open(name)
    cell = run_to_panel(lab, name)
    cell.get_by_role("button", name="Reject").click()
    status_of(cell, "Rejected — nothing was changed")
    expect(cell.get_by_role("button", name="Accept")).to_have_count(0)  # no decision left to make
    assert lab.sources(name) == CELLS
    assert lab.js("metadata", name, I_REFINE, "nbrefine") is None
    assert lab.run(name, I_SHOW).strip() == "revenue is None"


def test_accept_lands_in_the_right_cell_after_cells_were_inserted_above(lab: App, fake: Any) -> None:
    name = "inserted.ipynb"
    lab.server.write_notebook(name, CELLS)
    script_wrong_then_right(fake)
    lab.open(name)
    run_to_panel(lab, name)
    lab.js("insertCell", name, 0, "# a cell inserted at the top")
    lab.js("insertCell", name, 3, "# a cell inserted just above the %%refine cell")
    refine_at = I_REFINE + 2
    assert lab.sources(name)[refine_at] == REFINE
    cell = lab.cell(name, refine_at, "moved")
    cell.get_by_role("button", name="Accept").click()
    lab.wait_source(name, refine_at, FIXED)
    status_of(cell, "Fixed by nbrefine — 2 tries")
    assert lab.sources(name) == [
        "# a cell inserted at the top",
        SETUP,
        DATA,
        "# a cell inserted just above the %%refine cell",
        FIXED,
        SHOW,
    ]


def _write_v44(server: JupyterServer, name: str, sources: list[str]) -> None:
    """A notebook of nbformat 4.4: cells without ids (JupyterLab gives them ids; saving keeps those)."""
    cells: list[dict[str, Any]] = [
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": s}
        for s in sources
    ]
    nb = {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 4,
    }
    (server.root / name).write_text(json.dumps(nb), encoding="utf-8")


@pytest.mark.parametrize("minor", [5, 4])
def test_accept_after_the_notebook_was_saved_and_reopened(lab: App, fake: Any, minor: int) -> None:
    """Saved, closed, opened again with a new kernel; the %%refine cell re-run, then Accept.

    nbformat 4.5 files keep their cell ids across the reopen. JupyterLab 4 saves a 4.4 file as
    4.4, without ids, so its cells get new ids on every load: the write still lands, because
    the kernel learns the id when the cell is re-run.
    """
    name = f"reopened-{minor}.ipynb"
    if minor == 5:
        lab.server.write_notebook(name, CELLS)
    else:
        _write_v44(lab.server, name, CELLS)
    lab.open(name)
    lab.js("insertCell", name, 0, "# added before saving")
    ids = lab.js("ids", name)
    lab.js("save", name)
    saved = lab.server.read_notebook(name)
    assert saved.nbformat_minor == minor
    assert [cell.get("id") for cell in saved.cells] == (ids if minor == 5 else [None] * len(ids))

    lab.server.shutdown_kernels()
    script_wrong_then_right(fake)
    lab.open(name)
    if minor == 5:
        assert lab.js("ids", name) == ids
    else:
        assert not set(lab.js("ids", name)) & set(ids)
    cell = run_to_panel(lab, name, refine_index=I_REFINE + 1, first=1)
    cell.get_by_role("button", name="Accept").click()
    lab.wait_source(name, I_REFINE + 1, FIXED)
    status_of(cell, "Fixed by nbrefine — 2 tries")
    assert lab.sources(name) == ["# added before saving", SETUP, DATA, FIXED, SHOW]
    assert lab.run(name, I_SHOW + 1).strip() == "revenue is 15.0"


def test_accept_after_a_page_reload_with_the_kernel_still_running(lab: App, fake: Any) -> None:
    """The panel lives in the kernel: saved with its output, reloaded, it still writes the cell."""
    name = "reload.ipynb"
    lab.server.write_notebook(name, CELLS)
    script_wrong_then_right(fake)
    lab.open(name)
    run_to_panel(lab, name)
    lab.js("save", name)
    kernel = lab.js("kernelId", name)
    lab.open(name)  # the same page reloaded: the session and its kernel are still there
    assert lab.js("kernelId", name) == kernel
    cell = lab.cell(name, I_REFINE, "reloaded")
    accept = cell.get_by_role("button", name="Accept")
    expect(accept).to_be_enabled(timeout=PANEL_TIMEOUT)
    accept.click()
    lab.wait_source(name, I_REFINE, FIXED)
    status_of(cell, "Fixed by nbrefine — 2 tries")


def test_accept_refuses_to_overwrite_a_cell_edited_meanwhile(lab: App, fake: Any) -> None:
    name = "edited.ipynb"
    lab.server.write_notebook(name, CELLS)
    script_wrong_then_right(fake)
    lab.open(name)
    cell = run_to_panel(lab, name)
    edited = REFINE + "  # the user's own attempt"
    lab.js("setSource", name, I_REFINE, edited)
    cell.get_by_role("button", name="Accept").click()
    status_of(cell, "the cell was edited since it ran; nothing was changed")
    screenshot(cell, "panel-lab-edited.png")
    assert lab.sources(name)[I_REFINE] == edited
    assert lab.js("metadata", name, I_REFINE, "nbrefine") is None


def test_notebook7_accept_writes_the_fix_and_undo_restores(nb7: App, fake: Any) -> None:
    name = "nb7-accept.ipynb"
    nb7.server.write_notebook(name, CELLS)
    script_wrong_then_right(fake)
    nb7.open(name)
    assert nb7.js("appName") == "Jupyter Notebook"
    cell = run_to_panel(nb7, name)
    screenshot(cell, "panel-notebook7.png")
    cell.get_by_role("button", name="Accept").click()
    nb7.wait_source(name, I_REFINE, FIXED)
    status_of(cell, "Fixed by nbrefine — 2 tries")
    assert nb7.sources(name) == [SETUP, DATA, FIXED, SHOW]
    assert nb7.run(name, I_SHOW).strip() == "revenue is 15.0"
    cell.locator(".jp-InputArea .cm-content").click()
    nb7.page.keyboard.press("Control+z")
    nb7.wait_source(name, I_REFINE, REFINE)

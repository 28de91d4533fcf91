"""Repairs that span cells (issue 18), from the failing cell to Accept, in JupyterLab 4 and Notebook 7.

The engine finds the cell that causes a failure: a failed assert in a checks cell that calls a
function another cell defines (the fix goes to that cell; the checks never change), a check that
needs two cells changed, a name defined only in a cell below that never ran (that cell moves
above and runs first; no model is asked). The panel shows the plan (one labelled diff per cell,
the move, the checks the trial ran), and Accept writes it into the notebook through the
extension (``write_cell`` for one other cell, ``write_cells`` for several or a move), which runs
the cells in order, so each records the fixed run; one undo puts them all back.

The kernel learns of a cell below from the extension: nbrefine opens a ``watch_cells`` comm when it
loads, and the extension sends the notebook's cells at once and again before each cell runs. The
first test pins that down (an unsaved cell, an edit just before a run). Screenshots of the panel of
a two-cell fix (light, dark, 700 px) go to tests/browser/artifacts/ (``docs/panel-cross-cell.png``
when missing, or with NBREFINE_UPDATE_SCREENSHOTS=1).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Any

import pytest
from browser_driver import ARTIFACTS, ROOT, App, artifact, expect
from panel_page import box, diff_contrast, set_theme
from test_write_cells import FIRST_RANDOM, kinds, order, ran_after, state, text, write_notebook

pytestmark = pytest.mark.timeout(300)

APPS = ["lab", "nb7"]
PANEL_TIMEOUT = 90_000
READY = "Verified fix ready — it passed a trial run"

SETUP = "\n".join(
    [
        "%load_ext nbrefine",
        "%config Refine.quick_fixes = False",  # the model path, not the offline quick fixes
        "%config Refine.max_retries = 0",
        "%config Refine.request_timeout = 30.0",
    ]
)

# (a) a checks cell whose failed assert calls a function two cells above
SEARCH = (
    "def search(x, seq):\n"
    "    for i, v in enumerate(seq):\n"
    "        if x < v:\n"
    "            return i\n"
    "    return len(seq) - 1"
)
SEARCH_FIXED = SEARCH.replace("x < v", "x <= v").replace("len(seq) - 1", "len(seq)")
CHECKS = "assert search(-100, ()) == 0\nassert search(7, (1, 5, 8)) == 2"
SEARCH_CHECKS = f"%%refine\n{CHECKS}"
#: The most common real shape: the corrected function above the unchanged asserts, in one block.
REDEFINED_IN_CHECKS = (
    "`search` returns `len(seq) - 1` when `x` is larger than every element, but the insertion point "
    "is then `len(seq)`; an empty tuple gives -1 instead of 0.\n\n"
    f"```python\n{SEARCH_FIXED}\n\n{CHECKS}\n```\n\nThe asserts are unchanged."
)

# (b) a check that needs two cells changed: a helper and the function that uses it
TO_CENTS = "def to_cents(euros):\n    return int(euros * 10)"
TO_CENTS_FIXED = "def to_cents(euros):\n    return round(euros * 100)"
TOTAL = "def total_cents(prices):\n    return sum(to_cents(p) for p in prices[1:])"
TOTAL_FIXED = "def total_cents(prices):\n    return sum(to_cents(p) for p in prices)"
TWO_CHECKS = "%%refine\nassert to_cents(2.5) == 250 and total_cents([1.0, 2.5]) == 350"
TWO_FIXES = (
    "Two bugs: `to_cents` multiplies by 10 where a euro is 100 cents, and `total_cents` skips the "
    "first price (`prices[1:]`).\n\n"
    f"### In [2] (cell 'to-cents')\n```python\n{TO_CENTS_FIXED}\n```\n\n"
    f"### In [3] (cell 'total')\n```python\n{TOTAL_FIXED}\n```\n"
)

# (c) a name defined only in a cell below, which never ran
USE = "%%refine\nprint(rng.random())"
DEFINE = "import random\nrng = random.Random(0)"

CROSS_DOCS = "panel-cross-cell.png"

# What a repair does first: read the latest list the frontend sent (kept unread until the
# engine loads, so passing cells pay nothing), then the kernel state holds it.
PROBE = (
    "import json as _json\nfrom nbrefine.ipython.watched_cells import take_told_cells as _take\n"
    "from nbrefine.engine import current as _current\n_take()\n"
    "print(_json.dumps([[c.cell_id, c.source, c.readonly] for c in _current().notebook]))"
)

# Count the comm messages this page sends on the notebook's kernel connection.
COUNT_COMM_JS = """(path) => {
  const panel = Array.from(window.jupyterapp.shell.widgets('main'))
    .find(w => w.context && w.context.path === path);
  const kernel = panel.sessionContext.session.kernel;
  window.__nbrCommSent = window.__nbrCommSent || {};
  if (!(path in window.__nbrCommSent)) {
    window.__nbrCommSent[path] = 0;
    kernel.anyMessage.connect((_, args) => {
      if (args.direction === 'send' && args.msg.header.msg_type === 'comm_msg') {
        window.__nbrCommSent[path] += 1;
      }
    });
  }
  return window.__nbrCommSent[path];
}"""


def block(text_: str) -> dict[str, str]:
    return {"text": text_}


def nbrefine_console_errors(app: App) -> list[str]:
    """What the page logged as an error or a warning about nbrefine or its comm."""
    lines = getattr(app, "console", [])
    return [
        line
        for line in lines
        if line.startswith(("[error]", "[warning]", "[pageerror]")) and ("nbrefine" in line or "Comm" in line)
    ]


def open_and_run(app: App, name: str, cells: list[tuple[str, str]], upto: int) -> None:
    """Write and open the notebook, run its cells before ``upto`` (each must pass), then ``upto``."""
    write_notebook(app.server, name, cells)
    app.open(name)
    for index in range(upto):
        out = app.run(name, index)
        assert "Error" not in out, out
    app.run(name, upto)


def panel_of(app: App, name: str, index: int, tag: str, plan: bool = True) -> Any:
    """The failing cell's locator once its panel offers the fix (``plan``: one that spans cells)."""
    cell = app.cell(name, index, tag)
    expect(cell.get_by_text(READY)).to_be_visible(timeout=PANEL_TIMEOUT)
    expect(cell.get_by_role("button", name="Accept")).to_be_enabled()
    expect(cell.locator(".nbr-plan" if plan else ".nbr-code").first).to_be_visible()
    expect(cell.get_by_text("Where the cause is")).to_be_visible()
    return cell


def has_fixed_line(cell: dict[str, Any]) -> bool:
    outputs = cell["outputs"]
    return bool(outputs) and outputs[0].get("metadata", {}).get("nbrefine", {}).get("fixed") is True


def wait_fixed_line(app: App, name: str, cell_id: str, timeout: float = 30.0) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        cells = state(app, name)
        if has_fixed_line(cells[cell_id]):
            return cells
        if time.monotonic() > deadline:
            raise AssertionError(f"no fixed line above the outputs of {cell_id}: {cells[cell_id]}")
        time.sleep(0.2)


def no_traceback(cells: dict[str, dict[str, Any]]) -> None:
    for cell_id, cell in cells.items():
        assert "error" not in kinds(cell), (cell_id, cell["outputs"])


def shot(locator: Any, file: str, docs: bool = False) -> None:
    """A screenshot into the artifacts; into docs/ too when asked (or missing)."""
    artifact(locator, file)
    target = ROOT / "docs" / CROSS_DOCS
    if docs and (os.environ.get("NBREFINE_UPDATE_SCREENSHOTS") == "1" or not target.exists()):
        shutil.copyfile(ARTIFACTS / file, target)


# --------------------------------------------------------------------------- the kernel's cells


@pytest.mark.parametrize("app_name", APPS)
def test_the_kernel_has_the_notebooks_cells_before_each_cell_runs(
    app_name: str, request: pytest.FixtureRequest
) -> None:
    app: App = request.getfixturevalue(app_name)
    name = f"watch-{app_name}.ipynb"
    write_notebook(app.server, name, [("setup", "%load_ext nbrefine"), ("probe", PROBE)])
    app.open(name)
    app.run(name, 0)  # nbrefine loads: the kernel opens the watch_cells comm, the cells come back
    sent = app.page.evaluate(COUNT_COMM_JS, name)
    # Never saved, typed after nbrefine loaded: a cell below, and one marked not editable.
    app.js("insertCell", name, 2, "late = 1")
    app.js("setMetadata", name, 2, "editable", False)
    seen = json.loads(app.run(name, 1).strip().splitlines()[-1])
    ids = app.js("ids", name)
    assert [c[0] for c in seen] == ids and [c[1] for c in seen] == app.sources(name)
    assert seen[2][2] != "" and seen[0][2] == ""  # read-only: the metadata came with it
    # The probe edited, then run: its own run sees the edit (the list went before the request).
    edited = PROBE + "  # edited"
    app.js("setSource", name, 1, edited)
    seen = json.loads(app.run(name, 1).strip().splitlines()[-1])
    assert seen[1][1] == edited
    # Nothing changed since: nothing is sent again.
    before = app.page.evaluate(COUNT_COMM_JS, name)
    assert before > sent
    app.run(name, 1)
    assert app.page.evaluate(COUNT_COMM_JS, name) == before
    assert nbrefine_console_errors(app) == []


# --------------------------------------------------------------------------- (a) the function's cell


@pytest.mark.parametrize("app_name", APPS)
def test_a_failed_check_is_fixed_in_the_function_cell_and_the_checks_stay_byte_identical(
    app_name: str, fake: Any, request: pytest.FixtureRequest
) -> None:
    app: App = request.getfixturevalue(app_name)
    name = f"search-{app_name}.ipynb"
    cells = [("setup", SETUP), ("search", SEARCH), ("data", "points = (1, 5, 8)"), ("checks", SEARCH_CHECKS)]
    fake.script(block(REDEFINED_IN_CHECKS))
    open_and_run(app, name, cells, upto=3)
    cell = panel_of(app, name, 3, f"checks-{app_name}")
    panel = cell.locator(".nbr-panel")
    text_ = panel.inner_text()
    assert "In [2] (cell 'search')" in text_ and "defines search" in text_
    assert "the failing cell holds checks and must not change" in text_
    assert "check 1: In [4] (cell 'checks'), the failing cell" in text_
    before = state(app, name)

    cell.get_by_role("button", name="Accept").click()
    app.wait_source(name, 1, SEARCH_FIXED)
    after = ran_after(app, name, {"search": before["search"]["count"], "checks": before["checks"]["count"]})
    after = wait_fixed_line(app, name, "search")
    assert [after[i]["source"] for i in ("setup", "search", "data", "checks")] == [
        SETUP,
        SEARCH_FIXED,
        "points = (1, 5, 8)",
        SEARCH_CHECKS,  # byte for byte
    ]
    assert after["search"]["count"] < after["checks"]["count"]  # in that order
    assert after["data"]["count"] == before["data"]["count"]  # not run again
    no_traceback(after)
    assert kinds(after["checks"]) == [] and after["checks"]["nbrefine"] is None  # passed, not changed
    assert after["search"]["nbrefine"]["original_source"] == SEARCH
    assert after["search"]["nbrefine"]["verified"] is True
    expect(app.cell(name, 1, f"search-{app_name}").get_by_text("Fixed by nbrefine — 1 try")).to_be_visible()
    assert len(fake.requests) == 1

    # Undo (the fixed line's button) puts the function back; the checks cell was never changed.
    app.cell(name, 1, f"search-{app_name}").get_by_role("button", name="undo").click()
    app.wait_source(name, 1, SEARCH)
    undone = state(app, name)
    assert undone["checks"]["source"] == SEARCH_CHECKS
    assert "undone" in undone["search"]["outputs"][-1]["data"]["text/plain"]
    assert nbrefine_console_errors(app) == []


# --------------------------------------------------------------------------- (b) two cells


def two_cell_notebook(app: App, fake: Any, name: str) -> Any:
    cells = [("setup", SETUP), ("to-cents", TO_CENTS), ("total", TOTAL), ("checks", TWO_CHECKS)]
    fake.script(block(TWO_FIXES))
    open_and_run(app, name, cells, upto=3)
    return panel_of(app, name, 3, f"two-{name}")


@pytest.mark.parametrize("app_name", APPS)
def test_a_fix_of_two_cells_is_written_into_both_run_in_order_and_one_undo_restores_both(
    app_name: str, fake: Any, request: pytest.FixtureRequest
) -> None:
    app: App = request.getfixturevalue(app_name)
    name = f"two-{app_name}.ipynb"
    cell = two_cell_notebook(app, fake, name)
    text_ = cell.locator(".nbr-panel").inner_text()
    for label in (
        "In [2] (cell 'to-cents') · defines to_cents",
        "In [3] (cell 'total') · defines total_cents",
    ):
        assert label in text_
    assert (
        "then runs: In [2] (cell 'to-cents'), then In [3] (cell 'total'), then In [4] (cell 'checks')"
        in text_
    )
    before = state(app, name)

    cell.get_by_role("button", name="Accept").click()
    after = ran_after(app, name, {i: before[i]["count"] for i in ("to-cents", "total", "checks")})
    after = wait_fixed_line(app, name, "total")
    assert order(app, name) == ["setup", "to-cents", "total", "checks"]
    assert [after[i]["source"] for i in ("to-cents", "total", "checks")] == [
        TO_CENTS_FIXED,
        TOTAL_FIXED,
        TWO_CHECKS,
    ]
    assert after["to-cents"]["count"] < after["total"]["count"] < after["checks"]["count"]
    no_traceback(after)
    assert kinds(after["checks"]) == []
    for cell_id, original in (("to-cents", TO_CENTS), ("total", TOTAL)):
        assert has_fixed_line(after[cell_id]), after[cell_id]
        assert after[cell_id]["outputs"][0]["data"]["text/plain"] == "✔ Fixed by nbrefine — 1 try · 2 cells"
        assert after[cell_id]["nbrefine"]["original_source"] == original
    assert after["checks"]["nbrefine"] is None
    # the kernel holds the fixed functions
    assert app.js("exec", name, "print(total_cents([1.0, 2.5]))")["text"].strip() == "350"
    fixed = app.cell(name, 1, f"fixed-{app_name}")
    fixed.get_by_role("button", name="details").click()
    expect(
        fixed.locator(".nbr-fixed-details").get_by_text("In [3] (cell 'total') · defines total_cents")
    ).to_be_visible()
    shot(app.page.locator(".jp-Notebook").first, f"cross-cell-accepted-{app_name}.png")

    # One undo (the button in either changed cell) puts both back.
    fixed.get_by_role("button", name="undo").click()
    app.wait_source(name, 2, TOTAL)
    undone = state(app, name)
    assert [undone[i]["source"] for i in ("to-cents", "total", "checks")] == [TO_CENTS, TOTAL, TWO_CHECKS]
    for cell_id in ("to-cents", "total"):
        assert undone[cell_id]["nbrefine"] is None
        assert "undone" in undone[cell_id]["outputs"][-1]["data"]["text/plain"]
    assert order(app, name) == ["setup", "to-cents", "total", "checks"]
    assert nbrefine_console_errors(app) == []


def test_the_panel_of_a_two_cell_fix_reads_well_light_dark_and_at_700_px(lab: App, fake: Any) -> None:
    name = "two-shots.ipynb"
    cell = two_cell_notebook(lab, fake, name)
    panel = cell.locator(".nbr-panel")
    for theme, file in (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark")):
        set_theme(lab, theme)
        texts = diff_contrast(lab, panel)
        worst = min(texts, key=lambda t: t["ratio"])
        assert worst["ratio"] >= 4.5, (theme, worst)
        for label in panel.locator(".nbr-cell-label").all():
            ratio = label.evaluate("e => window.__nbrColour.textContrast(e)")
            assert ratio >= 4.5, (theme, label.inner_text(), ratio)
        shot(panel, f"panel-cross-cell-{file}.png", docs=file == "light")
    set_theme(lab, "JupyterLab Light")

    lab.page.set_viewport_size({"width": 700, "height": 900})
    lab.page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:activate')")  # sidebar open
    lab.page.wait_for_timeout(500)
    outer = box(panel)
    for part in panel.locator(".nbr-plan > *").all():  # labels, diffs, notes: each within the panel
        found = box(part)
        assert outer["x"] <= found["x"] and found["x"] + found["width"] <= outer["x"] + outer["width"] + 1
    for label in ("Accept", "Reject", "Try again"):
        button = cell.get_by_role("button", name=label)
        inner = button.evaluate("b => [b.scrollWidth, b.clientWidth]")
        assert inner[0] <= inner[1] + 1, (label, inner)
    shot(panel, "panel-cross-cell-narrow.png")
    cell.get_by_role("button", name="side by side", exact=True).click()
    columns = panel.locator(".nbr-sbs > div")
    expect(columns).to_have_count(4)  # two cells, two sides each, stacked
    for column in columns.all():
        found = box(column)
        assert outer["x"] <= found["x"] and found["x"] + found["width"] <= outer["x"] + outer["width"] + 1
    shot(panel, "panel-cross-cell-narrow-side-by-side.png")


# --------------------------------------------------------------------------- (c) a cell below


@pytest.mark.parametrize("app_name", APPS)
def test_a_name_defined_only_below_moves_that_cell_above_runs_both_and_undo_puts_it_back(
    app_name: str, fake: Any, request: pytest.FixtureRequest
) -> None:
    app: App = request.getfixturevalue(app_name)
    name = f"below-{app_name}.ipynb"
    write_notebook(app.server, name, [("setup", SETUP), ("use", USE)])
    app.open(name)
    assert "Error" not in app.run(name, 0)
    # The defining cell is typed below and never saved: only the extension tells the kernel of it.
    app.js("insertCell", name, 2, DEFINE)
    define = app.js("ids", name)[2]
    app.run(name, 1)
    cell = panel_of(app, name, 1, f"use-{app_name}")
    text_ = cell.locator(".nbr-panel").inner_text()
    assert f"Move cell '{define}' above In [2] (cell 'use') and run it first." in text_
    assert "rng = random.Random(0)" in text_
    assert fake.requests == []  # no model is asked: the fix is to run that cell first
    shot(cell.locator(".nbr-panel"), f"panel-move-{app_name}.png")
    before = state(app, name)

    cell.get_by_role("button", name="Accept").click()
    app.page.wait_for_function(
        "([path, id]) => window.__nbr.ids(path).join() === ['setup', id, 'use'].join()",
        arg=[name, define],
        timeout=20_000,
    )
    after = ran_after(app, name, {define: 0, "use": before["use"]["count"]})
    after = wait_fixed_line(app, name, define)
    assert after[define]["count"] < after["use"]["count"]
    assert text(after["use"]) == FIRST_RANDOM + "\n"
    no_traceback(after)
    assert [after[i]["source"] for i in ("setup", define, "use")] == [SETUP, DEFINE, USE]

    # Undo (the fixed line's button in the moved cell) puts the order back.
    app.cell(name, 1, f"moved-{app_name}").get_by_role("button", name="undo").click()
    app.page.wait_for_function(
        "([path, id]) => window.__nbr.ids(path).join() === ['setup', 'use', id].join()",
        arg=[name, define],
        timeout=20_000,
    )
    assert app.sources(name) == [SETUP, USE, DEFINE]
    assert not has_fixed_line(state(app, name)[define])
    assert nbrefine_console_errors(app) == []

"""The review panel as a user sees it (issue 12), in a real JupyterLab 4 and Notebook 7.

A DataFrame-like KeyError raised 25 library frames deep, fixed at the second attempt by the
loopback fake of the Anthropic API. Measured on the page: the contrast of every piece of diff
text and of the focus ring in the light and dark themes, where the decision is for a long
traceback, how often the error is named, and the layout at 700 px. Screenshots of the panel
go to tests/browser/artifacts/ (and, with NBREFINE_UPDATE_SCREENSHOTS=1, to docs/).
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import pytest
from browser_driver import ARTIFACTS, ROOT, App, artifact, expect
from panel_page import box, diff_contrast, focus_ring, set_theme

pytestmark = pytest.mark.timeout(300)

SETUP = "\n".join(
    [
        "%load_ext nbrefine",
        "%config Refine.quick_fixes = False",  # the model path, not the offline quick fixes
        "%config Refine.max_retries = 0",
        "%config Refine.request_timeout = 30.0",
    ]
)
DEEP_LIB = '''\
def lookup(table, key, depth=25):
    """Recurses, so that a failure deep inside has a long traceback of library frames."""
    if depth:
        return lookup(table, key, depth - 1)
    return table[key]
'''
DATA = "import deep_lib\nrevenue = {'north': 37.5, 'south': 12.0}"
LONG = 'label = f"north: {north}" + " — a line long enough to scroll sideways in a narrow panel, as code has"'
BODY = f'north = deep_lib.lookup(revenue, "North")\n{LONG}'
WRONG = f'north = deep_lib.lookup(revenue, "NORTH")\n{LONG}'
RIGHT = f'north = deep_lib.lookup(revenue, "north")  # keys are lower case\n{LONG}'
REFINE = f"%%refine\n{BODY}"
SHOW = 'print("north is", globals().get("north"))'
CELLS = [SETUP, DATA, REFINE, SHOW]
I_REFINE = 2
PANEL_TIMEOUT = 90_000
READY = "Verified fix ready — it passed a trial run"


def block(code: str, explanation: str) -> dict[str, str]:
    return {"text": f"{explanation}\n\n```python\n{code}\n```"}


def open_failing(app: App, fake: Any, name: str) -> Any:
    """The notebook run up to the %%refine cell; the cell's locator once the fix is offered."""
    (app.server.root / "deep_lib.py").write_text(DEEP_LIB, encoding="utf-8")
    app.server.write_notebook(name, CELLS)
    fake.script(
        block(WRONG, "The key is spelt `NORTH`."),
        block(RIGHT, 'The keys of `revenue` are **lower case**: use `"north"`.'),
    )
    app.open(name)
    for index in range(I_REFINE):
        assert "Error" not in app.run(name, index)
    app.run(name, I_REFINE)
    cell = app.cell(name, I_REFINE, f"refine-{name}")
    expect(cell.get_by_text(READY)).to_be_visible(timeout=PANEL_TIMEOUT)
    return cell


#: The screenshots the README shows (docs/); the others stay in the artifacts.
DOCS = {
    "panel-light.png",
    "panel-dark.png",
    "panel-narrow.png",
    "panel-teaching.png",
    "panel-accepted-lab.png",
}


def shot(locator: Any, name: str) -> None:
    """A screenshot into the artifacts; the README's into docs/ too when asked (or missing)."""
    artifact(locator, name)
    target = ROOT / "docs" / name
    if name not in DOCS:
        return
    if os.environ.get("NBREFINE_UPDATE_SCREENSHOTS") == "1" or not target.exists():
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(ARTIFACTS / name, target)


THEMES = {"JupyterLab Light": "light", "JupyterLab Dark": "dark", "JupyterLab Dark High Contrast": "contrast"}


@pytest.mark.parametrize("theme", list(THEMES))
def test_diff_text_and_focus_ring_have_contrast_in_light_and_dark(lab: App, fake: Any, theme: str) -> None:
    name = f"contrast-{THEMES[theme]}.ipynb"
    cell = open_failing(lab, fake, name)
    set_theme(lab, theme)
    panel = cell.locator(".nbr-panel")
    cell.locator("details.nbr-more > summary").click()  # the attempts' diffs too
    for summary in cell.locator("details.nbr-attempt > summary").all():
        summary.click()
    measured: dict[str, Any] = {}
    for view in ("unified", "side by side"):
        cell.get_by_role("button", name=view, exact=True).click()
        texts = diff_contrast(lab, panel)
        assert len(texts) > 20, texts
        worst = min(texts, key=lambda t: t["ratio"])
        measured[view] = worst
        assert worst["ratio"] >= 4.5, (theme, view, worst)
        assert {"nbr-line nbr-add", "nbr-line nbr-del"} <= {t["row"] for t in texts}
    cell.get_by_role("button", name="unified", exact=True).click()
    cell.locator("details.nbr-more > summary").click()  # folded again, for the screenshot

    # The focus ring, reached with the keyboard (so :focus-visible applies), on the green-less
    # primary button and on a plain one.
    accept = cell.get_by_role("button", name="Accept")
    reject = cell.get_by_role("button", name="Reject")
    reject.focus()
    lab.page.keyboard.press("Shift+Tab")
    for button in (accept, reject):
        if button == reject:
            lab.page.keyboard.press("Tab")
        ring = focus_ring(lab, button.element_handle())
        assert ring["focused"] and ring["visible"], ring
        assert ring["style"] == "solid" and ring["width"] >= 2 and ring["offset"] >= 1, ring
        assert ring["ratio"] >= 3, (theme, ring)
        measured[f"focus ring on {button.text_content()}"] = ring
    lab.page.mouse.click(5, 5)
    for button in cell.locator(".nbr-panel button:visible").all():  # and every button's label
        ratio = button.evaluate("b => window.__nbrColour.textContrast(b)")
        measured[f"label of {button.text_content()}"] = ratio
        assert ratio >= 4.5, (theme, button.text_content(), ratio)
    (ARTIFACTS / f"contrast-{THEMES[theme]}.json").write_text(json.dumps(measured, indent=1))
    shot(panel, f"panel-{THEMES[theme]}.png")
    set_theme(lab, "JupyterLab Light")


@pytest.mark.parametrize("app_name", ["lab", "nb7"])
def test_the_decision_is_at_the_top_and_the_error_named_once(
    app_name: str, fake: Any, request: pytest.FixtureRequest
) -> None:
    app: App = request.getfixturevalue(app_name)
    name = f"first-{app_name}.ipynb"
    cell = open_failing(app, fake, name)
    outputs = cell.locator(".jp-Cell-outputArea")
    accept = cell.get_by_role("button", name="Accept")
    top = box(outputs)["y"]
    assert box(accept)["y"] + box(accept)["height"] - top <= 900
    # Outside the folded details, the error is named once: in the panel's summary. The
    # traceback (25 library frames) folded away once the fix was offered.
    expect(outputs.get_by_text("Traceback (most recent call last)").first).to_be_hidden()
    text = outputs.inner_text()
    assert text.count("KeyError") == 1, text
    assert "deep_lib.py" not in text  # no library frame
    assert "Run All stopped here" in text  # the one line that stops Run All is still there
    # The full traceback is one click away, and folds again.
    expect(cell.get_by_text("your cell, line 2, in")).to_have_count(0)  # top level: no function
    expect(cell.locator(".nbr-frames").get_by_text('deep_lib.lookup(revenue, "North")')).to_be_visible()
    cell.locator("details.nbr-tb > summary").click()
    expect(outputs.get_by_text("Traceback (most recent call last)").first).to_be_visible()
    assert "deep_lib.py" in outputs.inner_text()
    cell.locator("details.nbr-tb > summary").click()
    expect(outputs.get_by_text("Traceback (most recent call last)").first).to_be_hidden()


def test_at_700_px_every_label_and_both_diff_sides_are_visible(lab: App, fake: Any) -> None:
    lab.page.set_viewport_size({"width": 700, "height": 900})
    name = "narrow.ipynb"
    cell = open_failing(lab, fake, name)
    lab.page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:activate')")  # sidebar open
    lab.page.wait_for_timeout(500)
    panel = cell.locator(".nbr-panel")
    outer = box(panel)
    for label in ("Accept", "Reject", "Try again"):
        button = cell.get_by_role("button", name=label)
        inner = button.evaluate("b => [b.scrollWidth, b.clientWidth, b.textContent]")
        assert inner[0] <= inner[1] + 1 and label in inner[2], (label, inner)  # not cut to "A…"
        found = box(button)
        assert outer["x"] <= found["x"] and found["x"] + found["width"] <= outer["x"] + outer["width"] + 1
    cell.get_by_role("button", name="side by side", exact=True).click()
    columns = cell.locator(".nbr-sbs > div")
    expect(columns).to_have_count(2)
    first, second = box(columns.nth(0)), box(columns.nth(1))
    for column in (first, second):  # each side whole within the panel
        assert outer["x"] <= column["x"] and column["x"] + column["width"] <= outer["x"] + outer["width"] + 1
    assert second["y"] >= first["y"] + first["height"] - 1  # stacked: "the fix" below "your cell"
    expect(cell.get_by_text("your cell", exact=True).first).to_be_visible()
    expect(cell.get_by_text("the fix", exact=True).first).to_be_visible()
    # Code never wraps inside a name: every line is one line high, and the long one scrolls.
    heights = cell.locator(".nbr-sbs .nbr-line").evaluate_all(
        "rows => rows.map(r => r.getBoundingClientRect().height)"
    )
    assert max(heights) < 1.6 * min(heights), heights
    scrolls = cell.locator(".nbr-sbs .nbr-code").evaluate_all(
        "els => els.map(e => e.scrollWidth > e.clientWidth)"
    )
    assert all(scrolls), scrolls
    shot(panel, "panel-narrow.png")


CELL_OUTPUTS_JS = """([path, i]) => {
  const panel = Array.from(window.jupyterapp.shell.widgets('main'))
    .find(w => w.context && w.context.path === path);
  const cell = panel.content.model.cells.get(i);
  return { outputs: cell.outputs.toJSON(), count: cell.executionCount };
}"""


def cell_state(app: App, name: str, index: int) -> dict[str, Any]:
    return dict(app.page.evaluate(CELL_OUTPUTS_JS, [name, index]))


@pytest.mark.parametrize("app_name", ["lab", "nb7"])
def test_after_accept_the_cell_shows_the_fixed_run_and_run_all_can_resume(
    app_name: str, fake: Any, request: pytest.FixtureRequest
) -> None:
    app: App = request.getfixturevalue(app_name)
    name = f"accept-{app_name}.ipynb"
    (app.server.root / "deep_lib.py").write_text(DEEP_LIB, encoding="utf-8")
    printing = f'{RIGHT}\nprint("north is", north)'
    app.server.write_notebook(name, [SETUP, DATA, REFINE, SHOW, "print('last cell')"])
    fake.script(block(WRONG, "The key is spelt `NORTH`."), block(printing, "Lower case."))
    app.open(name)
    app.page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")  # Run All
    cell = app.cell(name, I_REFINE, f"accept-{app_name}")
    expect(cell.get_by_text(READY)).to_be_visible(timeout=PANEL_TIMEOUT)
    failed = cell_state(app, name, I_REFINE)
    assert [o["output_type"] for o in failed["outputs"]].count(
        "error"
    ) == 2  # the traceback, "Run All stopped"
    assert cell_state(app, name, I_REFINE + 1)["count"] is None  # Run All stopped before these

    cell.get_by_role("button", name="Accept").click()
    expect(cell.get_by_text("Fixed by nbrefine — 2 tries")).to_be_visible(timeout=30_000)
    app.wait_source(name, I_REFINE, f"%%refine\n{printing}")
    fixed = cell_state(app, name, I_REFINE)
    kinds = [o["output_type"] for o in fixed["outputs"]]
    assert "error" not in kinds, fixed  # no traceback, no stale "Run All stopped here" line
    assert kinds[0] == "display_data" and fixed["outputs"][0]["metadata"] == {"nbrefine": {"fixed": True}}
    assert any(o.get("text") == "north is 37.5\n" for o in fixed["outputs"]), fixed  # the fixed run's output
    assert fixed["count"] is not None and fixed["count"] > (failed["count"] or 0)  # and its execution count
    text = cell.locator(".jp-Cell-outputArea").inner_text()
    assert "Verified fix ready" not in text and "KeyError" not in text and "Run All stopped" not in text
    shot(cell.locator(".jp-Cell-outputArea"), f"panel-accepted-{app_name}.png")

    # Run All resumes where it stopped.
    expect(cell.get_by_text("2 cells below did not run")).to_be_visible()
    cell.get_by_role("button", name="Run them").click()
    app.page.wait_for_function(
        "([p, i]) => window.__nbr.output(p, i).includes('last cell')",
        arg=[name, I_REFINE + 2],
        timeout=30_000,
    )
    assert app.js("output", name, I_REFINE + 1).strip() == "north is 37.5"
    expect(cell.get_by_text("cells below did not run")).to_have_count(0)

    # details unfold the diff in place; undo puts the old code back and clears the fixed run's outputs.
    cell.get_by_role("button", name="details").click()
    expect(cell.locator(".nbr-fixed-details .nbr-code").first).to_be_visible()
    cell.get_by_role("button", name="undo").click()
    app.wait_source(name, I_REFINE, REFINE)
    undone = cell_state(app, name, I_REFINE)
    assert undone["count"] is None and len(undone["outputs"]) == 1
    assert "undone" in undone["outputs"][0]["data"]["text/plain"]


def test_a_fix_for_the_cell_that_defines_the_function_reruns_the_failing_cell_too(
    lab: App, fake: Any
) -> None:
    # The error is raised inside `net`, defined two cells up: the fix is written there, that
    # cell runs, then the failing cell runs again, so neither keeps a stale output.
    name = "cross-cell.ipynb"
    net = "def net(price):\n    return price * (1 - rat)"
    fixed = "def net(price):\n    return price * (1 - rate)"
    lab.server.write_notebook(name, [SETUP, "rate = 0.2", net, '%%refine\nprint("net is", net(10))'])
    fake.script(block(fixed, "The rate is called `rate`."))
    lab.open(name)
    for index in range(3):
        assert "Error" not in lab.run(name, index)
    lab.run(name, 3)
    cell = lab.cell(name, 3, "cross-cell")
    expect(cell.get_by_text(READY)).to_be_visible(timeout=PANEL_TIMEOUT)
    failed, defining = cell_state(lab, name, 3), cell_state(lab, name, 2)

    cell.get_by_role("button", name="Accept").click()
    lab.wait_source(name, 2, fixed)
    lab.page.wait_for_function(
        "([p, i]) => window.__nbr.output(p, i).includes('net is 8.0')", arg=[name, 3], timeout=30_000
    )
    # The output streams in before the execute reply brings the execution count: wait for both.
    lab.page.wait_for_function(
        "([p, i]) => window.__nbr.executionCount(p, i) !== null", arg=[name, 3], timeout=30_000
    )
    rerun = cell_state(lab, name, 3)
    assert "error" not in [o["output_type"] for o in rerun["outputs"]], rerun  # no stale traceback
    assert rerun["count"] is not None and rerun["count"] > (failed["count"] or 0)
    text = cell.locator(".jp-Cell-outputArea").inner_text()
    assert "Verified fix ready" not in text and "NameError" not in text
    written = cell_state(lab, name, 2)
    assert written["count"] is not None and written["count"] > (defining["count"] or 0)  # it ran
    assert written["outputs"][0]["metadata"] == {"nbrefine": {"fixed": True}}  # with its undo line


def test_a_provider_error_counts_no_attempt_and_offers_only_retry(lab: App, fake: Any) -> None:
    name = "unauthorised.ipynb"
    (lab.server.root / "deep_lib.py").write_text(DEEP_LIB, encoding="utf-8")
    lab.server.write_notebook(name, CELLS)
    fake.script({"status": 401}, block(RIGHT, "Lower case."))
    lab.open(name)
    for index in range(I_REFINE):
        lab.run(name, index)
    lab.run(name, I_REFINE)
    cell = lab.cell(name, I_REFINE, "unauthorised")
    expect(cell.get_by_text("Could not ask the model")).to_be_visible(timeout=PANEL_TIMEOUT)
    panel = cell.locator(".nbr-panel")
    text = panel.inner_text()
    assert "HTTP 401" in text and "%env ANTHROPIC_API_KEY" in text
    assert "attempt" not in text.lower()  # nothing was proposed: no "✘ attempt 1"
    buttons = [b.inner_text().strip() for b in panel.locator("button:visible").all()]
    assert buttons == ["Retry"], buttons
    cell.get_by_role("button", name="Retry").click()
    expect(cell.get_by_text(READY)).to_be_visible(timeout=PANEL_TIMEOUT)
    expect(cell.get_by_text("Fixes KeyError at line 2: 'North' · 1 try")).to_be_visible()


def test_a_cell_with_whitespace_only_lines_is_written_and_run(lab: App, fake: Any) -> None:
    """IPython empties the magic body's blank-but-indented lines: the cell is found by the
    request that ran it, and the write compares what that request sent."""
    name = "blanks.ipynb"
    (lab.server.root / "deep_lib.py").write_text(DEEP_LIB, encoding="utf-8")
    helper = "def twice(x):\n    return 2 * x\n    \n"
    lab.server.write_notebook(name, [SETUP, DATA, f"%%refine\n{helper}{BODY}", SHOW])
    fake.script(block(f"{helper}{RIGHT}", "Lower case."))
    lab.open(name)
    for index in range(I_REFINE):
        lab.run(name, index)
    lab.run(name, I_REFINE)
    cell = lab.cell(name, I_REFINE, "blanks")
    expect(cell.get_by_text(READY)).to_be_visible(timeout=PANEL_TIMEOUT)
    cell.get_by_role("button", name="Accept").click()
    expect(cell.get_by_text("Fixed by nbrefine — 1 try")).to_be_visible(timeout=30_000)
    fixed = lab.sources(name)[I_REFINE]
    assert fixed.startswith("%%refine\ndef twice(x):") and '"north"' in fixed
    assert lab.run(name, I_REFINE + 1).strip() == "north is 37.5"


AUTO_SETUP = "%load_ext nbrefine\n%config Refine.quick_fixes = False\n%refine auto offer"


def test_automatic_mode_offers_above_the_traceback_and_accept_runs_the_cell(lab: App, fake: Any) -> None:
    name = "auto.ipynb"
    (lab.server.root / "deep_lib.py").write_text(DEEP_LIB, encoding="utf-8")
    lab.server.write_notebook(name, [AUTO_SETUP, DATA, BODY, SHOW])
    fake.script(block(RIGHT, "Lower case."))
    lab.open(name)
    for index in range(I_REFINE + 1):
        lab.run(name, index)
    cell = lab.cell(name, I_REFINE, "auto")
    offer = cell.get_by_role("button", name="Suggest a fix")
    expect(offer).to_be_visible(timeout=30_000)
    traceback = cell.get_by_text("Traceback (most recent call last)").first
    assert box(offer)["y"] < box(traceback)["y"]  # the action first, then the 25 frames
    offer.click()
    expect(cell.get_by_text(READY)).to_be_visible(timeout=PANEL_TIMEOUT)
    expect(cell.get_by_text("Traceback (most recent call last)").first).to_be_hidden()  # folded away
    assert cell.locator(".jp-Cell-outputArea").inner_text().count("KeyError") == 1
    cell.get_by_role("button", name="Accept").click()
    expect(cell.get_by_text("Fixed by nbrefine — 1 try")).to_be_visible(timeout=30_000)
    assert lab.sources(name)[I_REFINE] == RIGHT
    assert "error" not in [o["output_type"] for o in cell_state(lab, name, I_REFINE)["outputs"]]


TEACH_SETUP = "%load_ext nbrefine\n%refine policy --mode hint --max-hints 3 --lock\n%refine auto offer"
EXERCISE = "def mean(xs):\n    return sum(xs) / len(x)\n\nm = mean([1, 2, 3])"
HINTS = [
    "Look at the line the error points to: which name is used there that the function never defines?",
    "Inside `mean`, the list is called `xs`. Which name does the division use instead?",
    "The division should use the function's own parameter for the length.",
]


def test_teaching_hints_pile_up_under_one_label_and_the_last_one_says_so(lab: App, fake: Any) -> None:
    name = "exercise.ipynb"
    lab.server.write_notebook(name, [TEACH_SETUP, EXERCISE])
    fake.script(*({"text": hint} for hint in HINTS))
    lab.open(name)
    lab.run(name, 0)
    lab.run(name, 1)
    cell = lab.cell(name, 1, "exercise")
    ask = cell.get_by_role("button", name="Get a hint")  # not "Suggest a fix": the policy is hint
    expect(ask).to_be_visible(timeout=30_000)
    ask.click()
    panel = cell.locator(".nbr-panel")
    expect(panel.locator(".nbr-hint h4", has_text="Hint 1 of 3")).to_be_visible(timeout=PANEL_TIMEOUT)
    for number in (2, 3):
        more = cell.get_by_role("button", name=f"Another hint ({4 - number} left)")
        more.click()
        expect(panel.locator(".nbr-hint h4", has_text=f"Hint {number} of 3")).to_be_visible(
            timeout=PANEL_TIMEOUT
        )
    text = panel.inner_text()
    for number, hint in enumerate(HINTS, start=1):  # all three, in order, each labelled once
        assert text.count(f"Hint {number} of 3") == 1
        assert hint.replace("`", "") in text
    assert text.index(HINTS[0][:20]) < text.index("Inside") < text.index("The division should")
    assert "Hints used" not in text
    assert text.rstrip().endswith("That was the last hint for this cell.")
    expect(cell.get_by_role("button", name="Another hint")).to_have_count(0)
    shot(panel, "panel-teaching.png")


def test_while_it_runs_one_counter_a_moving_timer_and_no_decision_yet(lab: App, fake: Any) -> None:
    name = "running.ipynb"
    (lab.server.root / "deep_lib.py").write_text(DEEP_LIB, encoding="utf-8")
    lab.server.write_notebook(name, CELLS)
    fake.script(
        block(WRONG, "Upper case."), {"fault": "slow", "delay": 4.0, "text": block(RIGHT, "Lower.")["text"]}
    )
    lab.open(name)
    for index in range(I_REFINE):
        lab.run(name, index)
    lab.run(name, I_REFINE)
    cell = lab.cell(name, I_REFINE, "running")
    panel = cell.locator(".nbr-panel")
    expect(panel.get_by_text("Attempt 2 of 3")).to_be_visible(timeout=PANEL_TIMEOUT)
    timer = panel.locator(".nbr-timer")
    first = timer.inner_text()
    lab.page.wait_for_timeout(1500)  # the model says nothing meanwhile
    assert timer.inner_text() != first  # the timer moves
    text = panel.inner_text()
    assert text.lower().count("attempt 2") == 1 and "✘ attempt 1: KeyError at line 2: 'NORTH'" in text
    assert [b.inner_text().strip() for b in panel.locator("button:visible").all()] == ["Stop"]
    shot(panel, "panel-running.png")
    expect(panel.get_by_text(READY)).to_be_visible(timeout=PANEL_TIMEOUT)

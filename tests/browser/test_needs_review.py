"""A fix that adds what the cell did not do is named before it runs (issue 19), in JupyterLab 4 and
Notebook 7.

The failing ``%%refine`` cell misspells a name (``sum(pricez)``); the loopback fake of the Anthropic
API answers the correct fix plus a line the cell never had: it reads ``/proc/self/status`` (a probe of
the sandbox, which a trial allows, so the fix passes its trial). nbrefine's capability diff flags it:
before any click, the panel's headline says the fix needs review, the verdict names what it adds and
on which line, and the panel offers "Apply anyway" in place of Accept; nothing has run in the kernel.
"Apply anyway" then writes the fix into the cell and runs it. The verdict's text is measured for
contrast (WCAG AA) in the light theme; a screenshot of the panel before the click goes to
tests/browser/artifacts/.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from browser_driver import ARTIFACTS, App, artifact, expect
from panel_page import diff_contrast, install
from test_cross_cell import READY, SETUP

pytestmark = pytest.mark.timeout(300)

APPS = ["lab", "nb7"]
PANEL_TIMEOUT = 90_000
HEADLINE = "Needs review — the fix adds what the cell did not do"
DATA = "prices = [1, 2, 3]"
REFINE = "%%refine\ntotal = sum(pricez)"
#: Correct (``pricez`` → ``prices``), and it also probes the sandbox: what it adds is line 3 of the
#: cell (under its %%refine line), as the panel numbers the cell's lines everywhere.
FIX = "total = sum(prices)\nstatus = open('/proc/self/status').read()"
SHOW = 'print("total is", globals().get("total"))'
CELLS = [SETUP, DATA, REFINE, SHOW]
I_REFINE = 2
DEFINED = "print('total' in globals())"


def block(code: str, explanation: str) -> dict[str, str]:
    return {"text": f"{explanation}\n\n```python\n{code}\n```"}


@pytest.mark.parametrize("app_name", APPS)
def test_a_fix_that_adds_what_the_cell_did_not_do_needs_review_before_it_runs(
    app_name: str, fake: Any, request: pytest.FixtureRequest
) -> None:
    app: App = request.getfixturevalue(app_name)
    name = f"needs-review-{app_name}.ipynb"
    app.server.write_notebook(name, CELLS)
    fake.script(block(FIX, "The list is called `prices`."))
    app.open(name)
    for index in range(I_REFINE):
        assert "Error" not in app.run(name, index)
    app.run(name, I_REFINE)
    cell = app.cell(name, I_REFINE, f"needs-review-{app_name}")
    panel = cell.locator(".nbr-panel")

    # Before any click: the headline, what the fix adds (with its line), Apply anyway, no Accept.
    expect(panel.get_by_text(HEADLINE)).to_be_visible(timeout=PANEL_TIMEOUT)
    expect(panel.get_by_text(READY)).to_have_count(0)
    verdict = panel.locator(".nbr-verdict")
    expect(verdict).to_be_visible()
    said = verdict.inner_text()
    assert "review what the fix adds, which the cell did not do" in said, said
    adds = [item.inner_text() for item in verdict.locator("li").all()]
    assert len(adds) == 1, adds
    assert "/proc/self/status" in adds[0] and "line 3" in adds[0], adds
    assert "probes the sandbox" in adds[0], adds
    expect(cell.get_by_role("button", name="Accept", exact=True)).to_have_count(0)
    anyway = cell.get_by_role("button", name="Apply anyway")
    expect(anyway).to_be_visible()
    expect(anyway).to_be_enabled()
    buttons = [b.inner_text().strip() for b in panel.locator("button:visible").all()]
    assert "Accept" not in buttons and "Apply anyway" in buttons, buttons
    # The diff shows the fix, the added line included.
    expect(panel.locator(".nbr-code").get_by_text("/proc/self/status").first).to_be_visible()

    # Nothing ran in the kernel: the cell is as it was, and `total` is not defined.
    assert app.sources(name)[I_REFINE] == REFINE
    assert app.js("exec", name, DEFINED)["text"].strip() == "False"
    assert "total is" not in app.js("output", name, I_REFINE)
    assert len(fake.requests) == 1

    # Light theme: the verdict's text (each line of it) and the buttons' labels read at WCAG AA.
    install(app)
    measured: dict[str, Any] = {}
    parts = [verdict, *verdict.locator("li, b").all(), panel.get_by_text(HEADLINE)]
    for part in parts:
        ratio = part.evaluate("e => window.__nbrColour.textContrast(e)")
        measured[part.inner_text()[:60]] = ratio
        assert ratio >= 4.5, (part.inner_text()[:60], ratio)
    for button in panel.locator("button:visible").all():
        ratio = button.evaluate("b => window.__nbrColour.textContrast(b)")
        measured[f"label of {button.text_content()}"] = ratio
        assert ratio >= 4.5, (button.text_content(), ratio)
    texts = diff_contrast(app, panel)
    worst = min(texts, key=lambda t: t["ratio"])
    measured["worst diff text"] = worst
    assert worst["ratio"] >= 4.5, worst
    (ARTIFACTS / f"contrast-needs-review-{app_name}.json").write_text(json.dumps(measured, indent=1))
    app.page.mouse.click(5, 5)  # no hover or focus on the screenshot
    artifact(panel, f"panel-needs-review-{app_name}.png")

    # Apply anyway: the fix is written into the cell and runs there.
    anyway.click()
    expect(cell.get_by_text("Fixed by nbrefine — 1 try")).to_be_visible(timeout=30_000)
    app.wait_source(name, I_REFINE, f"%%refine\n{FIX}")
    app.page.wait_for_function(
        "([p, i]) => window.__nbr.executionCount(p, i) !== null", arg=[name, I_REFINE], timeout=30_000
    )
    app.js("ready", name, 30_000)
    assert "applied anyway" in cell.locator(".jp-Cell-outputArea").inner_text()
    assert app.js("exec", name, "print(total)")["text"].strip() == "6"
    assert app.run(name, I_REFINE + 1).strip() == "total is 6"

"""A notebook's metadata teaching policy, applied by the labextension when the notebook opens.

A student opens a locked exercise sheet in JupyterLab and runs nothing but an exercise cell:
the policy is already in the kernel (set silently by the extension: no output, no execution
count), so the failing cell offers a hint, never a fix, and the lock refuses fix mode. After a
kernel restart the extension applies it again. A notebook without the metadata is left alone.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from browser_driver import App, expect

pytestmark = pytest.mark.timeout(240)

POLICY = {"mode": "hint", "max_hints": 2, "allow_solution": False, "lock": True}
EXERCISE = "def mean(xs):\n    return sum(xs) / len(x)\n\nassert mean([1, 2, 3]) == 2"
SETUP_CELL = "%load_ext nbrefine\n%refine policy"  # what a student may run later: quiet, and it agrees
PROBE = (
    "import sys as _s, json as _j\n"
    "_t = _s.modules.get('nbrefine.engine')\n"
    "print(_j.dumps(_t.kernel_policy_holder().policy.describe() if _t else None))"
)


def write_exercise(app: App, name: str, policy: dict[str, Any] | None) -> None:
    app.server.write_notebook(name, [EXERCISE, SETUP_CELL])
    if policy is not None:
        path = app.server.root / name
        notebook = json.loads(path.read_text(encoding="utf-8"))
        notebook["metadata"]["nbrefine"] = policy
        path.write_text(json.dumps(notebook), encoding="utf-8")


def kernel_policy(app: App, name: str) -> str | None:
    """The policy in the notebook's kernel, in words (None: nbrefine is not loaded there)."""
    out = app.js("exec", name, PROBE)
    assert out["status"] == "ok", out
    return json.loads(out["text"].strip().splitlines()[-1])  # type: ignore[no-any-return]


def wait_policy(app: App, name: str, expected: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = kernel_policy(app, name)
        if seen == expected:
            return
        time.sleep(0.25)
    raise AssertionError(f"the kernel's policy is {seen!r}, not {expected!r}, {timeout:g} s after opening")


def test_opening_a_locked_exercise_sheet_applies_its_metadata_policy(lab: App, fake: Any) -> None:
    name = "sheet.ipynb"
    write_exercise(lab, name, POLICY)
    lab.open(name)
    wait_policy(lab, name, "hint mode, up to 2 hints per cell, locked")
    assert lab.js("executionCount", name, 0) is None and lab.js("output", name, 0) == ""  # silently

    fake.script({"text": "Look at line 2: which name holds the list, and which one did you count?"})
    out = lab.run(name, 0)
    assert "NameError" in out
    assert lab.js("executionCount", name, 0) == 1  # the set-up took no execution count
    cell = lab.cell(name, 0, "exercise")
    button = cell.get_by_role("button", name="Get a hint")
    expect(button).to_be_visible(timeout=30_000)
    expect(cell.get_by_role("button", name="Suggest a fix")).to_have_count(0)
    button.click()
    expect(cell.get_by_text("Hint 1 of 2").first).to_be_visible(timeout=60_000)
    expect(cell.get_by_text("which name holds the list").first).to_be_visible()

    refused = lab.js("exec", name, "%%refine --mode fix\nx = 1")
    assert refused["status"] == "error" and "instructor" in refused["text"], refused
    shown = lab.run(name, 1).strip()  # the setup cell run after it: quiet, and it agrees
    assert shown == "nbrefine: hint mode, up to 2 hints per cell, locked (set by notebook metadata)"

    # A restarted kernel is a new process: the extension applies the policy there again.
    lab.js("restartKernel", name)
    lab.js("ready", name, 60_000)
    wait_policy(lab, name, "hint mode, up to 2 hints per cell, locked")


def test_a_notebook_without_nbrefine_metadata_is_left_alone(lab: App) -> None:
    name = "plain.ipynb"
    write_exercise(lab, name, None)
    lab.open(name)
    time.sleep(2)  # time enough for a set-up that would have been sent at once
    assert kernel_policy(lab, name) is None  # nbrefine was not even imported

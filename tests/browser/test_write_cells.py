"""``write_cells``: one Accept that changes several cells, or moves one, then runs them in order.

The kernel calls ``nbrefine.ipython.writeback.write_cells`` directly (no model, no panel): the
extension checks every cell, applies the edits and moves as one change of the notebook, answers
``runs: true`` and runs the cells it was given, in order. Undo, three ways: "Z" in command mode
(Undo Cell Operation: the notebook's undo history holds the change as one step), the fixed
line's "undo" button, and the kernel's ``undo_cells`` (the extension's snapshot). In JupyterLab
4 and Notebook 7.
"""

from __future__ import annotations

import json
import time
from typing import Any

import nbformat
import pytest
from browser_driver import ARTIFACTS, App, JupyterServer, expect

pytestmark = pytest.mark.timeout(240)

APPS = ["lab", "nb7"]

F, F_FIXED = "def f(x): return x + 1", "def f(x): return x + 2"
OTHER = "y = 10"
CHECK = "assert f(1) == 3"
USE = "print(rng.random())"
DEFINE = "import random; rng = random.Random(0)"
FIRST_RANDOM = "0.8444218515250481"  # random.Random(0).random()

# In the kernel: write_cells / undo_cells with a recorded answer, and the line the panel would
# send ("✔ Fixed by nbrefine — 1 try · undo"), styled as the panel styles it.
SNIPPET = """\
import dataclasses as _dc, json as _json
from nbrefine.ipython import writeback as _wb
from nbrefine.ipython._panel_css import STYLE as _STYLE
_nbr_answers, _nbr_ids = {}, {}
_NBR_LINE = {
    "output_type": "display_data",
    "data": {
        "text/plain": "✔ Fixed by nbrefine — 1 try",
        "text/html": _STYLE + '<div class="nbr-panel nbr-fixed nbr-ok"><div class="nbr-fixed-line">'
        '<span class="nbr-icon" aria-hidden="true">✔</span>Fixed by nbrefine — 1 try · '
        '<button type="button" class="nbr-link" data-nbrefine-action="undo">undo</button>'
        '<span class="nbr-below"></span></div></div>',
    },
    "metadata": {"nbrefine": {"fixed": True}},
}

def _nbr_record(key):
    return lambda result: _nbr_answers.__setitem__(key, _dc.asdict(result))

def _nbr_write(key, kwargs):
    kwargs = _json.loads(kwargs)
    if kwargs.pop("line", False):
        kwargs["fixed_output"] = _NBR_LINE
    _nbr_ids[key] = _wb.write_cells(on_result=_nbr_record(key), **kwargs)

def _nbr_undo(key, of):
    _wb.undo_cells(_nbr_ids[of], _nbr_record(key))
"""

# Every cell of the notebook at `path`, as the model has it.
STATE_JS = """(path) => {
  const panel = Array.from(window.jupyterapp.shell.widgets('main'))
    .find(w => w.context && w.context.path === path);
  const model = panel.content.model;
  return Array.from({ length: model.cells.length }, (_, i) => {
    const cell = model.cells.get(i);
    const nbr = cell.getMetadata('nbrefine');
    return {
      id: cell.id,
      source: cell.sharedModel.getSource(),
      nbrefine: nbr === undefined ? null : nbr,
      count: cell.executionCount === undefined ? null : cell.executionCount,
      outputs: cell.outputs ? cell.outputs.toJSON() : []
    };
  });
}"""


def write_notebook(server: JupyterServer, name: str, cells: list[tuple[str, str]]) -> None:
    """An nbformat 4.5 notebook of code cells with these (id, source)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source, id=cell_id) for cell_id, source in cells]
    nbformat.write(nb, server.root / name)


def state(app: App, name: str) -> dict[str, dict[str, Any]]:
    """The cells by id, each with its position ("at")."""
    cells = app.page.evaluate(STATE_JS, name)
    return {cell["id"]: {**cell, "at": i} for i, cell in enumerate(cells)}


def order(app: App, name: str) -> list[str]:
    return [cell["id"] for cell in app.page.evaluate(STATE_JS, name)]


def kinds(cell: dict[str, Any]) -> list[str]:
    return [output["output_type"] for output in cell["outputs"]]


def text(cell: dict[str, Any]) -> str:
    return "".join("".join(o["text"]) if o["output_type"] == "stream" else "" for o in cell["outputs"])


def kernel(app: App, name: str, code: str) -> str:
    out = app.js("exec", name, code)
    assert out["status"] == "ok", out
    return str(out["text"])


def answer(app: App, name: str, key: str, timeout: float = 20.0) -> dict[str, Any]:
    """The WriteResult the kernel's callback got for request ``key`` (each probe lets the kernel
    read the comm messages that arrived meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = json.loads(kernel(app, name, f"print(_json.dumps(_nbr_answers.get({key!r})))").strip())
        if found is not None:
            return dict(found)
        time.sleep(0.1)
    raise AssertionError(f"no answer to {key} within {timeout:g} s")


def write(app: App, name: str, key: str, **kwargs: Any) -> dict[str, Any]:
    kernel(app, name, f"_nbr_write({key!r}, {json.dumps(json.dumps(kwargs))})")
    return answer(app, name, key)


def undo(app: App, name: str, key: str, of: str) -> dict[str, Any]:
    kernel(app, name, f"_nbr_undo({key!r}, {of!r})")
    return answer(app, name, key)


def edit(cell_id: str, expected: str, source: str, **provenance: Any) -> dict[str, Any]:
    return {
        "cell_id": cell_id,
        "expected_source": expected,
        "source": source,
        "metadata": {"nbrefine": provenance},
    }


def ran_after(
    app: App, name: str, counts: dict[str, int], timeout: float = 60.0
) -> dict[str, dict[str, Any]]:
    """Wait until each cell of ``counts`` has a higher execution count than that (and the kernel
    is idle again); the cells then."""
    deadline = time.monotonic() + timeout
    while True:
        cells = state(app, name)
        if all((cells[i]["count"] or 0) > before for i, before in counts.items()):
            app.js("ready", name, 30_000)
            return state(app, name)
        if time.monotonic() > deadline:
            raise AssertionError(f"the cells did not run: {cells}")
        time.sleep(0.1)


def fixed_line(app: App, name: str, cell_id: str) -> dict[str, dict[str, Any]]:
    """Wait for the fixed line above the cell's outputs (it comes once all the cells ran)."""
    app.page.wait_for_function(
        f"(path) => ({STATE_JS})(path).some(c => c.id === {cell_id!r} && c.outputs.length"
        " && c.outputs[0].metadata.nbrefine && c.outputs[0].metadata.nbrefine.fixed)",
        arg=name,
        timeout=20_000,
    )
    return state(app, name)


def open_notebook(app: App, name: str, cells: list[tuple[str, str]], run: list[int]) -> None:
    write_notebook(app.server, name, cells)
    app.open(name)
    for index in run:
        app.run(name, index)
    kernel(app, name, SNIPPET)


def command_mode_z(app: App, name: str, index: int, tag: str) -> None:
    """Click into a cell's editor, Escape to command mode, press Z (Undo Cell Operation)."""
    app.cell(name, index, tag).locator(".cm-content").click()
    app.page.keyboard.press("Escape")
    app.page.wait_for_function(
        """(path) => Array.from(window.jupyterapp.shell.widgets('main'))
            .find(w => w.context && w.context.path === path).content.mode === 'command'""",
        arg=name,
    )
    app.page.keyboard.press("z")


def screenshot(app: App, file: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    app.page.locator(".jp-Notebook").first.screenshot(path=str(ARTIFACTS / file))


@pytest.mark.parametrize("app_name", APPS)
def test_one_accept_changes_the_function_runs_it_and_the_failing_cell_and_z_undoes(
    app_name: str, request: pytest.FixtureRequest
) -> None:
    app: App = request.getfixturevalue(app_name)
    name = f"two-cells-{app_name}.ipynb"
    open_notebook(app, name, [("f", F), ("other", OTHER), ("check", CHECK)], run=[0, 1, 2])
    before = state(app, name)
    assert "error" in kinds(before["check"]), before["check"]  # it failed

    reply = write(
        app,
        name,
        "w1",
        edits=[edit("f", F, F_FIXED, original_source=F, attempts=1)],
        run=["f", "check"],
        line=True,
    )
    assert reply == {"ok": True, "reason": "", "via_extension": True, "runs": True}
    ran_after(app, name, {"f": before["f"]["count"], "check": before["check"]["count"]})
    after = fixed_line(app, name, "f")
    assert [after[i]["source"] for i in ("f", "other", "check")] == [F_FIXED, OTHER, CHECK]
    assert order(app, name) == ["f", "other", "check"]
    assert after["f"]["count"] < after["check"]["count"]  # in that order
    assert after["other"]["count"] == before["other"]["count"]  # not asked to run
    assert after["check"]["outputs"] == []  # passes now: no error output
    assert kinds(after["f"]) == ["display_data"]  # the fixed line above its (no) outputs
    assert after["f"]["outputs"][0]["metadata"] == {"nbrefine": {"fixed": True}}
    assert after["f"]["nbrefine"] == {"original_source": F, "attempts": 1}
    assert after["check"]["nbrefine"] is None  # not changed
    expect(app.page.get_by_text("Fixed by nbrefine — 1 try")).to_be_visible()
    screenshot(app, f"write-cells-{app_name}.png")

    # One "Z" in command mode (Undo Cell Operation) puts the notebook back as it was.
    command_mode_z(app, name, 2, "check-cell")
    app.wait_source(name, 0, F)
    undone = state(app, name)
    assert [undone[i]["source"] for i in ("f", "other", "check")] == [F, OTHER, CHECK]
    assert undone["f"]["nbrefine"] is None  # the metadata too
    assert order(app, name) == ["f", "other", "check"]

    # Ctrl+Z in the edited cell's own editor undoes its part, as after a one-cell write.
    reply = write(app, name, "w2", edits=[edit("f", F, F_FIXED, attempts=2)], run=[])
    assert reply["ok"] is True and reply["runs"] is False, reply
    app.wait_source(name, 0, F_FIXED)
    app.cell(name, 0, "f-cell").locator(".cm-content").click()
    app.page.keyboard.press("Control+z")
    app.wait_source(name, 0, F)
    assert app.sources(name) == [F, OTHER, CHECK]


@pytest.mark.parametrize("app_name", APPS)
def test_a_move_puts_the_definer_above_runs_both_and_z_puts_the_order_back(
    app_name: str, request: pytest.FixtureRequest
) -> None:
    app: App = request.getfixturevalue(app_name)
    name = f"move-{app_name}.ipynb"
    open_notebook(app, name, [("use", USE), ("define", DEFINE)], run=[0])
    before = state(app, name)
    assert "error" in kinds(before["use"])  # NameError: rng is defined only below

    reply = write(
        app,
        name,
        "m1",
        edits=[],
        moves=[{"cell_id": "define", "above": "use"}],
        run=["define", "use"],
        line=True,
    )
    assert reply["ok"] is True and reply["runs"] is True, reply
    ran_after(app, name, {"define": 0, "use": before["use"]["count"]})
    after = fixed_line(app, name, "define")
    assert order(app, name) == ["define", "use"]
    assert after["define"]["count"] < after["use"]["count"]
    assert text(after["use"]) == FIRST_RANDOM + "\n" and "error" not in kinds(after["use"])
    assert after["define"]["outputs"][0]["metadata"] == {"nbrefine": {"fixed": True}}  # moved: changed
    assert [after[i]["source"] for i in ("define", "use")] == [DEFINE, USE]
    screenshot(app, f"write-cells-move-{app_name}.png")

    command_mode_z(app, name, 1, "use-cell")
    app.page.wait_for_function(
        "(path) => window.__nbr.ids(path).join() === 'use,define'", arg=name, timeout=20_000
    )
    assert app.sources(name) == [USE, DEFINE]


@pytest.mark.parametrize("app_name", APPS)
def test_an_expected_source_mismatch_writes_nothing(app_name: str, request: pytest.FixtureRequest) -> None:
    app: App = request.getfixturevalue(app_name)
    name = f"mismatch-{app_name}.ipynb"
    open_notebook(app, name, [("f", F), ("other", OTHER), ("check", CHECK)], run=[0, 1, 2])
    app.js("setSource", name, 0, F + "  # the user's own edit")
    before = state(app, name)

    reply = write(
        app,
        name,
        "bad",
        edits=[edit("other", OTHER, "y = 11"), edit("f", F, F_FIXED)],  # the first one matches
        moves=[{"cell_id": "check", "above": "f"}],
        run=["f", "check"],
        line=True,
    )
    assert reply["ok"] is False and reply["via_extension"] is True, reply
    assert reply["reason"] == 'the cell "f" (cell 1) was edited since it ran; nothing was changed'
    time.sleep(1.0)  # nothing runs either
    assert state(app, name) == before

    reply = write(app, name, "gone", edits=[edit("other", OTHER, "y = 11")], run=["no-such-cell"])
    assert reply["ok"] is False
    assert reply["reason"] == 'the cell "no-such-cell" is no longer in the notebook; nothing was changed'
    assert state(app, name) == before


@pytest.mark.parametrize("app_name", APPS)
def test_one_undo_puts_back_an_edit_and_a_move_from_the_button_or_the_kernel(
    app_name: str, request: pytest.FixtureRequest
) -> None:
    app: App = request.getfixturevalue(app_name)
    name = f"undo-{app_name}.ipynb"
    check = "assert f(1) == 3\nprint(rng.random())"
    cells = [("f", F), ("check", check), ("define", DEFINE)]
    open_notebook(app, name, cells, run=[0, 1])
    request_fields = {
        "edits": [edit("f", F, F_FIXED, original_source=F, attempts=1)],
        "moves": [{"cell_id": "define", "above": "check"}],
        "run": ["f", "define", "check"],
        "line": True,
    }

    for round_, how in enumerate(["button", "kernel"]):
        before = state(app, name)
        reply = write(app, name, f"w{round_}", **request_fields)
        assert reply["ok"] is True and reply["runs"] is True, reply
        ran_after(app, name, {i: before[i]["count"] or 0 for i in ("f", "define", "check")})
        after = fixed_line(app, name, "f")
        assert order(app, name) == ["f", "define", "check"]
        assert after["f"]["count"] < after["define"]["count"] < after["check"]["count"]
        assert text(after["check"]) == FIRST_RANDOM + "\n"
        assert after["f"]["nbrefine"] == {"original_source": F, "attempts": 1}
        if how == "button":
            screenshot(app, f"write-cells-edit-and-move-{app_name}.png")
            cell = app.cell(name, 0, f"f-{round_}")
            cell.get_by_role("button", name="undo").click()
        else:
            assert undo(app, name, "u1", of=f"w{round_}") == {
                "ok": True, "reason": "", "via_extension": True, "runs": False,
            }  # fmt: skip
        app.page.wait_for_function(
            "(path) => window.__nbr.ids(path).join() === 'f,check,define'", arg=name, timeout=20_000
        )
        undone = state(app, name)
        assert [undone[i]["source"] for i in ("f", "check", "define")] == [F, check, DEFINE]
        assert undone["f"]["nbrefine"] is None  # metadata as it was
        assert "undone" in undone["f"]["outputs"][-1]["data"]["text/plain"]
        assert not any(
            o.get("metadata", {}).get("nbrefine", {}).get("fixed") for o in undone["define"]["outputs"]
        )

    again = undo(app, name, "u2", of="w1")
    assert again["ok"] is False and again["reason"] == "that fix was already undone"

    # A cell edited after the fix: the undo refuses, and changes nothing.
    assert write(app, name, "w3", **{**request_fields, "run": []})["ok"] is True
    app.wait_source(name, 0, F_FIXED)
    app.js("setSource", name, 0, F_FIXED + "  # the user's own edit")
    before = state(app, name)
    refused = undo(app, name, "u3", of="w3")
    assert refused["ok"] is False
    assert refused["reason"] == 'the cell "f" (cell 1) was changed since the fix; nothing was undone'
    assert state(app, name) == before


def test_with_the_notebook_wide_undo_history_one_ctrl_z_undoes_an_edit_and_a_move(lab_doc_undo: App) -> None:
    """``documentWideUndoRedo``: the cells share the notebook's undo manager, so Ctrl+Z (in command
    mode, or in any cell's editor) undoes the whole change, as "Z" does."""
    app, name = lab_doc_undo, "docundo-cells.ipynb"
    cells = [("f", F), ("check", CHECK), ("define", DEFINE)]
    open_notebook(app, name, cells, run=[])
    assert app.js("documentWideUndo", name) is True
    reply = write(
        app,
        name,
        "w",
        edits=[edit("f", F, F_FIXED, attempts=1)],
        moves=[{"cell_id": "define", "above": "f"}],
        run=["define", "f", "check"],
    )
    assert reply["ok"] is True and reply["runs"] is True, reply
    ran_after(app, name, {"define": 0, "f": 0, "check": 0})
    assert order(app, name) == ["define", "f", "check"]
    assert app.sources(name) == [DEFINE, F_FIXED, CHECK]

    app.cell(name, 2, "check-cell").locator(".cm-content").click()
    app.page.keyboard.press("Escape")
    app.page.keyboard.press("Control+z")
    app.page.wait_for_function(
        "(path) => window.__nbr.ids(path).join() === 'f,check,define'", arg=name, timeout=20_000
    )
    assert app.sources(name) == [F, CHECK, DEFINE]
    assert state(app, name)["f"]["nbrefine"] is None  # though JupyterLab rewrote it when f first ran

    # Redo brings the whole fix back, provenance too; undo again.
    app.page.keyboard.press("Control+Shift+z")
    app.page.wait_for_function(
        "(path) => window.__nbr.ids(path).join() === 'define,f,check'", arg=name, timeout=20_000
    )
    assert app.sources(name) == [DEFINE, F_FIXED, CHECK]
    assert state(app, name)["f"]["nbrefine"] == {"attempts": 1}
    app.page.keyboard.press("Control+z")
    app.page.wait_for_function(
        "(path) => window.__nbr.ids(path).join() === 'f,check,define'", arg=name, timeout=20_000
    )
    assert app.sources(name) == [F, CHECK, DEFINE]
    assert state(app, name)["f"]["nbrefine"] is None

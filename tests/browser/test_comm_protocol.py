"""The labextension's side of the write-back protocol, driven by a kernel snippet.

No nbrefine code runs in these kernels: a few lines open the comm the way
``nbrefine/ipython/writeback.py`` does (``comm.create_comm(target_name="nbrefine", data=...)``) and
record the answer, so these tests pin down the extension on its own.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from browser_driver import ROOT, App

pytestmark = pytest.mark.timeout(180)

PACKAGE_VERSION = json.loads((ROOT / "labextension" / "package.json").read_text())["version"]

SNIPPET = """\
import json as _json
from comm import create_comm as _create_comm
_nbr_replies, _nbr_closed = {}, []

def _nbr_open(data):
    def on_msg(msg):
        reply = msg["content"]["data"]
        _nbr_replies[reply.get("request_id", data.get("request_id"))] = reply
    comm = _create_comm(target_name="nbrefine", data=data)
    comm.on_msg(on_msg)
    comm.on_close(lambda msg: _nbr_closed.append(data.get("request_id")))
"""


def request(app: App, path: str, data: dict[str, Any], timeout: float = 15.0) -> dict[str, Any]:
    """Open a comm from the kernel of ``path`` with ``data``; the frontend's answer (and that it closed)."""
    data = {"request_id": uuid.uuid4().hex, **data}
    out = app.js("exec", path, f"_nbr_open(_json.loads({json.dumps(json.dumps(data))}))")
    assert out["status"] == "ok", out
    rid = data["request_id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # Each execute lets the kernel read the comm messages that arrived meanwhile.
        probe = f"print(_json.dumps([_nbr_replies.get({rid!r}), {rid!r} in _nbr_closed]))"
        text = app.js("exec", path, probe)["text"]
        reply, closed = json.loads(text.strip().splitlines()[-1])
        if reply is not None and closed:
            return dict(reply)
        time.sleep(0.1)
    raise AssertionError(f"no answer to {data} within {timeout:g} s")


def open_with_snippet(app: App, name: str, sources: list[str]) -> list[str]:
    ids = app.server.write_notebook(name, sources)
    app.open(name)
    assert app.js("exec", name, SNIPPET)["status"] == "ok"
    return ids


def test_ping_answers_with_the_extension_version(lab: App) -> None:
    open_with_snippet(lab, "ping.ipynb", ["1 + 1"])
    assert lab.js("pluginActive", "nbrefine-labextension:plugin")
    first = request(lab, "ping.ipynb", {"action": "ping"})
    assert first["ok"] is True
    assert first["version"] == PACKAGE_VERSION
    # the same kernel asked again: still one answer per request
    assert request(lab, "ping.ipynb", {"action": "ping"})["ok"] is True


def test_write_cell_replaces_the_source_keeps_the_id_and_undo_restores(lab: App) -> None:
    name = "write.ipynb"
    original = "total = sum(valuse)"
    ids = open_with_snippet(lab, name, ["values = [1, 2]", original, "print(total)"])
    assert lab.js("documentWideUndo", name) is False  # JupyterLab 4's default: one history per cell
    fixed = "total = sum(values)"
    reply = request(
        lab,
        name,
        {
            "action": "write_cell",
            "cell_id": ids[1],
            "expected_source": original,
            "source": fixed,
            "metadata": {"nbrefine": {"original_source": original, "attempts": 1}},
        },
    )
    assert reply["ok"] is True, reply
    assert lab.sources(name) == ["values = [1, 2]", fixed, "print(total)"]
    assert lab.js("ids", name) == ids  # same cells, same ids
    assert lab.js("metadata", name, 1, "nbrefine") == {"original_source": original, "attempts": 1}

    # Undo in the cell's editor (Ctrl+Z, as a user would) brings the original back...
    editor = lab.cell(name, 1, "target").locator(".cm-content")
    editor.click()
    lab.page.keyboard.press("Control+z")
    lab.wait_source(name, 1, original)
    # ... and redo the fix.
    lab.page.keyboard.press("Control+Shift+z")
    lab.wait_source(name, 1, fixed)


def test_undo_with_the_notebook_wide_undo_history(lab_doc_undo: App) -> None:
    """With ``documentWideUndoRedo`` the cells share the notebook's undo manager; same result."""
    app, name = lab_doc_undo, "docundo.ipynb"
    ids = open_with_snippet(app, name, ["a = 1", "b = a +"])
    assert app.js("documentWideUndo", name) is True
    reply = request(
        app,
        name,
        {"action": "write_cell", "cell_id": ids[1], "expected_source": "b = a +", "source": "b = a + 1"},
    )
    assert reply["ok"] is True, reply
    assert app.sources(name) == ["a = 1", "b = a + 1"]
    app.cell(name, 1, "target").locator(".cm-content").click()
    app.page.keyboard.press("Control+z")
    app.wait_source(name, 1, "b = a +")
    assert app.sources(name) == ["a = 1", "b = a +"]


def test_write_cell_refuses_when_the_cell_was_edited(lab: App) -> None:
    name = "edited.ipynb"
    ids = open_with_snippet(lab, name, ["x = 1", "y = x +"])
    lab.js("setSource", name, 1, "y = x + 2  # the user's own edit")
    reply = request(
        lab,
        name,
        {"action": "write_cell", "cell_id": ids[1], "expected_source": "y = x +", "source": "y = x + 1"},
    )
    assert reply == {
        "request_id": reply["request_id"],
        "ok": False,
        "reason": "the cell was edited since it ran; nothing was changed",
    }
    assert lab.sources(name)[1] == "y = x + 2  # the user's own edit"


def test_write_cell_refuses_when_the_cell_is_gone(lab: App) -> None:
    name = "gone.ipynb"
    open_with_snippet(lab, name, ["x = 1"])
    reply = request(
        lab,
        name,
        {"action": "write_cell", "cell_id": "no-such-cell", "expected_source": "", "source": "x = 2"},
    )
    assert reply["ok"] is False
    assert reply["reason"] == "the cell is no longer in the notebook"
    assert lab.sources(name) == ["x = 1"]


def test_write_cell_refuses_a_cell_marked_not_editable(lab: App) -> None:
    name = "locked.ipynb"
    ids = open_with_snippet(lab, name, ["x = 1", "y = x +"])
    lab.js("setMetadata", name, 1, "editable", False)
    reply = request(
        lab,
        name,
        {"action": "write_cell", "cell_id": ids[1], "expected_source": "y = x +", "source": "y = x + 1"},
    )
    assert reply["ok"] is False
    assert "not editable" in reply["reason"] and "nothing was changed" in reply["reason"]
    assert lab.sources(name) == ["x = 1", "y = x +"]


def test_unknown_action_is_refused(lab: App) -> None:
    open_with_snippet(lab, "unknown.ipynb", ["x = 1"])
    reply = request(lab, "unknown.ipynb", {"action": "delete_everything"})
    assert reply["ok"] is False and reply["reason"] == "unknown action"


def test_writes_into_the_notebook_bound_to_the_kernel_not_the_active_one(lab: App) -> None:
    """Two notebooks with the same cell ids (a copied file); the other one is active."""
    ids = lab.server.write_notebook("a.ipynb", ["x = 1", "y = x +"])
    lab.server.copy_notebook("a.ipynb", "b.ipynb")
    lab.open("a.ipynb")
    assert lab.js("exec", "a.ipynb", SNIPPET)["status"] == "ok"
    lab.open_in_app("b.ipynb")
    lab.js("activate", "b.ipynb")
    assert lab.js("activePath") == "b.ipynb"
    assert lab.js("kernelId", "a.ipynb") != lab.js("kernelId", "b.ipynb")

    reply = request(
        lab,
        "a.ipynb",
        {"action": "write_cell", "cell_id": ids[1], "expected_source": "y = x +", "source": "y = x + 1"},
    )
    assert reply["ok"] is True, reply
    assert lab.sources("a.ipynb") == ["x = 1", "y = x + 1"]
    assert lab.sources("b.ipynb") == ["x = 1", "y = x +"]


def test_cells_inserted_above_and_save_and_reopen(lab: App) -> None:
    name = "moved.ipynb"
    ids = open_with_snippet(lab, name, ["a = 1", "b = a +"])
    lab.js("insertCell", name, 0, "# inserted at the top")
    lab.js("insertCell", name, 1, "# inserted second")
    reply = request(
        lab,
        name,
        {"action": "write_cell", "cell_id": ids[1], "expected_source": "b = a +", "source": "b = a + 1"},
    )
    assert reply["ok"] is True, reply
    assert lab.sources(name) == ["# inserted at the top", "# inserted second", "a = 1", "b = a + 1"]

    # Saved, closed and opened again (a new page, a new kernel): the ids are the file's.
    lab.js("save", name)
    saved = lab.server.read_notebook(name)
    assert [c.source for c in saved.cells][-1] == "b = a + 1"
    assert saved.cells[-1].id == ids[1]
    lab.server.shutdown_kernels()
    lab.open(name)
    assert lab.js("exec", name, SNIPPET)["status"] == "ok"
    reply = request(
        lab,
        name,
        {"action": "write_cell", "cell_id": ids[1], "expected_source": "b = a + 1", "source": "b = a + 2"},
    )
    assert reply["ok"] is True, reply
    assert lab.sources(name)[-1] == "b = a + 2"


def test_still_registered_after_a_kernel_restart_and_a_kernel_change(lab: App) -> None:
    name = "restart.ipynb"
    open_with_snippet(lab, name, ["x = 1"])
    assert request(lab, name, {"action": "ping"})["ok"] is True

    lab.js("restartKernel", name)
    lab.js("ready", name, 60_000)
    assert lab.js("exec", name, SNIPPET)["status"] == "ok"
    assert request(lab, name, {"action": "ping"})["ok"] is True

    before, after = lab.js("changeKernel", name)
    assert before != after
    lab.js("ready", name, 60_000)
    assert lab.js("exec", name, SNIPPET)["status"] == "ok"
    assert request(lab, name, {"action": "ping"})["ok"] is True


def test_notebook7_ping_and_write(nb7: App) -> None:
    name = "nb7.ipynb"
    ids = open_with_snippet(nb7, name, ["z = 1", "w = z +"])
    assert nb7.js("appName") == "Jupyter Notebook"
    assert request(nb7, name, {"action": "ping"})["version"] == PACKAGE_VERSION
    reply = request(
        nb7,
        name,
        {"action": "write_cell", "cell_id": ids[1], "expected_source": "w = z +", "source": "w = z + 1"},
    )
    assert reply["ok"] is True, reply
    assert nb7.sources(name) == ["z = 1", "w = z + 1"]


def test_a_console_on_the_same_kernel_does_not_get_in_the_way(lab: App) -> None:
    """A console has no comm target, so its connection closes every nbrefine comm at once.

    The notebook's answer must still reach the kernel first (measured: always, here; the order
    is that of the two websockets' messages, so it is not guaranteed by JupyterLab)."""
    name = "console.ipynb"
    ids = open_with_snippet(lab, name, ["x = 1", "y = x +"])
    lab.js("activate", name)
    lab.page.evaluate("() => window.jupyterapp.commands.execute('notebook:create-console')")
    lab.page.wait_for_function(
        """(kernel) => Array.from(window.jupyterapp.shell.widgets('main')).filter(w => {
            const s = w.sessionContext && w.sessionContext.session;
            return s && s.kernel && s.kernel.id === kernel && s.kernel.status === 'idle';
        }).length === 2""",
        arg=lab.js("kernelId", name),
    )
    order = """
_nbr_order = {}
def _nbr_ping(rid):
    _nbr_order[rid] = []
    comm = _create_comm(target_name="nbrefine", data={"action": "ping", "request_id": rid})
    comm.on_msg(lambda msg: _nbr_order[rid].append("answer"))
    comm.on_close(lambda msg: _nbr_order[rid].append("close"))
for _i in range(10):
    _nbr_ping(f"p{_i}")
"""
    assert lab.js("exec", name, order)["status"] == "ok"
    deadline = time.monotonic() + 15
    seen: dict[str, list[str]] = {}
    while time.monotonic() < deadline:
        seen = json.loads(lab.js("exec", name, "print(_json.dumps(_nbr_order))")["text"])
        if all(len(events) == 2 for events in seen.values()):
            break
        time.sleep(0.2)
    assert all(events == ["answer", "close"] for events in seen.values()), seen

    reply = request(
        lab,
        name,
        {"action": "write_cell", "cell_id": ids[1], "expected_source": "y = x +", "source": "y = x + 1"},
    )
    assert reply["ok"] is True, reply
    assert lab.sources(name) == ["x = 1", "y = x + 1"]

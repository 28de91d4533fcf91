"""``nbrefine fix``: real notebooks run in real kernels through the command line.

The model is the scripted provider (``NBREFINE_SCRIPTED_REPLIES``: every failing cell gets the same
list of replies) or the offline quick fixes. Most tests call ``main([...])`` in this process; a few
run ``python -m nbrefine.cli`` as a subprocess, to see exactly what a shell user sees.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from nbrefine.cli.fix import parse_cells
from nbrefine.cli.main import main
from nbrefine.providers.anthropic import DEFAULT_MODEL

ROOT = Path(__file__).resolve().parents[2]
from fakes.anthropic_api import FakeAnthropic  # noqa: E402

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("clean_env")]


def make_notebook(path: Path, *sources: str) -> Path:
    cells = [new_markdown_cell("# test notebook", id="title")]
    cells += [new_code_cell(src, id=f"c{i}") for i, src in enumerate(sources, 1)]
    notebook = new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)
    return path


def replies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *texts: str) -> None:
    file = tmp_path / "replies.json"
    file.write_text(json.dumps(list(texts)))
    monkeypatch.setenv("NBREFINE_SCRIPTED_REPLIES", str(file))


def block(code: str, explanation: str = "Fixed the typo.") -> str:
    return f"{explanation}\n\n```python\n{code}\n```"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def code_cells(path: Path) -> list[Any]:
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def text_of(cell: Any) -> str:
    parts = []
    for out in cell.outputs:
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.data.get("text/plain", ""))
        elif out.output_type == "error":
            parts.append(f"{out.ename}: {out.evalue}")
    return "\n".join(parts)


SCRIPTED = ["--provider", "scripted", "--no-quick-fixes"]

TYPO = "print('computing')\ntotal = sum(pricez)\ntotal"
TYPO_FIXED = "print('computing')\ntotal = sum(prices)\ntotal"


# --------------------------------------------------------------------------- repairs


def test_failing_cell_is_fixed_and_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    nb = make_notebook(
        tmp_path / "sales.ipynb", "prices = [2.5, 4.0, 1.5]", TYPO, "double = total * 2\ndouble"
    )
    before = digest(nb)
    replies(tmp_path, monkeypatch, block(TYPO_FIXED))

    code = main(["fix", str(nb), *SCRIPTED, "--report", str(tmp_path / "report.json")])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert digest(nb) == before  # the input is never touched without --in-place
    cells = code_cells(tmp_path / "sales.fixed.ipynb")
    fixed = cells[1]
    assert fixed.source == TYPO_FIXED
    assert fixed.id == "c2"
    meta = fixed.metadata["nbrefine"]
    assert meta["original_source"] == TYPO
    assert meta["attempts"] == 1
    assert meta["provider"] == "scripted"
    assert meta["model"] == "scripted"
    assert meta["error_type"] == "NameError"
    assert meta["version"]
    assert meta["accepted_at"].endswith("+00:00")
    assert meta["verified"] is True
    assert meta["explanation"] == "Fixed the typo."
    # The outputs are those of the accepted run, not nbrefine's progress lines.
    assert [o.output_type for o in fixed.outputs] == ["stream", "execute_result"]
    assert fixed.outputs[0].text == "computing\n"
    assert fixed.outputs[1].data["text/plain"] == "8.0"
    assert "nbrefine" not in text_of(fixed)
    # The state advanced: the next cell saw the fixed run's `total`.
    assert text_of(cells[2]) == "16.0"
    assert [c.execution_count for c in cells] == [1, 2, 3]
    assert "nbrefine" not in cells[0].metadata

    assert "provider: scripted" in err
    assert "[2/3] cell 2: NameError → fixed at attempt 1 (scripted," in err
    assert "[1/3] cell 1: ok" in err
    assert "cells run" in out and "fixed at first attempt       1" in out
    assert "-total = sum(pricez)" in out and "+total = sum(prices)" in out
    assert "every cell passes" in out

    report = json.loads((tmp_path / "report.json").read_text())
    assert report["exit_code"] == 0
    assert report["summary"]["cells_run"] == 3
    assert report["summary"]["failed"] == 1
    assert report["summary"]["fixed_at_first_attempt"] == 1
    assert report["summary"]["by_error_type"] == {"NameError": {"failed": 1, "fixed": 1, "unfixed": 0}}
    row = report["cells"][1]
    assert row["status"] == "fixed" and row["id"] == "c2" and row["fixed_source"] == TYPO_FIXED
    assert "+total = sum(prices)" in row["diff"]
    assert row["attempts"][0]["ok"] is True
    assert report["output"] == str(tmp_path / "sales.fixed.ipynb")


def test_unfixable_cell_keeps_its_error_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    nb = make_notebook(
        tmp_path / "bad.ipynb",
        "x = 1",
        "print('about to fail')\ny = undefined_thing + 1",
        "z = y * 2",  # fails too, because the cell before stayed broken: counted honestly
    )
    replies(tmp_path, monkeypatch, "I cannot tell what undefined_thing should be.", "Still no idea.")
    out_path = tmp_path / "out" / "result.ipynb"
    out_path.parent.mkdir()
    out_path.write_text("an older result: overwritten")

    code = main(
        [
            "fix",
            str(nb),
            *SCRIPTED,
            "--max-attempts",
            "2",
            "-o",
            str(out_path),
            "--report",
            str(tmp_path / "r.md"),
        ]
    )

    out, err = capsys.readouterr()
    assert code == 1, out + err
    cells = code_cells(out_path)
    broken = cells[1]
    assert broken.source == "print('about to fail')\ny = undefined_thing + 1"
    assert "nbrefine" not in broken.metadata
    # The original run's outputs: its print and its traceback; no RefineStop, no nbrefine lines.
    assert [o.output_type for o in broken.outputs] == ["stream", "error"]
    assert broken.outputs[0].text == "about to fail\n"
    assert broken.outputs[1].ename == "NameError"
    assert "nbrefine" not in text_of(broken)
    assert cells[2].outputs[-1].ename == "NameError"  # y was never defined
    assert "still failing: NameError: name 'undefined_thing' is not defined" in err
    assert "2 cells still fail" in out

    md = (tmp_path / "r.md").read_text()
    assert md.startswith("# nbrefine report:")
    assert "| cells run | passed as they were | failed |" in md
    assert "| 3 | 1 | 2 | 0 | 0 | 2 |" in md
    assert "| NameError | 2 | 0 | 2 |" in md
    assert "### Cell 2: still failing" in md
    assert "exit code 1" in md


def test_dry_run_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    nb = make_notebook(tmp_path / "dry.ipynb", "prices = [1, 2]", TYPO)
    replies(tmp_path, monkeypatch, block(TYPO_FIXED))
    before = sorted(p.name for p in tmp_path.iterdir())

    code = main(["fix", str(nb), *SCRIPTED, "--dry-run"])

    out, _ = capsys.readouterr()
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert "dry run: no notebook written" in out
    assert "+total = sum(prices)" in out


def test_in_place_writes_atomically_with_a_backup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    nb = make_notebook(tmp_path / "inplace.ipynb", "prices = [1, 2]", TYPO)
    original = nb.read_bytes()
    replies(tmp_path, monkeypatch, block(TYPO_FIXED))

    code = main(["fix", str(nb), *SCRIPTED, "--in-place"])

    assert code == 0, capsys.readouterr()
    assert (tmp_path / "inplace.ipynb.bak").read_bytes() == original
    assert code_cells(nb)[1].source == TYPO_FIXED
    assert not (tmp_path / "inplace.fixed.ipynb").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "inplace.ipynb",
        "inplace.ipynb.bak",
        "replies.json",
    ]


def test_in_place_failed_write_leaves_the_original(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    nb = make_notebook(tmp_path / "keep.ipynb", "prices = [1, 2]", TYPO)
    before = digest(nb)
    replies(tmp_path, monkeypatch, block(TYPO_FIXED))
    real_replace = os.replace

    def failing_replace(src: Any, dst: Any) -> None:
        if Path(dst) == nb:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)

    code = main(["fix", str(nb), *SCRIPTED, "--in-place"])

    _, err = capsys.readouterr()
    assert code == 2
    assert digest(nb) == before
    assert err.strip().splitlines()[-1] == f"nbrefine: error: cannot write {nb}: No space left on device"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temp file left behind


def test_killed_run_leaves_the_original(tmp_path: Path) -> None:
    marker = tmp_path / "kernel.pid"
    nb = make_notebook(
        tmp_path / "slow.ipynb",
        "import os, time\nopen('kernel.pid', 'w').write(str(os.getpid()))\ntime.sleep(20)",
        "x = 1",
    )
    before = digest(nb)
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbrefine.cli", "fix", str(nb), "--in-place", "--provider", "offline"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    kernel_pid = 0
    try:
        deadline = time.monotonic() + 30
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        kernel_pid = int(marker.read_text())
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        if kernel_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(kernel_pid, signal.SIGKILL)  # the kernel we started, orphaned by the kill
    assert digest(nb) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kernel.pid", "slow.ipynb"]


def test_cells_selection_repairs_only_the_chosen_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    nb = make_notebook(
        tmp_path / "sel.ipynb",
        "prices = [1, 2]",
        "count = len(pricez)",  # not selected: stays failing
        TYPO,  # selected: fixed
    )
    replies(tmp_path, monkeypatch, block(TYPO_FIXED))

    code = main(["fix", str(nb), *SCRIPTED, "--cells", "1,3"])

    out, err = capsys.readouterr()
    assert code == 1
    cells = code_cells(tmp_path / "sel.fixed.ipynb")
    assert cells[1].source == "count = len(pricez)"
    assert cells[1].outputs[-1].ename == "NameError"
    assert "nbrefine" not in cells[1].metadata
    assert cells[2].source == TYPO_FIXED
    assert "not selected by --cells" in out
    assert "[3/3] cell 3: NameError → fixed at attempt 1" in err


def test_tagged_cells_are_skipped_or_allowed_to_fail(tmp_path: Path, capsys: Any) -> None:
    nb = make_notebook(tmp_path / "tags.ipynb", "x = 1", "1 / 0", "import os\nos._exit(1)", "print(x)")
    notebook = nbformat.read(nb, as_version=4)
    notebook.cells[2].metadata["tags"] = ["raises-exception"]
    notebook.cells[3].metadata["tags"] = ["skip-execution"]
    nbformat.write(notebook, nb)

    code = main(["fix", str(nb), "--provider", "offline", "--report", str(tmp_path / "r.json")])

    assert code == 0, capsys.readouterr()
    cells = code_cells(tmp_path / "tags.fixed.ipynb")
    assert cells[1].outputs[-1].ename == "ZeroDivisionError"
    assert "nbrefine" not in cells[1].metadata
    assert cells[2].outputs == [] and cells[2].execution_count is None
    assert text_of(cells[3]) == "1\n"
    report = json.loads((tmp_path / "r.json").read_text())
    assert [c["status"] for c in report["cells"]] == ["passed", "passed", "skipped", "passed"]


def test_refine_cells_run_as_they_are_and_keep_their_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    header = '%%refine -t "assert total == 3.5"'
    nb = make_notebook(tmp_path / "own.ipynb", "prices = [1.5, 2.0]", f"{header}\n{TYPO}")
    replies(tmp_path, monkeypatch, block(TYPO_FIXED))

    code = main(["fix", str(nb), *SCRIPTED])

    assert code == 0, capsys.readouterr()
    fixed = code_cells(tmp_path / "own.fixed.ipynb")[1]
    assert fixed.source == f"{header}\n{TYPO_FIXED}"
    assert fixed.metadata["nbrefine"]["original_source"] == f"{header}\n{TYPO}"
    assert text_of(fixed) == "computing\n\n3.5"


def test_kernel_death_stops_the_run_and_writes_what_was_done(tmp_path: Path, capsys: Any) -> None:
    nb = make_notebook(tmp_path / "die.ipynb", "x = 41\nx + 1", "import os\nos._exit(3)", "y = 2")

    code = main(["fix", str(nb), "--provider", "offline"])

    out, err = capsys.readouterr()
    assert code == 1
    cells = code_cells(tmp_path / "die.fixed.ipynb")
    assert text_of(cells[0]) == "42"
    assert cells[1].outputs[-1].ename == "DeadKernelError"
    assert cells[2].execution_count is None
    assert "the kernel died while cell 2 ran; later cells were not run" in out
    assert "not run" in out
    assert "Traceback" not in err


def test_demo_notebook_offline(tmp_path: Path, capsys: Any) -> None:
    """The README's main job: the demo notebook, offline, no API key."""
    demo = ROOT / "notebooks" / "demo.ipynb"
    before = digest(demo)
    out_path = tmp_path / "demo.fixed.ipynb"

    code = main(["fix", str(demo), "-o", str(out_path), "--report", str(tmp_path / "demo.json")])

    out, err = capsys.readouterr()
    assert digest(demo) == before
    assert "provider: offline (no ANTHROPIC_API_KEY set" in err
    report = json.loads((tmp_path / "demo.json").read_text())
    status = {c["id"]: c["status"] for c in report["cells"]}
    assert status == {
        "imports": "passed",
        "load-data": "passed",
        "clean": "fixed",
        "revenue": "fixed",
        "log-revenue": "fixed",
        "by-region": "fixed",
        "headline": "fixed",
        "region-table": "fixed",
        "monthly": "passed",
        "share": "unfixed",  # the logic bug: the offline tier declines it
    }, out
    assert code == 1
    assert all(c["provider"] == "offline" for c in report["cells"] if c["status"] == "fixed")
    cells = {c.id: c for c in code_cells(out_path)}
    assert "len(sales)" in cells["clean"].source
    assert 'clean["price"]' in cells["revenue"].source
    assert "import numpy as np" in cells["log-revenue"].source
    assert ".groupby(" in cells["by-region"].source
    assert "Units sold this quarter: 129" in text_of(cells["headline"])
    assert "north    127.00" in text_of(cells["region-table"])
    assert cells["share"].outputs[-1].ename == "AssertionError"


def test_quick_fixes_first_then_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """With an API key, the offline tier fixes the typo for free and the model gets the logic bug;
    each fixed cell says which of them fixed it."""
    nb = make_notebook(
        tmp_path / "tiers.ipynb",
        "prices = [2.0, 3.0]",
        "mean = sum(prices) / len(prics)",
        "share = [p / sum(prices) * 100 for p in prices]\nassert abs(sum(share) - 1) < 1e-9",
    )
    model_fix = "share = [p / sum(prices) for p in prices]\nassert abs(sum(share) - 1) < 1e-9"
    with FakeAnthropic() as fake:
        fake.script({"text": block(model_fix, "Fractions, not percentages.")})
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-cli-test-dummy")
        code = main(["fix", str(nb), "--report", str(tmp_path / "r.json")])
        requests = len(fake.requests)

    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert requests == 1  # the typo never reached the model
    assert "provider: anthropic (ANTHROPIC_API_KEY is set; offline quick fixes first)" in err
    assert "cell 2: NameError → fixed at attempt 1 (offline," in err
    assert "cell 3: AssertionError → fixed at attempt 1 (anthropic," in err
    cells = code_cells(tmp_path / "tiers.fixed.ipynb")
    assert cells[1].source == "mean = sum(prices) / len(prices)"
    assert cells[1].metadata["nbrefine"]["provider"] == "offline"
    assert cells[2].source == model_fix
    assert cells[2].metadata["nbrefine"]["provider"] == "anthropic"
    assert cells[2].metadata["nbrefine"]["model"] == DEFAULT_MODEL
    assert cells[2].metadata["nbrefine"]["explanation"] == "Fractions, not percentages."


# --------------------------------------------------------------------------- first try, real programs


def test_output_and_report_folders_are_created(tmp_path: Path, capsys: Any) -> None:
    """A fresh clone has no out/: the folders of -o and --report are made, as the README's
    `./dev demo` needs."""
    nb = make_notebook(tmp_path / "ok.ipynb", "x = 1")
    out_path = tmp_path / "out" / "nested" / "ok.fixed.ipynb"
    report = tmp_path / "reports" / "ok.md"

    code = main(["fix", str(nb), "--provider", "offline", "-o", str(out_path), "--report", str(report)])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert code_cells(out_path)[0].source == "x = 1"
    assert report.read_text().startswith("# nbrefine report:")


def test_dev_demo_works_on_a_fresh_checkout(tmp_path: Path) -> None:
    """`./dev demo` as a newcomer runs it: no out/ folder yet, nothing prepared beside it."""
    checkout = tmp_path / "nbrefine"
    checkout.mkdir()
    shutil.copy2(ROOT / "dev", checkout / "dev")
    shutil.copytree(ROOT / "notebooks", checkout / "notebooks")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NBREFINE_", "ANTHROPIC_"))}
    env["NBREFINE_VENV"] = str(ROOT / ".venv")  # the installed venv: nothing to download

    proc = subprocess.run(
        [str(checkout / "dev"), "demo"], capture_output=True, text=True, timeout=110, env=env
    )

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (checkout / "out" / "demo.fixed.ipynb").is_file()
    assert (checkout / "out" / "demo-report.md").read_text().startswith("# nbrefine report:")
    assert "demo done" in proc.stdout


BLANKS = "    "  # a whitespace-only line, as students leave between functions


def test_whitespace_only_lines_keep_the_real_error_and_the_repair(tmp_path: Path, capsys: Any) -> None:
    """IPython empties whitespace-only lines of a %%refine body: the session is still the cell's,
    and the report has the real error, its type and the attempts (not RefineStop)."""
    fixable = (
        f"def add_tax(x):\n    return x + 1\n{BLANKS}\ndef main():\n    return add_tx(2)\n{BLANKS}\nmain()"
    )
    unfixable = f"def twice(x):\n    return 2 * x\n{BLANKS}\nprint(twice(undefined_thing_xyz))"
    nb = make_notebook(tmp_path / "ws.ipynb", fixable, unfixable)

    code = main(["fix", str(nb), "--provider", "offline", "--report", str(tmp_path / "r.json")])

    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert "RefineStop" not in out + err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["summary"]["by_error_type"] == {"NameError": {"failed": 2, "fixed": 1, "unfixed": 1}}
    fixed, declined = report["cells"]
    assert (fixed["status"], fixed["error_type"]) == ("fixed", "NameError")
    assert fixed["attempts"] and fixed["attempts"][-1]["ok"] is True
    assert "+    return add_tax(2)" in fixed["diff"]
    assert (declined["status"], declined["error_type"]) == ("unfixed", "NameError")
    assert declined["error_message"] == "name 'undefined_thing_xyz' is not defined"
    assert declined["attempts"] and "no %%refine session" not in declined["reason"]
    cells = code_cells(tmp_path / "ws.fixed.ipynb")
    assert "return add_tax(2)" in cells[0].source
    assert text_of(cells[0]) == "3"


def test_teaching_mode_gives_hints_in_the_report_and_the_notebook(tmp_path: Path, capsys: Any) -> None:
    """`--mode hint --max-hints 2` means what the cell options mean: a hint, never the fix."""
    nb = make_notebook(tmp_path / "ex.ipynb", "prices = [2.5, 4.0]", "total = sum(pricez)\ntotal")

    code = main(
        ["fix", str(nb), "--provider", "offline", "--mode", "hint", "--max-hints", "2",
         "--report", str(tmp_path / "r.json")]
    )  # fmt: skip

    out, err = capsys.readouterr()
    assert code == 1, out + err  # a hint does not make the cell pass
    report = json.loads((tmp_path / "r.json").read_text())
    cell = report["cells"][1]
    assert (cell["status"], cell["error_type"], cell["fixed_source"]) == ("unfixed", "NameError", None)
    hint = cell["hint"]
    assert (hint["mode"], hint["header"], hint["hints_used"], hint["hint_cap"]) == (
        "hint",
        "Hint 1 of 2",
        1,
        2,
    )
    assert len(hint["text"]) > 40
    assert hint["text"] in out
    written = code_cells(tmp_path / "ex.fixed.ipynb")[1]
    assert written.source == "total = sum(pricez)\ntotal"  # never the fix
    assert written.metadata["nbrefine"]["hint"] == hint["text"]
    assert written.outputs[0].ename == "NameError"
    assert hint["text"] in text_of(written)

    code = main(
        ["fix", str(nb), "--provider", "offline", "--mode", "graduated", "--report", str(tmp_path / "r.md")]
    )

    assert code == 1
    md = (tmp_path / "r.md").read_text()
    assert "**Hint 1 of 3** (graduated mode)" in md
    assert code_cells(tmp_path / "ex.fixed.ipynb")[1].metadata["nbrefine"]["hint"] in md


def test_in_place_leaves_the_input_untouched_when_no_cell_changed(tmp_path: Path, capsys: Any) -> None:
    nb = make_notebook(tmp_path / "same.ipynb", "x = 1", "print(x + undefined_thing_xyz)")
    before, stamp = digest(nb), nb.stat().st_mtime_ns

    code = main(["fix", str(nb), "--provider", "offline", "--in-place"])

    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert (digest(nb), nb.stat().st_mtime_ns) == (before, stamp)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["same.ipynb"]  # no .bak
    assert f"no cell changed: {nb} left as it was" in out


# --------------------------------------------------------------------------- bad usage and input


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("nbrefine: error: "), err
    assert "Traceback" not in err
    return lines[0]


def good_notebook(tmp_path: Path) -> Path:
    return make_notebook(tmp_path / "good.ipynb", "x = 1")


BAD_INPUTS = {
    "missing file": (lambda p: ["fix", str(p / "nope.ipynb")], "no such file"),
    "not json": (lambda p: ["fix", str(_write(p / "x.ipynb", "this is not json"))], "not valid JSON"),
    "not a notebook": (
        lambda p: ["fix", str(_write(p / "x.ipynb", '{"cells": 3}'))],
        "not a valid Jupyter notebook",
    ),
    "json list": (lambda p: ["fix", str(_write(p / "x.ipynb", "[1, 2]"))], "not a valid Jupyter notebook"),
    "unknown kernel": (
        lambda p: ["fix", str(good_notebook(p)), "--kernel", "no-such-kernel-x"],
        "no such kernel",
    ),
    "output folder is a file": (
        lambda p: ["fix", str(good_notebook(p)), "-o", str(_write(p / "f.txt", "x") / "out.ipynb")],
        "is not a folder",
    ),
    "bad mode": (lambda p: ["fix", str(good_notebook(p)), "--mode", "lecture"], "invalid choice"),
    "bad max hints": (lambda p: ["fix", str(good_notebook(p)), "--max-hints", "0"], "at least 1"),
    "locked policy loosened": (
        lambda p: ["fix", str(_locked_notebook(p)), "--mode", "fix"],
        "Your instructor has set this notebook to hint mode",
    ),
    "unwritable output dir": (
        lambda p: ["fix", str(good_notebook(p)), "-o", str(_unwritable(p) / "out.ipynb")],
        "cannot write in",
    ),
    "output is the input": (
        lambda p: ["fix", str(good_notebook(p)), "-o", str(p / "good.ipynb")],
        "--in-place",
    ),
    "bad report extension": (
        lambda p: ["fix", str(good_notebook(p)), "--report", str(p / "r.txt")],
        "must end in .json or .md",
    ),
    "bad cells": (lambda p: ["fix", str(good_notebook(p)), "--cells", "2-x"], "--cells"),
    "cells out of range": (lambda p: ["fix", str(good_notebook(p)), "--cells", "1,4"], "only 1 code cell"),
    "in-place and output": (
        lambda p: ["fix", str(good_notebook(p)), "--in-place", "-o", str(p / "o.ipynb")],
        "not allowed with",
    ),
    "bad max attempts": (lambda p: ["fix", str(good_notebook(p)), "--max-attempts", "0"], "at least 1"),
    "unknown provider": (
        lambda p: ["fix", str(good_notebook(p)), "--provider", "nobody"],
        "unknown provider",
    ),
    "unknown option": (lambda p: ["fix", str(good_notebook(p)), "--frobnicate"], "unrecognized arguments"),
    "no command": (lambda p: [], "a command is required"),
}


def _locked_notebook(tmp_path: Path) -> Path:
    notebook = nbformat.read(good_notebook(tmp_path), as_version=4)
    notebook.metadata["nbrefine"] = {"mode": "hint", "lock": True}
    nbformat.write(notebook, tmp_path / "locked.ipynb")
    return tmp_path / "locked.ipynb"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _unwritable(tmp_path: Path) -> Path:
    if os.geteuid() == 0:  # root writes anywhere chmod allows nothing: use a folder no one can write in
        return Path("/sys")
    folder = tmp_path / "readonly"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_and_exit_2(case: str, tmp_path: Path, capsys: Any) -> None:
    make_args, expected = BAD_INPUTS[case]
    args = make_args(tmp_path)
    inputs = {p: digest(p) for p in tmp_path.iterdir() if p.is_file()}

    code = main(args)

    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert expected in one_error_line(err)
    assert out == ""
    assert {p: digest(p) for p in inputs} == inputs
    assert not [p for p in tmp_path.iterdir() if p.name.endswith((".fixed.ipynb", ".bak", ".tmp"))]


def test_bad_input_from_the_shell(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nbrefine.cli", "fix", str(tmp_path / "missing.ipynb")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == f"nbrefine: error: {tmp_path / 'missing.ipynb'}: no such file\n"


def test_help_lists_the_options(capsys: Any) -> None:
    assert main(["fix", "--help"]) == 0
    out = capsys.readouterr().out
    for option in (
        "--in-place",
        "--dry-run",
        "--report",
        "--cells",
        "--cell-timeout",
        "--no-quick-fixes",
        "--no-early-trials",
        "exit status",
    ):
        assert option in out


READ_SETTING = (
    "from nbrefine.engine.config import Refine\n"
    "settings = next(c for c in get_ipython().configurables if isinstance(c, Refine))\n"
    "print('early_trials =', settings.early_trials)"
)


@pytest.mark.parametrize("flags", [[], ["--no-early-trials"]], ids=["default", "off"])
def test_no_early_trials_reaches_every_kernel(
    flags: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """``--no-early-trials`` sets ``Refine.early_trials`` in the kernel of one notebook and in
    every kernel of a batch (the same trait, the same set-up call)."""
    monkeypatch.chdir(tmp_path)  # the batch writes its run record into the working folder
    one = make_notebook(tmp_path / "one.ipynb", READ_SETTING)
    folder = tmp_path / "many"
    folder.mkdir()
    many = [make_notebook(folder / f"nb{i}.ipynb", READ_SETTING) for i in (1, 2)]
    expected = "early_trials = False" if flags else "early_trials = True"

    assert main(["fix", str(one), "--provider", "offline", *flags]) == 0, capsys.readouterr()
    assert main(["fix", str(folder), "--provider", "offline", "--jobs", "2", *flags]) == 0, (
        capsys.readouterr()
    )

    for nb in (one, *many):
        assert text_of(code_cells(nb.with_name(nb.stem + ".fixed.ipynb"))[0]).strip() == expected


def test_parse_cells() -> None:
    assert parse_cells("3,5-7") == {3, 5, 6, 7}
    assert parse_cells(" 2 , 2-3 ") == {2, 3}


# --------------------------------------------------------------------------- verified means verified


def test_fix_puts_back_what_the_failed_run_changed_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 18, item 11: the failed run appended to ``items`` in place before its IndexError. The
    fix passed from the snapshot; Accept puts ``items`` back as it was before the cell ran, then runs
    the fix, so the notebook ends as if the broken cell had never run."""
    drift = "items.append(3)\nlast = items[5]\nassert last == 3"
    nb = make_notebook(tmp_path / "drift.ipynb", "items = [1, 2]", drift, "print(items)")
    replies(tmp_path, monkeypatch, block("items.append(3)\nlast = items[-1]\nassert last == 3"))

    code = main(["fix", str(nb), *SCRIPTED, "--max-attempts", "1", "--report", str(tmp_path / "r.json")])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    cells = code_cells(tmp_path / "drift.fixed.ipynb")
    assert cells[1].source == "items.append(3)\nlast = items[-1]\nassert last == 3"
    assert text_of(cells[2]) == "[1, 2, 3]\n"  # appended once: the failed run's append was undone
    row = json.loads((tmp_path / "r.json").read_text())["cells"][1]
    assert row["status"] == "fixed" and "put back" in row["accept_note"], row


def test_fix_never_applies_a_fix_that_fails_on_the_live_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 10, item 7: the fix passed from the snapshot, but fails from the live state (here the
    cell's own run changed ``items`` in a way Accept cannot put back: it is not picklable, so it is
    left as it is), so it is reported and not applied."""
    setup = "import threading\nclass Items(list):\n    lock = threading.Lock()\nitems = Items([1, 2])"
    drift = "items.lock = threading.Lock()\nitems.append(3)\nlast = items[5]\nassert last == 3"
    nb = make_notebook(tmp_path / "drift.ipynb", setup, drift, "print(list(items))")
    fix = drift.replace("items[5]", "items[-1]")
    fix = fix.replace("assert last", "assert items == [1, 2, 3]\nassert last")
    replies(tmp_path, monkeypatch, block(fix))

    code = main(["fix", str(nb), *SCRIPTED, "--max-attempts", "1", "--report", str(tmp_path / "r.json")])

    out, err = capsys.readouterr()
    assert code == 1, out + err
    cells = code_cells(tmp_path / "drift.fixed.ipynb")
    assert cells[1].source == drift and "nbrefine" not in cells[1].metadata  # not written
    assert "IndexError" in text_of(cells[1])  # the original failure stays
    assert text_of(cells[2]) == "[1, 2, 3]\n"  # nothing ran: the state is as the failed run left it
    assert "[2/3] cell 2: still failing: IndexError: list index out of range — not applied: " in err
    assert "not applied: the fix passed its trial, but `items` changed since" in err
    row = json.loads((tmp_path / "r.json").read_text())["cells"][1]
    assert row["status"] == "unfixed" and "from the live state it fails: AssertionError" in row["reason"]


def test_fix_applies_a_fix_that_passes_on_the_live_state_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    cell = "items.append(3)\nlast = items[5]\nassert last == 3"
    nb = make_notebook(tmp_path / "drift.ipynb", "items = [1, 2]", cell, "last")
    replies(tmp_path, monkeypatch, block("items.append(3)\nlast = items[-1]\nassert last == 3"))
    code = main(["fix", str(nb), *SCRIPTED, "--max-attempts", "1"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    cells = code_cells(tmp_path / "drift.fixed.ipynb")
    assert cells[1].source == "items.append(3)\nlast = items[-1]\nassert last == 3"
    assert text_of(cells[2]) == "3"


def test_fix_never_accepts_a_proposal_that_changes_the_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 10, item 8: deleting the failing assert passes its trial, but is not verified."""
    cell = "total = sum(values) + 1\nassert total == 6"
    nb = make_notebook(tmp_path / "forge.ipynb", "values = [1, 2, 3]", cell, "print(total)")
    replies(tmp_path, monkeypatch, block("total = sum(values) + 1"))

    code = main(["fix", str(nb), *SCRIPTED, "--max-attempts", "1", "--report", str(tmp_path / "r.json")])

    out, err = capsys.readouterr()
    assert code == 1, out + err
    cells = code_cells(tmp_path / "forge.fixed.ipynb")
    assert cells[1].source == cell and "nbrefine" not in cells[1].metadata
    assert "AssertionError" in text_of(cells[1])
    assert "[2/3] cell 2: still failing: AssertionError" in err
    assert "No verified fix in 1 attempt(s): attempt 1 passed its trial but changes the checks" in out
    assert "changes the checks (drops `assert total == 6`)" in out
    row = json.loads((tmp_path / "r.json").read_text())["cells"][1]
    assert row["status"] == "unfixed" and "-assert total == 6" in row["diff"]  # the proposal, reported

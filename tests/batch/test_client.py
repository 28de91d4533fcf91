"""``nbrefine fix`` over many notebooks: real notebooks in real kernels, several at once.

The model is the offline tier, the scripted provider, or the real ``anthropic`` SDK against
``tests/fakes/anthropic_api.py``. The notebooks are small: each test starts only a few kernels.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import nbformat
import pytest
from fakes import TimedFake
from kernel_io import ended, exists, kernels_in
from nbformat.v4 import new_code_cell, new_notebook

from nbrefine.cli.main import main

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("clean_env_in_tmp")]


def notebook(path: Path, *sources: str, kernel: str = "python3", cells: list[Any] | None = None) -> Path:
    nb = new_notebook(cells=cells or [new_code_cell(src, id=f"c{i}") for i, src in enumerate(sources, 1)])
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def code_sources(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def by_path(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["path"]: entry for entry in report["notebooks"]}


TYPO = "total = sum(pricez)\ntotal"
FIXED = "total = sum(prices)\ntotal"
OFFLINE = ["--provider", "offline"]


# --------------------------------------------------------------------------- a folder, in parallel


def test_a_folder_runs_in_parallel_with_mirrored_outputs_and_reports(tmp_path: Path, capsys: Any) -> None:
    sales = notebook(tmp_path / "proj/analysis/sales.ipynb", "prices = [2.5, 4.0, 1.5]", TYPO)
    logic = notebook(tmp_path / "proj/reports/logic.ipynb", "shares = [0.5, 0.5]", "assert sum(shares) == 2")
    clean = notebook(tmp_path / "proj/clean.ipynb", "x = 1", "print(x)")
    notebook(tmp_path / "proj/analysis/sales.fixed.ipynb", "1 / 0")  # an earlier output: not an input
    notebook(tmp_path / "proj/analysis/.ipynb_checkpoints/sales-checkpoint.ipynb", "1 / 0")
    (tmp_path / "proj/broken.ipynb").write_text("this is not json")
    notebook(tmp_path / "proj/alien.ipynb", "x = 1", kernel="no-such-kernel-x")
    inputs = {p: digest(p) for p in (tmp_path / "proj").rglob("*.ipynb")}

    reports = ["--report", "out/summary.md", "--report", "out/summary.json", "--report", "out/junit.xml"]
    code = main(["fix", "proj", *OFFLINE, "--jobs", "2", "-o", "out", *reports])

    out, err = capsys.readouterr()
    assert code == 2, out + err  # bad inputs were reported, the others still ran
    assert {p: digest(p) for p in inputs} == inputs  # no input touched
    written = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*.ipynb"))
    assert written == ["analysis/sales.ipynb", "clean.ipynb", "reports/logic.ipynb"]  # the tree, mirrored
    assert code_sources(tmp_path / "out/analysis/sales.ipynb")[1] == FIXED
    assert code_sources(tmp_path / "out/reports/logic.ipynb") == code_sources(logic)

    report = json.loads((tmp_path / "out/summary.json").read_text())
    rows = by_path(report)
    assert {p: e["outcome"] for p, e in rows.items()} == {
        "proj/analysis/sales.ipynb": "pass",
        "proj/clean.ipynb": "pass",
        "proj/reports/logic.ipynb": "fail",
        "proj/broken.ipynb": "error",
        "proj/alien.ipynb": "error",
    }
    assert "not valid JSON" in rows["proj/broken.ipynb"]["message"]
    assert "no such kernel" in rows["proj/alien.ipynb"]["message"]
    summary = report["summary"]
    ran = [e for e in rows.values() if e["status"] != "error"]
    assert summary["cells_run"] == sum(e["report"]["summary"]["cells_run"] for e in ran) == 6
    assert summary["by_error_type"] == {
        "AssertionError": {"failed": 1, "fixed": 0, "unfixed": 1, "notebooks": 1},
        "NameError": {"failed": 1, "fixed": 1, "unfixed": 0, "notebooks": 1},
    }
    assert report["exit_code"] == 2 and report["jobs"] == 2
    # Two jobs, two workers, running at the same time; each kernel started and loaded nbrefine.
    assert len({e["worker"] for e in ran}) == 2
    spans = sorted((e["started_at"], e["ended_at"]) for e in ran)
    assert any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))
    for entry in ran:
        timings = entry["timings"]
        assert 0 < timings["kernel_start_s"] < timings["total_s"] and timings["setup_s"] > 0

    junit = ET.parse(tmp_path / "out/junit.xml").getroot()
    suite = junit.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("5", "1", "2")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    failure = cases["logic.ipynb"].find("failure")
    assert failure is not None and failure.get("type") == "AssertionError"
    assert "cell 2" in (failure.text or "")
    assert cases["broken.ipynb"].find("error") is not None
    assert list(cases["sales.ipynb"]) == [] and cases["sales.ipynb"].get("classname") == "proj.analysis"

    md = (tmp_path / "out/summary.md").read_text()
    assert "| `proj/reports/logic.ipynb` | fail | 2 | 1 | 0 | 1 |" in md
    assert "| NameError | 1 | 1 | 0 | 1 |" in md
    assert "- `proj/reports/logic.ipynb` cell 2 [c2]: AssertionError" in md
    # Not a terminal: no bar, a line per notebook; the summary on stdout.
    assert "✓ proj/clean.ipynb: every cell passes" in err
    assert "✗ proj/reports/logic.ipynb: 1 still failing" in err
    assert "[2/2] cell 2" not in err  # the per-cell lines only with -v
    assert out.startswith("nbrefine fix: 5 notebooks in ")
    assert "2 pass, 1 fail, 2 could not run" in out
    _ = sales, clean


def test_verbose_shows_every_cell_and_quiet_one_line(tmp_path: Path, capsys: Any) -> None:
    notebook(tmp_path / "a.ipynb", "prices = [1, 2]", TYPO)
    notebook(tmp_path / "b.ipynb", "x = 1")

    code = main(["fix", "a.ipynb", "b.ipynb", *OFFLINE, "--jobs", "2", "--dry-run", "-v"])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "a.ipynb: [2/2] cell 2: NameError → fixed at attempt 1 (offline," in err
    assert "b.ipynb: [1/1] cell 1: ok" in err
    assert not list(tmp_path.glob("*.fixed.ipynb"))  # --dry-run

    code = main(["fix", "a.ipynb", "b.ipynb", *OFFLINE, "--dry-run", "--quiet", "--resume"])

    out, err = capsys.readouterr()
    assert code == 0
    assert err == ""
    assert out.count("\n") == 1 and out.startswith("nbrefine fix: 2 notebooks in ")
    assert out.endswith("2 pass, 0 fail, 0 could not run (exit 0)\n")


# --------------------------------------------------------------------------- in place, resume, fail-on


def test_in_place_then_resume_skips_what_is_done(tmp_path: Path, capsys: Any) -> None:
    fixable = notebook(tmp_path / "nbs/a.ipynb", "prices = [2.5, 4.0, 1.5]", TYPO)
    clean = notebook(tmp_path / "nbs/b.ipynb", "x = 1")
    original, clean_before = fixable.read_bytes(), (digest(clean), clean.stat().st_mtime_ns)
    record = tmp_path / "run.jsonl"

    code = main(["fix", "nbs", "--in-place", *OFFLINE, "--jobs", "2", "--record", str(record)])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert code_sources(fixable)[1] == FIXED
    assert (tmp_path / "nbs/a.ipynb.bak").read_bytes() == original
    assert (digest(clean), clean.stat().st_mtime_ns) == clean_before  # unchanged: not rewritten
    assert not (tmp_path / "nbs/b.ipynb.bak").exists()

    # Same settings: nothing runs again; the notebook replaced in place counts as done. A cell of
    # a.ipynb failed before it was fixed: --fail-on any fails the batch.
    started = time.monotonic()
    code = main(["fix", "nbs", "--in-place", *OFFLINE, "--resume", "--record", str(record),
                 "--fail-on", "any", "--report", "r.json", "--report", "r.xml"])  # fmt: skip
    took = time.monotonic() - started

    out, err = capsys.readouterr()
    assert code == 1, out + err
    report = json.loads((tmp_path / "r.json").read_text())
    assert [e["resumed"] for e in report["notebooks"]] == [True, True]
    assert report["summary"]["resumed"] == 2 and report["summary"]["fail_on"] == "any"
    assert (tmp_path / "nbs/a.ipynb.bak").read_bytes() == original  # the backup was not overwritten
    failure = ET.parse(tmp_path / "r.xml").getroot().find(".//testcase[@name='a.ipynb']/failure")
    assert failure is not None and "fixed by nbrefine" in (failure.text or "")
    assert "--resume: 2 notebooks done before" in err
    assert took < 20  # no kernel started (a kernel alone takes seconds here)

    # A changed notebook is not done: only it runs again.
    notebook(clean, "x = 1", "print(x + 1)")
    code = main(
        ["fix", "nbs", "--in-place", *OFFLINE, "--resume", "--record", str(record), "--report", "r.json"]
    )

    capsys.readouterr()
    assert code == 0
    entries = by_path(json.loads((tmp_path / "r.json").read_text()))
    assert (entries["nbs/a.ipynb"]["resumed"], entries["nbs/b.ipynb"].get("resumed", False)) == (True, False)
    assert entries["nbs/b.ipynb"]["report"]["summary"]["cells_run"] == 2


# --------------------------------------------------------------------------- Ctrl-C

WAIT = (
    "import os, time\n"
    "open('{name}.pid', 'w').write(str(os.getpid()))\n"
    "deadline = time.time() + 90\n"
    "while not os.path.exists('go') and time.time() < deadline:\n"
    "    time.sleep(0.05)"
)


def test_ctrl_c_stops_every_kernel_writes_nothing_half_done_and_the_partial_report(tmp_path: Path) -> None:
    notebook(tmp_path / "nbs/a_quick.ipynb", "x = 1")
    for name in ("s0", "s1"):
        notebook(tmp_path / f"nbs/{name}.ipynb", WAIT.format(name=name), "y = 2")
    command = [sys.executable, "-m", "nbrefine.cli", "fix", "nbs", *OFFLINE, "--jobs", "2", "-o", "out",
               "--report", "r.json", "--report", "r.xml"]  # fmt: skip
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while len(pids) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = [int(p.read_text()) for p in (tmp_path / "nbs").glob("s*.pid") if p.read_text()]
        assert len(pids) == 2, proc.stderr.read() if proc.poll() is not None else "no kernel started"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 0)
    assert proc.returncode == 130, out + err
    assert [pid for pid in pids if exists(pid)] == []  # every kernel was shut down
    assert kernels_in(tmp_path) == []  # and those started ahead for the next notebooks
    assert "Traceback" not in err and "interrupted" in err
    outputs = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert outputs == ["out/a_quick.ipynb", "out/nbrefine-run.jsonl"]  # the finished one, whole
    assert not list(tmp_path.rglob("*.tmp"))
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["interrupted"], report["exit_code"]) == (True, 130)
    assert {e["path"]: e["outcome"] for e in report["notebooks"]} == {
        "nbs/a_quick.ipynb": "pass",
        "nbs/s0.ipynb": "not_run",
        "nbs/s1.ipynb": "not_run",
    }
    skipped = ET.parse(tmp_path / "r.xml").getroot().findall(".//testcase/skipped")
    assert len(skipped) == 2

    # Resumed, the batch runs only what the interruption left.
    (tmp_path / "nbs/go").write_text("")
    resumed = subprocess.run(
        [*command, "--resume"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert {e["path"]: bool(e.get("resumed")) for e in report["notebooks"]} == {
        "nbs/a_quick.ipynb": True,
        "nbs/s0.ipynb": False,
        "nbs/s1.ipynb": False,
    }
    assert sorted(p.name for p in (tmp_path / "out").glob("*.ipynb")) == [
        "a_quick.ipynb",
        "s0.ipynb",
        "s1.ipynb",
    ]


DOOMED = (
    "import os, time\n"
    "open('kernel.pid', 'w').write(str(os.getpid()))\n"
    # The kernel was forked by the batch's zygote; the worker holds the other end of its stdin.
    "assert 'nbrefine.ipython.zygote' in open(f'/proc/{os.getppid()}/cmdline').read()\n"
    "pipe = os.readlink('/proc/self/fd/0')\n"
    "def holds(pid):\n"
    "    try:\n"
    "        fds = os.listdir(f'/proc/{pid}/fd')\n"
    "        return any(os.readlink(f'/proc/{pid}/fd/{fd}') == pipe for fd in fds)\n"
    "    except OSError:\n"
    "        return False\n"
    "def outside(pid):  # not the kernel, nor what it forked (its session)\n"
    "    try:\n"
    "        return os.getsid(pid) != os.getsid(0)\n"
    "    except OSError:\n"
    "        return False\n"
    "(worker,) = [int(p) for p in os.listdir('/proc') if p.isdigit() and outside(int(p)) and holds(p)]\n"
    "open('worker.pid', 'w').write(str(worker))\n"
    "time.sleep(60)"
)


def test_a_worker_that_dies_fails_its_notebook_and_the_batch_goes_on(tmp_path: Path, capsys: Any) -> None:
    notebook(tmp_path / "nbs/a_doomed.ipynb", DOOMED, "x = 1")
    notebook(tmp_path / "nbs/b_fine.ipynb", "x = 1")
    notebook(tmp_path / "nbs/c_fine.ipynb", "y = 2")
    # Kill the worker running the notebook (the OOM killer would).
    killed: list[int] = []

    def kill_the_worker() -> None:
        deadline = time.monotonic() + 60
        pid_file = tmp_path / "nbs/worker.pid"
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        killed.append(int(pid_file.read_text()))
        os.kill(killed[0], signal.SIGKILL)

    killer = threading.Thread(target=kill_the_worker, daemon=True)
    killer.start()
    code = main(["fix", "nbs", *OFFLINE, "--jobs", "1", "--dry-run", "--report", "r.json"])
    killer.join(5)

    out, err = capsys.readouterr()
    assert killed and code == 1, out + err
    report = json.loads((tmp_path / "r.json").read_text())
    rows = by_path(report)
    assert {p: e["outcome"] for p, e in rows.items()} == {
        "nbs/a_doomed.ipynb": "fail",
        "nbs/b_fine.ipynb": "pass",
        "nbs/c_fine.ipynb": "pass",
    }
    assert rows["nbs/a_doomed.ipynb"]["message"] == "the worker process running it died (killed by SIGKILL)"
    assert "✗ nbs/a_doomed.ipynb: the worker process running it died (killed by SIGKILL)" in err
    assert ended(int((tmp_path / "nbs/kernel.pid").read_text()))  # its kernel went with it
    assert kernels_in(tmp_path) == []  # and the one it had started for its next notebook
    assert rows["nbs/b_fine.ipynb"]["worker"] != f"{os.uname().nodename}:{killed[0]}"  # a new worker


# --------------------------------------------------------------------------- shared model requests


# Both notebooks reach their failing cell at the same moment: each waits for the other first.
TOGETHER = (
    "import os, time\n"
    "open('ready-{name}', 'w').close()\n"
    "deadline = time.time() + 60\n"
    "while not all(os.path.exists(f'ready-{{n}}') for n in ('a', 'b')) and time.time() < deadline:\n"
    "    time.sleep(0.02)"
)
FAILING = "value = 21\nprint(valeu * 2)"
FIX_REPLY = "Fixed the name.\n\n```python\nvalue = 21\nprint(value * 2)\n```"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    with TimedFake(default={"text": FIX_REPLY, "delay": 1.0}) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        yield server


def _together(tmp_path: Path) -> None:
    for name in ("a", "b"):
        notebook(tmp_path / f"{name}.ipynb", TOGETHER.format(name=name), FAILING)


MODEL = ["--provider", "anthropic", "--no-quick-fixes", "--max-attempts", "1", "--jobs", "2", "--dry-run"]


def test_one_request_limit_and_one_429_back_off_for_all_jobs(
    tmp_path: Path, fake: TimedFake, capsys: Any
) -> None:
    _together(tmp_path)
    fake.script({"status": 429, "retry_after": 0.5})

    code = main(["fix", "a.ipynb", "b.ipynb", *MODEL, "--max-requests", "1", "--report", "r.json"])

    out, err = capsys.readouterr()
    assert code == 0, out + err  # both fixed, through the one slot
    first, *rest = sorted(fake.arrivals)  # the 429 came first; the others one at a time
    assert len(rest) == 2
    assert rest[0] >= first + 0.45  # nobody asked during the pause the 429 asked for
    assert rest[1] >= rest[0] + 0.95  # the second waited for the first's 1-second reply
    requests = json.loads((tmp_path / "r.json").read_text())["requests"]
    assert (requests["requests"], requests["max_in_flight"], requests["rate_limited"]) == (3, 1, 1)
    assert requests["tokens"] > 0


def test_one_token_budget_for_all_jobs(tmp_path: Path, fake: TimedFake, capsys: Any) -> None:
    _together(tmp_path)

    code = main(["fix", "a.ipynb", "b.ipynb", *MODEL, "--max-requests", "1", "--budget-tokens", "1",
                 "--report", "r.json"])  # fmt: skip

    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert len(fake.arrivals) == 1  # the first reply spent the budget: the other job sent nothing
    report = json.loads((tmp_path / "r.json").read_text())
    outcomes = sorted(e["outcome"] for e in report["notebooks"])
    assert outcomes == ["fail", "pass"]
    failed = next(e for e in report["notebooks"] if e["outcome"] == "fail")
    cell = failed["report"]["cells"][1]
    assert cell["status"] == "unfixed" and "batch budget of 1 tokens is spent" in cell["reason"]
    assert report["summary"]["tokens"] == report["requests"]["tokens"] > 1


# --------------------------------------------------------------------------- the class report


def nbgrader_cell(source: str, grade_id: str, *, solution: bool = False, grade: bool = False) -> Any:
    cell = new_code_cell(source, id=grade_id)
    cell.metadata["nbgrader"] = {
        "grade_id": grade_id,
        "solution": solution,
        "grade": grade,
        "locked": not solution,
        "points": 1 if grade else 0,
        "schema_version": 3,
    }
    return cell


SUBMISSIONS = {
    "alice": "# Alice Smith's answer\ntotal = sum(pricez)\ntotal",
    "bob": 'owner = "bob"\ntotal = sum(pricez)\ntotal',
    "carol": "total = sum(prices)\ntotal",
    "dave": "total = prices.sum()\ntotal",
}
# A disobedient model: its "hint" is the solution. The no-solution guard must withhold it.
DISOBEDIENT = "Just use this:\n\n```python\ntotal = sum(prices)\ntotal\n```"


def test_class_report_feedback_per_student_and_the_instructor_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    for student, answer in SUBMISSIONS.items():
        cells = [
            nbgrader_cell("prices = [2.5, 4.0, 1.5]", "load"),
            nbgrader_cell(answer, "total", solution=True),
            nbgrader_cell("assert total == 8.0", "test_total", grade=True),
        ]
        notebook(tmp_path / f"course/submitted/{student}/ps1/ps1.ipynb", cells=cells)
    (tmp_path / "replies.json").write_text(json.dumps([DISOBEDIENT] * 3))
    monkeypatch.setenv("NBREFINE_SCRIPTED_REPLIES", str(tmp_path / "replies.json"))

    code = main(["fix", "course/submitted", "--provider", "scripted", "--no-quick-fixes", "--mode", "hint",
                 "--max-hints", "2", "--jobs", "2", "-o", "graded", "--report", "class.html",
                 "--report", "class.json"])  # fmt: skip

    out, err = capsys.readouterr()
    assert code == 1, out + err  # hints do not make cells pass
    report = json.loads((tmp_path / "class.json").read_text())
    assert len(report["notebooks"]) == 4
    for student in SUBMISSIONS:
        feedback = (tmp_path / f"graded/{student}/ps1/ps1.feedback.md").read_text()
        assert feedback.startswith("# Feedback on ps1.ipynb (ps1)")
        assert "sum(prices)" not in feedback  # never the solution
        if student == "carol":
            assert "Every cell ran without an error" in feedback
            continue
        assert "## total (cell 2)" in feedback and "**Hint 1 of 2** (hint mode)" in feedback
        assert "withheld" in feedback  # the guard took the code out of the model's reply
    alice = (tmp_path / "graded/alice/ps1/ps1.feedback.md").read_text()
    assert "Your cell raised `NameError: name 'pricez' is not defined`." in alice

    page = (tmp_path / "class.html").read_text()
    images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert len(images) == 3 and all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)
    # Every figure from the run: the exercise table against the per-notebook reports.
    cells = [c for e in report["notebooks"] for c in e["report"]["cells"]]
    for exercise in ("load", "total", "test_total"):
        mine = [c for c in cells if c.get("nbgrader", {}).get("grade_id") == exercise]
        failed = sum(c["status"] in ("fixed", "unfixed") for c in mine)
        # failing on a name the answer cell (unfixed: hint mode) was to define
        after = sum(c["error_message"] == "name 'total' is not defined" for c in mine)
        row = re.search(
            rf"<td><code>{exercise}</code></td><td class='n'>(\d+)</td><td class='n'>(\d+)</td>"
            r"<td class='n'>(\d+)</td>",
            text,
        )
        assert row is not None and (int(row[1]), int(row[2]), int(row[3])) == (len(mine), failed, after)
    assert (failed, after) == (3, 3)  # test_total: alice, bob, dave, after their answer failed
    assert "<code>test_total</code></h3>" not in text  # not their mistake: not listed as one
    assert "Not listed: 3 failures that followed from an earlier cell's failure." in text
    # The mistakes, grouped by signature, each with an anonymised example.
    assert "2 students · ps1/ps1.ipynb · <code>total</code>" in text
    assert "NameError: name &#x27;pricez&#x27; is not defined" in text
    assert "AttributeError: &#x27;list&#x27; object has no attribute &#x27;sum&#x27;" in text
    lowered = text.lower()
    for private in ("alice", "smith", '"bob"', "&quot;bob&quot;", "dave", "carol"):
        assert private not in lowered
    assert "total = sum(pricez)" in text  # the example is the student's code, comments removed
    # The table ranks exercises by how often they fail.
    assert text.index("<code>total</code></td>") < text.index("<code>load</code></td>")


# --------------------------------------------------------------------------- usage


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["a.ipynb", "b.ipynb", "-o", "x.ipynb"], "-o names a folder"),
        (["a.ipynb", "b.ipynb", "--jobs", "0"], "--jobs must be at least 1"),
        (["a.ipynb", "b.ipynb", "--report", "r.txt"], ".xml (JUnit) or .html (class report)"),
        (["a.ipynb", "--max-requests", "0"], "--max-requests must be at least 1"),
        (["a.ipynb", "--budget-usd", "-1"], "--budget-usd must be a positive number of USD"),
        (["a.ipynb", "b.ipynb", "--fail-on", "some"], "invalid choice"),
        (["a.ipynb", "--quiet", "--verbose"], "not allowed with"),
    ],
)
def test_bad_batch_usage_is_one_line(args: list[str], expected: str, capsys: Any) -> None:
    assert main(["fix", *args]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("nbrefine: error: ")
    assert expected in lines[0]


def test_a_glob_that_matches_nothing_is_reported_and_the_rest_runs(tmp_path: Path, capsys: Any) -> None:
    notebook(tmp_path / "ok.ipynb", "x = 1")

    code = main(["fix", "ok.ipynb", "missing/**/*.ipynb", *OFFLINE, "--dry-run", "--jobs", "1"])

    out, err = capsys.readouterr()
    assert code == 2
    assert "! missing/**/*.ipynb: no notebook matches" in err
    assert "✓ ok.ipynb: every cell passes" in err
    assert "1 pass, 0 fail, 1 could not run" in out
    shutil.rmtree(tmp_path / "missing", ignore_errors=True)

"""Trials in forks of a snapshot: isolation from the parent and typed outcomes."""

from __future__ import annotations

import os

import pytest

from nbrefine.grounding import Redactor
from nbrefine.sandbox import LiveForkRunner, Snapshot, TrialSpec, call_in_fork


@pytest.fixture
def namespace():
    return {"data": [1, 2, 3], "config": {"mode": "fast"}}


@pytest.fixture
def snapshot(namespace):
    snap = Snapshot.take(namespace, Redactor(environ={}))
    yield snap
    snap.close()


def test_trial_sees_the_snapshot_state_not_later_changes(namespace, snapshot):
    namespace["data"] = "changed after the snapshot"
    outcome = snapshot.run(TrialSpec("assert data == [1, 2, 3]\nprint(len(data))"))
    assert outcome.ok, outcome.render()
    assert outcome.stdout == "3\n"


def test_nothing_a_trial_does_reaches_the_parent(namespace, snapshot):
    before = {k: (id(v), repr(v)) for k, v in namespace.items()}
    code = (
        "data.append(4)\nconfig.clear()\ndel data\nnew_name = 1\nimport os\nos.environ['NBREFINE_LEAK'] = '1'"
    )
    outcome = snapshot.run(TrialSpec(code))
    assert outcome.ok, outcome.render()
    assert {k: (id(v), repr(v)) for k, v in namespace.items()} == before
    assert "NBREFINE_LEAK" not in os.environ
    # Each trial starts from the snapshot again, not from the previous trial.
    assert snapshot.run(TrialSpec("assert data == [1, 2, 3] and config == {'mode': 'fast'}")).ok


def test_failure_in_a_candidate_is_mapped_to_its_lines(snapshot):
    outcome = snapshot.run(TrialSpec("x = 1\ny = data[10]\n", label="candidate"))
    assert outcome.status == "failed"
    failure = outcome.failure
    assert failure.error_type == "IndexError" and failure.lineno == 2 and failure.where == "candidate"
    assert outcome.statements_done == 1 and outcome.statements_total == 2


def test_timeout_kills_the_trial(snapshot):
    outcome = snapshot.run(TrialSpec("while True:\n    pass", timeout_s=0.3))
    assert outcome.status == "timeout" and "0.3" in outcome.detail
    assert snapshot.run(TrialSpec("pass")).ok  # the snapshot survives


def test_exit_and_crash_are_typed(snapshot):
    assert snapshot.run(TrialSpec("import sys\nsys.exit(3)")).status == "exited"
    hard = snapshot.run(TrialSpec("import os\nos._exit(5)"))
    assert hard.status == "exited" and "code 5" in hard.detail
    crash = snapshot.run(TrialSpec("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)"))
    assert crash.status == "crashed" and "SIGSEGV" in crash.detail
    assert snapshot.run(TrialSpec("raise KeyboardInterrupt")).status == "interrupted"


def test_output_is_captured_and_capped(namespace):
    from nbrefine.sandbox import SandboxOptions

    with Snapshot.take(namespace, Redactor(environ={}), SandboxOptions(output_cap=1000)) as snap:
        outcome = snap.run(TrialSpec("for i in range(10000):\n    print('x' * 50)"))
    assert outcome.ok
    assert len(outcome.stdout) < 1200 and "dropped" in outcome.stdout


def test_fd_level_output_and_input_are_handled(snapshot):
    outcome = snapshot.run(TrialSpec("import os\nos.write(1, b'from fd\\n')\nprint('py')"))
    assert "from fd" in outcome.stdout and "py" in outcome.stdout
    blocked = snapshot.run(TrialSpec("input('name? ')"))
    assert blocked.status == "failed" and "input() is not available" in blocked.failure.message


def test_last_expression_value_is_reported(snapshot):
    outcome = snapshot.run(TrialSpec("sum(data)"))
    assert "Out: int 6" in outcome.stdout


def test_top_level_await_runs(snapshot):
    outcome = snapshot.run(TrialSpec("import asyncio\nawait asyncio.sleep(0)\nvalue = 1"))
    assert outcome.ok, outcome.render()


def test_syntax_error_candidate(snapshot):
    outcome = snapshot.run(TrialSpec("def f(:\n    pass"))
    assert outcome.status == "failed" and outcome.failure.error_type == "SyntaxError"


def test_start_latency_is_measured(snapshot):
    outcome = snapshot.run(TrialSpec("pass"))
    assert 0 < outcome.start_latency_s < 1.0


def test_closed_snapshot_reports_a_sandbox_error(namespace):
    snap = Snapshot.take(namespace, Redactor(environ={}))
    snap.close()
    assert snap.run(TrialSpec("pass")).status == "sandbox_error"


def test_live_fork_runner_and_call_in_fork(namespace):
    runner = LiveForkRunner(namespace, Redactor(environ={}))
    assert runner.run(TrialSpec("data.append(9)\nassert data[-1] == 9")).ok
    assert namespace["data"] == [1, 2, 3]
    assert call_in_fork(lambda: namespace["data"].append(5) or len(namespace["data"])) == 4
    assert namespace["data"] == [1, 2, 3]


def test_a_cell_that_writes_files_in_its_folder_is_trial_run_in_a_private_view(tmp_path, monkeypatch):
    """plt.savefig("fig/x.png") / df.to_csv("out.csv"): the trial writes into an overlay of the
    working folder (in its own mount namespace); the real folder is left exactly as it was."""
    (tmp_path / "fig").mkdir()
    (tmp_path / "data.csv").write_text("a,b\n")
    monkeypatch.chdir(tmp_path)
    snap = Snapshot.take({}, Redactor(environ={}))
    try:
        code = (
            "import os\n"
            "open('out.csv', 'w').write('x,y\\n')\n"
            "open('fig/x.png', 'wb').write(b'PNG')\n"
            "open('data.csv', 'a').write('3,4\\n')\n"
            "os.makedirs('new/sub')\n"
            "assert open('out.csv').read() == 'x,y\\n'\n"
            "assert open('data.csv').read() == 'a,b\\n3,4\\n'\n"
        )
        outcome = snap.run(TrialSpec(code))
    finally:
        snap.close()
    if "cwd-overlay" not in outcome.layers:
        pytest.skip(f"no overlay in a user namespace here: {outcome.layers}")
    assert outcome.ok, outcome.render()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "fig"]
    assert (tmp_path / "data.csv").read_text() == "a,b\n"
    assert list((tmp_path / "fig").iterdir()) == []


def test_writes_elsewhere_are_still_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    snap = Snapshot.take({}, Redactor(environ={}))
    try:
        outcome = snap.run(TrialSpec(f"open({str(outside)!r}, 'w').write('x')"))
    finally:
        snap.close()
    assert outcome.status == "refused", outcome.render()
    assert not outside.exists()


def test_a_trial_that_times_out_reports_how_long_it_ran(snapshot):
    outcome = snapshot.run(TrialSpec("while True:\n    pass", timeout_s=0.5))
    assert outcome.status == "timeout"
    assert outcome.duration_s >= 0.5, outcome


def test_candidates_are_compiled_without_nbrefines_future_imports(snapshot):
    """sandbox.py has `from __future__ import annotations`; a candidate must not inherit it:
    an annotation naming an undefined type raises in a kernel, so it must raise in a trial."""
    outcome = snapshot.run(TrialSpec("rows: Undefined = [1]"))
    assert outcome.status == "failed" and outcome.error_type == "NameError", outcome.render()

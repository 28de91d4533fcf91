"""The snapshot's spare trial (issue 20, item 1): a trial child forked and hardened ahead for the
default policy, in which a candidate of that policy starts; it must be hardened exactly as a
trial forked on demand, count its timeouts from the hand-over and leave nothing behind."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time

import pytest
from kernel_io import children_of, wait_until
from machine import expect_layers

from nbrefine.grounding import Redactor
from nbrefine.sandbox import SandboxOptions, Snapshot, TrialPolicy, TrialSpec

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="spares are made on Linux")

# Differs from the default in nothing the probes below look at: its trials are forked on demand.
_ON_DEMAND = TrialPolicy(scratch_mb=TrialPolicy().scratch_mb + 1)

# What a candidate can see of its own confinement, with what differs from trial to trial anyway
# (pipe inodes, the scratch folder's name) taken out.
_PROBE = """
import json, os, re, resource, sys
scratch = os.environ["TMPDIR"]
def target(fd):
    try:
        return re.sub(r"\\[\\d+\\]", "", os.readlink(f"/proc/self/fd/{fd}")).replace(scratch, "SCRATCH")
    except OSError:
        return "?"
fds = sorted(t for t in map(target, os.listdir("/proc/self/fd")) if t != "/dev/null")
names = ("CPU", "FSIZE", "NOFILE", "NPROC", "CORE")
limits = {name: resource.getrlimit(getattr(resource, "RLIMIT_" + name)) for name in names}
status = {}
with open("/proc/self/status") as fh:
    for line in fh:
        key, _, value = line.partition(":")
        if key.startswith(("Cap", "Seccomp", "NoNewPrivs")):
            status[key] = value.strip()
shared = {ns: os.readlink(f"/proc/self/ns/{ns}") for ns in ("pid", "ipc")}
print(json.dumps({
    "fds": fds, "limits": limits, "status": status, "shared": shared, "env": sorted(os.environ),
    "threads": len(os.listdir("/proc/self/task")), "nbrefine": "nbrefine" in sys.modules,
    "address_space": resource.getrlimit(resource.RLIMIT_AS)[0],
}))
"""


@pytest.fixture
def snapshot():
    snap = Snapshot.take({"data": [1, 2, 3]}, Redactor(environ={}))
    yield snap
    snap.close()


def _quiet() -> None:
    """The kernel between two trials: it reads the outcome, asks for fingerprints, the model."""
    time.sleep(0.05)


def _both(snap: Snapshot, code: str, **fields):
    """The same candidate in the spare, then in a trial forked on demand (after which the next
    spare is hardened for the default policy again)."""
    spare = snap.run(TrialSpec(code, **fields))
    assert snap.last_start == "spare", spare.render()
    fork = snap.run(TrialSpec(code, policy=_ON_DEMAND, **fields))
    assert snap.last_start == "fork", fork.render()
    assert snap.run(TrialSpec("pass")).ok and snap.last_start == "fork"
    _quiet()  # (the next spare is made once the kernel is quiet after a pass)
    return spare, fork


def test_a_trial_starts_in_the_spare_when_it_was_hardened_for_its_policy(snapshot):
    for _ in range(3):  # each trial's successor is made once it is done
        assert snapshot.run(TrialSpec("assert data == [1, 2, 3]\ndata.append(4)")).ok
        assert snapshot.last_start == "spare"
        _quiet()
    networked = TrialPolicy(allow_network=True)
    first = snapshot.run(TrialSpec("assert data == [1, 2, 3]", policy=networked))
    assert first.ok and snapshot.last_start == "fork"  # the spare was hardened for the default
    _quiet()
    second = snapshot.run(TrialSpec("assert data == [1, 2, 3]", policy=networked))
    assert second.ok and snapshot.last_start == "spare"  # the next one for the policy just asked for
    assert second.layers == first.layers and "netns" not in second.layers
    _quiet()
    assert snapshot.run(TrialSpec("pass")).ok and snapshot.last_start == "fork"
    _quiet()
    assert snapshot.run(TrialSpec("pass")).ok and snapshot.last_start == "spare"


def test_the_next_spare_waits_for_a_quick_pass_to_be_answered_not_for_a_failure(snapshot):
    """After a quick candidate that passed, the kernel's next questions (fingerprints, values)
    come before the next spare's fork; after one that failed, the next attempt's trial follows
    at once, and finds its spare made while the model answered (here: at once)."""
    assert snapshot.run(TrialSpec("x = 1")).ok and snapshot.last_start == "spare"
    # (a trial asked for at once may find no spare yet: how soon depends on the machine's load)
    assert snapshot.run(TrialSpec("x = 2")).ok
    _quiet()
    assert not snapshot.run(TrialSpec("assert data == []")).ok and snapshot.last_start == "spare"
    for _ in range(3):
        assert not snapshot.run(TrialSpec("assert data == []")).ok
        assert snapshot.last_start == "spare"
    assert snapshot.run(TrialSpec("import time\ntime.sleep(0.1)")).ok  # a while: made as it runs
    assert snapshot.run(TrialSpec("pass")).ok and snapshot.last_start == "spare"


def test_the_spare_is_hardened_exactly_as_a_fork_on_demand(snapshot):
    import json

    spare, fork = _both(snapshot, _PROBE, timeout_s=7.0)
    assert spare.ok and fork.ok, spare.render() + fork.render()
    expect_layers(spare.layers, "userns", "pidns", "seccomp", "landlock")
    assert spare.layers == fork.layers
    seen, expected = json.loads(spare.stdout), json.loads(fork.stdout)
    # The address space allowance is counted from the trial's size, which may differ by an arena.
    assert abs(seen.pop("address_space") - expected.pop("address_space")) < 64 << 20
    assert seen == expected
    assert seen["limits"]["CPU"] == [8, 10]  # the candidate's timeout + 1 s, set at the hand-over
    assert not seen["nbrefine"] and seen["threads"] == 2  # the candidate's thread and the reporter


def test_checks_given_with_the_candidate_are_counted_and_run(snapshot):
    spare, fork = _both(snapshot, "x = 1", checks=("assert x == 1", "assert x > 1"))
    for outcome in (spare, fork):
        assert outcome.status == "failed" and outcome.checks_total == 2, outcome.render()
        assert len(outcome.check_failures) == 1


def test_secrets_judged_once_in_the_snapshot_are_gone_from_both(monkeypatch):
    monkeypatch.setenv("NBREFINE_TEST_API_KEY", "sk-test-0123456789abcdefghijklmnop")
    monkeypatch.setenv("NBREFINE_TEST_LEVEL", "WARNING")
    with Snapshot.take({}, Redactor(environ={})) as snap:
        code = "import os\nprint(sorted(k for k in os.environ if k.startswith('NBREFINE_TEST')))"
        spare, fork = _both(snap, code)
    assert spare.stdout == fork.stdout == "['NBREFINE_TEST_LEVEL']\n", spare.render()


def test_a_write_outside_scratch_is_refused_in_the_spare(snapshot, tmp_path):
    target = tmp_path / "out.txt"
    spare, fork = _both(snapshot, f"open({str(target)!r}, 'w').write('x')")
    assert spare.status == fork.status == "refused", spare.render()
    assert not target.exists()
    low_level = f"import os\nos.open({str(target)!r}, os.O_WRONLY | os.O_CREAT)"
    spare, fork = _both(snapshot, low_level)
    assert spare.status == fork.status and spare.status != "passed"
    assert not target.exists()


def test_the_wall_clock_counts_from_the_hand_over(snapshot):
    assert snapshot.run(TrialSpec("pass")).ok  # the next spare is made meanwhile
    time.sleep(2.5)  # it waits, ready, longer than the next candidate may run
    outcome = snapshot.run(TrialSpec("import time\ntime.sleep(0.1)", timeout_s=2.0))
    assert outcome.ok and snapshot.last_start == "spare", outcome.render()
    stuck = snapshot.run(TrialSpec("import time\ntime.sleep(60)", timeout_s=0.5))
    assert stuck.status == "timeout" and snapshot.last_start == "spare"
    assert snapshot.run(TrialSpec("pass")).ok  # the snapshot, and its next spare, carry on


def test_cancel_kills_a_trial_in_the_spare(snapshot):
    def cancel_once_started() -> None:
        deadline = time.monotonic() + 30
        while snapshot._trial_pid is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        snapshot.cancel()

    canceller = threading.Thread(target=cancel_once_started)
    canceller.start()
    outcome = snapshot.run(TrialSpec("import time\ntime.sleep(60)", timeout_s=60))
    canceller.join()
    assert outcome.status == "crashed" and "SIGKILL" in outcome.detail
    assert snapshot.last_start == "spare"


def test_close_leaves_no_spare_and_no_scratch_folder(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the snapshot makes scratch folders
    snap = Snapshot.take({}, Redactor(environ={}))
    assert snap.run(TrialSpec("pass")).ok and snap.last_start == "spare"
    waiting = set(children_of(snap.pid))  # the next spare (and the PID namespace's pid 1)
    assert waiting and list(tmp_path.glob("nbrefine-trial-*"))
    snap.close()
    wait_until(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in waiting), within=10)
    assert not [pid for pid in waiting if os.path.exists(f"/proc/{pid}")]
    assert not list(tmp_path.glob("nbrefine-trial-*"))


def _names(namespace: dict[str, object]) -> int:
    return len(namespace)


_ON_FAILURE = SandboxOptions(ready_ahead=False)  # as nbrefine fix takes its snapshots


def test_a_snapshot_gets_its_first_trial_ready_ahead_by_default():
    with Snapshot.take({"x": 1}, Redactor(environ={})) as snap:
        assert snap.inspect(_names) == 1  # an answer: the snapshot process is past its start
        assert children_of(snap.pid), "no spare was made ahead"


def test_a_snapshot_not_ready_ahead_gets_ready_for_trials_only_once_armed():
    """Not ready ahead, a passing cell's snapshot makes nothing for trials: no hardening found,
    no spare forked (it has no child) until the kernel arms it (its cell failed); then the spare
    is there and the first trial starts in it."""
    snap = Snapshot.take({"x": 1}, Redactor(environ={}), _ON_FAILURE)
    try:
        assert snap.inspect(_names) == 1  # an answer: the snapshot process is past its start
        assert children_of(snap.pid) == {}, "a spare was forked before anything asked for trials"
        snap.arm()
        snap.arm()  # once is enough; again changes nothing
        assert snap.inspect(_names) == 1  # (requests are served in order: the arm came first)
        assert children_of(snap.pid), "armed, yet no spare"
        outcome = snap.run(TrialSpec("y = x + 1"))
        assert outcome.ok and snap.last_start == "spare", outcome.render()
    finally:
        snap.close()
    assert not children_of(snap.pid)


def test_an_unarmed_snapshot_is_killed_at_close_and_reaped_by_the_next_fork():
    """Closing the snapshot (not ready ahead) of a cell that passed does not wait for it to end:
    it had nothing to tidy up, so it is killed, and the next snapshot's fork reaps it (no zombie
    stays)."""
    first = Snapshot.take({"x": 1}, Redactor(environ={}), _ON_FAILURE)
    first.close()
    assert not first.alive
    assert wait_until(lambda: children_of(os.getpid()).get(first.pid) in (None, "Z"))
    with Snapshot.take({"x": 2}, Redactor(environ={})) as second:
        assert second.run(TrialSpec("assert x == 2")).ok
    assert first.pid not in children_of(os.getpid())


def test_a_trial_asked_of_an_unarmed_snapshot_arms_it():
    """Trials asked for without arm() (the engine's own callers arm first) still run, and the
    snapshot then tidies up as an armed one: its spare and scratch folders go with it."""
    before = set(os.listdir(tempfile.gettempdir()))
    snap = Snapshot.take({"x": 1}, Redactor(environ={}), _ON_FAILURE)
    assert snap.run(TrialSpec("y = x")).ok and snap.last_start == "spare"  # made as it came
    assert snap.run(TrialSpec("y = x")).ok
    snap.close()
    assert not children_of(snap.pid)
    assert wait_until(lambda: set(os.listdir(tempfile.gettempdir())) <= before)

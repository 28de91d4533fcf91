"""The integrity of "verified" in a REAL kernel (issue 10, items 7 and 8): part of the adversarial suite.

Item 8, forged passes: each forge below reached ``passed`` and was offered as a fix. Now a candidate
counts as verified only when it keeps the original cell's asserts and every ``-t`` check, adds no
blanket ``except`` around the failing statements and does not reach into nbrefine or the sandbox;
otherwise its attempt shows as "changes the checks", the loop goes on to the next attempt, and a
forge that is all the loop found is offered only as a labelled, unverified proposal that
``%refine accept`` does not apply without ``--anyway``.

Item 7, Accept against drifted state: the failed run mutated ``items`` in place, so the live kernel
no longer holds what the trial saw. Accept notices, trial-runs the fix from the live state first,
and applies a fix that fails there only on the explicit second choice ``%refine accept --anyway``.

The model is the loopback fake of the Anthropic API (tests/fake_anthropic.py), reached by the kernel
through the official SDK, as in tests/test_adversarial.py.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fake_anthropic import FakeAnthropic
from kernel_io import ADVERSARIAL_SETUP, RealKernel, adversarial_kernel

pytestmark = pytest.mark.timeout(180)

SETUP = ADVERSARIAL_SETUP + "%config Refine.timeout = 5.0\nvalues = [1, 2, 3]\n"

# What the tests read of the last session. getattr: the same expression runs on code without the
# new attributes (the tests were first run red against it).
SESSION_EXPR = """(lambda s: None if s is None else {
    "status": s.status,
    "message": s.message,
    "decision": s.decision,
    "accept_ok": s.accept_ok,
    "fixed_code": s.fixed_code,
    "render": s.render_text(),
    "attempts": [
        {
            "ok": a.ok,
            "trial": a.outcome.status if a.outcome is not None else None,
            "checks_total": a.outcome.checks_total if a.outcome is not None else None,
            "summary": a.summary(),
            "code": a.code,
        }
        for a in s.attempts
    ],
})(__import__("nbrefine").last_session())"""


def block(code: str) -> dict[str, str]:
    return {"text": f"Here is the fix.\n\n```python\n{code}\n```"}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture(scope="module", params=["tcp", "ipc"])
def module_kernel(
    request: pytest.FixtureRequest, fake: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealKernel]:
    """A kernel on each transport ipykernel offers, like the rest of the adversarial suite."""
    ipc_dir = str(tmp_path_factory.mktemp("ipc"))
    kernel = adversarial_kernel(fake.base_url, request.param, NBREFINE_TEST_IPC_DIR=ipc_dir)
    yield kernel
    kernel.shutdown()


@pytest.fixture
def kernel(module_kernel: RealKernel, fake: FakeAnthropic) -> Iterator[RealKernel]:
    module_kernel.ensure_healthy()
    module_kernel.ok(SETUP)
    fake.reset()
    yield module_kernel
    fake.reset()


# --------------------------------------------------------------------------- item 8: forged passes


@dataclass(frozen=True)
class Forge:
    name: str
    cell: str  # fails in the kernel
    forged: str  # reached "passed" before the gate existed
    honest: str  # a real fix
    reason: str  # what "changes the checks" says about the forge
    options: str = ""
    #: the sandbox may also stop the forge at run time: then its trial fails saying this
    refused_at_run_time: str = ""


FORGES = [
    Forge(
        "try/except Exception: pass",
        cell="total = sum(value)\nassert total == 6",
        forged="try:\n    total = sum(value)\n    assert total == 6\nexcept Exception:\n    pass",
        honest="total = sum(values)\nassert total == 6",
        reason="blanket",
    ),
    Forge(
        "the failing assert deleted",
        cell="total = sum(values) + 1\nassert total == 6",
        forged="total = sum(values) + 1",
        honest="total = sum(values)\nassert total == 6",
        reason="assert total == 6",
    ),
    Forge(
        "nbrefine.sandbox.run_checks replaced",
        cell="total = sum(values) + 1",
        options='-t "assert total == 6"',
        forged="import nbrefine.sandbox as s\ns.run_checks = lambda *a, **k: []\ntotal = sum(values) + 1",
        honest="total = sum(values)",
        reason="nbrefine",
        refused_at_run_time="cannot be imported in a trial",
    ),
    Forge(
        "run_checks replaced through the trial's frames",
        cell="total = sum(values) + 1",
        options='-t "assert total == 6"',
        forged=(
            "import sys\n"
            "frame = sys._getframe()\n"
            'while "run_checks" not in frame.f_globals:\n'
            "    frame = frame.f_back\n"
            'frame.f_globals["run_checks"] = lambda *a, **k: []\n'
            "total = sum(values) + 1"
        ),
        honest="total = sum(values)",
        reason="sandbox",
    ),
    Forge(
        "a -t check dropped from the trial's own spec",
        cell="total = sum(values) + 1",
        options='-t "assert total == 6"',
        forged=(
            "import sys\n"
            "frame = sys._getframe()\n"
            'while frame is not None and "spec" not in frame.f_locals:\n'
            "    frame = frame.f_back\n"
            'object.__setattr__(frame.f_locals["spec"], "checks", ())\n'
            "total = sum(values) + 1"
        ),
        honest="total = sum(values)",
        reason="sandbox",
    ),
]


def refine(kernel: RealKernel, forge: Forge, attempts: int) -> dict[str, Any]:
    out = kernel.run(f"%%refine --max-attempts {attempts} {forge.options}\n{forge.cell}", timeout=60)
    assert out["ename"] == "RefineStop", out["text"][-2000:]
    session: dict[str, Any] = kernel.value(SESSION_EXPR)
    return session


@pytest.mark.parametrize("forge", FORGES, ids=[f.name for f in FORGES])
def test_a_forged_pass_is_not_verified_and_the_loop_goes_on(
    forge: Forge, kernel: RealKernel, fake: FakeAnthropic
) -> None:
    fake.script(block(forge.forged), block(forge.honest))
    session = refine(kernel, forge, attempts=2)
    first = session["attempts"][0]
    assert first["code"] == forge.forged
    assert not first["ok"], f"the forge counted as a fix: {session['render']}"
    assert session["status"] == "fixed", session["render"]
    assert session["fixed_code"] == forge.honest
    assert len(fake.requests) == 2  # the loop asked again instead of stopping at the forge
    if refused_at_run_time(forge, first):
        return
    assert first["summary"].startswith("changes the checks"), first["summary"]
    assert forge.reason in first["summary"], first["summary"]
    second_prompt = str(fake.requests[1]["json"])
    assert "changes the checks" in second_prompt  # the model is told why attempt 1 did not count


def refused_at_run_time(forge: Forge, attempt: dict[str, Any]) -> bool:
    """The sandbox stopped the forge before the gate had to (its trial failed, as it says)."""
    if attempt["trial"] == "passed" or not forge.refused_at_run_time:
        return False
    assert forge.refused_at_run_time in attempt["summary"], attempt["summary"]
    return True


@pytest.mark.parametrize("forge", FORGES, ids=[f.name for f in FORGES])
def test_a_forge_alone_is_only_an_unverified_proposal(
    forge: Forge, kernel: RealKernel, fake: FakeAnthropic
) -> None:
    fake.script(block(forge.forged))
    session = refine(kernel, forge, attempts=1)
    if refused_at_run_time(forge, session["attempts"][0]):
        assert session["status"] == "unfixed", session["render"]
        return
    assert session["status"] == "changes_checks", session["render"]
    assert session["fixed_code"] == forge.forged  # shown, labelled, never as "fixed"
    assert "not verified" in session["render"] and "changes the checks" in session["render"]
    assert "fixed at attempt" not in session["render"]
    # Accept refuses it; the kernel state stays as the failed run left it.
    kernel.ok("total = 'untouched'")
    out = kernel.run("%refine accept")
    assert out["ename"] == "UsageError" and "--anyway" in out["evalue"], out["text"]
    assert kernel.value("total") == "untouched"
    assert kernel.value(SESSION_EXPR)["decision"] == "pending"


def test_accept_anyway_applies_an_unverified_proposal(kernel: RealKernel, fake: FakeAnthropic) -> None:
    forge = FORGES[1]  # the failing assert deleted
    fake.script(block(forge.forged))
    refine(kernel, forge, attempts=1)
    out = kernel.ok("%refine accept --anyway")
    assert "not verified" in out["stdout"], out["stdout"]
    assert kernel.value("total") == 7
    assert kernel.value(SESSION_EXPR)["decision"] == "accepted"


# --------------------------------------------------------------------------- item 7: drifted state

DRIFT_CELL = "items.append(3)\nlast = items[5]"
#: The index edit the fixes make is pinned by a check (else it is a proposal: nothing checks it).
DRIFT_CHECK = '-t "assert last == 3"'


def test_accept_puts_back_what_the_failed_run_changed_in_place(
    kernel: RealKernel, fake: FakeAnthropic
) -> None:
    """The failed run appended to ``items`` before its IndexError: Accept brings ``items`` back from
    the snapshot, then runs the fix, as if the broken cell had never run."""
    kernel.ok("items = [1, 2]")
    fake.script(block("items.append(3)\nlast = items[-1]\nassert items == [1, 2, 3]"))
    out = kernel.run(f"%%refine --max-attempts 1 {DRIFT_CHECK}\n{DRIFT_CELL}", timeout=60)
    assert out["ename"] == "RefineStop"
    assert kernel.value("items") == [1, 2, 3]  # the failed run appended in place
    applied = kernel.ok("%refine accept")
    assert "put back" in applied["stdout"] and "`items`" in applied["stdout"], applied["stdout"]
    assert kernel.value("[items, last]") == [[1, 2, 3], 3]


def test_accept_refuses_a_fix_that_fails_on_the_live_state(kernel: RealKernel, fake: FakeAnthropic) -> None:
    kernel.ok("items = [1, 2]")
    fake.script(block("items.append(3)\nlast = items[-1]\nassert items == [1, 2, 3]"))
    out = kernel.run(f"%%refine --max-attempts 1 {DRIFT_CHECK}\n{DRIFT_CELL}", timeout=60)
    assert out["ename"] == "RefineStop"
    session = kernel.value(SESSION_EXPR)
    assert session["status"] == "fixed", session["render"]  # it passed from the snapshot
    kernel.ok("items.append(4)")  # a later cell changes it in place too: that is never undone

    refused = kernel.run("%refine accept")
    assert refused["ename"] == "UsageError", refused["text"]
    said = refused["evalue"]
    assert "items" in said and "AssertionError" in said and "--anyway" in said, said
    assert kernel.value("items") == [1, 2, 3, 4]  # nothing ran in the kernel, nothing was put back
    assert kernel.value("'last' in globals()") is False
    assert kernel.value(SESSION_EXPR)["decision"] == "pending"

    applied = kernel.ok("%refine accept --anyway")
    assert "raised" in applied["text"]  # the user chose to run it, and it did fail
    assert kernel.value("items") == [1, 2, 3, 4, 3]
    assert kernel.value(SESSION_EXPR)["decision"] == "accepted"


def test_accept_reverifies_on_the_live_state_and_applies_a_fix_that_passes_there(
    kernel: RealKernel, fake: FakeAnthropic
) -> None:
    kernel.ok("items = [1, 2]")
    fake.script(block("items.append(3)\nlast = items[-1]"))
    kernel.run(f"%%refine --max-attempts 1 {DRIFT_CHECK}\n{DRIFT_CELL}", timeout=60)
    kernel.ok("items.append(4)")  # a later cell's change: the fix is trial-run from the live state
    out = kernel.ok("%refine accept")
    assert "items" in out["stdout"] and "live state" in out["stdout"], out["stdout"]
    assert kernel.value("[items, last]") == [[1, 2, 3, 4, 3], 3]


def test_accept_without_drift_runs_no_extra_trial_message(kernel: RealKernel, fake: FakeAnthropic) -> None:
    kernel.ok("items = [1, 2]")
    fake.script(block("last = items[-1]"))
    kernel.run("%%refine --max-attempts 1 -t 'assert last == 2'\nlast = items[5]", timeout=60)
    out = kernel.ok("%refine accept")
    assert "live state" not in out["stdout"], out["stdout"]
    assert kernel.value("last") == 2

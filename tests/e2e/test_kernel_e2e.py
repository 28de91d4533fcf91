"""End to end: ``%%refine`` in a real Jupyter kernel driven through jupyter_client.

The model is the loopback fake of the Anthropic Messages API (tests/fakes/anthropic_api.py), run in
this test process and reached by the kernel through the official ``anthropic`` SDK
(``ANTHROPIC_BASE_URL``). Everything else is real: the kernel runs the cell, captures the
failure, forks trial processes, and answers interrupts.

One kernel serves the module; before each test the user namespace is reset, the settings are
put back and the fake's queue and request log are cleared. A kernel that stopped answering is
replaced, so one broken test does not take the others down with it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import string
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fakes import FakeAnthropic, block
from kernel_io import RealKernel, children_of, collect, read_proc_stat

pytestmark = pytest.mark.timeout(90)

SERVICE_TOKEN = "svc-" + secrets.token_hex(16)  # in the kernel's environment as MY_SERVICE_TOKEN
DUMMY_KEY = "sk-e2e-dummy-key"

# Put back before every test: an empty namespace and the settings these tests assume.
SETUP = """\
%reset -f
%load_ext nbrefine
%config Refine.display = 'text'
%config Refine.response_cache = False
%config Refine.quick_fixes = False
%config Refine.max_retries = 0
%config Refine.request_timeout = 20.0
%config Refine.max_attempts = 3
%config Refine.timeout = 10.0
"""

# What the tests read of the last session (evaluated in the kernel; binds no user name).
SESSION_EXPR = """(lambda s: None if s is None else {
    "status": s.status,
    "message": s.message,
    "decision": s.decision,
    "accept_ok": s.accept_ok,
    "original_code": s.original_code,
    "fixed_code": s.fixed_code,
    "prompts": s.prompts,
    "render": s.render_text(),
    "printed": s.render_text(failure=False),  # the text view after the one-line failure
    "attempts": [
        {
            "error_type": a.error_type,
            "error_message": a.error_message,
            "outcome": a.outcome.status if a.outcome is not None else None,
            "code": a.code,
            "note": a.note,
            "stdout": a.stdout,
        }
        for a in s.attempts
    ],
})(__import__("nbrefine").last_session())"""


def prompt_of(request: dict[str, Any]) -> str:
    content = request["json"]["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


# --------------------------------------------------------------------------- the kernel


def running(pid: int) -> bool:
    stat = read_proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


class Kernel(RealKernel):
    """A real ipykernel with the fake as its Anthropic endpoint."""

    def session(self) -> dict[str, Any]:
        return self.value(SESSION_EXPR)

    def answers_quickly(self, within: float = 5.0) -> float:
        """Seconds the kernel took to answer ``1+1`` (asserts it did, within ``within``)."""
        started = time.monotonic()
        out = self.run("1+1", timeout=within)
        elapsed = time.monotonic() - started
        assert out["results"] == ["2"], out
        return elapsed


@pytest.fixture(scope="module")
def module_kernel(fake: FakeAnthropic) -> Iterator[Kernel]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NBREFINE_", "ANTHROPIC_"))}
    env.update(ANTHROPIC_BASE_URL=fake.base_url, ANTHROPIC_API_KEY=DUMMY_KEY, MY_SERVICE_TOKEN=SERVICE_TOKEN)
    kernel = Kernel(env)
    yield kernel
    kernel.shutdown()


@pytest.fixture
def kernel(module_kernel: Kernel, fake: FakeAnthropic) -> Iterator[Kernel]:
    module_kernel.ensure_healthy()
    module_kernel.ok(SETUP)
    fake.reset()
    yield module_kernel
    fake.reset()


def refine_cell(kernel: Kernel, body: str, options: str = "", timeout: float = 60.0) -> dict[str, Any]:
    """Run a ``%%refine`` cell; a failing one ends with RefineStop, so no status is asserted here."""
    return kernel.run(f"%%refine {options}\n{body}".replace("%%refine \n", "%%refine\n"), timeout)


def assert_stopped(out: dict[str, Any]) -> None:
    assert out["status"] == "error", out["text"]
    assert out["ename"] == "RefineStop", out["text"]


# --------------------------------------------------------------------------- 1. the loop


def test_first_candidate_fails_second_passes(kernel: Kernel, fake: FakeAnthropic) -> None:
    kernel.ok("prices = [2.5, 4.0, 1.5]\nqty = [2, 1, 4]")
    cell = "revenue = sum(p * q for p, q in zip(prices, qtty))"
    wrong = "revenue = sum(p * q for p, q in zip(prices, qty[5]))"
    right = "revenue = sum(p * q for p, q in zip(prices, qty))"
    fake.script(block(wrong, "The list is called qty."), block(right, "Index removed."))

    out = refine_cell(kernel, cell, '-t "assert revenue == 15.0"')

    assert_stopped(out)
    assert "verified fix ready — it passed a trial run (2 tries)" in out["stdout"]
    session = kernel.session()
    assert session["original_code"].rstrip() == cell
    assert session["status"] == "fixed"
    assert len(session["attempts"]) == 2
    assert session["attempts"][0]["error_type"] == "IndexError"
    assert session["attempts"][0]["outcome"] == "failed"
    assert session["attempts"][1]["outcome"] == "passed"
    assert session["fixed_code"] == right

    requests = fake.requests
    assert len(requests) == 2
    first, second = prompt_of(requests[0]), prompt_of(requests[1])
    assert "NameError" in first and "qtty" in first
    assert wrong in second  # the first candidate ...
    assert "IndexError: list index out of range" in second  # ... and how it really failed
    assert session["prompts"] == [first, second]  # what the session shows is what was sent
    assert "revenue" not in kernel.value("sorted(globals())")


# --------------------------------------------------------------------------- 2. live state untouched

STATE_SETUP = """\
import pandas as pd
lst = [1, 2, 3]
dct = {"a": 1, "b": [1, 2]}
df = pd.DataFrame({"x": [1, 2, 3], "y": ["p", "q", "r"]})
n = 41
"""

FINGERPRINT = """{
    "names": sorted(
        k for k in globals()
        if not k.startswith("_") and k not in ("In", "Out", "get_ipython", "exit", "quit", "open")
    ),
    "ids": {k: id(globals()[k]) for k in ("lst", "dct", "df", "n", "pd")},
    "reprs": {
        "lst": repr(lst), "dct": repr(dct), "n": repr(n), "df": df.to_json(), "df_dtypes": repr(df.dtypes)
    },
    "df_hash": int(pd.util.hash_pandas_object(df, index=True).sum()),
    "df_columns": list(df.columns),
    "b_id": id(dct["b"]),
}"""

# Markers are built at run time so the text itself never appears in the code nbrefine shows.
MUTATING_1 = """\
lst.append(99)
dct.clear()
df.loc[0, "x"] = -1
df["z"] = 0
del n
brand_new = 1
print("CANDI" + "DATE-OUT-" + str(6 * 7))
import os
os.write(1, ("FD" + "-LEAK-" + str(6 * 7) + "\\n").encode())
from IPython.display import display
display("DISP" + "LAY-LEAK-" + str(6 * 7))
raise ValueError("candidate one fails on purpose")"""

MUTATING_2 = """\
lst = ["rebound"]
dct["new"] = 2
df.drop(columns=["x"], inplace=True)
n = 0
another_new = 2
import sys
sys.stderr.write("STDE" + "RR-LEAK-" + str(6 * 7) + "\\n")
result = n + len(lst)
print("CANDI" + "DATE-OUT-" + str(6 * 7 + 1))"""


@pytest.mark.parametrize("snapshot", ["snapshot", "no snapshot"])
def test_trials_leave_the_live_state_untouched(kernel: Kernel, fake: FakeAnthropic, snapshot: str) -> None:
    kernel.ok(STATE_SETUP)
    before = kernel.value(FINGERPRINT)
    fake.script(block(MUTATING_1), block(MUTATING_2))

    options = "--max-attempts 2" + (" --no-snapshot" if snapshot == "no snapshot" else "")
    out = refine_cell(kernel, "result = n + lst[0] + undefined_offset", options)

    assert_stopped(out)
    session = kernel.session()
    assert session["status"] == "fixed", session["message"]
    assert [a["outcome"] for a in session["attempts"]] == ["failed", "passed"]
    # The trials really ran, and their output was captured (it is fed back to the model) ...
    second_prompt = prompt_of(fake.requests[1])
    assert "CANDIDATE-OUT-42" in second_prompt
    assert "FD-LEAK-42" in second_prompt
    assert "DISPLAY-LEAK-42" in second_prompt
    assert "STDERR-LEAK-42" not in second_prompt  # (the second candidate's output is never sent)

    # ... but none of it reached the notebook: only nbrefine's own lines are there.
    for marker in ("CANDIDATE-OUT-", "FD-LEAK-", "DISPLAY-LEAK-", "STDERR-LEAK-"):
        assert marker not in out["text"], f"{marker} leaked into the notebook output:\n{out['text']}"
    assert out["displays"] == [] and out["results"] == []
    report = session["printed"] + "\n"
    assert out["stdout"].endswith(report), out["stdout"]
    progress = out["stdout"][: -len(report)].splitlines()
    assert progress and all(line.startswith("nbrefine:") for line in progress), progress
    assert "STDERR-LEAK" not in out["stderr"]

    after = kernel.value(FINGERPRINT)
    assert after == before
    for name in ("brand_new", "another_new", "result", "os", "sys", "display"):
        assert name not in after["names"]


# --------------------------------------------------------------------------- 3. accept / reject

AREA_CELL = "area = width * heigth\nperimeter = 2 * (width + height)"
AREA_FIX = "area = width * height\nperimeter = 2 * (width + height)"
AREA_STATE = """{
    "area": globals().get("area"),
    "perimeter": globals().get("perimeter"),
    "decision": __import__("nbrefine").last_session().decision,
    "accept_ok": __import__("nbrefine").last_session().accept_ok,
}"""


@pytest.mark.parametrize("how", ["magic accept", "method accept", "reject"])
def test_accept_advances_state_and_reject_does_not(kernel: Kernel, fake: FakeAnthropic, how: str) -> None:
    kernel.ok("width = 3\nheight = 4")
    fake.script(block(AREA_FIX, "Typo in height."))
    assert_stopped(refine_cell(kernel, AREA_CELL))
    assert kernel.session()["status"] == "fixed"
    assert kernel.value(AREA_STATE) == {
        "area": None,
        "perimeter": None,
        "decision": "pending",
        "accept_ok": None,
    }

    if how == "magic accept":
        out = kernel.ok("%refine accept")
        assert "nbrefine: accepted; the fix ran in the kernel" in out["stdout"]
        assert kernel.value(AREA_STATE) == {
            "area": 12,
            "perimeter": 14,
            "decision": "accepted",
            "accept_ok": True,
        }
        again = kernel.run("%refine accept")
        assert again["status"] == "error" and again["ename"] == "UsageError", again["text"]
    elif how == "method accept":
        out = kernel.ok("__import__('nbrefine').last_session().accept()")
        assert out["results"] == ["True"]
        assert kernel.value(AREA_STATE) == {
            "area": 12,
            "perimeter": 14,
            "decision": "accepted",
            "accept_ok": True,
        }
    else:
        out = kernel.ok("%refine reject")
        assert "rejected" in out["stdout"]
        assert kernel.value(AREA_STATE) == {
            "area": None,
            "perimeter": None,
            "decision": "rejected",
            "accept_ok": None,
        }
    assert len(fake.requests) == 1  # deciding does not talk to the model


# --------------------------------------------------------------------------- 4. redaction


def _random(alphabet: str, size: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(size))


def test_planted_secrets_never_reach_the_model(kernel: Kernel, fake: FakeAnthropic) -> None:
    key_tail = _random(string.ascii_letters + string.digits, 40)
    gh_tail = _random(string.ascii_letters + string.digits, 36)
    api_key = "sk-ant-api03-" + key_tail
    gh_token = "ghp_" + gh_tail
    password = "hunter2-xyz"
    kernel.ok(
        "import os\n"
        f"api_key = {api_key!r}\n"
        f"creds = {{'password': {password!r}}}\n"
        f"build_label = {gh_token!r}\n"
        "def connect(settings):\n"
        "    raise PermissionError(f'server refused the login: {settings}')\n"
    )
    cell = (
        'settings = {"key": api_key, "label": build_label, "svc": os.environ["MY_SERVICE_TOKEN"], **creds}\n'
        "conn = connect(settings)"
    )
    leaky = (
        # the env value is absent in a trial (the sandbox strips secret env values): .get()
        'print("using", api_key, build_label, creds, os.environ.get("MY_SERVICE_TOKEN"))\n'
        "settings = dict(creds, token=build_label, key=api_key)\n"
        "conn = connect(settings)"
    )
    fake.script(block(leaky, "Pass the token too."), block("conn = None", "Skip the login."))

    out = refine_cell(kernel, cell)

    assert_stopped(out)
    session = kernel.session()
    assert session["status"] == "fixed", session["message"]
    requests = fake.requests
    assert len(requests) == 2
    # The secrets were really in play: the candidate printed them and the error carried them.
    assert api_key in session["attempts"][0]["stdout"]
    assert "PermissionError" in prompt_of(requests[1])

    secret_values = {
        "api_key": api_key,
        "api key tail": key_tail,
        "password": password,
        "github token": gh_token,
        "github token tail": gh_tail,
        "env MY_SERVICE_TOKEN": SERVICE_TOKEN,
    }
    for number, request in enumerate(requests, start=1):
        body = json.dumps(request["json"])
        for what, value in secret_values.items():
            assert value not in body, f"the {what} leaked in request {number}: ...{_around(body, value)}..."
        assert "hunter2" not in body
    assert all("<redacted" in json.dumps(r["json"]) for r in requests)


def _around(text: str, value: str, width: int = 80) -> str:
    at = text.find(value)
    return text[max(at - width, 0) : at + len(value) + width]


# --------------------------------------------------------------------------- 5. assert operands


def test_assert_operands_in_the_prompt(kernel: Kernel, fake: FakeAnthropic) -> None:
    kernel.ok("total = 7")
    out = refine_cell(kernel, "assert total == 10", "--max-attempts 1")
    assert_stopped(out)
    assert len(fake.requests) == 1
    prompt = prompt_of(fake.requests[0])
    assert "assert total == 10" in prompt
    assert "where total = int 7" in prompt


def test_call_operand_evaluated_without_touching_the_kernel(kernel: Kernel, fake: FakeAnthropic) -> None:
    kernel.ok("calls = []\ndef f(x):\n    calls.append(x)\n    return x + 1")
    out = refine_cell(kernel, "assert f(2) == 4", "--max-attempts 1")
    assert_stopped(out)
    assert len(fake.requests) == 1
    prompt = prompt_of(fake.requests[0])
    assert "assert f(2) == 4" in prompt
    assert "where f(2) = int 3" in prompt
    assert kernel.value("calls") == [2]  # the cell's own call only: the operand ran in a fork


# --------------------------------------------------------------------------- 6. provider faults

# name: (settings, reply specs, requests the fake must see, pattern the message must match)
FAULTS: dict[str, tuple[str, list[dict[str, Any]], int, str]] = {
    "401": ("", [{"status": 401}], 1, r"401.*credentials|credentials.*401"),
    "429 on every try": (
        "%config Refine.max_retries = 1",
        [{"status": 429, "retry_after": 0.01}] * 2,
        2,
        r"rate limit.*429.*after 1 retry",
    ),
    "529": (
        "%config Refine.max_retries = 1",
        [{"status": 529, "retry_after": 0.01}] * 2,
        2,
        r"overloaded.*529",
    ),
    "reset": ("", [{"fault": "reset"}], 1, r"connection .*failed|could not reach"),
    "cut": (
        "",
        [{"fault": "cut", "text": "x" * 200 + "\n```python\ny = 1\n```", "cut_after": 3}],
        1,
        r"cut off",
    ),
    "slow": (
        "%config Refine.request_timeout = 1.0",
        [{"fault": "slow", "delay": 5, "text": "```python\ny = 1\n```"}],
        1,
        r"(within|longer than) 1 s",
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_provider_fault_ends_in_a_clear_error(kernel: Kernel, fake: FakeAnthropic, fault: str) -> None:
    config, specs, expected_requests, pattern = FAULTS[fault]
    if config:
        kernel.ok(config)
    fake.script(*specs)

    started = time.monotonic()
    out = refine_cell(kernel, "y = undefined_y", timeout=30)
    took = time.monotonic() - started

    assert_stopped(out)
    session = kernel.session()
    assert session["status"] == "error", session
    message = session["message"]
    assert message and "\n" not in message and len(message) < 400, message
    assert re.search(pattern, message, re.I), message
    assert message in out["text"]  # the notebook shows the cause
    assert "Traceback" not in out["text"]
    assert len(session["attempts"]) == 1 and session["attempts"][0]["note"].startswith("provider error")
    assert len(fake.requests) == expected_requests
    assert took < 15, f"the fault took {took:.1f} s to surface"
    kernel.answers_quickly(5.0)


def test_rate_limit_once_then_a_good_reply_is_retried_by_the_sdk(kernel: Kernel, fake: FakeAnthropic) -> None:
    kernel.ok("%config Refine.max_retries = 1")
    fake.script({"status": 429, "retry_after": 0.01}, block("y = 1"))
    out = refine_cell(kernel, "y = undefined_y")
    assert_stopped(out)
    session = kernel.session()
    assert session["status"] == "fixed", session["message"]
    assert len(session["attempts"]) == 1
    requests = fake.requests
    assert len(requests) == 2
    assert requests[1]["headers"].get("x-stainless-retry-count") == "1"
    assert requests[0]["json"] == requests[1]["json"]


# --------------------------------------------------------------------------- 7-9. replies and trials


def test_reply_without_code_then_a_good_one(kernel: Kernel, fake: FakeAnthropic) -> None:
    fake.script({"text": "You should define the variable first."}, block("y = 2"))
    out = refine_cell(kernel, "y = undefined_y")
    assert_stopped(out)
    session = kernel.session()
    assert session["status"] == "fixed"
    assert [a["error_type"] for a in session["attempts"]] == ["NoCode", None]
    assert len(fake.requests) == 2


def test_passing_cell_runs_normally_without_the_model(kernel: Kernel, fake: FakeAnthropic) -> None:
    out = refine_cell(kernel, "q = 6 * 7\nprint('q is', q)\nq")
    assert out["status"] == "ok", out["text"]
    assert out["stdout"] == "q is 42\n"
    assert out["results"] == ["42"]
    assert out["errors"] == []
    session = kernel.session()
    assert session["status"] == "no_error" and session["attempts"] == []
    assert kernel.value("q") == 42
    assert fake.requests == []


def test_candidate_that_never_ends_times_out(kernel: Kernel, fake: FakeAnthropic) -> None:
    fake.script(block("while True:\n    pass"))
    started = time.monotonic()
    out = refine_cell(kernel, "y = undefined_y", "--timeout 1 --max-attempts 1", timeout=30)
    took = time.monotonic() - started
    assert_stopped(out)
    session = kernel.session()
    assert session["attempts"][0]["outcome"] == "timeout", session["attempts"]
    assert session["status"] == "unfixed"
    assert took < 10, took
    kernel.answers_quickly(5.0)
    assert children_of(kernel.pid) == {}


# --------------------------------------------------------------------------- 10. interrupt


def _wait_for_trial(kernel_pid: int, timeout: float = 20.0) -> tuple[int, int]:
    """(snapshot pid, trial pid) once a grandchild of the kernel is running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in children_of(kernel_pid):
            for grandchild, state in children_of(child).items():
                if state == "R":
                    return child, grandchild
        time.sleep(0.05)
    raise AssertionError("no trial process appeared under the kernel")


def test_interrupt_during_a_trial(kernel: Kernel, fake: FakeAnthropic) -> None:
    fake.script(block("while True:\n    pass"))
    msg_id = kernel.kc.execute("%%refine --timeout 60 --max-attempts 1\ny = undefined_y")
    try:
        snapshot_pid, trial_pid = _wait_for_trial(kernel.pid)
        time.sleep(0.3)  # well inside the trial
        started = time.monotonic()
        kernel.km.interrupt_kernel()
        out = collect(kernel.kc, msg_id, timeout=10)
    except Exception:
        kernel.broken = True
        raise
    took = time.monotonic() - started
    assert took < 10, took
    assert_stopped(out)
    assert kernel.session()["status"] == "interrupted"

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (children_of(kernel.pid) or running(trial_pid)):
        time.sleep(0.05)
    assert children_of(kernel.pid) == {}, "the kernel still has child processes"
    assert not running(trial_pid), "the trial process survived the interrupt"
    assert read_proc_stat(snapshot_pid) is None, "the snapshot process was not reaped"
    kernel.answers_quickly(5.0)


SLOW_SETUP_PROVIDER = """\
import nbrefine as _nbrefine, time as _time
def _slow_factory(settings):
    _time.sleep(30)  # stands in for a slow first `import anthropic` or client setup
    raise RuntimeError("unreachable")
_nbrefine.register_provider("e2e-slow-setup", _slow_factory)
"""


def test_interrupt_before_the_first_request(kernel: Kernel, fake: FakeAnthropic) -> None:
    """Ctrl-C while the provider is being set up (in a fresh kernel the first ``import anthropic``
    takes about a second) must end the session like an interrupt during the loop does."""
    kernel.ok(SLOW_SETUP_PROVIDER)
    msg_id = kernel.kc.execute("%%refine --provider e2e-slow-setup\ny = undefined_y")
    try:
        deadline = time.monotonic() + 20
        while not children_of(kernel.pid) and time.monotonic() < deadline:  # the snapshot exists
            time.sleep(0.02)
        time.sleep(0.5)  # inside the factory's sleep
        started = time.monotonic()
        kernel.km.interrupt_kernel()
        out = collect(kernel.kc, msg_id, timeout=10)
    except Exception:
        kernel.broken = True
        raise
    assert time.monotonic() - started < 10
    assert out["status"] == "error", out["text"]
    session = kernel.session()
    assert session["original_code"].rstrip() == "y = undefined_y"
    assert session["status"] == "interrupted", (
        f"after Ctrl-C the session is left as {session['status']!r} and the cell ended with "
        f"{out['ename']} instead of RefineStop"
    )
    assert out["ename"] == "RefineStop"
    kernel.answers_quickly(5.0)
    assert children_of(kernel.pid) == {}
    assert fake.requests == []

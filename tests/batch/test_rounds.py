"""``nbrefine fix --batch``: each round's model requests through Anthropic's Message Batches API.

Real kernels and the real ``anthropic`` SDK (``client.messages.batches.create/retrieve/results``)
against the loopback fake ``tests/fakes/anthropic_api.py``, which serves the batch endpoints; only the
model is scripted.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import pytest
from fakes import FakeAnthropic, TimedFake
from test_client import FAILING, FIX_REPLY, TOGETHER, notebook

from nbrefine.cli.main import main
from nbrefine.engine import price_of, usage_of
from nbrefine.providers.base import ProviderReply

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("clean_env_in_tmp")]

# A fix that still fails: its trial's error is the feedback the next round's request carries.
WRONG_REPLY = "Fixed the name.\n\n```python\nvalue = 21\nprint(valeu2 * 2)\n```"
BATCH = ["--provider", "anthropic", "--no-quick-fixes", "--batch", "--dry-run"]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    with TimedFake(default={"text": FIX_REPLY}, batch_seconds=2.5) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        yield server


def batch_bodies(fake: FakeAnthropic) -> list[list[dict[str, Any]]]:
    """The requests of each batch created, as the SDK sent them."""
    made = [r for r in fake.requests if r["method"] == "POST" and r["path"] == "/v1/messages/batches"]
    return [r["json"]["requests"] for r in made]


def user_text(params: dict[str, Any]) -> str:
    return "".join(block["text"] for block in params["messages"][0]["content"])


# --------------------------------------------------------------------------- the fake, through the SDK


def test_the_fake_serves_the_batch_endpoints_the_sdk_calls() -> None:
    with FakeAnthropic(batch_seconds=0.3) as fake:
        fake.script({"text": "one"}, {"status": 529}, {"batch_result": "expired"})
        client = anthropic.Anthropic(api_key="sk-test", base_url=fake.base_url, max_retries=0)
        params = {
            "model": "claude-sonnet-5-5",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "x"}],
        }
        requests: list[Any] = [{"custom_id": f"r{i}", "params": params} for i in range(3)]
        requests.append({"custom_id": "bad", "params": {"model": "claude-sonnet-5-5"}})

        made = client.messages.batches.create(requests=requests)

        assert made.processing_status == "in_progress" and made.request_counts.processing == 4
        with pytest.raises(anthropic.AnthropicError, match="results_url"):
            list(client.messages.batches.results(made.id))  # not ended yet
        time.sleep(0.4)
        ended = client.messages.batches.retrieve(made.id)
        assert ended.processing_status == "ended" and ended.results_url and ended.ended_at is not None
        counts = ended.request_counts
        assert (counts.succeeded, counts.errored, counts.expired, counts.processing) == (1, 2, 1, 0)
        results = {r.custom_id: r.result for r in client.messages.batches.results(made.id)}
        assert results["r0"].type == "succeeded" and results["r0"].message.content[0].text == "one"
        assert results["r0"].message.usage.output_tokens == 1
        assert results["r1"].type == "errored" and results["r1"].error.error.type == "overloaded_error"
        assert results["r2"].type == "expired"
        assert results["bad"].type == "errored" and "max_tokens" in results["bad"].error.error.message
        assert fake.batches == [{"id": made.id, "custom_ids": ["r0", "r1", "r2", "bad"], "status": "ended"}]
        with pytest.raises(anthropic.NotFoundError):
            client.messages.batches.retrieve("msgbatch_nonesuch")


def test_a_batch_reply_costs_half() -> None:
    price = price_of("claude-sonnet-5-5")
    assert price is not None
    full = ProviderReply("x", "claude-sonnet-5-5", input_tokens=1000, output_tokens=200)
    batch = ProviderReply("x", "claude-sonnet-5-5", input_tokens=1000, output_tokens=200,
                          extra={"price_factor": 0.5})  # fmt: skip

    full_usd, batch_usd = usage_of(full).cost_usd, usage_of(batch).cost_usd

    assert full_usd == pytest.approx((1000 * price[0] + 200 * price[1]) / 1e6)
    assert batch_usd == pytest.approx(full_usd / 2)


# --------------------------------------------------------------------------- rounds


def test_each_round_is_one_batch_over_every_notebook(tmp_path: Path, fake: TimedFake, capsys: Any) -> None:
    for name in ("a", "b"):
        notebook(tmp_path / f"{name}.ipynb", TOGETHER.format(name=name), FAILING)
    fake.script({"text": WRONG_REPLY}, {"text": WRONG_REPLY})  # round 1: both proposals fail their trial

    code = main(["fix", "a.ipynb", "b.ipynb", *BATCH, "--max-attempts", "2", "--jobs", "2",
                 "--report", "r.json", "--record", "run.jsonl"])  # fmt: skip

    out, err = capsys.readouterr()
    assert code == 0, out + err
    # No request went to the Messages API itself: two batches, one per round, each with one
    # request of each notebook.
    assert not [r for r in fake.requests if r["path"] == "/v1/messages"]
    first, second = batch_bodies(fake)
    assert sorted(r["custom_id"][:3] for r in first) == sorted(r["custom_id"][:3] for r in second)
    assert len({r["custom_id"][:3] for r in first}) == 2
    # Trials and feedback between the rounds: the second round tells each notebook's model how
    # its first proposal failed.
    assert all("valeu2" not in user_text(r["params"]) for r in first)
    assert all("valeu2" in user_text(r["params"]) for r in second)
    assert first[0]["params"]["system"][0]["cache_control"] == {"type": "ephemeral"}

    report = json.loads((tmp_path / "r.json").read_text())
    assert [e["outcome"] for e in report["notebooks"]] == ["pass", "pass"]
    assert all(len(e["report"]["cells"][1]["attempts"]) == 2 for e in report["notebooks"])
    batches = report["batches"]
    assert [b["id"] for b in batches] == [b["id"] for b in fake.batches]
    assert [(b["round"], b["requests"], b["status"], b["counts"]["succeeded"]) for b in batches] == [
        (1, 2, "ended", 2),
        (2, 2, "ended", 2),
    ]
    assert all(b["wait_s"] >= 2.5 for b in batches)
    # The batch ids are in the run record as they are sent (what --resume reads).
    lines = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [line["batch_id"] for line in lines if line["kind"] == "batch"] == [b["id"] for b in batches]
    # Half price, in the budget's count and in each notebook's own usage.
    usage = [e["report"]["usage"] for e in report["notebooks"]]
    tokens = sum(u["input_tokens"] + u["output_tokens"] for u in usage)
    assert report["requests"]["tokens"] == tokens > 0
    price = price_of("claude-sonnet-5-5")
    assert price is not None
    full = sum(u["input_tokens"] * price[0] + u["output_tokens"] * price[1] for u in usage) / 1e6
    assert sum(u["cost_usd"] for u in usage) == pytest.approx(full / 2)
    assert report["requests"]["usd"] == pytest.approx(full / 2)
    # Polled politely: the first look after a second, each wait longer than the one before.
    created = [t for t, method, path in fake.timeline if (method, path) == ("POST", "/v1/messages/batches")]
    for made, batch in zip(created, fake.batches, strict=True):
        looks = [t for t, method, path in fake.timeline if method == "GET" and path.endswith(batch["id"])]
        polls = looks[:-1]  # the last: results() retrieves the batch once more before it fetches them
        waits = [later - earlier for earlier, later in itertools.pairwise([made, *polls])]
        assert 2 <= len(polls) <= 3 and waits[0] >= 0.95
        assert all(b > a for a, b in itertools.pairwise(waits))
    # Progress: each batch as it is sent and as it ends.
    for number, batch in enumerate(batches, 1):
        assert f"batch {number} ({batch['id']}): 2 requests from 2 notebooks sent" in err
        assert f"batch {number} ({batch['id']}) ended after " in err
    assert "2 succeeded" in err


def test_an_expired_or_failed_request_fails_its_cell_with_the_reason(
    tmp_path: Path, fake: TimedFake, capsys: Any
) -> None:
    fake.batch_seconds = 0.2
    for name in ("a", "b"):
        notebook(tmp_path / f"{name}.ipynb", TOGETHER.format(name=name), FAILING)
    fake.script({"batch_result": "expired"}, {"status": 400, "message": "prompt is too long"})

    code = main(["fix", "a.ipynb", "b.ipynb", *BATCH, "--max-attempts", "1", "--jobs", "2",
                 "--report", "r.json"])  # fmt: skip

    out, err = capsys.readouterr()
    assert code == 1, out + err
    cells = [e["report"]["cells"][1] for e in json.loads((tmp_path / "r.json").read_text())["notebooks"]]
    assert all(c["status"] == "unfixed" for c in cells)
    batch = fake.batches[0]["id"]
    reasons = " | ".join(c["reason"] for c in cells)
    assert f"the request expired in its batch (batch {batch}) before it was processed" in reasons
    assert f"invalid_request_error: prompt is too long (batch {batch})" in reasons


def test_resume_takes_the_results_of_a_batch_sent_before_the_interruption(
    tmp_path: Path, fake: TimedFake
) -> None:
    notebook(tmp_path / "a.ipynb", FAILING)
    fake.batch_seconds = 600  # the batch is still processing when the run is interrupted
    command = [sys.executable, "-m", "nbrefine.cli", "fix", "a.ipynb", *BATCH, "--max-attempts", "1",
               "--report", "r.json", "--record", "run.jsonl"]  # fmt: skip
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not fake.batches and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert fake.batches, proc.communicate()[1] if proc.poll() is not None else "no batch was sent"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    earlier = fake.batches[0]["id"]
    report = json.loads((tmp_path / "r.json").read_text())
    assert [b["id"] for b in report["batches"]] == [earlier] and report["batches"][0][
        "status"
    ] == "in_progress"

    fake.batch_seconds = 0.5  # meanwhile, at Anthropic, the batch ended
    resumed = subprocess.run(
        [*command, "--resume"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [b["id"] for b in fake.batches] == [earlier]  # nothing sent (or paid for) again
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["notebooks"][0]["outcome"] == "pass"
    assert [(b["id"], b["earlier_run"], b["status"]) for b in report["batches"]] == [(earlier, True, "ended")]
    assert f"an earlier run's batch ({earlier}) ended" in resumed.stderr


# --------------------------------------------------------------------------- usage


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--provider", "offline", "--batch"], "--batch needs the anthropic provider"),
        (["--batch", "--provider", "anthropic", "--cluster", "tcp://127.0.0.1:8786"], "not with --cluster"),
        (["--batch", "--provider", "anthropic", "--max-requests", "2"], "--max-requests does not apply"),
    ],
)
def test_bad_batch_usage_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], expected: str, capsys: Any
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    notebook(tmp_path / "a.ipynb", "x = 1")

    assert main(["fix", "a.ipynb", *args]) == 2

    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("nbrefine: error: ")
    assert expected in lines[0]

"""The shared request gate of a batch: one limit, one budget, one back-off for every job.

The jobs are separate processes (each notebook's kernel), so these tests use real processes and
the real ``anthropic`` SDK against ``tests/fakes/anthropic_api.py``; nothing is mocked but the model.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import TimedFake

from nbrefine import providers
from nbrefine._errors import ProviderError
from nbrefine.batch.gate import FileGate, GatedProvider, GateLimits, install, open_gate
from nbrefine.providers import ProviderSettings, make_provider

pytestmark = pytest.mark.timeout(60)

# One job of a batch, as a process of its own: take a slot, hold it, say when.
HOLDER = """
import json, sys, time
from nbrefine.batch.gate import open_gate
gate = open_gate(sys.argv[1])
with gate.slot():
    entered = time.time()
    print(json.dumps({"entered": entered}), flush=True)
    time.sleep(float(sys.argv[2]))
print(json.dumps({"entered": entered, "left": time.time()}), flush=True)
"""


def holders(spec: str, count: int, hold: float) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen([sys.executable, "-c", HOLDER, spec, str(hold)], stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]


def intervals(procs: list[subprocess.Popen[str]]) -> list[tuple[float, float]]:
    spans = []
    for proc in procs:
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        last = json.loads(out.strip().splitlines()[-1])
        spans.append((last["entered"], last["left"]))
    return spans


def most_at_once(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    now = best = 0
    for _, step in edges:
        now += step
        best = max(best, now)
    return best


def test_the_limit_holds_across_processes(tmp_path: Path) -> None:
    gate = FileGate.create(tmp_path / "gate", GateLimits(max_requests=2))

    spans = intervals(holders(gate.spec, 5, 0.4))

    assert most_at_once(spans) == 2
    state = gate.state()
    assert (state.requests, state.max_in_flight, state.in_flight) == (5, 2, 0)
    assert state.waited_s > 0.3  # three of the five had to wait for a slot


def test_a_killed_job_gives_its_slot_back(tmp_path: Path) -> None:
    gate = FileGate.create(tmp_path / "gate", GateLimits(max_requests=1))
    proc = holders(gate.spec, 1, 30)[0]
    try:
        assert proc.stdout is not None
        assert "entered" in proc.stdout.readline()  # it holds the only slot
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        started = time.monotonic()
        with gate.slot():
            waited = time.monotonic() - started
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    assert waited < 1.0


def test_a_back_off_pauses_every_job(tmp_path: Path) -> None:
    gate = FileGate.create(tmp_path / "gate", GateLimits(max_requests=4))
    asked = time.time()
    gate.back_off(1.0)  # one job was told 429, retry after 1 s

    spans = intervals(holders(gate.spec, 2, 0.0))  # two other jobs, free slots, still wait

    assert all(entered >= asked + 0.95 for entered, _ in spans)
    state = gate.state()
    assert (state.rate_limited, state.paused_s) == (1, 1.0)


def test_the_budget_is_shared(tmp_path: Path) -> None:
    gate = FileGate.create(tmp_path / "gate", GateLimits(budget_tokens=1000, budget_usd=0.05))
    other = open_gate(gate.spec)  # another job's view of the same gate

    other.charge(600, 0.01)
    assert gate.over_budget() is None
    gate.charge(500, None)  # a model without a known price: tokens count, money cannot
    reason = other.over_budget()
    assert reason is not None and "1,000 tokens" in reason and "1,100 used" in reason
    state = gate.state()
    assert (state.tokens, state.usd, state.unpriced) == (1100, 0.01, 1)

    money = FileGate.create(tmp_path / "money", GateLimits(budget_usd=0.05))
    money.charge(10, 0.06)
    assert "$0.05" in (money.over_budget() or "")


def test_a_bad_spec_is_one_line() -> None:
    with pytest.raises(ValueError, match="not a request gate spec"):
        open_gate("redis://nowhere")


# --------------------------------------------------------------------------- in a kernel's provider


@pytest.fixture
def registry() -> Iterator[None]:
    """install() wraps the process's provider registry: put it back afterwards."""
    saved = dict(providers._FACTORIES)
    yield
    providers._FACTORIES.clear()
    providers._FACTORIES.update(saved)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[TimedFake]:
    with TimedFake() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        yield server


def _request() -> Any:
    from nbrefine.providers.base import ProviderRequest

    return ProviderRequest(system="fix it", user="cell: print(x)")


def test_install_gates_the_model_providers_not_the_offline_tier(tmp_path: Path, registry: None) -> None:
    gate = FileGate.create(tmp_path / "gate", GateLimits())
    install(gate.spec)
    install(gate.spec)  # idempotent: the set-up code may run twice in a kernel

    made = make_provider("anthropic", ProviderSettings(max_retries=3))
    assert isinstance(made, GatedProvider) and made.retries == 3
    assert made.inner.max_retries == 0  # type: ignore[attr-defined]  # the gate retries, not the SDK
    assert not isinstance(made.inner, GatedProvider)
    assert not isinstance(make_provider("offline", ProviderSettings()), GatedProvider)


def test_wrap_provider_factories_wraps_each_available_factory_where_asked(registry: None) -> None:
    seen: list[str] = []
    offline = make_provider("offline", ProviderSettings())

    def wrap(name: str, factory: Any) -> Any:
        seen.append(name)
        return (lambda settings: offline) if name == "anthropic" else None

    providers.wrap_provider_factories(wrap)
    assert seen == providers.available_providers() and "openai" in seen
    assert make_provider("anthropic", ProviderSettings()) is offline  # wrapped
    assert make_provider("openai", ProviderSettings(model="m")) is not offline  # None: left as it was


def test_a_429_pauses_every_job_then_the_request_is_retried(
    tmp_path: Path, registry: None, fake: TimedFake
) -> None:
    gate = FileGate.create(tmp_path / "gate", GateLimits(max_requests=4))
    install(gate.spec)
    fake.script({"status": 429, "retry_after": 1.0}, {"text": "first"}, {"text": "second"})
    replies: dict[str, str] = {}

    def ask(name: str) -> None:
        replies[name] = make_provider("anthropic", ProviderSettings(max_retries=2)).complete(_request()).text

    first = threading.Thread(target=ask, args=("a",))
    first.start()
    deadline = time.monotonic() + 20
    while gate.state().rate_limited == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    paused_at = time.time()
    ask("b")  # another job, with free slots, during the pause
    first.join(20)

    assert sorted(replies.values()) == ["first", "second"]
    assert len(fake.arrivals) == 3  # the 429, then one request each: the SDK did not retry on its own
    assert all(t >= paused_at + 0.9 for t in fake.arrivals[1:])  # nobody asked during the pause
    state = gate.state()
    assert (state.rate_limited, state.requests) == (1, 3)
    assert state.tokens > 0 and state.usd > 0  # the default model's price is known


def test_the_budget_stops_the_next_request(tmp_path: Path, registry: None, fake: TimedFake) -> None:
    gate = FileGate.create(tmp_path / "gate", GateLimits(budget_tokens=5))
    install(gate.spec)
    provider = make_provider("anthropic", ProviderSettings())

    provider.complete(_request())  # spends more than 5 tokens
    with pytest.raises(ProviderError) as err:
        provider.complete(_request())

    assert "batch budget of 5 tokens is spent" in str(err.value)
    assert len(fake.arrivals) == 1


def test_gate_spec_reaches_a_new_process(tmp_path: Path) -> None:
    """A kernel opens the gate from its spec alone (the folder's config)."""
    gate = FileGate.create(tmp_path / "gate", GateLimits(max_requests=3, budget_tokens=7))
    code = (
        "import sys; from nbrefine.batch.gate import open_gate; g = open_gate(sys.argv[1]); "
        "print(g.limits.max_requests, g.limits.budget_tokens)"
    )
    out = subprocess.run([sys.executable, "-c", code, gate.spec], capture_output=True, text=True, timeout=30)
    assert out.stdout.split() == ["3", "7"], out.stderr
    assert os.path.isdir(tmp_path / "gate")

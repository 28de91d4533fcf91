"""engine/kernel_state.py: what a kernel remembers between cells lives in one KernelState."""

from __future__ import annotations

import pytest

from nbrefine.engine import (
    LoopConfig,
    PolicyLockedError,
    RefineJob,
    RefineSession,
    RepairTask,
    TeachingPolicy,
    Usage,
    add_to_kernel,
    apply_policy_line,
    cached,
    current,
    kernel_ledger,
    kernel_policy_holder,
    kernel_usage,
    last_session,
)
from nbrefine.engine.kernel_state import reset
from nbrefine.grounding import Redactor
from nbrefine.providers.base import ProviderRequest
from nbrefine.providers.scripted import ScriptedProvider
from nbrefine.sandbox import LiveForkRunner


@pytest.fixture(autouse=True)
def fresh_state():
    reset()
    yield
    reset()


def test_the_shortcuts_read_and_write_the_one_holder():
    state = current()
    add_to_kernel(Usage(input_tokens=10, output_tokens=2, cost_usd=0.5))
    add_to_kernel(Usage(input_tokens=1, cost_usd=None))
    assert kernel_usage() is state.usage and kernel_usage().tokens == 13 and state.usage.cost_usd is None
    apply_policy_line("--mode hint --max-hints 2 --lock")
    assert kernel_policy_holder() is state.policy_holder and state.policy_holder.policy == TeachingPolicy(
        "hint", 2, locked=True
    )
    kernel_ledger().record("cell:a", "a hint")
    assert state.ledger.used("cell:a") == 1


def test_the_response_cache_is_the_kernels_and_reset_forgets_it():
    provider = ScriptedProvider(["```python\nx = 1\n```"] * 3)
    request = ProviderRequest(system="s", user="the same failing cell")
    first = cached(provider).complete(request)
    again = cached(provider).complete(request)  # a new wrapper, as each %%refine run makes
    assert len(provider.requests) == 1 and again.text == first.text and again.extra.get("cached")
    assert len(current().responses) == 1
    reset()
    cached(provider).complete(request)
    assert len(provider.requests) == 2


def test_reset_starts_over_even_after_a_lock():
    apply_policy_line("--mode explain --lock")
    with pytest.raises(PolicyLockedError):
        apply_policy_line("--mode fix")
    add_to_kernel(Usage(output_tokens=5))
    kernel_ledger().record("cell:a", "a hint")
    before = current()
    reset()
    assert current() is not before
    assert kernel_policy_holder().policy == TeachingPolicy() and kernel_usage() == Usage()
    assert kernel_ledger().used("cell:a") == 0 and len(current().responses) == 0


def test_the_latest_session_is_the_kernels_and_an_older_one_is_released():
    released: list[str] = []

    def session(name: str) -> RefineSession:
        made = RefineSession(f"{name} = missing")
        made.job = RefineJob(
            RepairTask(made.original_code, ()),
            lambda: ScriptedProvider([]),
            LiveForkRunner({}, Redactor(environ={})),
            Redactor(environ={}),
            LoopConfig(),
            free=lambda: released.append(name),
        )
        made.finish_without_loop("unfixed", "")
        return made

    first = session("first")
    assert last_session() is first and current().session is first
    second = session("second")
    assert last_session() is second and released == ["first"]  # its snapshot is not needed any more
    reset()
    assert last_session() is None and released == ["first", "second"]

"""The SDK client lifecycle both SDK providers share (nbrefine/providers/_sdk_client.py), through the
real ``anthropic`` and ``openai`` SDKs against the loopback fakes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.anthropic_api import FakeAnthropic

from nbrefine._errors import ProviderConfigError
from nbrefine.providers._sdk_client import LazyClient
from nbrefine.providers.anthropic import AnthropicProvider
from nbrefine.providers.base import ProviderRequest

pytestmark = pytest.mark.timeout(60)

KEY = "sk-test-key"
REQUEST = ProviderRequest(system="You repair cells.", user="Fix it.", max_tokens=64)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


class _Client:
    """Stands in for an SDK client in the helper's own tests: a base URL and close()."""

    def __init__(self, base_url: str, fail_on_close: bool = False) -> None:
        self.base_url = base_url
        self.closed = False
        self.fail_on_close = fail_on_close

    def close(self) -> None:
        self.closed = True
        if self.fail_on_close:
            raise OSError("connection reset while closing")


def test_threads_asking_at_once_share_one_client() -> None:
    made: list[_Client] = []

    def make() -> _Client:
        time.sleep(0.05)  # wide enough for every thread to be waiting
        made.append(_Client("http://127.0.0.1:1/"))
        return made[-1]

    lazy = LazyClient(make)
    got: list[_Client] = []
    threads = [threading.Thread(target=lambda: got.append(lazy.get())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and got == made * 8


def test_close_closes_and_the_next_get_makes_a_new_client() -> None:
    lazy = LazyClient(lambda: _Client("http://127.0.0.1:1/", fail_on_close=True))
    assert lazy.current is None and lazy.base_url("http://configured") == "http://configured"
    first = lazy.get()
    assert lazy.current is first and lazy.base_url("http://configured") == "http://127.0.0.1:1"
    lazy.close()  # the client's own error while closing is not the caller's problem
    assert first.closed and lazy.current is None
    assert lazy.get() is not first
    lazy.close()
    lazy.close()  # closing twice is harmless


def test_a_failed_make_leaves_no_client_and_is_tried_again() -> None:
    attempts: list[int] = []

    def make() -> _Client:
        attempts.append(1)
        if len(attempts) == 1:
            raise ProviderConfigError("no key yet")
        return _Client("http://127.0.0.1:1")

    lazy = LazyClient(make)
    with pytest.raises(ProviderConfigError, match="no key yet"):
        lazy.get()
    assert lazy.current is None
    assert isinstance(lazy.get(), _Client) and len(attempts) == 2


# -- through both providers and their real SDKs ----------------------------------------------------


def _openai_provider(**kwargs: Any) -> Any:
    pytest.importorskip("openai")
    from nbrefine.providers.openai_compat import OpenAIProvider

    return OpenAIProvider("qwen2.5-coder:7b", **kwargs)


@pytest.mark.parametrize(
    ("make", "sdk"),
    [(AnthropicProvider, "Anthropic"), (_openai_provider, "openai")],
    ids=["anthropic", "openai"],
)
def test_a_base_url_the_sdk_refuses_is_a_one_line_config_error(make: Any, sdk: str) -> None:
    provider = make(api_key=KEY, base_url="::::", max_retries=0, timeout=2)  # construction never fails
    with pytest.raises(ProviderConfigError) as info:
        provider.complete(REQUEST)
    message = str(info.value)
    assert message.startswith(f"could not set up the {sdk} client for ::::: "), message
    assert "\n" not in message and info.value.__cause__ is not None
    assert provider._sdk.current is None


@pytest.fixture
def fake_openai() -> Iterator[Any]:
    pytest.importorskip("openai")
    from fakes.openai_api import FakeOpenAI

    with FakeOpenAI() as server:
        yield server


def test_openai_client_is_made_once_reused_and_made_again_after_close(fake_openai: Any) -> None:
    fake_openai.script({"text": "one"}, {"text": "two"}, {"text": "three"})
    provider = _openai_provider(api_key=KEY, base_url=fake_openai.base_url, max_retries=0, timeout=10)
    try:
        assert provider.complete(REQUEST).text == "one"
        client = provider._sdk.current
        assert client is not None and provider.base_url == fake_openai.base_url.rstrip("/")
        assert provider.complete(REQUEST).text == "two"
        assert provider._sdk.current is client
        provider.close()
        assert provider._sdk.current is None
        assert provider.complete(REQUEST).text == "three"
        assert provider._sdk.current is not client
    finally:
        provider.close()


def test_anthropic_key_set_after_the_provider_was_made_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeAnthropic() as fake:
        fake.script({"text": "late key"})
        provider = AnthropicProvider(base_url=fake.base_url, max_retries=0, timeout=10)
        try:
            with pytest.raises(ProviderConfigError, match="no Anthropic API key"):
                provider.complete(REQUEST)
            monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
            assert provider.complete(REQUEST).text == "late key"
        finally:
            provider.close()

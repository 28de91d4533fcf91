"""OpenAIProvider (real openai SDK) against the loopback fake in tests/fakes/openai_api.py."""

from __future__ import annotations

import json
import sys
import time
import typing
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

openai = pytest.importorskip("openai")

from fakes.openai_api import FakeOpenAI  # noqa: E402

from nbrefine._errors import (  # noqa: E402
    ProviderAuthError,
    ProviderConfigError,
    ProviderError,
    ProviderOverloadedError,
    ProviderRateLimitError,
    ProviderReplyError,
    ProviderTimeoutError,
    ProviderUnavailableError,
)
from nbrefine.providers import openai_compat  # noqa: E402
from nbrefine.providers.base import Provider, ProviderRequest  # noqa: E402
from nbrefine.providers.openai_compat import (  # noqa: E402
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    NO_KEY_PLACEHOLDER,
    OpenAIProvider,
)

pytestmark = pytest.mark.timeout(60)

KEY = "sk-test-key"
MODEL = "qwen2.5-coder:7b"
SYSTEM = "You repair Python notebook cells. Answer with one fenced code block."
USER = "The cell `df.groupby('a').sum()` raised KeyError: 'a'. Fix it."
CODE_REPLY = "The column is named 'A'.\n\n```python\ndf.groupby('A').sum()\n```\n"
REQUEST = ProviderRequest(system=SYSTEM, user=USER, max_tokens=512)

_ENV = [
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ADMIN_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_WEBHOOK_SECRET",
    "OPENAI_CUSTOM_HEADERS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


_made: list[OpenAIProvider] = []


@pytest.fixture(autouse=True)
def _close_providers() -> Iterator[None]:
    yield
    while _made:
        _made.pop().close()


def make(model: str | None = MODEL, **kwargs: Any) -> OpenAIProvider:
    provider = OpenAIProvider(model, **kwargs)
    _made.append(provider)
    return provider


def provider_for(fake: FakeOpenAI, model: str | None = MODEL, **kwargs: Any) -> OpenAIProvider:
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("timeout", 10.0)
    return make(model, base_url=fake.base_url, **kwargs)


def assert_one_line(message: str) -> None:
    assert message, "empty error message"
    assert "\n" not in message and "\r" not in message, repr(message)
    assert message == message.strip()


def http(fake: FakeOpenAI, method: str, path: str, payload: Any = None) -> tuple[int, Any]:
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{fake.port}{path}", data=data, method=method)
    req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


# -- replies -----------------------------------------------------------------------------------


def test_streams_text_usage_and_chunks(fake: FakeOpenAI) -> None:
    fake.script({"text": CODE_REPLY, "chunk_size": 7, "prompt_tokens": 42, "completion_tokens": 17})
    provider = provider_for(fake)
    assert isinstance(provider, Provider)
    assert provider.name == "openai"
    chunks: list[str] = []

    reply = provider.complete(REQUEST, on_text=chunks.append)

    assert reply.text == CODE_REPLY
    assert chunks == [CODE_REPLY[i : i + 7] for i in range(0, len(CODE_REPLY), 7)]
    assert (reply.input_tokens, reply.output_tokens) == (42, 17)
    assert reply.stop_reason == "stop"
    assert reply.model == MODEL
    assert str(reply.extra["id"]).startswith("chatcmpl-")
    assert reply.extra["usage_reported"] is True
    assert str(reply.extra["request_id"]).startswith("req-")


def test_request_carries_model_messages_and_limits(fake: FakeOpenAI) -> None:
    fake.script({"text": "ok"})
    provider_for(fake).complete(REQUEST)

    (sent,) = fake.requests
    assert (sent["method"], sent["path"]) == ("POST", "/v1/chat/completions")
    assert sent["headers"]["authorization"] == f"Bearer {KEY}"
    body = sent["json"]
    assert body["model"] == MODEL
    assert body["messages"] == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    assert body["max_tokens"] == 512 and "max_completion_tokens" not in body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_openai_api_gets_max_completion_tokens(fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    # The OpenAI API deprecated max_tokens; pretend the fake is it (the only thing that changes).
    monkeypatch.setattr(openai_compat, "is_official", lambda url: True)
    fake.script({"text": "ok"})
    assert provider_for(fake).complete(REQUEST).text == "ok"
    body = fake.requests[0]["json"]
    assert body["max_completion_tokens"] == 512 and "max_tokens" not in body


def test_usage_on_the_finish_chunk_and_no_usage(fake: FakeOpenAI) -> None:
    fake.script(
        {"text": "ollama style", "usage_in_last_chunk": True, "prompt_tokens": 5, "completion_tokens": 3},
        {"text": "no usage", "usage": False},
    )
    provider = provider_for(fake)
    first = provider.complete(REQUEST)
    assert (first.text, first.input_tokens, first.output_tokens) == ("ollama style", 5, 3)
    second = provider.complete(REQUEST)
    assert (second.text, second.input_tokens, second.output_tokens) == ("no usage", 0, 0)
    assert second.extra["usage_reported"] is False


def test_length_finish_reason_is_reported(fake: FakeOpenAI) -> None:
    fake.script({"text": "```python\nx = ", "finish_reason": "length", "model": "served-name"})
    reply = provider_for(fake).complete(REQUEST)
    assert (reply.stop_reason, reply.model) == ("length", "served-name")


def test_local_server_without_a_key(fake: FakeOpenAI) -> None:
    fake.script({"text": "no auth needed"})
    provider = make(base_url=fake.base_url, max_retries=0, timeout=10)  # no api_key, none in env
    assert provider.complete(REQUEST).text == "no auth needed"
    assert fake.requests[0]["headers"]["authorization"] == f"Bearer {NO_KEY_PLACEHOLDER}"


def test_base_url_and_key_from_the_environment(fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = make(max_retries=0, timeout=10)  # the environment is read at the first request
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    fake.script({"text": "env"})
    assert provider.complete(REQUEST).text == "env"
    assert provider.base_url == fake.base_url
    assert fake.requests[0]["headers"]["authorization"] == "Bearer sk-from-env"


def test_keyed_server_checks_the_key() -> None:
    with FakeOpenAI(api_key="the-right-key") as fake:
        with pytest.raises(ProviderAuthError, match="401") as info:
            provider_for(fake, api_key="a-wrong-key").complete(REQUEST)
        assert "OPENAI_API_KEY" in str(info.value) and "invalid_api_key" in str(info.value)
        assert isinstance(info.value, PermissionError)
        assert_one_line(str(info.value))
        fake.script({"text": "welcome"})
        assert provider_for(fake, api_key="the-right-key").complete(REQUEST).text == "welcome"


# -- configuration errors -----------------------------------------------------------------------


def test_no_model_for_a_local_server_is_a_config_error(fake: FakeOpenAI) -> None:
    provider = make(None, base_url=fake.base_url)  # construction never fails
    assert provider.model == ""
    with pytest.raises(ProviderConfigError) as info:
        provider.complete(REQUEST)
    message = str(info.value)
    assert "--model" in message and "Refine.model" in message and fake.base_url in message
    assert_one_line(message)
    assert fake.requests == []


def test_openai_api_defaults_the_model_but_needs_a_key() -> None:
    provider = make(None)
    assert provider.base_url == DEFAULT_BASE_URL
    assert provider.model == DEFAULT_MODEL
    assert DEFAULT_MODEL in typing.get_args(openai.types.ChatModel)
    with pytest.raises(ProviderConfigError) as info:
        provider.complete(REQUEST)  # fails before any network use
    assert "OPENAI_API_KEY" in str(info.value)
    assert_one_line(str(info.value))
    assert info.value.__cause__ is None


def test_missing_sdk_is_a_config_error(fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` now raises ImportError
    provider = provider_for(fake)  # construction does not import the SDK
    with pytest.raises(ProviderConfigError) as info:
        provider.complete(REQUEST)
    assert str(info.value) == "the openai provider needs the openai package: pip install 'nbrefine[openai]'"
    assert fake.requests == []


def test_unknown_model_is_a_config_error() -> None:
    with FakeOpenAI(models=["llama3.2"]) as fake, pytest.raises(ProviderConfigError) as info:
        provider_for(fake, "llama3.3").complete(REQUEST)
    message = str(info.value)
    assert "404" in message and "'llama3.3'" in message and "model_not_found" in message
    assert_one_line(message)


# -- failures ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("specs", "error", "needle", "retries"),
    [
        pytest.param([{"status": 401}], ProviderAuthError, "401", 2, id="401"),
        pytest.param([{"status": 403}], ProviderAuthError, "403", 2, id="403"),
        pytest.param([{"status": 429, "retry_after": 0.01}] * 2, ProviderRateLimitError, "429", 1, id="429"),
        pytest.param([{"status": 500}], ProviderOverloadedError, "500", 0, id="500"),
        pytest.param([{"status": 503, "retry_after": 0.01}] * 2, ProviderOverloadedError, "503", 1, id="503"),
        pytest.param([{"status": 404}], ProviderConfigError, "404", 0, id="404"),
        pytest.param([{"status": 400, "message": "bad\nthing"}], ProviderError, "bad thing", 0, id="400"),
        pytest.param([{"fault": "reset"}], ProviderUnavailableError, "127.0.0.1", 0, id="reset"),
        pytest.param([{"fault": "cut", "text": CODE_REPLY}], ProviderReplyError, "cut off", 0, id="cut"),
        pytest.param(
            [{"fault": "early_end", "text": CODE_REPLY}],
            ProviderReplyError,
            "finish_reason",
            0,
            id="early-end",
        ),
        pytest.param([{"fault": "malformed"}], ProviderReplyError, "malformed", 0, id="malformed"),
        pytest.param(
            [{"fault": "malformed", "body": "<html>bad gateway</html>"}],
            ProviderReplyError,
            "finish_reason",
            0,
            id="not-sse",
        ),
        pytest.param(
            [{"fault": "stream_error", "text": CODE_REPLY}],
            ProviderOverloadedError,
            "server_error",
            0,
            id="mid-stream-error",
        ),
    ],
)
def test_errors_map_to_one_line_nbrefine_errors(
    fake: FakeOpenAI, specs: list[dict[str, Any]], error: type[ProviderError], needle: str, retries: int
) -> None:
    fake.script(*specs)
    provider = provider_for(fake, max_retries=retries)

    with pytest.raises(ProviderError) as info:
        provider.complete(REQUEST)

    assert type(info.value) is error, f"{type(info.value).__name__}: {info.value}"
    assert needle in str(info.value)
    assert_one_line(str(info.value))
    assert len(fake.requests) == len(specs)  # retried statuses took the next spec; others did not
    assert fake.pending == 0


def test_429_then_success_is_retried_by_the_sdk(fake: FakeOpenAI) -> None:
    fake.script({"status": 429, "retry_after": 0.01}, {"text": CODE_REPLY})
    assert provider_for(fake, max_retries=2).complete(REQUEST).text == CODE_REPLY
    assert [r["headers"]["x-stainless-retry-count"] for r in fake.requests] == ["0", "1"]


def test_rate_limit_error_mentions_retries_and_retry_after(fake: FakeOpenAI) -> None:
    fake.script({"status": 429, "retry_after": 0.01}, {"status": 429, "retry_after": 0.01})
    with pytest.raises(ProviderRateLimitError) as info:
        provider_for(fake, max_retries=1).complete(REQUEST)
    assert "after 1 retry" in str(info.value)
    assert "retry after 0.01 s" in str(info.value)
    assert "rate_limit_exceeded" in str(info.value)


def test_cut_stream_delivered_the_pieces_before_the_cut(fake: FakeOpenAI) -> None:
    fake.script({"fault": "cut", "text": CODE_REPLY, "chunk_size": 5, "cut_after": 2})
    chunks: list[str] = []
    with pytest.raises(ProviderReplyError, match="after 10 characters"):
        provider_for(fake).complete(REQUEST, on_text=chunks.append)
    assert chunks == [CODE_REPLY[:5], CODE_REPLY[5:10]]


def test_slow_reply_past_the_timeout(fake: FakeOpenAI) -> None:
    fake.script({"fault": "slow", "delay": 3, "text": "too late"})
    start = time.monotonic()
    with pytest.raises(ProviderTimeoutError, match=r"0\.5 s") as info:
        provider_for(fake, timeout=0.5).complete(REQUEST)
    assert time.monotonic() - start < 2.5
    assert_one_line(str(info.value))
    assert isinstance(info.value, TimeoutError)


def test_stream_stalling_mid_reply_is_a_timeout(fake: FakeOpenAI) -> None:
    fake.script({"text": CODE_REPLY, "chunk_size": 8, "chunk_delay": 2.0})
    with pytest.raises(ProviderTimeoutError, match="rest of the reply") as info:
        provider_for(fake, timeout=0.5).complete(REQUEST)
    assert_one_line(str(info.value))


def test_nothing_listening_is_unavailable() -> None:
    with FakeOpenAI() as fake:
        base_url = fake.base_url
    provider = make(api_key=KEY, base_url=base_url, max_retries=0, timeout=2)
    with pytest.raises(ProviderUnavailableError) as info:
        provider.complete(REQUEST)
    assert base_url in str(info.value)
    assert_one_line(str(info.value))


def test_errors_raised_by_on_text_propagate_unchanged(fake: FakeOpenAI) -> None:
    fake.script({"text": CODE_REPLY})

    class Stop(Exception):
        pass

    def on_text(piece: str) -> None:
        raise Stop(piece)

    with pytest.raises(Stop):
        provider_for(fake).complete(REQUEST, on_text=on_text)


def test_sdk_exception_is_kept_as_the_cause(fake: FakeOpenAI) -> None:
    fake.script({"status": 500})
    with pytest.raises(ProviderOverloadedError) as info:
        provider_for(fake).complete(REQUEST)
    assert isinstance(info.value.__cause__, openai.APIStatusError)


# -- the fake itself ---------------------------------------------------------------------------


def test_non_streaming_json_with_the_raw_sdk(fake: FakeOpenAI) -> None:
    fake.script({"text": CODE_REPLY})
    with openai.OpenAI(api_key=KEY, base_url=fake.base_url, max_retries=0, timeout=10) as client:
        completion = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": USER}], max_tokens=100
        )
        models = [m.id for m in client.models.list()]
    assert completion.choices[0].message.content == CODE_REPLY
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.prompt_tokens == len(USER) // 4
    assert models == ["fake-model"]
    assert "stream" not in fake.requests[0]["json"]


def test_control_endpoints_over_http(fake: FakeOpenAI) -> None:
    status, body = http(fake, "POST", "/_fake/script", [{"text": "via http"}, {"status": 500}])
    assert (status, body["queued"]) == (200, 2)
    assert http(fake, "GET", "/_fake/state") == (200, {"pending": 2, "requests": 0})
    provider = provider_for(fake)
    assert provider.complete(REQUEST).text == "via http"
    with pytest.raises(ProviderOverloadedError):
        provider.complete(REQUEST)
    status, requests = http(fake, "GET", "/_fake/requests")
    assert status == 200 and len(requests) == 2
    assert http(fake, "POST", "/_fake/reset") == (200, {"ok": True})
    assert http(fake, "GET", "/_fake/requests") == (200, [])
    assert http(fake, "POST", "/_fake/script", [1, 2])[0] == 400


def test_invalid_request_body_gets_400(fake: FakeOpenAI) -> None:
    status, body = http(fake, "POST", "/v1/chat/completions", {"model": MODEL})
    assert status == 400 and body["error"]["type"] == "invalid_request_error"

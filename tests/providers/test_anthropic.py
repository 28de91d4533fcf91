"""AnthropicProvider (real SDK) against the loopback fake in tests/fakes/anthropic_api.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic._data import DEPRECATED_MODELS
from fakes.anthropic_api import FakeAnthropic

from nbrefine._errors import (
    ProviderAuthError,
    ProviderConfigError,
    ProviderError,
    ProviderOverloadedError,
    ProviderRateLimitError,
    ProviderReplyError,
    ProviderTimeoutError,
    ProviderUnavailableError,
)
from nbrefine.providers.anthropic import DEFAULT_MODEL, AnthropicProvider
from nbrefine.providers.base import Provider, ProviderRequest

pytestmark = pytest.mark.timeout(60)

KEY = "sk-ant-test-key"
SYSTEM = "You repair Python notebook cells. Answer with one fenced code block."
USER = "The cell `df.groupby('a').sum()` raised KeyError: 'a'. Fix it."
CODE_REPLY = "The column is named 'A'.\n\n```python\ndf.groupby('A').sum()\n```\n"
REQUEST = ProviderRequest(system=SYSTEM, user=USER, max_tokens=512)

_ENV = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR",
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
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


_made: list[AnthropicProvider] = []


@pytest.fixture(autouse=True)
def _close_providers() -> Iterator[None]:
    yield
    while _made:
        _made.pop().close()


def make(**kwargs: Any) -> AnthropicProvider:
    """An AnthropicProvider that is closed when the test ends (no leaked keep-alive sockets)."""
    provider = AnthropicProvider(**kwargs)
    _made.append(provider)
    return provider


def provider_for(fake: FakeAnthropic, **kwargs: Any) -> AnthropicProvider:
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("timeout", 10.0)
    return make(base_url=fake.base_url, **kwargs)


def assert_one_line(message: str) -> None:
    assert message, "empty error message"
    assert "\n" not in message and "\r" not in message, repr(message)
    assert message == message.strip()


def sent_key(headers: dict[str, str]) -> str | None:
    """The API key a request carried: ``x-api-key``, or the ``Bearer`` token SDK 2.x sends."""
    if headers.get("x-api-key"):
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None


def http(fake: FakeAnthropic, method: str, path: str, payload: Any = None, **headers: str) -> tuple[int, Any]:
    return http_url(fake.base_url, method, path, payload, **headers)


def http_url(base_url: str, method: str, path: str, payload: Any = None, **headers: str) -> tuple[int, Any]:
    """Call the fake over plain HTTP (as a test in another process, e.g. a kernel, would)."""
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(base_url + path, data=data, method=method)
    req.add_header("content-type", "application/json")
    for name, value in headers.items():
        req.add_header(name.replace("_", "-"), value)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


# -- the happy path ----------------------------------------------------------------------------


def test_streamed_reply_text_usage_and_chunks(fake: FakeAnthropic) -> None:
    fake.script({"text": CODE_REPLY, "chunk_size": 10})
    provider = provider_for(fake)
    assert isinstance(provider, Provider)
    chunks: list[str] = []

    reply = provider.complete(REQUEST, on_text=chunks.append)

    assert reply.text == CODE_REPLY
    assert "".join(chunks) == CODE_REPLY
    assert len(chunks) >= 3
    assert reply.model == DEFAULT_MODEL
    assert reply.stop_reason == "end_turn"
    assert reply.input_tokens == (len(SYSTEM) + len(USER)) // 4
    assert reply.output_tokens == -(-len(CODE_REPLY) // 4)
    assert str(reply.extra["id"]).startswith("msg_")


def test_request_carries_model_system_user_max_tokens_and_key(fake: FakeAnthropic) -> None:
    fake.script({"text": "ok"})
    provider_for(fake, model="claude-opus-5").complete(REQUEST)

    (req,) = fake.requests
    assert req["method"] == "POST" and req["path"] == "/v1/messages"
    body = req["json"]
    assert body["model"] == "claude-opus-5"
    assert body["system"] == [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": USER}]}]
    assert body["max_tokens"] == 512
    assert body["stream"] is True
    assert sent_key(req["headers"]) == KEY
    assert req["headers"]["anthropic-version"]


def test_key_and_base_url_from_environment(fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    fake.script({"text": "from env"})

    provider = make(max_retries=0)
    assert provider.name == "anthropic" and provider.model == DEFAULT_MODEL
    assert provider.complete(REQUEST).text == "from env"
    (req,) = fake.requests
    assert sent_key(req["headers"]) == "sk-from-env"
    assert req["json"]["model"] == DEFAULT_MODEL


def test_default_model_is_current() -> None:
    assert DEFAULT_MODEL not in DEPRECATED_MODELS


def test_client_is_created_once_and_reused(fake: FakeAnthropic) -> None:
    fake.script({"text": "one"}, {"text": "two"})
    provider = provider_for(fake)
    assert provider.complete(REQUEST).text == "one"
    client = provider._client
    assert client is not None
    assert provider.complete(REQUEST).text == "two"
    assert provider._client is client
    provider.close()
    assert provider._client is None
    fake.script({"text": "three"})
    assert provider.complete(REQUEST).text == "three"  # reopens after close()


def test_default_reply_when_queue_is_empty(fake: FakeAnthropic) -> None:
    provider = provider_for(fake)
    reply = provider.complete(REQUEST)
    assert reply.text == "no scripted reply left" and "```" not in reply.text
    fake.default = {"text": "fallback", "stop_reason": "max_tokens"}
    reply = provider.complete(REQUEST)
    assert (reply.text, reply.stop_reason) == ("fallback", "max_tokens")


def test_json_mode_with_raw_sdk_create(fake: FakeAnthropic) -> None:
    fake.script({"text": CODE_REPLY})
    with anthropic.Anthropic(api_key=KEY, base_url=fake.base_url, max_retries=0, timeout=10) as client:
        message = client.messages.create(
            model="claude-haiku-5-5",
            max_tokens=100,
            system=SYSTEM,
            messages=[{"role": "user", "content": USER}],
        )

    assert isinstance(message, anthropic.types.Message)
    assert message.id.startswith("msg_") and message.type == "message" and message.role == "assistant"
    assert message.model == "claude-haiku-5-5"
    assert [(b.type, getattr(b, "text", None)) for b in message.content] == [("text", CODE_REPLY)]
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens == (len(SYSTEM) + len(USER)) // 4
    assert message.usage.output_tokens > 0
    assert "stream" not in fake.requests[0]["json"]


# -- failures ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("specs", "error", "needle", "retries"),
    [
        pytest.param([{"status": 401}], ProviderAuthError, "401", 2, id="401"),
        pytest.param([{"status": 403}], ProviderAuthError, "403", 2, id="403"),
        pytest.param([{"status": 429, "retry_after": 0.01}] * 2, ProviderRateLimitError, "429", 1, id="429"),
        pytest.param([{"status": 529}], ProviderOverloadedError, "529", 0, id="529"),
        pytest.param([{"status": 500}], ProviderOverloadedError, "500", 0, id="500"),
        pytest.param([{"status": 404}], ProviderConfigError, "404", 0, id="404"),
        pytest.param([{"status": 400, "message": "bad\nthing"}], ProviderError, "400", 0, id="400"),
        pytest.param([{"fault": "reset"}], ProviderUnavailableError, "127.0.0.1", 0, id="reset"),
        pytest.param([{"fault": "cut", "text": CODE_REPLY}], ProviderReplyError, "cut off", 0, id="cut"),
        pytest.param([{"fault": "malformed"}], ProviderReplyError, "malformed", 0, id="malformed"),
        pytest.param(
            [{"fault": "malformed", "body": "<html>bad gateway</html>"}],
            ProviderReplyError,
            "message_stop",
            0,
            id="not-sse",
        ),
        pytest.param(
            [{"fault": "stream_error", "text": CODE_REPLY}],
            ProviderOverloadedError,
            "overloaded_error",
            0,
            id="mid-stream-error",
        ),
    ],
)
def test_errors_map_to_one_line_nbrefine_errors(
    fake: FakeAnthropic, specs: list[dict[str, Any]], error: type[ProviderError], needle: str, retries: int
) -> None:
    fake.script(*specs)
    provider = provider_for(fake, max_retries=retries)

    with pytest.raises(ProviderError) as info:
        provider.complete(REQUEST)

    assert type(info.value) is error, f"{type(info.value).__name__}: {info.value}"
    assert needle in str(info.value)
    assert_one_line(str(info.value))
    # Retrying statuses are retried by the SDK, each retry taking the next spec; others are not.
    assert len(fake.requests) == len(specs)
    assert fake.pending == 0


def test_401_message_points_at_the_key(fake: FakeAnthropic) -> None:
    fake.script({"status": 401})
    with pytest.raises(ProviderAuthError, match="ANTHROPIC_API_KEY") as info:
        provider_for(fake).complete(REQUEST)
    assert "invalid x-api-key" in str(info.value)
    assert isinstance(info.value, PermissionError)  # the built-in it also is


def test_wrong_key_is_rejected_by_a_keyed_fake() -> None:
    with FakeAnthropic(api_key="the-right-key") as fake:
        with pytest.raises(ProviderAuthError, match="401"):
            provider_for(fake, api_key="a-wrong-key").complete(REQUEST)
        fake.script({"text": "welcome"})
        assert provider_for(fake, api_key="the-right-key").complete(REQUEST).text == "welcome"


def test_429_then_success_is_retried_by_the_sdk(fake: FakeAnthropic) -> None:
    fake.script({"status": 429, "retry_after": 0.01}, {"text": CODE_REPLY})
    reply = provider_for(fake, max_retries=2).complete(REQUEST)
    assert reply.text == CODE_REPLY
    assert [r["headers"]["x-stainless-retry-count"] for r in fake.requests] == ["0", "1"]


def test_rate_limit_error_mentions_retry_after(fake: FakeAnthropic) -> None:
    fake.script({"status": 429, "retry_after": 0}, {"status": 429, "retry_after": 0.01})
    with pytest.raises(ProviderRateLimitError) as info:
        provider_for(fake, max_retries=1).complete(REQUEST)
    assert "after 1 retry" in str(info.value)  # the retries the SDK really made
    assert "retry after 0.01 s" in str(info.value)  # from the last answer's retry-after header


def test_cut_stream_delivered_the_pieces_before_the_cut(fake: FakeAnthropic) -> None:
    fake.script({"fault": "cut", "text": CODE_REPLY, "chunk_size": 5, "cut_after": 2})
    chunks: list[str] = []
    with pytest.raises(ProviderReplyError, match="after 10 characters"):
        provider_for(fake).complete(REQUEST, on_text=chunks.append)
    assert chunks == [CODE_REPLY[:5], CODE_REPLY[5:10]]


def test_slow_reply_past_the_timeout(fake: FakeAnthropic) -> None:
    fake.script({"fault": "slow", "delay": 3, "text": "too late"})
    start = time.monotonic()
    with pytest.raises(ProviderTimeoutError, match=r"0\.5 s") as info:
        provider_for(fake, timeout=0.5).complete(REQUEST)
    assert time.monotonic() - start < 2.5
    assert_one_line(str(info.value))
    assert isinstance(info.value, TimeoutError)


def test_stream_stalling_mid_reply_is_a_timeout(fake: FakeAnthropic) -> None:
    fake.script({"text": CODE_REPLY, "chunk_size": 8, "chunk_delay": 2.0})
    with pytest.raises(ProviderTimeoutError, match="rest of the reply") as info:
        provider_for(fake, timeout=0.5).complete(REQUEST)
    assert_one_line(str(info.value))


def test_slow_reply_within_the_timeout(fake: FakeAnthropic) -> None:
    fake.script({"fault": "slow", "delay": 0.3, "text": "in time"})
    assert provider_for(fake, timeout=5).complete(REQUEST).text == "in time"


def test_nothing_listening_is_unavailable() -> None:
    with FakeAnthropic() as fake:
        base_url = fake.base_url
    provider = make(api_key=KEY, base_url=base_url, max_retries=0, timeout=2)
    with pytest.raises(ProviderUnavailableError) as info:
        provider.complete(REQUEST)
    assert base_url in str(info.value)
    assert_one_line(str(info.value))


def test_no_api_key_is_a_config_error(fake: FakeAnthropic) -> None:
    provider = make(base_url=fake.base_url)  # construction never fails
    with pytest.raises(ProviderConfigError) as info:
        provider.complete(REQUEST)
    message = str(info.value)
    assert "ANTHROPIC_API_KEY" in message and "Refine.provider" in message
    assert_one_line(message)
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert fake.requests == []


def test_errors_raised_by_on_text_propagate_unchanged(fake: FakeAnthropic) -> None:
    fake.script({"text": CODE_REPLY})

    class Stop(Exception):
        pass

    def on_text(piece: str) -> None:
        raise Stop(piece)

    with pytest.raises(Stop):
        provider_for(fake).complete(REQUEST, on_text=on_text)


def test_sdk_exception_is_kept_as_the_cause(fake: FakeAnthropic) -> None:
    fake.script({"status": 529})
    with pytest.raises(ProviderOverloadedError) as info:
        provider_for(fake).complete(REQUEST)
    assert isinstance(info.value.__cause__, anthropic.APIStatusError)


# -- the fake itself ---------------------------------------------------------------------------


def test_control_endpoints_over_http(fake: FakeAnthropic) -> None:
    status, body = http(fake, "POST", "/_fake/script", [{"text": "via http"}, {"status": 529}])
    assert (status, body["queued"]) == (200, 2)
    assert http(fake, "GET", "/_fake/state") == (200, {"pending": 2, "requests": 0})

    provider = provider_for(fake)
    assert provider.complete(REQUEST).text == "via http"
    with pytest.raises(ProviderOverloadedError):
        provider.complete(REQUEST)

    status, requests = http(fake, "GET", "/_fake/requests")
    assert status == 200 and len(requests) == 2
    assert requests[0]["json"]["messages"][0]["content"] == [{"type": "text", "text": USER}]
    assert sent_key(requests[0]["headers"]) == KEY

    assert http(fake, "POST", "/_fake/script", {"text": "single spec"})[1]["queued"] == 1
    assert http(fake, "POST", "/_fake/reset") == (200, {"ok": True})
    assert http(fake, "GET", "/_fake/requests") == (200, [])
    assert fake.pending == 0
    assert http(fake, "POST", "/_fake/script", {"not": "a list"})[0] == 200  # a single spec is accepted
    assert http(fake, "POST", "/_fake/script", [1, 2])[0] == 400


def test_missing_api_key_gets_401_and_consumes_nothing(fake: FakeAnthropic) -> None:
    fake.script({"text": "kept"})
    payload = {"model": DEFAULT_MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    status, body = http(fake, "POST", "/v1/messages", payload)
    assert status == 401
    assert body["type"] == "error"
    assert body["error"] == {"type": "authentication_error", "message": "invalid x-api-key"}
    assert fake.pending == 1

    status, body = http(fake, "POST", "/v1/messages", payload, x_api_key=KEY)
    assert status == 200 and body["content"][0]["text"] == "kept"


def test_invalid_request_body_gets_400(fake: FakeAnthropic) -> None:
    status, body = http(fake, "POST", "/v1/messages", {"model": DEFAULT_MODEL}, x_api_key=KEY)
    assert status == 400 and body["error"]["type"] == "invalid_request_error"


def test_stop_does_not_wait_for_a_slow_reply() -> None:
    fake = FakeAnthropic().start()
    fake.script({"fault": "slow", "delay": 30, "text": "never"})
    with pytest.raises(ProviderTimeoutError):
        provider_for(fake, timeout=0.3).complete(REQUEST)
    start = time.monotonic()
    fake.stop()
    assert time.monotonic() - start < 2
    fake.stop()  # idempotent


def test_cli_serves_replies_until_terminated(tmp_path: Path) -> None:
    replies = tmp_path / "replies.json"
    replies.write_text(
        json.dumps({"replies": [{"text": "from the cli"}], "default": {"text": "cli default"}})
    )
    port_file = tmp_path / "url.txt"
    proc = subprocess.Popen(  # the fake's command line, run from tests/ as python -m fakes.anthropic_api
        [
            sys.executable,
            "-m",
            "fakes.anthropic_api",
            "--replies",
            str(replies),
            "--port-file",
            str(port_file),
        ],
        cwd=Path(__file__).resolve().parents[1],
        env={k: v for k, v in os.environ.items() if k not in _ENV},
    )
    try:
        deadline = time.monotonic() + 15
        while not port_file.exists():
            assert proc.poll() is None, "fake server exited early"
            assert time.monotonic() < deadline, "no port file"
            time.sleep(0.05)
        base_url = port_file.read_text().strip()
        assert base_url.startswith("http://127.0.0.1:")

        provider = make(api_key=KEY, base_url=base_url, max_retries=0, timeout=5)
        assert provider.complete(REQUEST).text == "from the cli"
        assert provider.complete(REQUEST).text == "cli default"
        status, body = http_url(base_url, "POST", "/_fake/script", [{"text": "scripted over http"}])
        assert status == 200 and body["pending"] == 1
        assert provider.complete(REQUEST).text == "scripted over http"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_prompt_caching_of_the_stable_part_is_read_on_later_attempts(fake: FakeAnthropic) -> None:
    """The real loop, the real SDK: attempt 1 writes the repeated part of the prompt to the
    cache, attempt 2 reads it (the fake caches like the API, here from 50 tokens on)."""
    from nbrefine.engine import LoopConfig, RepairTask, refine
    from nbrefine.grounding import Redactor
    from nbrefine.grounding.capture import Failure
    from nbrefine.sandbox import LiveForkRunner

    fake.min_cache_tokens = 50
    fake.script({"text": "```python\nx = y2\n```"}, {"text": "```python\nx = 1\n```"})
    code = "x = y\n" + "# a long cell\n" * 40
    task = RepairTask(
        code=code, failures=(Failure("NameError", "name 'y' is not defined", lineno=1, line="x = y"),)
    )
    result = refine(
        task, provider_for(fake), LiveForkRunner({}, Redactor(environ={})), Redactor(environ={}), LoopConfig()
    )
    assert result.status == "fixed"
    first, second = (attempt.reply for attempt in result.attempts)
    assert first.cache_write_tokens > 0 and first.cache_read_tokens == 0
    assert second.cache_read_tokens == first.cache_write_tokens  # the cell, failure and state: read
    assert second.input_tokens > 0  # the attempt's own feedback is new
    body = fake.requests[1]["json"]
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}

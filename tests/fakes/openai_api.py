"""A loopback fake of an OpenAI-compatible Chat Completions server, stdlib only.

It serves ``POST /v1/chat/completions`` (streamed server-sent events or one JSON body) and
``GET /v1/models``, the way the OpenAI API and the servers that imitate it (Ollama, vLLM,
LM Studio, llama.cpp) do. Use it in-process::

    with FakeOpenAI() as fake:
        fake.script({"text": "```python\\nprint(1)\\n```"}, {"status": 500})
        client = openai.OpenAI(api_key="sk-test", base_url=fake.base_url)   # base_url ends in /v1
        ...
        assert fake.requests[0]["json"]["model"] == "llama3.2"

or as a separate process::

    cd tests && python -m fakes.openai_api --replies replies.json --port-file /tmp/fake.url

which writes ``http://127.0.0.1:PORT/v1`` to the port file (or prints it) and serves until
SIGTERM/SIGINT. Control endpoints (never recorded in ``requests``, no key needed):
``POST /_fake/script`` (a JSON list of reply specs, or one spec), ``GET /_fake/requests``,
``GET /_fake/state`` (``{"pending", "requests"}``), ``POST /_fake/reset``.

Reply specs
-----------
Each API request takes the next queued spec; when none is left the *default* spec answers
(``{"text": "no scripted reply left"}`` unless changed).

``{"text": "..."}``
    A normal reply. A request with ``"stream": true`` gets ``data: {chunk}`` events: a first
    chunk with ``delta.role``, content deltas of ``chunk_size`` characters (default 12), a chunk
    with ``finish_reason`` (default ``"stop"``), then, if the request asked for
    ``stream_options.include_usage``, a chunk with empty ``choices`` and ``usage``, and finally
    ``data: [DONE]``. Other requests get one ``chat.completion`` JSON body. Optional keys:
    ``finish_reason``, ``model`` (default: echo the request's), ``prompt_tokens`` (default
    prompt characters // 4), ``completion_tokens`` (default ceil(len(text) / 4)), ``usage``
    (``False``: never send usage, like some older local servers), ``usage_in_last_chunk``
    (``True``: put usage on the finish chunk instead of a separate one, as Ollama does),
    ``chunk_size``, ``chunk_delay`` (seconds between events), ``delay`` (before answering).
``{"status": 401}`` (also 400, 403, 404, 429, 500, 503, ...)
    An error with the OpenAI JSON error body ``{"error": {"message", "type", "param",
    "code"}}``. Optional ``retry_after`` (a ``retry-after`` header; the SDK waits a small
    positive value exactly, so use e.g. 0.01), ``error_type``, ``code``, ``message``.
``{"fault": "reset"}``
    Reads the request, then aborts the connection (TCP RST) with no response.
``{"fault": "cut", "text": "...", "cut_after": 2}``
    Streams the role chunk and ``cut_after`` content deltas, then closes the connection in the
    middle of the chunked body. A non-streaming request gets half a JSON body.
``{"fault": "early_end", "text": "...", "cut_after": 2}``
    Like ``cut``, but ends the body cleanly (no ``finish_reason``, no ``[DONE]``).
``{"fault": "slow", "delay": 3.0, "text": "..."}``
    Waits ``delay`` seconds (abandoned when the server stops), then answers like ``text``.
``{"fault": "malformed"}``
    HTTP 200 with a ``data:`` line that is not JSON (or a non-JSON body). ``body`` replaces it.
``{"fault": "stream_error", "text": "...", "error_type": "server_error"}``
    Streams ``cut_after`` deltas, then ``data: {"error": {...}}`` (as vLLM and the OpenAI API do
    when a stream fails after it began), then ``[DONE]``.

Retries: the SDK retries 408/409/429/5xx and connection errors up to ``max_retries`` times,
and each retry takes the next queued spec.

Authentication: without ``api_key`` every request is served (like a local server); with it,
only ``Authorization: Bearer <api_key>`` is, others get 401 ``invalid_api_key`` (consuming no
spec). With ``models``, a request for another model gets 404 ``model_not_found`` (consuming no
spec).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from fakes.server import DEFAULT_REPLY, FakeServer, Handler, chunks, new_id, serve

__all__ = ["DEFAULT_REPLY", "FakeOpenAI", "main"]

_ERRORS = {
    400: ("invalid_request_error", None, "Invalid request"),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-***"),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden"),
    404: ("invalid_request_error", "model_not_found", "The model does not exist"),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests"),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}


def _prompt_chars(body: Mapping[str, Any]) -> int:
    total = 0
    for message in body.get("messages") or ():
        if isinstance(message, Mapping):
            content = message.get("content", "")
            if isinstance(content, list):
                content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
            total += len(str(content))
    return total


class _Handler(Handler):
    server_version = "fake-openai/1.0"
    request_id_header = "x-request-id"
    id_sep = "-"
    faults = ("cut", "early_end", "stream_error")
    delta_kind = "content"
    end_kinds = ("finish", "usage")
    stream_trailer = b"data: [DONE]\n\n"
    _reply_id, _created = "chatcmpl-fake", 0

    def error_payload(self, status: int, spec: Mapping[str, Any]) -> Any:
        etype, code, message = _ERRORS.get(
            status, ("server_error" if status >= 500 else "invalid_request_error", None, f"HTTP {status}")
        )
        error = {
            "message": spec.get("message", message),
            "type": spec.get("error_type", etype),
            "param": None,
            "code": spec.get("code", code),
        }
        return {"error": error}

    def api(self, method: str, path: str, body: Any) -> None:
        fake = self.server.fake
        if method == "GET" and path == "/v1/models":
            models = fake.models or ["fake-model"]
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models]
            self._send_json(200, {"object": "list", "data": data})
            return
        if method != "POST" or path != "/v1/chat/completions":
            self._send_error(404, {"message": f"{method} {path} is not served by the fake", "code": None})
            return
        problem = self._invalid(body)
        if problem:
            self._send_error(400, {"message": problem})
            return
        if fake.models is not None and body["model"] not in fake.models:
            message = f"The model `{body['model']}` does not exist or you do not have access to it."
            self._send_error(404, {"message": message})
            return
        self._reply(fake._next_spec(), body)

    @staticmethod
    def _invalid(body: Any) -> str | None:
        if not isinstance(body, dict):
            return "request body must be a JSON object"
        if not isinstance(body.get("model"), str) or not body["model"]:
            return "you must provide a model parameter"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "'messages' is a required property"
        for key in ("max_tokens", "max_completion_tokens"):
            if key in body and not isinstance(body[key], int):
                return f"'{key}' must be an integer"
        return None

    # -- replies ---------------------------------------------------------------------------

    @staticmethod
    def _usage(spec: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, int]:
        prompt = int(spec.get("prompt_tokens", _prompt_chars(body) // 4))
        if "completion_tokens" in spec:
            completion = int(spec["completion_tokens"])
        else:
            completion = max(1, math.ceil(len(str(spec.get("text", ""))) / 4))
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def begin_reply(self) -> None:
        self._reply_id, self._created = new_id("chatcmpl", "-"), int(time.time())

    def _head(self, kind: str, spec: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
        """What a completion and each chunk of a streamed one begin with."""
        return {
            "id": self._reply_id,
            "object": kind,
            "created": self._created,
            "model": spec.get("model") or body.get("model"),
            "system_fingerprint": "fp_fake",
        }

    def reply_body(self, spec: Mapping[str, Any], body: Mapping[str, Any]) -> Any:
        reply: dict[str, Any] = {
            **self._head("chat.completion", spec, body),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": str(spec.get("text", "")), "refusal": None},
                    "logprobs": None,
                    "finish_reason": spec.get("finish_reason", "stop"),
                }
            ],
        }
        if spec.get("usage", True) is not False:
            reply["usage"] = self._usage(spec, body)
        return reply

    def events(self, spec: Mapping[str, Any], body: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
        """``(kind, chunk)`` for a complete streamed reply; kind is role/content/finish/usage."""
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        send_usage = include_usage and spec.get("usage", True) is not False
        in_last = bool(spec.get("usage_in_last_chunk"))

        def chunk(choices: list[dict[str, Any]], usage: Any = None) -> dict[str, Any]:
            data: dict[str, Any] = {**self._head("chat.completion.chunk", spec, body), "choices": choices}
            if include_usage:
                data["usage"] = usage
            return data

        def choice(delta: dict[str, Any], finish: Any = None) -> dict[str, Any]:
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

        yield "role", chunk([choice({"role": "assistant", "content": "", "refusal": None})])
        for piece in chunks(str(spec.get("text", "")), spec.get("chunk_size", 12)):
            if piece:
                yield "content", chunk([choice({"content": piece})])
        usage = self._usage(spec, body) if send_usage else None
        yield "finish", chunk([choice({}, spec.get("finish_reason", "stop"))], usage if in_last else None)
        if send_usage and not in_last:
            yield "usage", chunk([], usage)

    def stream_error(self, spec: Mapping[str, Any]) -> bytes:
        error = {
            "message": spec.get("message", "The server had an error while processing your request."),
            "type": spec.get("error_type", "server_error"),
            "param": None,
            "code": spec.get("code"),
        }
        return self.sse("error", {"error": error})

    def malformed_body(self, streaming: bool) -> str:
        return 'data: {"id": "chatcmpl-x", "choices": [{not json\n\n' if streaming else "{not json"


class FakeOpenAI(FakeServer):
    """A fake OpenAI-compatible server on ``127.0.0.1`` (see the module docstring). Thread-safe."""

    handler = _Handler
    name = "fake-openai"
    url_path = "/v1"

    def __init__(
        self,
        replies: Iterable[Mapping[str, Any]] = (),
        *,
        default: Mapping[str, Any] | None = None,
        api_key: str | None = None,
        models: Iterable[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(replies, default=default, api_key=api_key, host=host, port=port)
        self.models: list[str] | None = list(models) if models is not None else None

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        if self._api_key is None:
            return True
        auth = headers.get("authorization", "")
        return auth.lower().startswith("bearer ") and auth[7:].strip() == self._api_key


def main(argv: list[str] | None = None) -> int:
    return serve(
        FakeOpenAI,
        "Serve a fake OpenAI-compatible API on 127.0.0.1.",
        "accept only this key (default: no auth)",
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())

"""A loopback fake of the Anthropic Messages API (``POST /v1/messages``), stdlib only.

Use it in-process::

    with FakeAnthropic() as fake:
        fake.script({"text": "```python\\nprint(1)\\n```"}, {"status": 529})
        client = anthropic.Anthropic(api_key="sk-test", base_url=fake.base_url)
        ...
        assert fake.requests[0]["json"]["model"] == "claude-sonnet-5-5"

or as a separate process (for a Jupyter kernel, a demo script)::

    cd tests && python -m fakes.anthropic_api --replies replies.json --port-file /tmp/fake.url

which writes ``http://127.0.0.1:PORT`` to the port file (or prints it) and serves until
SIGTERM/SIGINT. A test in another process programs it over HTTP through the control
endpoints (none of them needs an API key, none is recorded in ``requests``):

* ``POST /_fake/script`` with a JSON list of reply specs (or a single spec) appends them;
* ``GET /_fake/requests`` returns the received API requests as JSON;
* ``GET /_fake/state`` returns ``{"pending": <queued specs>, "requests": <count>}``;
* ``POST /_fake/reset`` clears both the queue and the received requests.

Reply specs
-----------
A reply spec is a plain dict (so it can come from JSON). Each API request takes the next
queued spec; when the queue is empty the *default* spec answers (by default a reply whose
text is ``"no scripted reply left"``, with no code block).

``{"text": "..."}``
    A normal reply. A request with ``"stream": true`` gets real server-sent events, in the
    order the API sends them (``message_start``, ``content_block_start``, ``ping``, several
    ``content_block_delta``/``text_delta``, ``content_block_stop``, ``message_delta`` with
    the stop reason and ``usage.output_tokens``, ``message_stop``); any other request gets a
    JSON ``Message`` body. Optional keys: ``stop_reason`` (default ``"end_turn"``), ``model``
    (default: echo the request's), ``input_tokens`` (default ``len(prompt chars) // 4``),
    ``output_tokens`` (default ``max(1, len(text) // 4)``), ``chunk_size`` (characters per
    text delta, default 12), ``chunk_delay`` (seconds between streamed events, default 0),
    ``delay`` (seconds to wait before answering, any spec).
``{"status": 401}`` (also 400, 403, 404, 413, 429, 500, 503, 529, ...)
    An error with the API's JSON error body, e.g.
    ``{"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    "request_id": "req_..."}``. Optional ``retry_after`` (sent as a ``retry-after`` header),
    ``error_type``, ``message``. The SDK waits exactly a positive ``retry-after`` (floats too,
    without any cap), while ``0`` makes it fall back to its own backoff of about 0.5 s; so
    ``"retry_after": 0.01`` gives the fastest retries.
``{"fault": "reset"}``
    Reads the request, then closes the socket abruptly (``SO_LINGER`` 0, so a TCP RST) without
    any response.
``{"fault": "cut", "text": "...", "cut_after": 2}``
    Streams ``message_start``, ``content_block_start`` and ``cut_after`` text deltas, then
    closes the connection without finishing the (chunked) body, so no ``message_stop``.
    A non-streaming request just gets its connection closed mid-body.
``{"fault": "slow", "delay": 3.0, "text": "..."}``
    Waits ``delay`` seconds, then answers like ``{"text": ...}``. The wait is taken in small
    steps and abandoned when the server stops, so it never holds up shutdown.
``{"fault": "malformed"}``
    HTTP 200 with the content type the request expects but a body that is neither valid JSON
    nor a valid event stream (``event: message_start`` whose ``data`` is not JSON). Optional
    ``body`` (str) replaces it.
``{"fault": "stream_error", "text": "...", "error_type": "overloaded_error"}``
    Starts a stream, sends ``cut_after`` deltas, then an ``event: error`` mid-stream as the API
    does when it overloads after the response has begun.

Retries
-------
The official SDK retries 408/409/429/5xx/529 responses and connection errors (``reset``,
timeouts) up to ``max_retries`` times, and **each retry is a new request that consumes the
next queued spec**. So ``script({"status": 429, "retry_after": 0}, {"text": "ok"})`` succeeds
on the first retry, while a client with ``max_retries=2`` needs three 429 specs queued to see
the error. Keep ``max_retries`` small and ``retry_after`` tiny (e.g. 0.01) in tests.

Message Batches
---------------
The batch endpoints the SDK's ``client.messages.batches`` calls are served too:

* ``POST /v1/messages/batches`` (``create``) takes ``{"requests": [{"custom_id", "params"}]}``;
  each request takes the next queued spec *when the batch is created*, in order (a request
  whose ``params`` lack ``model``/``max_tokens``/``messages`` is ``errored`` instead);
* ``GET /v1/messages/batches/{id}`` (``retrieve``): ``in_progress`` with every request counted
  as ``processing`` until ``batch_seconds`` (constructor argument or attribute, default 0.5) or
  the largest ``delay`` of its specs has passed since it was created, then ``ended`` with the
  counts and a ``results_url``;
* ``GET /v1/messages/batches/{id}/results`` (what ``results`` fetches from ``results_url``):
  one JSON line per request, ``{"custom_id", "result"}``, the result ``succeeded`` (with the
  ``message`` a ``{"text": ...}`` spec makes), ``errored`` (a ``{"status": N}`` spec: the API's
  error object under ``error``) or ``expired`` / ``canceled`` (a ``{"batch_result": "expired"}``
  spec). Before the batch ends it is a 404, as the API's ``results_url`` does not exist yet.

A ``{"fault": ...}`` spec has no meaning in a batch (nothing streams): it gives ``errored``.
``batches`` (and ``GET /_fake/batches``) lists the batches made so far, each with its ``id``,
``custom_ids`` and ``status``; ``batch_faults`` queues answers for the batch endpoints
themselves (a ``{"status": 529}`` spec there answers the next batch call with that error).

Authentication
--------------
Like the real API, a request to ``/v1/...`` without credentials gets a 401
``authentication_error`` (and consumes no spec). Credentials are an ``x-api-key`` header or
an ``Authorization: Bearer`` header (anthropic SDK 2.x sends the API key the latter way). If
``api_key`` is given to the constructor, only that key is accepted.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

from fakes.server import DEFAULT_REPLY, FakeServer, Handler, chunks, new_id, serve

__all__ = ["DEFAULT_REPLY", "FakeAnthropic", "main"]

_ERROR_TYPES = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "Not found"),
    408: ("timeout_error", "Request timed out"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "Internal server error"),
    503: ("api_error", "Service unavailable"),
    504: ("timeout_error", "Gateway timeout"),
    529: ("overloaded_error", "Overloaded"),
}


def _text_of(content: Any) -> str:
    """The text in a ``system`` value or a message ``content`` (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, Mapping):
                parts.append(str(block.get("text", "")))
            elif isinstance(block, str):
                parts.append(block)
        return "".join(parts)
    return ""


def _prompt_chars(body: Mapping[str, Any]) -> int:
    total = len(_text_of(body.get("system", "")))
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, Mapping):
                total += len(_text_of(message.get("content", "")))
    return total


class _Handler(Handler):
    server_version = "fake-anthropic/1.0"
    status_phrases: ClassVar[dict[int, str]] = {529: "Site Overloaded"}
    faults = ("cut", "stream_error")
    delta_kind = "content_block_delta"
    end_kinds = ("content_block_stop",)
    _msg_id = "msg_fake"

    def error_payload(self, status: int, spec: Mapping[str, Any]) -> Any:
        default_type, default_message = _ERROR_TYPES.get(
            status, ("api_error" if status >= 500 else "invalid_request_error", f"HTTP {status}")
        )
        return {
            "type": "error",
            "error": {
                "type": spec.get("error_type") or default_type,
                "message": spec.get("message") or default_message,
            },
            "request_id": new_id("req"),
        }

    def api(self, method: str, path: str, body: Any) -> None:
        if path.startswith("/v1/messages/batches"):
            self._batches(method, path, body)
            return
        if method != "POST" or path != "/v1/messages":
            self._send_error(404, {"message": f"{method} {path} is not served by the fake"})
            return
        problem = self._invalid(body)
        if problem:
            self._send_error(400, {"message": problem})
            return
        self._reply(self.server.fake._next_spec(), body)

    @staticmethod
    def _invalid(body: Any) -> str | None:
        if not isinstance(body, dict):
            return "request body must be a JSON object"
        if not isinstance(body.get("model"), str):
            return "model: Field required"
        if not isinstance(body.get("max_tokens"), int):
            return "max_tokens: Field required"
        if not isinstance(body.get("messages"), list):
            return "messages: Field required"
        return None

    # -- message batches -------------------------------------------------------------------

    def _batches(self, method: str, path: str, body: Any) -> None:
        fake = self.server.fake
        fault = fake._next_batch_fault()
        if fault is not None:
            status = int(fault.get("status", 500))
            headers = (
                {"retry-after": str(fault["retry_after"])} if fault.get("retry_after") is not None else {}
            )
            self._send_error(status, fault, headers)
            return
        parts = path.rstrip("/").split("/")[4:]  # after /v1/messages/batches
        if method == "POST" and not parts:
            requests = body.get("requests") if isinstance(body, dict) else None
            if not isinstance(requests, list) or not requests:
                self._send_error(400, {"message": "requests: Field required (a non-empty list)"})
                return
            self._send_json(200, fake._batch_view(fake._create_batch(self, requests), self._base()))
            return
        batch = fake._batch(parts[0]) if parts else None
        if method != "GET" or batch is None or len(parts) > 2 or parts[1:] not in ([], ["results"]):
            self._send_error(404, {"message": f"{method} {path} is not served by the fake"})
            return
        if not parts[1:]:
            self._send_json(200, fake._batch_view(batch, self._base()))
        elif not fake._ended(batch):
            self._send_error(404, {"message": f"the results of {batch['id']} are not ready"})
        else:
            lines = [json.dumps({"custom_id": cid, "result": result}) for cid, result in batch["results"]]
            self._send_body(200, ("\n".join(lines) + "\n").encode(), "application/binary")

    def _base(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def _batch_result(self, spec: Mapping[str, Any], params: Any) -> dict[str, Any]:
        """What one request of a batch ends as, from its spec (see the module docstring)."""
        problem = self._invalid(params)
        if problem or spec.get("fault") or int(spec.get("status", 200)) != 200:
            status = 400 if problem else int(spec.get("status", 500))
            etype, message = _ERROR_TYPES.get(status, ("api_error", f"HTTP {status}"))
            error = {
                "type": spec.get("error_type") or etype,
                "message": problem or spec.get("message") or message,
            }
            return {"type": "errored", "error": {"type": "error", "error": error, "request_id": None}}
        if spec.get("batch_result") in ("expired", "canceled"):
            return {"type": spec["batch_result"]}
        self._msg_id = new_id("msg")
        return {"type": "succeeded", "message": self._message(spec, params, final=True)}

    # -- replies ---------------------------------------------------------------------------

    def begin_reply(self) -> None:
        self._msg_id = new_id("msg")

    def reply_body(self, spec: Mapping[str, Any], body: Mapping[str, Any]) -> Any:
        return self._message(spec, body, final=True)

    def _message(self, spec: Mapping[str, Any], body: Mapping[str, Any], *, final: bool) -> dict[str, Any]:
        text = str(spec.get("text", ""))
        return {
            "id": self._msg_id,
            "type": "message",
            "role": "assistant",
            "model": spec.get("model") or body.get("model"),
            "content": [{"type": "text", "text": text}] if final else [],
            "stop_reason": spec.get("stop_reason", "end_turn") if final else None,
            "stop_sequence": None,
            "usage": {
                **(
                    {"input_tokens": int(spec["input_tokens"])}
                    if "input_tokens" in spec
                    else self.server.fake._cache_usage(body)
                ),
                "output_tokens": self._output_tokens(spec) if final else 1,
            },
        }

    @staticmethod
    def _output_tokens(spec: Mapping[str, Any]) -> int:
        if "output_tokens" in spec:
            return int(spec["output_tokens"])
        return max(1, math.ceil(len(str(spec.get("text", ""))) / 4))

    def events(self, spec: Mapping[str, Any], body: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
        """The server-sent events of a complete streamed reply, in the API's order."""
        text = str(spec.get("text", ""))
        yield "message_start", {"type": "message_start", "message": self._message(spec, body, final=False)}
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
        yield "ping", {"type": "ping"}
        for piece in chunks(text, spec.get("chunk_size", 12)):
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": spec.get("stop_reason", "end_turn"), "stop_sequence": None},
                "usage": {"output_tokens": self._output_tokens(spec)},
            },
        )
        yield "message_stop", {"type": "message_stop"}

    def sse(self, kind: str, data: Any) -> bytes:
        return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()

    def stream_error(self, spec: Mapping[str, Any]) -> bytes:
        error_type = spec.get("error_type", "overloaded_error")
        message = spec.get("message", "Overloaded")
        return self.sse("error", {"type": "error", "error": {"type": error_type, "message": message}})

    def malformed_body(self, streaming: bool) -> str:
        return 'event: message_start\ndata: {"type": "message_start", "message": {not json\n\n'


class FakeAnthropic(FakeServer):
    """A fake Anthropic Messages API on ``127.0.0.1`` (see the module docstring for reply specs).

    Thread-safe: the server answers each connection on its own thread, and ``script``,
    ``requests``, ``reset`` may be called from any thread.
    """

    handler = _Handler
    name = "fake-anthropic"

    def __init__(
        self,
        replies: Iterable[Mapping[str, Any]] = (),
        *,
        default: Mapping[str, Any] | None = None,
        api_key: str | None = None,
        batch_seconds: float = 0.5,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(replies, default=default, api_key=api_key, host=host, port=port)
        # Prompt caching as the API does it: the prefix up to the last block marked
        # cache_control, if it has at least ``min_cache_tokens`` tokens, is written on first sight
        # and read afterwards (reported as cache_creation_input_tokens / cache_read_input_tokens).
        self.min_cache_tokens = 1024
        self._prompt_cache: set[str] = set()
        #: How long a message batch stays in progress (at least: its specs' largest ``delay``).
        self.batch_seconds = batch_seconds
        self._batches: dict[str, dict[str, Any]] = {}
        self._batch_faults: deque[dict[str, Any]] = deque()

    def _forget(self) -> None:
        self._prompt_cache.clear()
        self._batches.clear()
        self._batch_faults.clear()

    @property
    def batches(self) -> list[dict[str, Any]]:
        """The message batches made so far, oldest first: ``id``, ``custom_ids``, ``status``."""
        with self._lock:
            made = list(self._batches.values())
        return [
            {
                "id": b["id"],
                "custom_ids": [cid for cid, _ in b["results"]],
                "status": "ended" if self._ended(b) else "in_progress",
            }
            for b in made
        ]

    def batch_faults(self, *specs: Mapping[str, Any]) -> None:
        """Answer the next calls to the batch endpoints with these errors (``{"status": 529}``)."""
        with self._lock:
            self._batch_faults.extend(dict(s) for s in specs)

    # -- used by the handler ---------------------------------------------------------------

    def _control_views(self) -> dict[str, Any]:
        return {**super()._control_views(), "/_fake/batches": lambda: self.batches}

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        key = headers.get("x-api-key")
        auth = headers.get("authorization", "")
        if not key and auth.lower().startswith("bearer "):
            key = auth[7:].strip()
        if not key:
            return False
        return self._api_key is None or key == self._api_key

    def _cache_usage(self, body: Mapping[str, Any]) -> dict[str, int]:
        """input_tokens and the cache fields for a request, updating the prompt cache."""
        blocks: list[tuple[str, bool]] = []
        sources = [body.get("system", "")] + [
            m.get("content", "") for m in body.get("messages", []) if isinstance(m, Mapping)
        ]
        for source in sources:
            for block in [{"text": source}] if isinstance(source, str) else source or []:
                if isinstance(block, Mapping):
                    blocks.append((str(block.get("text", "")), "cache_control" in block))
        total = sum(len(text) for text, _ in blocks) // 4
        marked = [i for i, (_, cached) in enumerate(blocks) if cached]
        if not marked:
            return {"input_tokens": total}
        prefix = "".join(text for text, _ in blocks[: marked[-1] + 1])
        prefix_tokens = len(prefix) // 4
        if prefix_tokens < self.min_cache_tokens:
            return {"input_tokens": total}
        key = hashlib.sha256(f"{body.get('model')}\0{prefix}".encode()).hexdigest()
        with self._lock:
            hit = key in self._prompt_cache
            self._prompt_cache.add(key)
        field = "cache_read_input_tokens" if hit else "cache_creation_input_tokens"
        return {"input_tokens": total - prefix_tokens, field: prefix_tokens}

    def _next_batch_fault(self) -> dict[str, Any] | None:
        with self._lock:
            return self._batch_faults.popleft() if self._batch_faults else None

    def _create_batch(self, handler: _Handler, requests: list[Any]) -> dict[str, Any]:
        results, delay = [], 0.0
        for item in requests:
            item = item if isinstance(item, Mapping) else {}
            spec = self._next_spec()
            delay = max(delay, float(spec.get("delay", 0) or 0))
            results.append((str(item.get("custom_id")), handler._batch_result(spec, item.get("params"))))
        batch = {"id": new_id("msgbatch"), "created": time.time(), "delay": delay, "results": results}
        with self._lock:
            self._batches[batch["id"]] = batch
        return batch

    def _batch(self, batch_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._batches.get(batch_id)

    def _ended(self, batch: Mapping[str, Any]) -> bool:
        return time.time() >= batch["created"] + max(self.batch_seconds, batch["delay"])

    def _batch_view(self, batch: Mapping[str, Any], base_url: str) -> dict[str, Any]:
        """The API's MessageBatch object for ``batch`` as it stands now."""
        ended = self._ended(batch)
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        for _, result in batch["results"]:
            counts[result["type"] if ended else "processing"] += 1
        created = batch["created"]
        return {
            "id": batch["id"],
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": _iso(created),
            "expires_at": _iso(created + 86400),
            "ended_at": _iso(created + max(self.batch_seconds, batch["delay"])) if ended else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{base_url}/v1/messages/batches/{batch['id']}/results" if ended else None,
        }


def _iso(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when)) + f".{int(when % 1 * 1e6):06d}Z"


def main(argv: list[str] | None = None) -> int:
    return serve(
        FakeAnthropic,
        "Serve a fake Anthropic Messages API on 127.0.0.1.",
        "accept only this API key (default: any non-empty)",
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())

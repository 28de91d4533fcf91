"""A loopback fake of the Anthropic Messages API (``POST /v1/messages``), stdlib only.

Use it in-process::

    with FakeAnthropic() as fake:
        fake.script({"text": "```python\\nprint(1)\\n```"}, {"status": 529})
        client = anthropic.Anthropic(api_key="sk-test", base_url=fake.base_url)
        ...
        assert fake.requests[0]["json"]["model"] == "claude-sonnet-5-5"

or as a separate process (for a Jupyter kernel, a demo script)::

    python tests/fake_anthropic.py --replies replies.json --port-file /tmp/fake.url

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

import argparse
import contextlib
import copy
import hashlib
import json
import logging
import math
import os
import signal
import socket
import struct
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["DEFAULT_REPLY", "FakeAnthropic", "main"]

log = logging.getLogger("fake_anthropic")

#: What answers when no scripted reply is left (no code block in it, on purpose).
DEFAULT_REPLY: dict[str, Any] = {"text": "no scripted reply left"}

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
_STATUS_PHRASES = {529: "Site Overloaded"}
_SLEEP_STEP = 0.05


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


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


def _chunks(text: str, size: int) -> list[str]:
    size = max(1, int(size))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Do not join handler threads on close: an idle keep-alive connection would block it.
    block_on_close = False
    fake: FakeAnthropic

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (timeouts, resets) is normal here; keep the test output clean.
        log.debug("error while serving %s", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-anthropic/1.0"
    sys_version = ""
    timeout = 60  # idle keep-alive connections are dropped after this
    server: _Server
    _msg_id = "msg_fake"

    # -- plumbing --------------------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.fake._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - %s", self.address_string(), format % args)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status, _STATUS_PHRASES.get(status))
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", _new_id("req"))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error_body(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        default_type, default_message = _ERROR_TYPES.get(
            status, ("api_error" if status >= 500 else "invalid_request_error", f"HTTP {status}")
        )
        request_id = _new_id("req")
        body = {
            "type": "error",
            "error": {"type": error_type or default_type, "message": message or default_message},
            "request_id": request_id,
        }
        self._send_json(status, body, headers)

    # -- routing ---------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        raw = self._read_body()
        path = self.path.split("?", 1)[0]
        if path.startswith("/_fake/"):
            self._control(method, path, raw)
            return
        self._api(method, path, raw)

    def _control(self, method: str, path: str, raw: bytes) -> None:
        fake = self.server.fake
        if method == "POST" and path == "/_fake/script":
            try:
                specs = json.loads(raw or b"[]")
            except ValueError as exc:
                self._send_json(400, {"error": f"body is not JSON: {exc}"})
                return
            if isinstance(specs, Mapping):
                specs = [specs]
            if not isinstance(specs, list) or not all(isinstance(s, Mapping) for s in specs):
                self._send_json(400, {"error": "expected a JSON list of reply specs (objects)"})
                return
            fake.script(*specs)
            self._send_json(200, {"queued": len(specs), "pending": fake.pending})
        elif method == "POST" and path == "/_fake/reset":
            fake.reset()
            self._send_json(200, {"ok": True})
        elif method == "GET" and path == "/_fake/requests":
            self._send_json(200, fake.requests)
        elif method == "GET" and path == "/_fake/batches":
            self._send_json(200, fake.batches)
        elif method == "GET" and path == "/_fake/state":
            self._send_json(200, {"pending": fake.pending, "requests": len(fake.requests)})
        else:
            self._send_json(404, {"error": f"no control endpoint {method} {path}"})

    def _api(self, method: str, path: str, raw: bytes) -> None:
        fake = self.server.fake
        headers = {k.lower(): v for k, v in self.headers.items()}
        body: Any
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        fake._record({"method": method, "path": path, "headers": headers, "json": body})

        if not fake._authorized(headers):
            self._send_error_body(401)
            return
        if path.startswith("/v1/messages/batches"):
            self._batches(method, path, body)
            return
        if method != "POST" or path != "/v1/messages":
            self._send_error_body(404, message=f"{method} {path} is not served by the fake")
            return
        problem = self._invalid(body)
        if problem:
            self._send_error_body(400, message=problem)
            return

        spec = fake._next_spec()
        self._reply(spec, body)

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
            self._send_error_body(status, fault.get("error_type"), fault.get("message"), headers)
            return
        parts = path.rstrip("/").split("/")[4:]  # after /v1/messages/batches
        if method == "POST" and not parts:
            requests = body.get("requests") if isinstance(body, dict) else None
            if not isinstance(requests, list) or not requests:
                self._send_error_body(400, message="requests: Field required (a non-empty list)")
                return
            self._send_json(200, fake._batch_view(fake._create_batch(self, requests), self._base()))
            return
        batch = fake._batch(parts[0]) if parts else None
        if method != "GET" or batch is None or len(parts) > 2 or parts[1:] not in ([], ["results"]):
            self._send_error_body(404, message=f"{method} {path} is not served by the fake")
            return
        if not parts[1:]:
            self._send_json(200, fake._batch_view(batch, self._base()))
        elif not fake._ended(batch):
            self._send_error_body(404, message=f"the results of {batch['id']} are not ready")
        else:
            lines = [json.dumps({"custom_id": cid, "result": result}) for cid, result in batch["results"]]
            data = ("\n".join(lines) + "\n").encode()
            self.send_response(200)
            self.send_header("content-type", "application/binary")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

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
        self._msg_id = _new_id("msg")
        return {"type": "succeeded", "message": self._message(spec, params, final=True)}

    # -- replies ---------------------------------------------------------------------------

    def _reply(self, spec: Mapping[str, Any], body: dict[str, Any]) -> None:
        fake = self.server.fake
        fault = spec.get("fault")
        self._msg_id = _new_id("msg")
        delay = float(spec.get("delay", 5.0 if fault == "slow" else 0) or 0)
        if delay > 0 and not fake._sleep(delay):
            self._drop()  # the server is stopping: give up on this request
            return

        if fault == "reset":
            self._reset()
            return
        if fault == "malformed":
            self._malformed(spec, body)
            return
        status = int(spec.get("status", 200))
        if status != 200:
            headers = {}
            if spec.get("retry_after") is not None:
                headers["retry-after"] = str(spec["retry_after"])
            self._send_error_body(status, spec.get("error_type"), spec.get("message"), headers)
            return
        if fault not in (None, "slow", "cut", "stream_error"):
            self._send_error_body(500, message=f"fake: unknown fault {fault!r}")
            return

        if body.get("stream"):
            self._stream(spec, body)
        elif fault == "cut":
            self._cut_json(spec, body)
        else:
            self._send_json(200, self._message(spec, body, final=True))

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

    def _events(self, spec: Mapping[str, Any], body: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
        """The server-sent events of a complete streamed reply, in the API's order."""
        text = str(spec.get("text", ""))
        yield "message_start", {"type": "message_start", "message": self._message(spec, body, final=False)}
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
        yield "ping", {"type": "ping"}
        for piece in _chunks(text, spec.get("chunk_size", 12)):
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

    def _start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", _new_id("req"))
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def _end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _stream(self, spec: Mapping[str, Any], body: Mapping[str, Any]) -> None:
        fake = self.server.fake
        fault = spec.get("fault")
        cut_after = int(spec.get("cut_after", 2))
        chunk_delay = float(spec.get("chunk_delay", 0) or 0)
        self._start_chunked("text/event-stream; charset=utf-8")
        deltas = 0
        for event, data in self._events(spec, body):
            if fault in ("cut", "stream_error"):
                if event == "content_block_stop" or (event == "content_block_delta" and deltas >= cut_after):
                    break
                deltas += event == "content_block_delta"
            self._chunk(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
            if chunk_delay > 0 and not fake._sleep(chunk_delay):
                self._drop()
                return
        if fault == "cut":
            self._drop()
            return
        if fault == "stream_error":
            error_type = spec.get("error_type", "overloaded_error")
            message = spec.get("message", "Overloaded")
            payload = {"type": "error", "error": {"type": error_type, "message": message}}
            self._chunk(f"event: error\ndata: {json.dumps(payload)}\n\n".encode())
        self._end_chunked()

    def _cut_json(self, spec: Mapping[str, Any], body: Mapping[str, Any]) -> None:
        data = json.dumps(self._message(spec, body, final=True)).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self._drop()

    def _malformed(self, spec: Mapping[str, Any], body: Mapping[str, Any]) -> None:
        default = 'event: message_start\ndata: {"type": "message_start", "message": {not json\n\n'
        data = str(spec.get("body", default)).encode()
        streaming = bool(body.get("stream"))
        self.send_response(200)
        self.send_header(
            "content-type", "text/event-stream; charset=utf-8" if streaming else "application/json"
        )
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", _new_id("req"))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the connection now (FIN), leaving whatever was being sent unfinished."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.flush()
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _reset(self) -> None:
        """Abort the connection with a TCP RST and no response at all."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            self.connection.close()


class FakeAnthropic:
    """A fake Anthropic Messages API on ``127.0.0.1`` (see the module docstring for reply specs).

    Thread-safe: the server answers each connection on its own thread, and ``script``,
    ``requests``, ``reset`` may be called from any thread.
    """

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
        self._lock = threading.Lock()
        self._queue: deque[dict[str, Any]] = deque(dict(r) for r in replies)
        self._requests: list[dict[str, Any]] = []
        # Prompt caching as the API does it: the prefix up to the last block marked
        # cache_control, if it has at least ``min_cache_tokens`` tokens, is written on first sight
        # and read afterwards (reported as cache_creation_input_tokens / cache_read_input_tokens).
        self.min_cache_tokens = 1024
        self._prompt_cache: set[str] = set()
        self._default: dict[str, Any] = dict(default if default is not None else DEFAULT_REPLY)
        self._api_key = api_key
        self._host = host
        self._port = port
        self._server: _Server | None = None
        self._bound_port: int | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        #: How long a message batch stays in progress (at least: its specs' largest ``delay``).
        self.batch_seconds = batch_seconds
        self._batches: dict[str, dict[str, Any]] = {}
        self._batch_faults: deque[dict[str, Any]] = deque()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeAnthropic:
        """Bind and serve in a daemon thread. Returns ``self``."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server((self._host, self._port), _Handler)
        server.fake = self
        self._server = server
        self._bound_port = int(server.server_address[1])
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-anthropic", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, drop open connections, abandon slow replies. Safe to call twice."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- public API ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (still answered after ``stop()``, for "nothing listening" tests)."""
        if self._bound_port is None:
            raise RuntimeError("FakeAnthropic has not been started")
        return self._bound_port

    @property
    def base_url(self) -> str:
        """E.g. ``"http://127.0.0.1:40123"`` (what ``ANTHROPIC_BASE_URL`` should be)."""
        return f"http://{self._host}:{self.port}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of the API requests received so far, oldest first.

        Each is ``{"method", "path", "headers" (lower-cased names), "json" (the parsed body or None)}``.
        """
        with self._lock:
            return copy.deepcopy(self._requests)

    @property
    def pending(self) -> int:
        """How many scripted replies are still queued."""
        with self._lock:
            return len(self._queue)

    @property
    def default(self) -> dict[str, Any]:
        """The reply spec used when the queue is empty."""
        with self._lock:
            return dict(self._default)

    @default.setter
    def default(self, spec: Mapping[str, Any]) -> None:
        with self._lock:
            self._default = dict(spec)

    def script(self, *replies: Mapping[str, Any]) -> None:
        """Queue reply specs; each API request (each SDK retry too) takes the next one."""
        with self._lock:
            self._queue.extend(dict(r) for r in replies)

    def reset(self) -> None:
        """Forget the queued replies and the received requests (and the batches)."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
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
        batch = {"id": _new_id("msgbatch"), "created": time.time(), "delay": delay, "results": results}
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

    def _next_spec(self) -> dict[str, Any]:
        with self._lock:
            return self._queue.popleft() if self._queue else dict(self._default)

    def _record(self, request: dict[str, Any]) -> None:
        with self._lock:
            self._requests.append(request)

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        key = headers.get("x-api-key")
        auth = headers.get("authorization", "")
        if not key and auth.lower().startswith("bearer "):
            key = auth[7:].strip()
        if not key:
            return False
        return self._api_key is None or key == self._api_key

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _sleep(self, seconds: float) -> bool:
        """Sleep in small steps; False if the server began stopping meanwhile."""
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            if self._stopping.wait(min(_SLEEP_STEP, remaining)):
                return False


def _iso(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when)) + f".{int(when % 1 * 1e6):06d}Z"


def _load_replies(path: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if isinstance(data, Mapping):  # {"replies": [...], "default": {...}}
        return list(data.get("replies", [])), data.get("default")
    if isinstance(data, list):
        return data, None
    raise SystemExit(f"{path}: expected a JSON list of reply specs or an object with 'replies'")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a fake Anthropic Messages API on 127.0.0.1.")
    parser.add_argument(
        "--replies", metavar="FILE.json", help="JSON list of reply specs, or {replies, default}"
    )
    parser.add_argument("--port-file", metavar="PATH", help="write the base URL here (else print it)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: any free port)")
    parser.add_argument("--api-key", default=None, help="accept only this API key (default: any non-empty)")
    args = parser.parse_args(argv)

    replies, default = _load_replies(args.replies) if args.replies else ([], None)
    fake = FakeAnthropic(replies, default=default, api_key=args.api_key, port=args.port)
    done = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    fake.start()
    try:
        if args.port_file:
            tmp = f"{args.port_file}.tmp{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(fake.base_url + "\n")
            os.replace(tmp, args.port_file)  # atomic: a reader never sees half a URL
        else:
            print(fake.base_url, flush=True)
        while not done.wait(0.1):
            pass
    finally:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

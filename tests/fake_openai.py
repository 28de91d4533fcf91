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

    python tests/fake_openai.py --replies replies.json --port-file /tmp/fake.url

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

import argparse
import contextlib
import copy
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

__all__ = ["DEFAULT_REPLY", "FakeOpenAI", "main"]

log = logging.getLogger("fake_openai")

DEFAULT_REPLY: dict[str, Any] = {"text": "no scripted reply left"}

_ERRORS = {
    400: ("invalid_request_error", None, "Invalid request"),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-***"),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden"),
    404: ("invalid_request_error", "model_not_found", "The model does not exist"),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests"),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}
_SLEEP_STEP = 0.05


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def _prompt_chars(body: Mapping[str, Any]) -> int:
    total = 0
    for message in body.get("messages") or ():
        if isinstance(message, Mapping):
            content = message.get("content", "")
            if isinstance(content, list):
                content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
            total += len(str(content))
    return total


def _chunks(text: str, size: int) -> list[str]:
    size = max(1, int(size))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeOpenAI

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("error while serving %s", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-openai/1.0"
    sys_version = ""
    timeout = 60
    server: _Server

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
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-request-id", _new_id("req"))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error_body(
        self, status: int, spec: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        spec = spec or {}
        etype, code, message = _ERRORS.get(
            status, ("server_error" if status >= 500 else "invalid_request_error", None, f"HTTP {status}")
        )
        error = {
            "message": spec.get("message", message),
            "type": spec.get("error_type", etype),
            "param": None,
            "code": spec.get("code", code),
        }
        self._send_json(status, {"error": error}, headers)

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
        else:
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
        if method == "GET" and path == "/v1/models":
            models = fake.models or ["fake-model"]
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models]
            self._send_json(200, {"object": "list", "data": data})
            return
        if method != "POST" or path != "/v1/chat/completions":
            self._send_error_body(
                404, {"message": f"{method} {path} is not served by the fake", "code": None}
            )
            return
        problem = self._invalid(body)
        if problem:
            self._send_error_body(400, {"message": problem})
            return
        if fake.models is not None and body["model"] not in fake.models:
            message = f"The model `{body['model']}` does not exist or you do not have access to it."
            self._send_error_body(404, {"message": message})
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

    def _reply(self, spec: Mapping[str, Any], body: dict[str, Any]) -> None:
        fake = self.server.fake
        fault = spec.get("fault")
        delay = float(spec.get("delay", 5.0 if fault == "slow" else 0) or 0)
        if delay > 0 and not fake._sleep(delay):
            self._drop()
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
            self._send_error_body(status, spec, headers)
            return
        if fault not in (None, "slow", "cut", "early_end", "stream_error"):
            self._send_error_body(500, {"message": f"fake: unknown fault {fault!r}"})
            return
        reply_id, created = _new_id("chatcmpl"), int(time.time())
        if body.get("stream"):
            self._stream(spec, body, reply_id, created)
        elif fault in ("cut", "early_end"):
            data = json.dumps(self._completion(spec, body, reply_id, created)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self._drop()
        else:
            self._send_json(200, self._completion(spec, body, reply_id, created))

    @staticmethod
    def _usage(spec: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, int]:
        prompt = int(spec.get("prompt_tokens", _prompt_chars(body) // 4))
        if "completion_tokens" in spec:
            completion = int(spec["completion_tokens"])
        else:
            completion = max(1, math.ceil(len(str(spec.get("text", ""))) / 4))
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _completion(
        self, spec: Mapping[str, Any], body: Mapping[str, Any], reply_id: str, created: int
    ) -> dict[str, Any]:
        reply: dict[str, Any] = {
            "id": reply_id,
            "object": "chat.completion",
            "created": created,
            "model": spec.get("model") or body.get("model"),
            "system_fingerprint": "fp_fake",
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

    def _chunk_events(
        self, spec: Mapping[str, Any], body: Mapping[str, Any], reply_id: str, created: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(kind, chunk)`` for a complete streamed reply; kind is role/content/finish/usage."""
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        send_usage = include_usage and spec.get("usage", True) is not False
        in_last = bool(spec.get("usage_in_last_chunk"))

        def chunk(choices: list[dict[str, Any]], usage: Any = None) -> dict[str, Any]:
            data: dict[str, Any] = {
                "id": reply_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": spec.get("model") or body.get("model"),
                "system_fingerprint": "fp_fake",
                "choices": choices,
            }
            if include_usage:
                data["usage"] = usage
            return data

        def choice(delta: dict[str, Any], finish: Any = None) -> dict[str, Any]:
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

        yield "role", chunk([choice({"role": "assistant", "content": "", "refusal": None})])
        for piece in _chunks(str(spec.get("text", "")), spec.get("chunk_size", 12)):
            if piece:
                yield "content", chunk([choice({"content": piece})])
        usage = self._usage(spec, body) if send_usage else None
        yield "finish", chunk([choice({}, spec.get("finish_reason", "stop"))], usage if in_last else None)
        if send_usage and not in_last:
            yield "usage", chunk([], usage)

    def _start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("x-request-id", _new_id("req"))
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def _end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _stream(self, spec: Mapping[str, Any], body: Mapping[str, Any], reply_id: str, created: int) -> None:
        fake = self.server.fake
        fault = spec.get("fault")
        cut_after = int(spec.get("cut_after", 2))
        chunk_delay = float(spec.get("chunk_delay", 0) or 0)
        self._start_chunked("text/event-stream; charset=utf-8")
        deltas = 0
        for kind, data in self._chunk_events(spec, body, reply_id, created):
            if fault in ("cut", "early_end", "stream_error"):
                if kind in ("finish", "usage") or (kind == "content" and deltas >= cut_after):
                    break
                deltas += kind == "content"
            self._chunk(f"data: {json.dumps(data)}\n\n".encode())
            if chunk_delay > 0 and not fake._sleep(chunk_delay):
                self._drop()
                return
        if fault == "cut":
            self._drop()
            return
        if fault == "early_end":
            self._end_chunked()
            return
        if fault == "stream_error":
            error = {
                "message": spec.get("message", "The server had an error while processing your request."),
                "type": spec.get("error_type", "server_error"),
                "param": None,
                "code": spec.get("code"),
            }
            self._chunk(f"data: {json.dumps({'error': error})}\n\n".encode())
        self._chunk(b"data: [DONE]\n\n")
        self._end_chunked()

    def _malformed(self, spec: Mapping[str, Any], body: Mapping[str, Any]) -> None:
        streaming = bool(body.get("stream"))
        default = 'data: {"id": "chatcmpl-x", "choices": [{not json\n\n' if streaming else "{not json"
        data = str(spec.get("body", default)).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream" if streaming else "application/json")
        self.send_header("content-length", str(len(data)))
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


class FakeOpenAI:
    """A fake OpenAI-compatible server on ``127.0.0.1`` (see the module docstring). Thread-safe."""

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
        self._lock = threading.Lock()
        self._queue: deque[dict[str, Any]] = deque(dict(r) for r in replies)
        self._requests: list[dict[str, Any]] = []
        self._default: dict[str, Any] = dict(default if default is not None else DEFAULT_REPLY)
        self._api_key = api_key
        self.models: list[str] | None = list(models) if models is not None else None
        self._host = host
        self._port = port
        self._server: _Server | None = None
        self._bound_port: int | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server((self._host, self._port), _Handler)
        server.fake = self
        self._server = server
        self._bound_port = int(server.server_address[1])
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
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

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- public API ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._bound_port is None:
            raise RuntimeError("FakeOpenAI has not been started")
        return self._bound_port

    @property
    def base_url(self) -> str:
        """E.g. ``"http://127.0.0.1:40123/v1"`` (what ``OPENAI_BASE_URL`` should be)."""
        return f"http://{self._host}:{self.port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of the API requests so far: ``{"method", "path", "headers", "json"}`` each."""
        with self._lock:
            return copy.deepcopy(self._requests)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def default(self) -> dict[str, Any]:
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
        with self._lock:
            self._queue.clear()
            self._requests.clear()

    # -- used by the handler ---------------------------------------------------------------

    def _next_spec(self) -> dict[str, Any]:
        with self._lock:
            return self._queue.popleft() if self._queue else dict(self._default)

    def _record(self, request: dict[str, Any]) -> None:
        with self._lock:
            self._requests.append(request)

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        if self._api_key is None:
            return True
        auth = headers.get("authorization", "")
        return auth.lower().startswith("bearer ") and auth[7:].strip() == self._api_key

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a fake OpenAI-compatible API on 127.0.0.1.")
    parser.add_argument(
        "--replies", metavar="FILE.json", help="JSON list of reply specs, or {replies, default}"
    )
    parser.add_argument("--port-file", metavar="PATH", help="write the base URL here (else print it)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: any free port)")
    parser.add_argument("--api-key", default=None, help="accept only this key (default: no auth)")
    args = parser.parse_args(argv)

    replies: list[dict[str, Any]] = []
    default = None
    if args.replies:
        with open(args.replies, encoding="utf-8") as fh:
            data = json.load(fh)
        if isinstance(data, Mapping):
            replies, default = list(data.get("replies", [])), data.get("default")
        else:
            replies = list(data)
    fake = FakeOpenAI(replies, default=default, api_key=args.api_key, port=args.port)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    fake.start()
    try:
        if args.port_file:
            tmp = f"{args.port_file}.tmp{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(fake.base_url + "\n")
            os.replace(tmp, args.port_file)
        else:
            print(fake.base_url, flush=True)
        while not done.wait(0.1):
            pass
    finally:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The one loopback HTTP server the fakes share (stdlib only).

:class:`FakeServer` holds what every fake API has: the thread and port, the received requests
and when each arrived, the queue of scripted reply specs and the default one, the sleeps that
give up when the server stops, the control endpoints (``/_fake/...``) and the command line.
:class:`Handler` holds the HTTP plumbing: JSON and chunked bodies, server-sent events, the
``delay`` / ``status`` / ``fault`` handling of a reply spec, dropped and reset connections.
``anthropic_api.py`` and ``openai_api.py`` add only what their API says differently.
"""

from __future__ import annotations

import abc
import argparse
import contextlib
import copy
import json
import logging
import os
import signal
import socket
import struct
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar

#: What answers when no scripted reply is left (no code block in it, on purpose).
DEFAULT_REPLY: dict[str, Any] = {"text": "no scripted reply left"}

_SLEEP_STEP = 0.05
#: The faults a stream may end with early (each fake accepts those its API has).
_CUT_FAULTS = ("cut", "early_end", "stream_error")


def new_id(prefix: str, sep: str = "_") -> str:
    return f"{prefix}{sep}{uuid.uuid4().hex[:24]}"


def chunks(text: str, size: int) -> list[str]:
    size = max(1, int(size))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Do not join handler threads on close: an idle keep-alive connection would block it.
    block_on_close = False
    fake: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (timeouts, resets) is normal here; keep the test output clean.
        self.fake.log.debug("error while serving %s", client_address, exc_info=True)


class Handler(BaseHTTPRequestHandler, abc.ABC):
    """One connection of a fake; subclasses say what their API answers (the hooks below)."""

    protocol_version = "HTTP/1.1"
    sys_version = ""
    timeout = 60  # idle keep-alive connections are dropped after this
    server: _Server
    #: The response header carrying a request id, and how the fake's ids are joined.
    request_id_header = "request-id"
    id_sep = "_"
    status_phrases: ClassVar[dict[int, str]] = {}
    #: The faults this API's fake knows besides ``reset``, ``malformed`` and ``slow``.
    faults: ClassVar[tuple[str, ...]] = ("cut", "stream_error")
    #: Stream events: the kind of a text delta, the kinds a cut stream stops before, the trailer.
    delta_kind = "content"
    end_kinds: ClassVar[tuple[str, ...]] = ()
    stream_trailer = b""

    # -- hooks -----------------------------------------------------------------------------

    @abc.abstractmethod
    def api(self, method: str, path: str, body: Any) -> None:
        """Answer an authorized API request (recorded already)."""

    @abc.abstractmethod
    def error_payload(self, status: int, spec: Mapping[str, Any]) -> Any:
        """The API's JSON error body for ``status`` (``spec`` may name a type, code, message)."""

    def begin_reply(self) -> None:
        """Called before a reply spec is answered (new ids)."""

    @abc.abstractmethod
    def reply_body(self, spec: Mapping[str, Any], body: Mapping[str, Any]) -> Any:
        """The JSON body of a complete non-streamed reply."""

    @abc.abstractmethod
    def events(self, spec: Mapping[str, Any], body: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
        """``(kind, data)`` of a complete streamed reply, in the API's order."""

    def sse(self, kind: str, data: Any) -> bytes:
        return f"data: {json.dumps(data)}\n\n".encode()

    @abc.abstractmethod
    def stream_error(self, spec: Mapping[str, Any]) -> bytes:
        """The event a stream that fails after it began sends."""

    @abc.abstractmethod
    def malformed_body(self, streaming: bool) -> str:
        """A body the SDK cannot read (the ``malformed`` fault), streamed or not."""

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
        self.server.fake.log.debug("%s - %s", self.address_string(), format % args)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send_body(
        self, status: int, data: bytes, content_type: str, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_response(status, self.status_phrases.get(status))
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.send_header(self.request_id_header, new_id("req", self.id_sep))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send_body(status, json.dumps(payload).encode(), "application/json", headers)

    def _send_error(
        self, status: int, spec: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        self._send_json(status, self.error_payload(status, spec or {}), headers)

    def _start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header(self.request_id_header, new_id("req", self.id_sep))
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def _end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
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
        views = fake._control_views()
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
        elif method == "GET" and path in views:
            self._send_json(200, views[path]())
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
            self._send_error(401)
            return
        self.api(method, path, body)

    # -- replies ---------------------------------------------------------------------------

    def _reply(self, spec: Mapping[str, Any], body: dict[str, Any]) -> None:
        """Answer one reply spec: its delay, then a fault, an error status or the reply."""
        fake = self.server.fake
        fault = spec.get("fault")
        self.begin_reply()
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
            self._send_error(status, spec, headers)
            return
        if fault is not None and fault != "slow" and fault not in self.faults:
            self._send_error(500, {"message": f"fake: unknown fault {fault!r}"})
            return
        if body.get("stream"):
            self._stream(spec, body)
        elif fault in ("cut", "early_end"):  # half a JSON body
            data = json.dumps(self.reply_body(spec, body)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self._drop()
        else:
            self._send_json(200, self.reply_body(spec, body))

    def _stream(self, spec: Mapping[str, Any], body: Mapping[str, Any]) -> None:
        fake = self.server.fake
        fault = spec.get("fault")
        cut_after = int(spec.get("cut_after", 2))
        chunk_delay = float(spec.get("chunk_delay", 0) or 0)
        self._start_chunked("text/event-stream; charset=utf-8")
        deltas = 0
        for kind, data in self.events(spec, body):
            if fault in _CUT_FAULTS:
                if kind in self.end_kinds or (kind == self.delta_kind and deltas >= cut_after):
                    break
                deltas += kind == self.delta_kind
            self._chunk(self.sse(kind, data))
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
            self._chunk(self.stream_error(spec))
        self._chunk(self.stream_trailer)
        self._end_chunked()

    def _malformed(self, spec: Mapping[str, Any], body: Mapping[str, Any]) -> None:
        streaming = bool(body.get("stream"))
        data = str(spec.get("body", self.malformed_body(streaming))).encode()
        content_type = "text/event-stream; charset=utf-8" if streaming else "application/json"
        self._send_body(200, data, content_type)


class FakeServer(abc.ABC):
    """A fake API on ``127.0.0.1`` serving scripted reply specs. Thread-safe: the server answers
    each connection on its own thread, and ``script``, ``requests``, ``reset`` may be called from
    any thread."""

    handler: ClassVar[type[Handler]] = Handler
    #: The thread's and the logger's name; what ``base_url`` ends with.
    name = "fake"
    url_path = ""

    def __init__(
        self,
        replies: Iterable[Mapping[str, Any]] = (),
        *,
        default: Mapping[str, Any] | None = None,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.log = logging.getLogger(self.name.replace("-", "_"))
        self._lock = threading.Lock()
        self._queue: deque[dict[str, Any]] = deque(dict(r) for r in replies)
        self._requests: list[dict[str, Any]] = []
        self._arrivals: list[tuple[float, str, str]] = []
        self._default: dict[str, Any] = dict(default if default is not None else DEFAULT_REPLY)
        self._api_key = api_key
        self._host = host
        self._port = port
        self._server: _Server | None = None
        self._bound_port: int | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Any:
        """Bind and serve in a daemon thread. Returns ``self``."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server((self._host, self._port), self.handler)
        server.fake = self
        self._server = server
        self._bound_port = int(server.server_address[1])
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=self.name, daemon=True
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

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- public API ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (still answered after ``stop()``, for "nothing listening" tests)."""
        if self._bound_port is None:
            raise RuntimeError(f"{type(self).__name__} has not been started")
        return self._bound_port

    @property
    def base_url(self) -> str:
        """E.g. ``"http://127.0.0.1:40123"`` (and the API's path prefix, if its SDK wants it)."""
        return f"http://{self._host}:{self.port}{self.url_path}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of the API requests received so far, oldest first.

        Each is ``{"method", "path", "headers" (lower-cased names), "json" (the parsed body or None)}``.
        """
        with self._lock:
            return copy.deepcopy(self._requests)

    @property
    def arrivals(self) -> list[float]:
        """When each API request arrived (``time.time()``), oldest first."""
        with self._lock:
            return [at for at, _, _ in self._arrivals]

    @property
    def timeline(self) -> list[tuple[float, str, str]]:
        """``(time, method, path)`` of each API request, oldest first."""
        with self._lock:
            return list(self._arrivals)

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
        """Forget the queued replies and the received requests (and what a subclass keeps)."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._arrivals.clear()
            self._forget()

    # -- used by the handler ---------------------------------------------------------------

    def _forget(self) -> None:  # noqa: B027 (an optional hook: most fakes keep nothing more)
        """What ``reset`` clears besides the queue and the requests (the lock is held)."""

    def _control_views(self) -> dict[str, Any]:
        """``GET /_fake/<name>`` endpoints: path -> what it returns."""
        return {
            "/_fake/requests": lambda: self.requests,
            "/_fake/state": lambda: {"pending": self.pending, "requests": len(self.requests)},
        }

    @abc.abstractmethod
    def _authorized(self, headers: Mapping[str, str]) -> bool:
        """Whether the request carries this API's key header."""

    def _next_spec(self) -> dict[str, Any]:
        with self._lock:
            return self._queue.popleft() if self._queue else dict(self._default)

    def _record(self, request: dict[str, Any]) -> None:
        with self._lock:
            self._arrivals.append((time.time(), request["method"], request["path"]))
            self._requests.append(request)

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


def _load_replies(path: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if isinstance(data, Mapping):  # {"replies": [...], "default": {...}}
        return list(data.get("replies", [])), data.get("default")
    if isinstance(data, list):
        return data, None
    raise SystemExit(f"{path}: expected a JSON list of reply specs or an object with 'replies'")


def serve(fake_class: type[FakeServer], description: str, key_help: str, argv: list[str] | None) -> int:
    """The command line of a fake: serve until SIGTERM/SIGINT, the base URL in a file or printed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--replies", metavar="FILE.json", help="JSON list of reply specs, or {replies, default}"
    )
    parser.add_argument("--port-file", metavar="PATH", help="write the base URL here (else print it)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: any free port)")
    parser.add_argument("--api-key", default=None, help=key_help)
    args = parser.parse_args(argv)

    replies, default = _load_replies(args.replies) if args.replies else ([], None)
    fake = fake_class(replies, default=default, api_key=args.api_key, port=args.port)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
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

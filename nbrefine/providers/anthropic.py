"""The Anthropic provider: one streamed Messages API call per repair request.

Every failure comes out as a :class:`~nbrefine.ProviderError` subclass with a one-line message;
no SDK or network exception escapes :meth:`AnthropicProvider.complete`. The original exception
is kept as ``__cause__`` for debugging. Things the SDK (2.x) does that this module guards:

* errors raised while the body streams in: up to 2.16 the SDK did not wrap them (a connection
  cut mid-stream surfaced as the HTTP library's ``RemoteProtocolError``/``ReadError``, a stall as
  ``ReadTimeout``), from 2.17 it wraps them as ``APIConnectionError``/``APITimeoutError``; both
  are read as a reply cut off once text has streamed; an unparsable event is a
  ``json.JSONDecodeError``;
* an ``event: error`` sent mid-stream becomes a plain ``APIStatusError`` whose status is 200,
  so it is classified by the error type in its body;
* a stream that just ends (no ``message_stop``) is not an error to the SDK at all.

May import: the standard library, the ``anthropic`` SDK, :mod:`nbrefine._errors` and this package's
``base``, ``_sdk_client`` and ``_text``; never the sandbox, the engine, IPython or the CLI.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any, NoReturn

import anthropic

from nbrefine._errors import ProviderConfigError, ProviderError, ProviderReplyError
from nbrefine.providers._sdk_client import LazyClient, make_client
from nbrefine.providers._sdk_errors import Service, in_stream_error, translate
from nbrefine.providers.base import ProviderReply, ProviderRequest, TextCallback

if TYPE_CHECKING:
    from anthropic.types import Message

__all__ = ["API_KEY_ENV", "BASE_URL_ENV", "DEFAULT_BASE_URL", "DEFAULT_MODEL", "AnthropicProvider"]

#: A current model (not in the SDK's ``DEPRECATED_MODELS``).
DEFAULT_MODEL = "claude-sonnet-5-5"
API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
DEFAULT_BASE_URL = "https://api.anthropic.com"


def _error_detail(exc: anthropic.APIStatusError) -> tuple[str | None, str | None]:
    """``(error.type, error.message)`` from the API's JSON error body, when it has one."""
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            etype, message = error.get("type"), error.get("message")
            return (
                etype if isinstance(etype, str) else None,
                message if isinstance(message, str) else None,
            )
    return None, None


class AnthropicProvider:
    """Anthropic's Messages API through the official SDK (streamed).

    The API key comes from ``api_key`` or ``ANTHROPIC_API_KEY``, the base URL from ``base_url``
    or ``ANTHROPIC_BASE_URL``; both are read when the first request is made, so a key set after
    the provider was created still counts. Without a key, :meth:`complete` raises
    :class:`~nbrefine.ProviderConfigError`. ``timeout`` bounds the wait for a connection and for
    each piece of the reply (not the whole reply); ``max_retries`` is the SDK's own retrying of
    429/5xx/529 answers and connection failures.
    """

    name: str = "anthropic"

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        self.model: str = model or DEFAULT_MODEL
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self._api_key = api_key
        self._base_url = base_url
        self._sdk: LazyClient[anthropic.Anthropic] = LazyClient(self._new_client)

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r})"

    # -- client ------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The API base URL requests go (or will go) to."""
        return self._sdk.base_url(self._base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL)

    @property
    def _client(self) -> anthropic.Anthropic | None:
        """The SDK client, once the first request made it (None again after :meth:`close`)."""
        return self._sdk.current

    def _new_client(self) -> anthropic.Anthropic:
        api_key = self._api_key or os.environ.get(API_KEY_ENV)
        if not api_key:
            raise ProviderConfigError(
                f"no Anthropic API key: set the {API_KEY_ENV} environment variable "
                "(or choose another provider with %config Refine.provider = ...)"
            )
        return make_client(
            "Anthropic",
            anthropic.Anthropic,
            api_key=api_key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def close(self) -> None:
        """Close the SDK client's connections (a later :meth:`complete` opens new ones)."""
        self._sdk.close()

    # -- the call ----------------------------------------------------------------------------

    def complete(self, request: ProviderRequest, on_text: TextCallback | None = None) -> ProviderReply:
        """Stream the reply to ``request``, passing each text piece to ``on_text``.

        Exceptions raised by ``on_text`` itself propagate unchanged.
        """
        client = self._sdk.get()
        try:
            manager = client.messages.stream(
                model=self.model,
                max_tokens=request.max_tokens,
                system=[{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}],
                messages=_messages(request),
            )
            stream = manager.__enter__()
        except Exception as exc:
            self._raise_translated(exc, received=None)

        received = 0  # characters of text streamed so far
        started = stopped = False
        final: Message | None = None
        try:
            events = iter(stream)
            while True:
                try:
                    event = next(events)
                except StopIteration:
                    break
                except Exception as exc:
                    self._raise_translated(exc, received=received)
                if event.type == "message_start":
                    started = True
                elif event.type == "message_stop":
                    stopped = True
                    if started:
                        final = stream.current_message_snapshot
                elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                    piece = event.delta.text
                    received += len(piece)
                    if on_text is not None and piece:
                        on_text(piece)  # outside the translation: the caller's own errors pass through
        finally:
            # closing a broken connection can fail too: nothing useful to report then
            with contextlib.suppress(Exception):
                manager.__exit__(None, None, None)

        if not stopped or final is None:
            raise ProviderReplyError(
                f"the Anthropic reply stream ended before message_stop (after {received} characters of text)"
            )
        if final.stop_reason is None:
            raise ProviderReplyError("the Anthropic reply ended without a stop_reason")
        text = "".join(block.text for block in final.content if block.type == "text")
        return ProviderReply(
            text=text,
            model=str(final.model or self.model),
            input_tokens=int(final.usage.input_tokens or 0),
            output_tokens=int(final.usage.output_tokens or 0),
            cache_read_tokens=int(getattr(final.usage, "cache_read_input_tokens", 0) or 0),
            cache_write_tokens=int(getattr(final.usage, "cache_creation_input_tokens", 0) or 0),
            stop_reason=str(final.stop_reason),
            extra={"id": final.id, "request_id": stream.request_id},
        )

    # -- error translation ---------------------------------------------------------------------

    def _raise_translated(self, exc: Exception, *, received: int | None) -> NoReturn:
        """Raise the nbrefine error for ``exc`` (``received`` is None before the stream began)."""
        raise translate(anthropic, exc, self._service, received=received) from exc

    @property
    def _service(self) -> Service:
        return Service(
            who="Anthropic",
            connecting=f"Anthropic at {self.base_url}",
            base_url=self.base_url,
            model=self.model,
            timeout=self.timeout,
            sdk_error=anthropic.AnthropicError,
            sdk_name="Anthropic",
            key_hint=f"; check {API_KEY_ENV}",
            mid_stream=self._mid_stream,
            detail=_error_detail,
        )

    def _mid_stream(self, exc: Exception) -> ProviderError | None:
        """An ``event: error`` in the middle of the stream: the SDK raises it as a status error
        of the stream's own status, 200."""
        if not isinstance(exc, anthropic.APIStatusError) or exc.status_code != 200:
            return None
        etype, api_message = _error_detail(exc)
        return in_stream_error(self._service, etype, api_message or exc.message)


def _messages(request: ProviderRequest) -> Any:  # the SDK's TypedDicts are stricter than this shape
    return [{"role": "user", "content": _user_content(request)}]


def _user_content(request: ProviderRequest) -> list[dict[str, Any]]:
    """The user message as content blocks: the part every attempt repeats is marked for
    Anthropic's prompt cache (later attempts of a session then read it instead of paying)."""
    prefix = request.cache_prefix
    if not 0 < prefix < len(request.user):
        return [{"type": "text", "text": request.user}]
    return [
        {"type": "text", "text": request.user[:prefix], "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": request.user[prefix:]},
    ]

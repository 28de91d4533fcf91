"""The OpenAI-compatible provider: one streamed Chat Completions call per repair request.

Works with the OpenAI API and with any server that speaks its ``/v1/chat/completions`` dialect
(Ollama, vLLM, LM Studio, llama.cpp's server, ...). The ``openai`` SDK is an optional
dependency, imported on the first request (``pip install 'nbrefine[openai]'``).

Every failure comes out as a :class:`~nbrefine.ProviderError` subclass with a one-line message;
no SDK or network exception escapes :meth:`OpenAIProvider.complete`. The original exception is
kept as ``__cause__``. Things the SDK does that this module guards:

* errors while the body streams in are wrapped as ``APITimeoutError``/``APIConnectionError``
  (the same classes as before the reply began), so they are told apart by whether the stream
  had started;
* an ``{"error": ...}`` object sent as a stream chunk becomes a plain ``APIError`` (no status);
* an unparsable ``data:`` line raises ``json.JSONDecodeError``;
* a stream that just ends (no ``finish_reason``, no ``[DONE]``) is not an error to the SDK.

May import: the standard library, the ``openai`` SDK (only when the first request is made),
:mod:`nbrefine._errors` and this package's ``base``, ``_sdk_client`` and ``_text``;
never the sandbox, the engine, IPython or the CLI.
"""

from __future__ import annotations

import contextlib
import os
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

from nbrefine._errors import ProviderConfigError, ProviderError, ProviderReplyError
from nbrefine.providers._sdk_client import LazyClient, make_client
from nbrefine.providers._sdk_errors import Service, in_stream_error, translate
from nbrefine.providers.base import ProviderReply, ProviderRequest, TextCallback

if TYPE_CHECKING:
    import openai

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "NO_KEY_PLACEHOLDER",
    "OpenAIProvider",
    "is_official",
]

#: The model used when none is given and the base URL is the OpenAI API itself (a current,
#: not deprecated, model of the SDK's ``ChatModel`` list). Local servers have no such default.
DEFAULT_MODEL = "gpt-5.5"
API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Sent as the key to a server that needs none (the SDK refuses to start without one).
NO_KEY_PLACEHOLDER = "not-needed"

_OFFICIAL_HOSTS = frozenset({"api.openai.com"})
_MISSING_SDK = "the openai provider needs the openai package: pip install 'nbrefine[openai]'"


def _load_sdk() -> ModuleType:
    """The ``openai`` module, or a :class:`ProviderConfigError` saying how to install it."""
    try:
        import openai
    except ImportError:
        raise ProviderConfigError(_MISSING_SDK) from None
    return openai


def _not_in_stream(sdk: ModuleType) -> tuple[type[Exception], ...]:
    """The SDK's APIError subclasses that are not an error sent in the stream."""
    return (sdk.APIStatusError, sdk.APIConnectionError, sdk.APIResponseValidationError)


def is_official(base_url: str) -> bool:
    """Whether ``base_url`` is the OpenAI API itself (not a local or third-party server)."""
    host = urlsplit(base_url).hostname or ""
    return host.lower() in _OFFICIAL_HOSTS


def _error_detail(body: object) -> tuple[str | None, str | None]:
    """``(code or type, message)`` from an error body: ``{"error": {...}}``, ``{...}`` or a string."""
    if isinstance(body, dict) and "error" in body:
        body = body["error"]
    if isinstance(body, dict):
        kind = body.get("code") or body.get("type")  # code is the specific one: "invalid_api_key"
        message = body.get("message")
        return (
            str(kind) if isinstance(kind, str | int) and kind != "" else None,
            message if isinstance(message, str) else None,
        )
    if isinstance(body, str) and body.strip():
        return None, body
    return None, None


class OpenAIProvider:
    """An OpenAI-compatible Chat Completions endpoint through the official ``openai`` SDK (streamed).

    The base URL comes from ``base_url`` or ``OPENAI_BASE_URL`` (default: the OpenAI API), the
    key from ``api_key`` or ``OPENAI_API_KEY``; both are read when the first request is made.
    A server other than the OpenAI API may need no key: then a placeholder is sent. The model
    must be given for such servers (there is no common default); for the OpenAI API it defaults
    to :data:`DEFAULT_MODEL`. Construction never fails: :meth:`complete` raises
    :class:`~nbrefine.ProviderConfigError` for a missing SDK, model or key.

    ``timeout`` bounds the wait for a connection and for each piece of the reply (not the whole
    reply); ``max_retries`` is the SDK's own retrying of 408/409/429/5xx answers and connection
    failures.
    """

    name: str = "openai"

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        self._model_arg = (model or "").strip()
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self._api_key = api_key
        self._base_url = base_url
        self._sdk: LazyClient[openai.OpenAI] = LazyClient(self._new_client)
        self.model: str = self._model_arg or (DEFAULT_MODEL if is_official(self.base_url) else "")

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, base_url={self.base_url!r})"

    # -- configuration -----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The API base URL requests go (or will go) to, e.g. ``http://localhost:11434/v1``."""
        url = self._base_url or os.environ.get(BASE_URL_ENV, "").strip() or DEFAULT_BASE_URL
        return self._sdk.base_url(url.rstrip("/"))

    @property
    def _where(self) -> str:
        """How messages name the service: "OpenAI", or "the server at <url>"."""
        base_url = self.base_url
        return f"OpenAI ({base_url})" if is_official(base_url) else f"the server at {base_url}"

    def _new_client(self) -> openai.OpenAI:
        sdk = _load_sdk()
        base_url = self.base_url
        official = is_official(base_url)
        if not self.model:
            if not official:
                raise ProviderConfigError(
                    f"no model set for the OpenAI-compatible server at {base_url}: choose one with "
                    "--model NAME or %config Refine.model = 'NAME' (a model the server serves)"
                )
            self.model = DEFAULT_MODEL
        api_key = self._api_key or os.environ.get(API_KEY_ENV, "").strip()
        if not api_key:
            if official:
                raise ProviderConfigError(
                    f"no OpenAI API key: set the {API_KEY_ENV} environment variable (or set "
                    f"{BASE_URL_ENV} to a local server, or choose another provider with "
                    "%config Refine.provider = ...)"
                )
            api_key = NO_KEY_PLACEHOLDER
        client: openai.OpenAI = make_client(
            "openai",
            sdk.OpenAI,
            api_key=api_key,
            base_url=base_url,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )
        return client

    def close(self) -> None:
        """Close the SDK client's connections (a later :meth:`complete` opens new ones)."""
        self._sdk.close()

    # -- the call ----------------------------------------------------------------------------

    def complete(self, request: ProviderRequest, on_text: TextCallback | None = None) -> ProviderReply:
        """Stream the reply to ``request``, passing each text piece to ``on_text``.

        Exceptions raised by ``on_text`` itself propagate unchanged.
        """
        client = self._sdk.get()
        sdk = _load_sdk()
        # The OpenAI API deprecated max_tokens (newer models reject it); servers that imitate
        # the API do not all know max_completion_tokens yet, but all know max_tokens.
        limit_key = "max_completion_tokens" if is_official(self.base_url) else "max_tokens"
        kwargs: dict[str, Any] = {limit_key: request.max_tokens}
        try:
            stream = client.chat.completions.create(
                model=self.model,
                messages=[
                    {"role": "system", "content": request.system},
                    {"role": "user", "content": request.user},
                ],
                stream=True,
                stream_options={"include_usage": True},
                **kwargs,
            )
        except Exception as exc:
            self._raise_translated(sdk, exc, received=None)

        received = 0  # characters of text streamed so far
        parts: list[str] = []
        finish_reason: str | None = None
        model: str | None = None
        reply_id: str | None = None
        input_tokens = output_tokens = 0
        usage_seen = False
        try:
            chunks = iter(stream)
            while True:
                try:
                    chunk = next(chunks)
                except StopIteration:
                    break
                except Exception as exc:
                    self._raise_translated(sdk, exc, received=received)
                model = chunk.model or model
                reply_id = chunk.id or reply_id
                usage = chunk.usage
                if usage is not None:
                    usage_seen = True
                    input_tokens = int(usage.prompt_tokens or 0)
                    output_tokens = int(usage.completion_tokens or 0)
                for choice in chunk.choices or ():
                    if choice.index != 0:
                        continue
                    if choice.finish_reason is not None:
                        finish_reason = str(choice.finish_reason)
                    piece = choice.delta.content if choice.delta is not None else None
                    if piece:
                        parts.append(piece)
                        received += len(piece)
                        if on_text is not None:
                            on_text(piece)  # outside the translation: the caller's own errors pass through
        finally:
            # closing a broken connection can fail too: nothing useful to report then
            with contextlib.suppress(Exception):
                stream.close()

        if finish_reason is None:
            raise ProviderReplyError(
                f"the reply stream from {self._where} ended without a finish_reason "
                f"(after {received} characters of text)"
            )
        extra: dict[str, object] = {"id": reply_id, "usage_reported": usage_seen}
        request_id = stream.response.headers.get("x-request-id")
        if request_id:
            extra["request_id"] = request_id
        return ProviderReply(
            text="".join(parts),
            model=str(model or self.model),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            stop_reason=finish_reason,
            extra=extra,
        )

    # -- error translation ---------------------------------------------------------------------

    def _raise_translated(self, sdk: ModuleType, exc: Exception, *, received: int | None) -> NoReturn:
        """Raise the nbrefine error for ``exc`` (``received`` is None before the stream began)."""
        raise translate(sdk, exc, self._service(sdk), received=received) from exc

    def _service(self, sdk: ModuleType) -> Service:
        official = is_official(self.base_url)
        key_hint = f"; check {API_KEY_ENV}" + ("" if official else " (the key this server expects)")

        def mid_stream(exc: Exception) -> ProviderError | None:
            """An error object sent in the middle of the stream: the SDK raises a bare APIError."""
            if not isinstance(exc, sdk.APIError) or isinstance(exc, _not_in_stream(sdk)):
                return None
            kind, message = _error_detail(getattr(exc, "body", None))
            return in_stream_error(service, kind, message or getattr(exc, "message", "") or str(exc))

        service = Service(
            who=self._where,
            connecting=self.base_url,
            base_url=self.base_url,
            model=self.model,
            timeout=self.timeout,
            sdk_error=sdk.OpenAIError,
            sdk_name="openai",
            key_hint=key_hint,
            model_hint=" (--model / %config Refine.model)",
            mid_stream=mid_stream,
            detail=lambda exc: _error_detail(exc.body),
        )
        return service

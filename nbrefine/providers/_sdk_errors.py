"""One translation of an SDK's exceptions into nbrefine's errors, for both SDK-backed providers.

The ``anthropic`` and ``openai`` SDKs are generated from the same template: the same exception
classes under the same names (``APIStatusError``, ``APIConnectionError``, ``RateLimitError``, ...).
What differs is how an error sent in the middle of a stream arrives and how messages name the
service; each provider says that in its :class:`Service`, and this module does the rest.

May import: the standard library, :mod:`nbrefine._errors` and the providers' ``_text``; never
an SDK (each provider passes its own module), the sandbox, the engine, IPython or the CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .._errors import (
    ProviderAuthError,
    ProviderConfigError,
    ProviderError,
    ProviderOverloadedError,
    ProviderRateLimitError,
    ProviderReplyError,
)
from ._text import connection_error, describe, one_line, reading_error, retried

__all__ = ["Service", "in_stream_error", "translate"]


@dataclass(frozen=True)
class Service:
    """How one provider's messages name what failed."""

    who: str  # "Anthropic", "OpenAI (https://api.openai.com/v1)", "the server at http://..."
    connecting: str  # what a connection failure could not reach
    base_url: str
    model: str | None
    timeout: float
    sdk_error: type[Exception]  # the SDK's root exception class (anthropic.AnthropicError, ...)
    sdk_name: str  # the SDK, as "the <sdk_name> SDK failed" names it
    key_hint: str  # after a 401: "; check ANTHROPIC_API_KEY"
    model_hint: str = ""  # after the model name on a 404: " (--model / %config Refine.model)"
    #: the provider's reading of an error sent in the middle of a stream, or None: not one
    mid_stream: Callable[[Exception], ProviderError | None] | None = None
    #: ``(kind, message)`` of the API's error body, as this API shapes it
    detail: Callable[[Any], tuple[str | None, str | None]] = lambda exc: (None, None)


def translate(sdk: ModuleType, exc: Exception, service: Service, *, received: int | None) -> ProviderError:
    """The nbrefine error for ``exc`` raised by ``sdk`` (``received``: characters of text
    streamed before it; None before the stream began)."""
    who = service.who
    if isinstance(exc, ProviderError):
        return exc
    streamed = service.mid_stream(exc) if service.mid_stream is not None else None
    if streamed is not None:
        return streamed
    if isinstance(exc, sdk.APIStatusError):
        return _status_error(sdk, exc, service)
    if isinstance(exc, sdk.APIConnectionError):  # APITimeoutError too: a subclass
        return connection_error(
            exc,
            who=who,
            connecting=service.connecting,
            timeout=service.timeout,
            received=received,
            timed_out=isinstance(exc, sdk.APITimeoutError),
        )
    if isinstance(exc, sdk.APIResponseValidationError):
        return ProviderReplyError(f"{who} sent a reply that does not fit the API schema: {describe(exc)}")
    failed = reading_error(
        exc, who=who, base_url=service.base_url, timeout=service.timeout, received=received
    )
    if failed is not None:
        return failed
    if isinstance(exc, service.sdk_error):  # a failure of the SDK itself
        return ProviderError(f"the {service.sdk_name} SDK failed: {describe(exc)}")
    # Anything else raised inside the SDK while reading the reply (bad event order, a content
    # index out of range, ...) means the reply was not what the API sends.
    return ProviderReplyError(f"could not read the reply from {who} ({describe(exc)})")


def in_stream_error(service: Service, kind: str | None, message: str) -> ProviderError:
    """An error the API sent in the middle of the reply, by its ``kind`` (type or code)."""
    what = f"{kind or 'error'}: {one_line(message)}"
    msg = f"{service.who} reported an error in the middle of the reply ({what})"
    low = (kind or "").lower()
    if "rate_limit" in low or "insufficient_quota" in low:
        return ProviderRateLimitError(msg)
    if "overloaded" in low or low in ("server_error", "api_error", "internal_error"):
        return ProviderOverloadedError(msg)
    if "auth" in low or "permission" in low:
        return ProviderAuthError(msg)
    return ProviderError(msg)


def _status_error(sdk: ModuleType, exc: Any, service: Service) -> ProviderError:
    who, status = service.who, int(exc.status_code)
    kind, api_message = service.detail(exc)
    detail = f"HTTP {status}"
    if kind or api_message:
        detail += f" {kind or 'error'}: {one_line(api_message or '')}".rstrip(": ")
    if isinstance(exc, sdk.AuthenticationError | sdk.PermissionDeniedError):
        if status == 401:
            return ProviderAuthError(f"{who} rejected the credentials ({detail}){service.key_hint}")
        return ProviderAuthError(f"{who} refused the request ({detail})")
    if isinstance(exc, sdk.RateLimitError):
        retry_after = exc.response.headers.get("retry-after")
        hint = f"; the server asks to retry after {retry_after} s" if retry_after else ""
        return ProviderRateLimitError(f"{who} is rate limiting requests ({detail}){retried(exc)}{hint}")
    if isinstance(exc, sdk.InternalServerError) or status >= 500:
        what = "is overloaded" if status == 529 else "had a server error"  # 529: Anthropic's overload
        return ProviderOverloadedError(f"{who} {what} ({detail}){retried(exc)}; try again shortly")
    if status == 404:
        return ProviderConfigError(
            f"{who} answered {detail}; check the model name {service.model!r}{service.model_hint} "
            f"and the base URL {service.base_url}"
        )
    return ProviderError(f"{who} returned an error ({detail})")
